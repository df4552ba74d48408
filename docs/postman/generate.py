#!/usr/bin/env python3
"""Writes fhirstore.postman_collection.json and fhirstore.postman_environment.json.

The collection is data (requests, bodies, tests) kept here as one table per folder;
edit this file and run `python3 docs/postman/generate.py`, then `bash .ci/newman`.
"""
import json, uuid

def script(lines):
    return {"exec": lines, "type": "text/javascript"}

def test(lines):
    return {"listen": "test", "script": script(lines)}

def pre(lines):
    return {"listen": "prerequest", "script": script(lines)}

def url(raw):
    # raw like {{baseUrl}}/fhir/r4/Patient?x=y
    path_q = raw.split("}}", 1)[1]
    path, _, q = path_q.partition("?")
    u = {"raw": raw, "host": ["{{baseUrl}}"], "path": [p for p in path.split("/") if p]}
    if q:
        u["query"] = [dict(zip(("key", "value"), kv.split("=", 1))) for kv in q.split("&")]
    return u

def req(name, method, path, desc, tests, body=None, headers=None, prereq=None, noauth=False, ctype="application/fhir+json"):
    h = [{"key": "Accept", "value": "application/json" if path.startswith("/api") else "application/fhir+json"}]
    if body is not None:
        h.append({"key": "Content-Type", "value": ctype})
    for k, v in (headers or {}).items():
        h.append({"key": k, "value": v})
    r = {"method": method, "header": h, "url": url("{{baseUrl}}" + path), "description": desc}
    if body is not None:
        r["body"] = {"mode": "raw", "raw": body if isinstance(body, str) else json.dumps(body, indent=2),
                     "options": {"raw": {"language": "json"}}}
    if noauth:
        r["auth"] = {"type": "noauth"}
    ev = []
    if prereq:
        ev.append(pre(prereq))
    ev.append(test(tests))
    return {"name": name, "event": ev, "request": r}

def status(code):
    return [f"pm.test('status is {code}', function () {{ pm.response.to.have.status({code}); }});"]

FHIR_JSON = ["pm.test('answers FHIR JSON', function () { pm.expect(pm.response.headers.get('Content-Type')).to.include('application/fhir+json'); });"]

U = {k: "urn:uuid:" + str(uuid.uuid5(uuid.NAMESPACE_URL, "fhirstore-postman/" + k)) for k in
     ["org", "prac", "role", "pat", "eoc", "q", "qr", "cp", "dr", "list", "enc", "doc"]}

txn = {"resourceType": "Bundle", "type": "transaction", "entry": [
 {"fullUrl": U["org"], "resource": {"resourceType": "Organization", "identifier": [{"system": "https://example.org/agency", "value": "AG-{{runId}}"}], "active": True, "name": "Sunrise Home Health {{runId}}"}, "request": {"method": "POST", "url": "Organization"}},
 {"fullUrl": U["prac"], "resource": {"resourceType": "Practitioner", "identifier": [{"system": "http://hl7.org/fhir/sid/us-npi", "value": "{{npi}}"}], "active": True,
   "name": [{"use": "official", "family": "Nurse{{runId}}", "given": ["Nina"], "suffix": ["RN"]}],
   "telecom": [{"system": "email", "value": "nina.nurse@example.org"}],
   "qualification": [{"code": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v2-0360", "code": "RN", "display": "Registered Nurse"}]}}]}, "request": {"method": "POST", "url": "Practitioner"}},
 {"fullUrl": U["role"], "resource": {"resourceType": "PractitionerRole", "active": True, "practitioner": {"reference": U["prac"]}, "organization": {"reference": U["org"]},
   "code": [{"text": "Home health nurse"}]}, "request": {"method": "POST", "url": "PractitionerRole"}},
 {"fullUrl": U["pat"], "resource": {"resourceType": "Patient", "active": True,
   "identifier": [{"type": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v2-0203", "code": "MR"}]}, "system": "https://example.org/mrn", "value": "MRN-{{runId}}"}],
   "name": [{"use": "official", "family": "Postman{{runId}}", "given": ["Pat"]}], "gender": "female", "birthDate": "1948-03-14",
   "telecom": [{"system": "phone", "value": "555-0100", "use": "home"}],
   "address": [{"use": "home", "line": ["12 Elm Street"], "city": "Springfield", "state": "IL", "postalCode": "62701"}],
   "managingOrganization": {"reference": U["org"]}}, "request": {"method": "POST", "url": "Patient"}},
 {"fullUrl": U["eoc"], "resource": {"resourceType": "EpisodeOfCare", "status": "active", "patient": {"reference": U["pat"]}, "managingOrganization": {"reference": U["org"]},
   "period": {"start": "2024-05-01"}}, "request": {"method": "POST", "url": "EpisodeOfCare"}},
 {"fullUrl": U["q"], "resource": {"resourceType": "Questionnaire", "url": "https://example.org/Questionnaire/intake-{{runId}}", "status": "active", "title": "Intake",
   "item": [{"linkId": "1", "text": "Lives alone?", "type": "boolean"}]}, "request": {"method": "POST", "url": "Questionnaire"}},
 {"fullUrl": U["qr"], "resource": {"resourceType": "QuestionnaireResponse", "status": "completed", "questionnaire": "https://example.org/Questionnaire/intake-{{runId}}",
   "subject": {"reference": U["pat"]}, "authored": "2024-05-02T10:00:00Z", "author": {"reference": U["prac"]},
   "item": [{"linkId": "1", "text": "Lives alone?", "answer": [{"valueBoolean": True}]}]}, "request": {"method": "POST", "url": "QuestionnaireResponse"}},
 {"fullUrl": U["cp"], "resource": {"resourceType": "CarePlan", "status": "active", "intent": "plan", "title": "Wound care", "subject": {"reference": U["pat"]}}, "request": {"method": "POST", "url": "CarePlan"}},
 {"fullUrl": U["dr"], "resource": {"resourceType": "DiagnosticReport", "status": "final", "code": {"coding": [{"system": "http://loinc.org", "code": "58410-2", "display": "CBC panel"}]},
   "subject": {"reference": U["pat"]}, "effectiveDateTime": "2024-05-03"}, "request": {"method": "POST", "url": "DiagnosticReport"}},
 {"fullUrl": U["list"], "resource": {"resourceType": "List", "status": "current", "mode": "working", "title": "Problem list", "subject": {"reference": U["pat"]}}, "request": {"method": "POST", "url": "List"}},
 {"fullUrl": U["enc"], "resource": {"resourceType": "Encounter", "status": "planned",
   "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "HH", "display": "home health"},
   "extension": [{"url": "http://hl7.org/fhir/5.0/StructureDefinition/extension-Encounter.plannedStartDate", "valueDateTime": "2024-05-10T09:00:00Z"}],
   "type": [{"coding": [{"system": "https://fhirstore.dev/fhir/CodeSystem/visit-type", "code": "SN-VISIT", "display": "Skilled nursing visit"}]}],
   "subject": {"reference": U["pat"]}, "episodeOfCare": [{"reference": U["eoc"]}],
   "participant": [{"type": [{"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v3-ParticipationType", "code": "PPRF"}]}], "individual": {"reference": U["prac"]}}],
   "period": {"start": "2024-05-10T09:00:00Z"}}, "request": {"method": "POST", "url": "Encounter"}},
 {"fullUrl": U["doc"], "resource": {"resourceType": "DocumentReference", "status": "current", "docStatus": "final", "description": "Referral letter",
   "type": {"text": "Referral"}, "subject": {"reference": U["pat"]}, "custodian": {"reference": U["org"]},
   "context": {"encounter": [{"reference": U["eoc"]}]},
   "content": [{"attachment": {"contentType": "text/plain", "title": "referral.txt", "data": "UmVmZXJyYWwgZm9yIGhvbWUgY2FyZS4=", "size": 23}}]}, "request": {"method": "POST", "url": "DocumentReference"}},
]}
NAMES = ["organizationId", "practitionerId", "practitionerRoleId", "patientId", "episodeOfCareId", "questionnaireId", "questionnaireResponseId", "carePlanId", "diagnosticReportId", "listId", "encounterId", "documentId"]

items = []
fhir = []
fhir.append(req("F13 capability statement", "GET", "/fhir/r4/metadata",
    "F13: the CapabilityStatement; it needs no token.",
    status(200) + FHIR_JSON + [
    "const cs = pm.response.json();",
    "pm.test('is an R4 CapabilityStatement', function () { pm.expect(cs.resourceType).to.eql('CapabilityStatement'); pm.expect(cs.fhirVersion).to.eql('4.0.1'); });",
    "pm.test('lists the spec types', function () { const types = cs.rest[0].resource.map(r => r.type); ['Patient','DiagnosticReport','CarePlan','QuestionnaireResponse','EpisodeOfCare','List','Questionnaire','Practitioner'].forEach(t => pm.expect(types).to.include(t)); });"],
    noauth=True,
    prereq=["// One value per run keeps identifiers unique when the collection runs twice against one server.",
            "pm.collectionVariables.set('runId', String(Date.now()));",
            "pm.collectionVariables.set('npi', String(1000000000 + Math.floor(Math.random() * 899999999)));"]))
fhir.append(req("F1 transaction: load a home-health record", "POST", "/fhir/r4", 
    "F1: a transaction Bundle creating an agency, a clinician and their role, a patient with episode, questionnaire and response, care plan, report, list, a planned visit (Encounter) and a document. The ids the server assigns are stored in collection variables for every later request.",
    status(200) + FHIR_JSON + [
    "const b = pm.response.json();",
    "pm.test('is a transaction-response', function () { pm.expect(b.resourceType).to.eql('Bundle'); pm.expect(b.type).to.eql('transaction-response'); pm.expect(b.entry).to.have.lengthOf(%d); });" % len(txn["entry"]),
    "pm.test('every entry was created', function () { b.entry.forEach(e => pm.expect(e.response.status).to.match(/^201/)); });",
    "// Entries answer in request order; each location is [base/]Type/id/_history/1.",
    "const names = %s;" % json.dumps(NAMES),
    "b.entry.forEach(function (e, i) { const m = e.response.location.match(/([A-Za-z]+)\\/([^/]+)\\/_history\\/(\\d+)$/); pm.collectionVariables.set(names[i], m[2]); });",
    "pm.test('ids captured', function () { names.forEach(n => pm.expect(pm.collectionVariables.get(n)).to.be.a('string').and.not.empty); });"],
    body=json.dumps(txn, indent=2)))
fhir.append(req("F1 batch: read and search in one call", "POST", "/fhir/r4",
    "F1: a batch Bundle; each entry succeeds or fails on its own.",
    status(200) + [
    "const b = pm.response.json();",
    "pm.test('is a batch-response with an answer per entry', function () { pm.expect(b.type).to.eql('batch-response'); pm.expect(b.entry).to.have.lengthOf(3); });",
    "pm.test('the read found the patient', function () { pm.expect(b.entry[0].response.status).to.match(/^200/); pm.expect(b.entry[0].resource.id).to.eql(pm.collectionVariables.get('patientId')); });",
    "pm.test('the search found one patient', function () { pm.expect(b.entry[1].resource.type).to.eql('searchset'); pm.expect(b.entry[1].resource.total).to.eql(1); });",
    "pm.test('a missing resource fails only its entry', function () { pm.expect(b.entry[2].response.status).to.match(/^404/); });"],
    body=json.dumps({"resourceType": "Bundle", "type": "batch", "entry": [
        {"request": {"method": "GET", "url": "Patient/{{patientId}}"}},
        {"request": {"method": "GET", "url": "Patient?identifier=https://example.org/mrn|MRN-{{runId}}"}},
        {"request": {"method": "GET", "url": "Patient/does-not-exist-{{runId}}"}}]}, indent=2)))
fhir.append(req("F2 read patient", "GET", "/fhir/r4/Patient/{{patientId}}",
    "F2: read by logical id; the ETag is kept for the conditional update that follows.",
    status(200) + FHIR_JSON + [
    "const p = pm.response.json();",
    "pm.test('is the patient', function () { pm.expect(p.resourceType).to.eql('Patient'); pm.expect(p.id).to.eql(pm.collectionVariables.get('patientId')); pm.expect(p.name[0].family).to.eql('Postman' + pm.collectionVariables.get('runId')); });",
    "pm.test('has version 1 and a matching ETag', function () { pm.expect(p.meta.versionId).to.eql('1'); pm.expect(pm.response.headers.get('ETag')).to.eql('W/\"1\"'); });",
    "pm.collectionVariables.set('patientEtag', pm.response.headers.get('ETag'));"]))
fhir.append(req("F2 read patient with _format=json", "GET", "/fhir/r4/Patient/{{patientId}}?_format=json",
    "F2 with the optional _format parameter.",
    status(200) + FHIR_JSON + [
    "pm.test('is the patient', function () { pm.expect(pm.response.json().id).to.eql(pm.collectionVariables.get('patientId')); });"]))
upd = {"resourceType": "Patient", "id": "{{patientId}}", "active": True,
   "identifier": [{"type": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v2-0203", "code": "MR"}]}, "system": "https://example.org/mrn", "value": "MRN-{{runId}}"}],
   "name": [{"use": "official", "family": "Postman{{runId}}", "given": ["Pat", "Q"]}], "gender": "female", "birthDate": "1948-03-14",
   "telecom": [{"system": "phone", "value": "555-0100", "use": "home"}],
   "address": [{"use": "home", "line": ["12 Elm Street"], "city": "Springfield", "state": "IL", "postalCode": "62701"}],
   "managingOrganization": {"reference": "Organization/{{organizationId}}"}}
fhir.append(req("Update patient with If-Match", "PUT", "/fhir/r4/Patient/{{patientId}}",
    "Not in the spec's table but needed for history: an update conditioned on the ETag read by F2.",
    status(200) + [
    "pm.test('is version 2', function () { pm.expect(pm.response.json().meta.versionId).to.eql('2'); pm.expect(pm.response.headers.get('ETag')).to.eql('W/\"2\"'); });"],
    body=json.dumps(upd, indent=2), headers={"If-Match": "{{patientEtag}}", "Prefer": "return=representation"}))
fhir.append(req("Update patient with a stale If-Match", "PUT", "/fhir/r4/Patient/{{patientId}}",
    "The same ETag again is stale now: 412 and an OperationOutcome, nothing written.",
    status(412) + [
    "pm.test('is an OperationOutcome', function () { pm.expect(pm.response.json().resourceType).to.eql('OperationOutcome'); });"],
    body=json.dumps(upd, indent=2), headers={"If-Match": "{{patientEtag}}"}))
for num, typ, var, check in [
    ("F3", "DiagnosticReport", "diagnosticReportId", "pm.expect(r.status).to.eql('final'); pm.expect(r.code.coding[0].code).to.eql('58410-2');"),
    ("F4", "CarePlan", "carePlanId", "pm.expect(r.intent).to.eql('plan');"),
    ("F5", "QuestionnaireResponse", "questionnaireResponseId", "pm.expect(r.status).to.eql('completed'); pm.expect(r.item[0].answer[0].valueBoolean).to.eql(true);"),
    ("F6", "EpisodeOfCare", "episodeOfCareId", "pm.expect(r.status).to.eql('active');"),
    ("F7", "List", "listId", "pm.expect(r.mode).to.eql('working');"),
    ("F8", "Questionnaire", "questionnaireId", "pm.expect(r.status).to.eql('active');"),
]:
    refcheck = ""
    if typ not in ("Questionnaire",):
        field = "patient" if typ == "EpisodeOfCare" else "subject"
        refcheck = f"pm.test('refers to the patient', function () {{ pm.expect(r.{field}.reference).to.eql('Patient/' + pm.collectionVariables.get('patientId')); }});"
    fhir.append(req(f"{num} read {typ}", "GET", f"/fhir/r4/{typ}/{{{{{var}}}}}",
        f"{num}: read a {typ} by id.",
        status(200) + FHIR_JSON + [
        "const r = pm.response.json();",
        f"pm.test('is the {typ}', function () {{ pm.expect(r.resourceType).to.eql('{typ}'); pm.expect(r.id).to.eql(pm.collectionVariables.get('{var}')); {check} }});"]
        + ([refcheck] if refcheck else [])))
fhir.append(req("F2 read of an unknown id", "GET", "/fhir/r4/Patient/unknown-{{runId}}",
    "An unknown id is 404 with an OperationOutcome.",
    status(404) + ["pm.test('is an OperationOutcome', function () { pm.expect(pm.response.json().resourceType).to.eql('OperationOutcome'); });"]))
fhir.append(req("F2 read without a token", "GET", "/fhir/r4/Patient/{{patientId}}",
    "Every request but metadata needs a bearer token: 401 with WWW-Authenticate.",
    status(401) + ["pm.test('asks for a bearer token', function () { pm.expect(pm.response.headers.get('WWW-Authenticate')).to.match(/^Bearer/); });"],
    noauth=True))
fhir.append(req("F9 patient history", "GET", "/fhir/r4/Patient/{{patientId}}/_history",
    "F9: every version of the patient, newest first.",
    status(200) + FHIR_JSON + [
    "const b = pm.response.json();",
    "pm.test('is a history Bundle with both versions', function () { pm.expect(b.type).to.eql('history'); pm.expect(b.total).to.eql(2); pm.expect(b.entry.map(e => e.resource.meta.versionId)).to.eql(['2', '1']); });",
    "pm.test('entries carry the request that made them', function () { pm.expect(b.entry[0].request.method).to.eql('PUT'); pm.expect(b.entry[1].request.method).to.eql('POST'); });",
    "pm.collectionVariables.set('v1LastUpdated', b.entry[1].resource.meta.lastUpdated);"]))
fhir.append(req("F9 patient history with _count and _since", "GET", "/fhir/r4/Patient/{{patientId}}/_history?_count=1&_since={{v1LastUpdated}}",
    "F9 with _count (page size) and _since (changes at or after an instant, here version 1's lastUpdated).",
    status(200) + [
    "const b = pm.response.json();",
    "pm.test('one entry per page', function () { pm.expect(b.entry).to.have.lengthOf(1); pm.expect(b.entry[0].resource.meta.versionId).to.eql('2'); });",
    "pm.test('links to the next page', function () { pm.expect(b.link.map(l => l.relation)).to.include('next'); });"]))
fhir.append(req("F10 patient search by identifier", "GET", "/fhir/r4/Patient?identifier=https://example.org/mrn|MRN-{{runId}}",
    "F10: search by a medical record number (token system|value).",
    status(200) + FHIR_JSON + [
    "const b = pm.response.json();",
    "pm.test('finds exactly the patient', function () { pm.expect(b.type).to.eql('searchset'); pm.expect(b.total).to.eql(1); pm.expect(b.entry[0].resource.id).to.eql(pm.collectionVariables.get('patientId')); pm.expect(b.entry[0].search.mode).to.eql('match'); });",
    "pm.test('has a self link', function () { pm.expect(b.link.find(l => l.relation === 'self')).to.be.an('object'); });"]))
fhir.append(req("F10 patient search by name, gender and birthdate with _include", "GET", "/fhir/r4/Patient?family=postman{{runId}}&gender=female&birthdate=1948&_include=Patient:organization",
    "F10: string (prefix, case-insensitive), token and date (year precision) parameters, with the managing organization included.",
    status(200) + [
    "const b = pm.response.json();",
    "pm.test('one match', function () { pm.expect(b.total).to.eql(1); pm.expect(b.entry.filter(e => e.search.mode === 'match')).to.have.lengthOf(1); });",
    "pm.test('the organization is included', function () { const inc = b.entry.filter(e => e.search.mode === 'include'); pm.expect(inc).to.have.lengthOf(1); pm.expect(inc[0].resource.resourceType).to.eql('Organization'); pm.expect(inc[0].resource.id).to.eql(pm.collectionVariables.get('organizationId')); });"]))
fhir.append(req("F10 patient search by agency and episode-status with _revinclude", "GET", "/fhir/r4/Patient?agency=Organization/{{organizationId}}&episode-status=active&_revinclude=EpisodeOfCare:patient",
    "F10: the service's own agency and episode-status parameters, with the patient's episodes reverse-included.",
    status(200) + [
    "const b = pm.response.json();",
    "pm.test('finds the patient', function () { pm.expect(b.total).to.eql(1); pm.expect(b.entry[0].resource.id).to.eql(pm.collectionVariables.get('patientId')); });",
    "pm.test('the episode is reverse-included', function () { const inc = b.entry.filter(e => e.search.mode === 'include'); pm.expect(inc.map(e => e.resource.resourceType)).to.include('EpisodeOfCare'); });"]))
fhir.append(req("F10 patient search _summary=count", "GET", "/fhir/r4/Patient?_id={{patientId}}&_summary=count",
    "F10: only the total.",
    status(200) + [
    "const b = pm.response.json();",
    "pm.test('total only', function () { pm.expect(b.total).to.eql(1); pm.expect(b.entry || []).to.have.lengthOf(0); });"]))
fhir.append(req("F10 patient search with a bad _count", "GET", "/fhir/r4/Patient?_count=abc",
    "A malformed value is 400 naming the parameter.",
    status(400) + ["pm.test('names the parameter', function () { pm.expect(pm.response.text()).to.include('_count'); });"]))
fhir.append(req("F11 questionnaire response search", "GET", "/fhir/r4/QuestionnaireResponse?patient=Patient/{{patientId}}&status=completed&authored=ge2024-05-01&author=Practitioner/{{practitionerId}}",
    "F11: by patient, status, authored date and author. (Search by questionnaire canonical URL, questionnaire=https://example.org/Questionnaire/intake-{{runId}}, finds nothing on this server yet.)",
    status(200) + [
    "const b = pm.response.json();",
    "pm.test('finds the response', function () { pm.expect(b.total).to.eql(1); pm.expect(b.entry[0].resource.id).to.eql(pm.collectionVariables.get('questionnaireResponseId')); });"]))
fhir.append(req("F12 practitioner search", "GET", "/fhir/r4/Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|{{npi}}&active=true&qualification=RN&name=nurse{{runId}}",
    "F12: by NPI, active, qualification code and name.",
    status(200) + [
    "const b = pm.response.json();",
    "pm.test('finds the clinician', function () { pm.expect(b.total).to.eql(1); pm.expect(b.entry[0].resource.id).to.eql(pm.collectionVariables.get('practitionerId')); });"]))

fhir.append(req("GraphQL patient with episodes", "POST", "/fhir/r4/$graphql",
    "FHIR GraphQL: the patient and, through a reverse reference, their episodes of care, in one request (docs/guide/graphql.md).",
    status(200) + [
    "const d = pm.response.json().data;",
    "pm.test('answers the patient', function () { pm.expect(d.Patient.id).to.eql(pm.collectionVariables.get('patientId')); pm.expect(d.Patient.name[0].family).to.eql('Postman' + pm.collectionVariables.get('runId')); });",
    "pm.test('with their episodes', function () { pm.expect(d.Patient.EpisodeOfCareList.map(e => e.id)).to.include(pm.collectionVariables.get('episodeOfCareId')); });"],
    body=json.dumps({"query": "{ Patient(id: \"{{patientId}}\") { id name { family given } EpisodeOfCareList(_reference: patient) { id status } } }"}, indent=2),
    ctype="application/json"))

rest = []
REST_JSON = ["pm.test('answers JSON', function () { pm.expect(pm.response.headers.get('Content-Type')).to.include('application/json'); });"]
rest.append(req("R3 get patient", "GET", "/api/v1/patients/{{patientId}}",
    "R3: the FHIR Patient projected to the REST shape.",
    status(200) + REST_JSON + [
    "const p = pm.response.json();",
    "pm.test('projects the FHIR patient', function () { pm.expect(p.patientId).to.eql(pm.collectionVariables.get('patientId')); pm.expect(p.firstName).to.eql('Pat'); pm.expect(p.lastName).to.eql('Postman' + pm.collectionVariables.get('runId')); pm.expect(p.medicalRecordNumber).to.eql('MRN-' + pm.collectionVariables.get('runId')); pm.expect(p.agencyId).to.eql(pm.collectionVariables.get('organizationId')); pm.expect(p.status).to.eql('active'); });"]))
rest.append(req("R2 update patient", "PUT", "/api/v1/patients/{{patientId}}",
    "R2: changes only the fields sent; the change is a new FHIR version.",
    status(200) + [
    "const p = pm.response.json();",
    "pm.test('has the new values', function () { pm.expect(p.address.street).to.eql('7 Oak Avenue'); pm.expect(p.phoneNumbers.primary).to.eql('555-0199'); pm.expect(p.emergencyContact.name).to.eql('Sam Postman'); });",
    "pm.test('keeps the fields not sent', function () { pm.expect(p.firstName).to.eql('Pat'); pm.expect(p.address.city).to.eql('Springfield'); });"],
    body=json.dumps({"address": {"street": "7 Oak Avenue"}, "phoneNumbers": {"primary": "555-0199"}, "emergencyContact": {"name": "Sam Postman", "relationship": "Son", "phone": "555-0142"}}, indent=2),
    ctype="application/json"))
rest.append(req("R2 change is a FHIR version", "GET", "/fhir/r4/Patient/{{patientId}}/_history?_count=1",
    "The REST change shows in FHIR history as version 3.",
    status(200) + ["pm.test('version 3 has the new street', function () { const v = pm.response.json().entry[0].resource; pm.expect(v.meta.versionId).to.eql('3'); pm.expect(v.address[0].line[0]).to.eql('7 Oak Avenue'); });"]))
rest.append(req("R1 clinician visits (scheduled)", "GET", "/api/v1/clinicians/{{practitionerId}}/visits?status=scheduled&dateFrom=2000-01-01",
    "R1: the clinician's visits, filtered by status and date.",
    status(200) + REST_JSON + [
    "const b = pm.response.json();",
    "pm.test('lists the planned visit', function () { pm.expect(b.data).to.have.lengthOf(1); const v = b.data[0]; pm.expect(v.visitId).to.eql(pm.collectionVariables.get('encounterId')); pm.expect(v.status).to.eql('scheduled'); pm.expect(v.patientId).to.eql(pm.collectionVariables.get('patientId')); pm.expect(v.episodeId).to.eql(pm.collectionVariables.get('episodeOfCareId')); pm.expect(v.scheduledDate).to.eql('2024-05-10T09:00:00Z'); });",
    "pm.test('has pagination', function () { pm.expect(b.pagination.total).to.eql(1); pm.expect(b.pagination.page).to.eql(1); });"]))
rest.append(req("R4 complete visit", "POST", "/api/v1/visits/{{encounterId}}/complete",
    "R4: completes the visit (Encounter status finished).",
    status(200) + [
    "const v = pm.response.json();",
    "pm.test('is completed', function () { pm.expect(v.visitId).to.eql(pm.collectionVariables.get('encounterId')); pm.expect(v.status).to.eql('completed'); pm.expect(v.duration).to.eql(45); });"],
    body=json.dumps({"endTime": "2024-05-10T09:45:00Z", "duration": 45, "mileage": 12.5, "summary": "Dressing changed; wound healing well."}, indent=2),
    ctype="application/json"))
rest.append(req("R4 complete visit again", "POST", "/api/v1/visits/{{encounterId}}/complete",
    "A completed visit cannot be completed twice: 409 and the REST error JSON.",
    status(409) + ["pm.test('is a REST error', function () { pm.expect(pm.response.json().error.code).to.be.a('string'); });"],
    body=json.dumps({"endTime": "2024-05-10T09:50:00Z"}), ctype="application/json"))
rest.append(req("R1 clinician visits (completed)", "GET", "/api/v1/clinicians/{{practitionerId}}/visits?status=completed",
    "R1 after R4: the visit is now listed as completed.",
    status(200) + ["pm.test('lists the completed visit', function () { const b = pm.response.json(); pm.expect(b.data.map(v => v.visitId)).to.include(pm.collectionVariables.get('encounterId')); b.data.forEach(v => pm.expect(v.status).to.eql('completed')); });"]))
rest.append(req("R5 get document", "GET", "/api/v1/documents/{{documentId}}",
    "R5: a DocumentReference as a document.",
    status(200) + REST_JSON + [
    "const d = pm.response.json();",
    "pm.test('projects the DocumentReference', function () { pm.expect(d.documentId).to.eql(pm.collectionVariables.get('documentId')); pm.expect(d.patientId).to.eql(pm.collectionVariables.get('patientId')); pm.expect(d.episodeId).to.eql(pm.collectionVariables.get('episodeOfCareId')); pm.expect(d.agencyId).to.eql(pm.collectionVariables.get('organizationId')); pm.expect(d.mimeType).to.eql('text/plain'); pm.expect(d.textContent).to.eql('Referral for home care.'); });"]))
rest.append(req("R6 agency clinicians", "GET", "/api/v1/agencies/{{organizationId}}/clinicians?page=1&limit=10",
    "R6: the agency's clinicians (PractitionerRoles of the Organization), paged.",
    status(200) + REST_JSON + [
    "const b = pm.response.json();",
    "pm.test('lists the clinician', function () { pm.expect(b.data).to.have.lengthOf(1); const c = b.data[0]; pm.expect(c.clinicianId).to.eql(pm.collectionVariables.get('practitionerId')); pm.expect(c.npi).to.eql(pm.collectionVariables.get('npi')); pm.expect(c.credentials).to.eql('RN'); pm.expect(c.role).to.eql('Home health nurse'); });",
    "pm.test('paging', function () { pm.expect(b.pagination).to.include({page: 1, limit: 10, total: 1, totalPages: 1}); });"]))
rest.append(req("R6 limit above 100", "GET", "/api/v1/agencies/{{organizationId}}/clinicians?limit=101",
    "limit is bounded by 100: 400 naming it.",
    status(400) + ["pm.test('names limit', function () { pm.expect(pm.response.text()).to.include('limit'); });"]))
rest.append(req("R7 replace visit medications", "PUT", "/api/v1/visits/{{encounterId}}/medications",
    "R7: replaces the visit's medication list in one transaction.",
    status(200) + [
    "const r = pm.response.json();",
    "pm.test('stores both medications', function () { pm.expect(r.visitId).to.eql(pm.collectionVariables.get('encounterId')); pm.expect(r.medications).to.have.lengthOf(2); pm.expect(r.medications.map(m => m.medication)).to.eql(['Metformin 500 mg tablet', 'Lisinopril 10 mg tablet']); r.medications.forEach(m => pm.expect(m.medicationId).to.be.a('string').and.not.empty); });",
    "pm.collectionVariables.set('medicationId', r.medications[0].medicationId);"],
    body=json.dumps({"medications": [
        {"medication": "Metformin 500 mg tablet", "usageStatus": "active", "clinicianReviewed": True, "source": "Admission Referral Packet", "dose": "1", "unitOfMeasurement": "tablet", "frequency": "twice daily", "route": "oral", "highRisk": False, "matchedToMedDb": True},
        {"medication": "Lisinopril 10 mg tablet", "usageStatus": "active", "dose": "1", "unitOfMeasurement": "tablet", "frequency": "daily", "route": "oral"}]}, indent=2),
    ctype="application/json"))
rest.append(req("R7 stored as FHIR", "GET", "/fhir/r4/MedicationStatement/{{medicationId}}",
    "The medication is a FHIR MedicationStatement in the visit's context.",
    status(200) + ["pm.test('is in the visit context', function () { const m = pm.response.json(); pm.expect(m.context.reference).to.eql('Encounter/' + pm.collectionVariables.get('encounterId')); pm.expect(m.status).to.eql('active'); });"]))
rest.append(req("R3 unknown patient", "GET", "/api/v1/patients/unknown-{{runId}}",
    "An unknown id is 404 with the REST error JSON.",
    status(404) + ["pm.test('is a REST error', function () { pm.expect(pm.response.json().error.code).to.eql('not_found'); });"]))

def oauth_items():
    token = {"name": "Token: client credentials", "event": [test(status(200) + [
        "pm.test('no-store', function () { pm.expect(pm.response.headers.get('Cache-Control')).to.include('no-store'); });",
        "pm.test('a Bearer token with the granted scope', function () {",
        "  const b = pm.response.json();",
        "  pm.expect(b.token_type).to.eql('Bearer');",
        "  pm.expect(b.expires_in).to.be.above(0);",
        "  pm.expect(b.scope).to.eql('system/*.read');",
        "  pm.collectionVariables.set('oauthToken', b.access_token);",
        "});"])],
      "request": {"method": "POST", "description": "A token from the server's own token endpoint: client credentials, the secret by HTTP Basic (Postman's \"Send as Basic Auth header\"). Needs `clientId` and `clientSecret` in the environment (`fhirstore client create --tenant demo --scope 'system/*.read'`).",
        "auth": {"type": "basic", "basic": [{"key": "username", "value": "{{clientId}}", "type": "string"}, {"key": "password", "value": "{{clientSecret}}", "type": "string"}]},
        "header": [{"key": "Content-Type", "value": "application/x-www-form-urlencoded"}],
        "body": {"mode": "urlencoded", "urlencoded": [{"key": "grant_type", "value": "client_credentials"}, {"key": "scope", "value": "system/*.read"}]},
        "url": url("{{baseUrl}}/oauth2/token")}}
    bearer = {"type": "bearer", "bearer": [{"key": "token", "value": "{{oauthToken}}", "type": "string"}]}
    read = req("Search with the token", "GET", "/fhir/r4/Patient?_count=1", "The token works on the tenant's FHIR base.", status(200) + FHIR_JSON)
    read["request"]["auth"] = bearer
    write = req("A write with a read-only token is 403", "POST", "/fhir/r4/Patient", "system/*.read grants read and search only.",
        status(403) + ["pm.test('names the missing permission', function () { pm.expect(pm.response.json().issue[0].diagnostics).to.include('create'); });"],
        body={"resourceType": "Patient"})
    write["request"]["auth"] = bearer
    smart = req("SMART configuration", "GET", "/fhir/r4/.well-known/smart-configuration", "Discovery, without a token.",
        status(200) + ["pm.test('names the token endpoint', function () { pm.expect(pm.response.json().token_endpoint).to.include('/oauth2/token'); });"], noauth=True)
    return [smart, token, read, write]

collection = {
  "info": {
    "_postman_id": "6f1f4c8e-5a43-4c1e-9d7e-0a1b2c3d4e5f",
    "name": "fhirstore",
    "description": (
      "Every endpoint of the service contract (FHIR F1–F13, REST R1–R7) against a fhirstore server, each with tests.\n\n"
      "Run it in order (the first transaction creates the data the later requests use; their ids go into collection variables) "
      "with the environment `fhirstore.postman_environment.json`: set `baseUrl` to the server (e.g. `http://127.0.0.1:8080`), "
      "`tenantHost` to the tenant's host name (e.g. `demo.localhost:8080`; the tenant is chosen by the Host header) and `token` "
      "to a bearer token, e.g. the output of `fhirstore token --data-dir ./data --tenant demo --scope 'system/*.*'`.\n\n"
      "CI runs it with newman: `.ci/newman`.\n\n"
      "## OAuth 2.0 instead of a pasted token\n\n"
      "The server issues tokens itself at `POST {{baseUrl}}/oauth2/token` (client credentials). Create a client with "
      "`fhirstore client create --data-dir ./data --tenant demo --scope 'system/*.*'`, which prints `client_id` and `client_secret`. "
      "Then, on this collection: Authorization → type OAuth 2.0 → Configure New Token: grant type Client Credentials, "
      "access token URL `{{baseUrl}}/oauth2/token`, the client id and secret, scope `system/*.*`, client authentication "
      "Send as Basic Auth header → Get New Access Token → Use Token. A token of /oauth2/token is for the origin it was asked at "
      "(its iss and aud), so clear `tenantHost` in the environment to send the requests to that same origin "
      "(`http://127.0.0.1:8080` is served by the default tenant, demo). See docs/guide/oauth.md.\n\n"
      "The folder OAuth 2.0 does this itself: with `clientId` and `clientSecret` of a client with scope `system/*.read` "
      "in the environment it gets a token, searches with it and checks that a write is refused (403)."),
    "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"
  },
  "auth": {"type": "bearer", "bearer": [{"key": "token", "value": "{{token}}", "type": "string"}]},
  "event": [
    pre(["// The tenant is the first label of the Host header. Node does not resolve *.localhost, so",
         "// requests go to baseUrl (an IP address) and name the tenant's host here.",
         "const host = pm.environment.get('tenantHost') || pm.collectionVariables.get('tenantHost');",
         "if (host) { pm.request.headers.upsert({ key: 'Host', value: host }); }"]),
    test(["pm.test('carries a request id', function () { pm.expect(pm.response.headers.get('X-Request-Id')).to.be.a('string').and.not.empty; });"]),
  ],
  "item": [
    {"name": "FHIR R4", "description": "FHIR interface, `/fhir/r4` (F1–F13).", "item": fhir},
    {"name": "REST", "description": "REST interface, `/api/v1` (R1–R7), on the data the FHIR folder created.", "item": rest},
    {"name": "OAuth 2.0", "description": "The token endpoint (client credentials) and SMART scopes.", "item": oauth_items()},
  ],
  "variable": [{"key": k, "value": ""} for k in ["runId", "npi", "patientEtag", "v1LastUpdated", "medicationId", "oauthToken"] + NAMES],
}
env = {
  "id": "3c5e0f7a-9b1d-4e2a-8c6f-0a1b2c3d4e5f",
  "name": "fhirstore local",
  "values": [
    {"key": "baseUrl", "value": "http://127.0.0.1:8080", "type": "default", "enabled": True},
    {"key": "tenantHost", "value": "demo.localhost:8080", "type": "default", "enabled": True},
    {"key": "token", "value": "", "type": "secret", "enabled": True},
    {"key": "clientId", "value": "", "type": "default", "enabled": True},
    {"key": "clientSecret", "value": "", "type": "secret", "enabled": True},
  ],
  "_postman_variable_scope": "environment",
}
import os, sys
out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
json.dump(collection, open(out + "/fhirstore.postman_collection.json", "w"), indent=2, ensure_ascii=False)
open(out + "/fhirstore.postman_collection.json", "a").write("\n")
json.dump(env, open(out + "/fhirstore.postman_environment.json", "w"), indent=2)
open(out + "/fhirstore.postman_environment.json", "a").write("\n")
