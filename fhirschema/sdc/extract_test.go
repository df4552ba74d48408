package sdc_test

import (
	"context"
	"strings"
	"testing"

	"fhirstore/fhirschema/sdc"
)

// resourcesOf are the resources of a transaction Bundle's entries, checked
// for a urn:uuid fullUrl and a POST of their type.
func resourcesOf(t *testing.T, b map[string]any) []map[string]any {
	t.Helper()
	if b["resourceType"] != "Bundle" || b["type"] != "transaction" {
		t.Fatalf("not a transaction Bundle: %v", b)
	}
	var out []map[string]any
	for _, e := range b["entry"].([]any) {
		entry := e.(map[string]any)
		res := entry["resource"].(map[string]any)
		req := entry["request"].(map[string]any)
		if !strings.HasPrefix(entry["fullUrl"].(string), "urn:uuid:") || req["method"] != "POST" || req["url"] != res["resourceType"] {
			t.Errorf("entry %v", entry)
		}
		out = append(out, res)
	}
	return out
}

func TestExtractMakesObservationsAndTheCaregiver(t *testing.T) {
	rec := patientRecord(t)
	q := load(t, "Questionnaire-hh-visit.json")
	rec.byRef["Questionnaire/hh-visit"] = q
	b, issues, err := sdc.Extract(context.Background(), rec, sdc.ExtractRequest{Response: load(t, "QuestionnaireResponse-hh-visit.json")})
	if err != nil || b == nil {
		t.Fatalf("extract: %v\n%s", err, issuesText(issues))
	}
	got := map[string]string{}
	for _, res := range resourcesOf(t, b) {
		switch res["resourceType"] {
		case "Observation":
			code := res["code"].(map[string]any)["coding"].([]any)[0].(map[string]any)["code"].(string)
			delete(res, "code")
			got[code] = jsonText(res)
		default:
			got[res["resourceType"].(string)] = jsonText(res)
		}
	}
	common := `"derivedFrom":[{"reference":"QuestionnaireResponse/qr1"}],"effectiveDateTime":"2026-12-01T10:00:00Z","issued":"2026-12-01T10:00:00Z","performer":[{"reference":"Practitioner/n1"}],"resourceType":"Observation","status":"final","subject":{"reference":"Patient/p1"}`
	for code, want := range map[string]string{
		"29463-7":       `{` + common + `,"valueQuantity":{"code":"kg","system":"http://unitsofmeasure.org","unit":"kg","value":80.5}}`,
		"8302-2":        `{` + common + `,"valueQuantity":{"code":"cm","system":"http://unitsofmeasure.org","unit":"cm","value":175}}`,
		"39156-5":       `{` + common + `,"valueQuantity":{"code":"kg/m2","system":"http://unitsofmeasure.org","unit":"kg/m2","value":26.3}}`,
		"8480-6":        `{` + common + `,"valueQuantity":{"code":"mm[Hg]","system":"http://unitsofmeasure.org","unit":"mm[Hg]","value":128}}`,
		"RelatedPerson": `{"name":[{"text":"Ana Smith"}],"patient":{"reference":"Patient/p1"},"resourceType":"RelatedPerson"}`,
	} {
		if got[code] != want {
			t.Errorf("%s:\n got %s\nwant %s", code, got[code], want)
		}
	}
	if len(got) != 5 {
		t.Errorf("extracted %d resources, want 5: %v", len(got), got)
	}
}

func TestExtractByDefinitionSetsElementsFromAnswersAndExpressions(t *testing.T) {
	q := decode(t, `{"resourceType":"Questionnaire","url":"http://example.org/q/reg","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-definitionExtract","extension":[{"url":"definition","valueCanonical":"http://hl7.org/fhir/StructureDefinition/Patient"},{"url":"ifNoneExist","valueString":"'identifier=' + %resource.item.where(linkId='mrn').answer.value"}]},
	   {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-definitionExtractValue","extension":[{"url":"definition","valueCanonical":"http://hl7.org/fhir/StructureDefinition/Patient#Patient.active"},{"url":"fixed-value","valueBoolean":true}]}],
	 "item":[{"linkId":"mrn","type":"string","definition":"http://hl7.org/fhir/StructureDefinition/Patient#Patient.identifier.value"},
	  {"linkId":"given","type":"string","repeats":true,"definition":"http://hl7.org/fhir/StructureDefinition/Patient#Patient.name.given"},
	  {"linkId":"family","type":"string","definition":"http://hl7.org/fhir/StructureDefinition/Patient#Patient.name.family"},
	  {"linkId":"gender","type":"choice","definition":"http://hl7.org/fhir/StructureDefinition/Patient#Patient.gender"},
	  {"linkId":"dob","type":"date","definition":"http://hl7.org/fhir/StructureDefinition/Patient#Patient.birthDate"},
	  {"linkId":"contacts","type":"group","repeats":true,
	   "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-itemExtractionContext","valueCode":"RelatedPerson"}],
	   "item":[{"linkId":"contact-name","type":"string","definition":"http://hl7.org/fhir/StructureDefinition/RelatedPerson#RelatedPerson.name.text"},
	     {"linkId":"contact-rel","type":"choice","definition":"http://hl7.org/fhir/StructureDefinition/RelatedPerson#RelatedPerson.relationship"}]}]}`)
	qr := decode(t, `{"resourceType":"QuestionnaireResponse","status":"completed","item":[
	 {"linkId":"mrn","answer":[{"valueString":"12345"}]},{"linkId":"given","answer":[{"valueString":"Ana"},{"valueString":"Maria"}]},
	 {"linkId":"family","answer":[{"valueString":"Jerde"}]},{"linkId":"gender","answer":[{"valueCoding":{"system":"http://hl7.org/fhir/administrative-gender","code":"female"}}]},
	 {"linkId":"dob","answer":[{"valueDate":"1961-04-12"}]},
	 {"linkId":"contacts","item":[{"linkId":"contact-name","answer":[{"valueString":"Bo Smith"}]},{"linkId":"contact-rel","answer":[{"valueCoding":{"system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode","code":"SON"}}]}]},
	 {"linkId":"contacts","item":[{"linkId":"contact-name","answer":[{"valueString":"Cy Smith"}]}]},
	 {"linkId":"contacts","item":[]}]}`)
	b, issues, err := sdc.Extract(context.Background(), newRecords(), sdc.ExtractRequest{Response: qr, Questionnaire: q})
	if err != nil || b == nil {
		t.Fatalf("extract: %v\n%s", err, issuesText(issues))
	}
	var got []string
	for _, res := range resourcesOf(t, b) {
		got = append(got, jsonText(res))
	}
	want := []string{
		`{"active":true,"birthDate":"1961-04-12","gender":"female","identifier":[{"value":"12345"}],"name":[{"family":"Jerde","given":["Ana","Maria"]}],"resourceType":"Patient"}`,
		`{"name":[{"text":"Bo Smith"}],"relationship":[{"coding":[{"code":"SON","system":"http://terminology.hl7.org/CodeSystem/v3-RoleCode"}]}],"resourceType":"RelatedPerson"}`,
		`{"name":[{"text":"Cy Smith"}],"resourceType":"RelatedPerson"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("resources\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if req := b["entry"].([]any)[0].(map[string]any)["request"].(map[string]any); req["ifNoneExist"] != "identifier=12345" {
		t.Errorf("request %v", req)
	}
}

func TestExtractNeedsTheQuestionnaire(t *testing.T) {
	b, issues, err := sdc.Extract(context.Background(), newRecords(), sdc.ExtractRequest{Response: load(t, "QuestionnaireResponse-hh-visit.json")})
	if err != nil || b != nil || !sdc.Failed(issues) || issues[0].Expression != "QuestionnaireResponse.questionnaire" {
		t.Fatalf("bundle %v, err %v, issues:\n%s", b != nil, err, issuesText(issues))
	}
}

func TestExtractObservationValuesFollowTheAnswerType(t *testing.T) {
	q := decode(t, `{"resourceType":"Questionnaire","url":"http://example.org/q/screen","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observationExtract","valueBoolean":true},
	  {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observation-extract-category","valueCodeableConcept":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"survey"}]}}],
	 "item":[{"linkId":"steps","type":"integer","code":[{"system":"http://loinc.org","code":"41950-7"}]},
	  {"linkId":"mood","type":"choice","code":[{"system":"http://loinc.org","code":"44250-9"}]},
	  {"linkId":"smokes","type":"boolean","code":[{"system":"http://loinc.org","code":"LOCAL-1"},{"system":"http://snomed.info/sct","code":"77176002","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observationExtract","valueBoolean":true}]}]},
	  {"linkId":"private","type":"string","code":[{"system":"http://loinc.org","code":"X"}],"extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observationExtract","valueBoolean":false}]},
	  {"linkId":"uncoded","type":"string"}]}`)
	qr := decode(t, `{"resourceType":"QuestionnaireResponse","status":"completed","authored":"2026-12-01","subject":{"reference":"Patient/p1"},"item":[
	 {"linkId":"steps","answer":[{"valueInteger":4200}]},{"linkId":"mood","answer":[{"valueCoding":{"system":"http://loinc.org","code":"LA6568-5"}}]},
	 {"linkId":"smokes","answer":[{"valueBoolean":false}]},{"linkId":"private","answer":[{"valueString":"secret"}]},{"linkId":"uncoded","answer":[{"valueString":"x"}]}]}`)
	b, issues, err := sdc.Extract(context.Background(), newRecords(), sdc.ExtractRequest{Response: qr, Questionnaire: q})
	if err != nil || b == nil {
		t.Fatalf("extract: %v\n%s", err, issuesText(issues))
	}
	var got []string
	for _, res := range resourcesOf(t, b) {
		got = append(got, jsonText(map[string]any{"code": res["code"], "valueInteger": res["valueInteger"], "valueCodeableConcept": res["valueCodeableConcept"], "valueBoolean": res["valueBoolean"], "category": res["category"] != nil, "issued": res["issued"], "effective": res["effectiveDateTime"]}))
	}
	want := []string{
		`{"category":true,"code":{"coding":[{"code":"41950-7","system":"http://loinc.org"}]},"effective":"2026-12-01","issued":null,"valueBoolean":null,"valueCodeableConcept":null,"valueInteger":4200}`,
		`{"category":true,"code":{"coding":[{"code":"44250-9","system":"http://loinc.org"}]},"effective":"2026-12-01","issued":null,"valueBoolean":null,"valueCodeableConcept":{"coding":[{"code":"LA6568-5","system":"http://loinc.org"}]},"valueInteger":null}`,
		`{"category":true,"code":{"coding":[{"code":"77176002","system":"http://snomed.info/sct"}]},"effective":"2026-12-01","issued":null,"valueBoolean":false,"valueCodeableConcept":null,"valueInteger":null}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("observations\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(issues) != 1 || issues[0].Expression != "Questionnaire.item[4]" {
		t.Errorf("issues:\n%s", issuesText(issues))
	}
}

func TestExtractByDefinitionOpensAnElementPerRepeatedGroup(t *testing.T) {
	const sd = "http://hl7.org/fhir/StructureDefinition/Patient"
	q := decode(t, `{"resourceType":"Questionnaire","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-definitionExtract","extension":[{"url":"definition","valueCanonical":"`+sd+`"}]}],
	 "item":[{"linkId":"family","type":"string","definition":"`+sd+`#Patient.name.family"},
	  {"linkId":"contact","type":"group","repeats":true,"definition":"`+sd+`#Patient.contact","item":[
	   {"linkId":"contact-name","type":"string","definition":"`+sd+`#Patient.contact.name.text"},
	   {"linkId":"contact-phone","type":"string","definition":"`+sd+`#Patient.contact.telecom.value"},
	   {"linkId":"contact-kind","type":"coding","definition":"`+sd+`#Patient.contact.relationship"}]}]}`)
	qr := decode(t, `{"resourceType":"QuestionnaireResponse","status":"completed","item":[
	 {"linkId":"family","answer":[{"valueString":"Jerde"}]},
	 {"linkId":"contact","item":[{"linkId":"contact-name","answer":[{"valueString":"Bo"}]},{"linkId":"contact-kind","answer":[{"valueCoding":{"system":"http://terminology.hl7.org/CodeSystem/v2-0131","code":"N"}}]}]},
	 {"linkId":"contact","item":[]},
	 {"linkId":"contact","item":[{"linkId":"contact-name","answer":[{"valueString":"Cy"}]},{"linkId":"contact-phone","answer":[{"valueString":"555-0100"}]}]}]}`)
	b, issues, err := sdc.Extract(context.Background(), newRecords(), sdc.ExtractRequest{Response: qr, Questionnaire: q})
	if err != nil || b == nil || len(issues) > 0 {
		t.Fatalf("extract: %v\n%s", err, issuesText(issues))
	}
	want := `{"contact":[{"name":{"text":"Bo"},"relationship":[{"coding":[{"code":"N","system":"http://terminology.hl7.org/CodeSystem/v2-0131"}]}]},{"name":{"text":"Cy"},"telecom":[{"value":"555-0100"}]}],"name":[{"family":"Jerde"}],"resourceType":"Patient"}`
	if got := jsonText(resourcesOf(t, b)[0]); got != want {
		t.Errorf("patient\n got %s\nwant %s", got, want)
	}
}

func TestExtractExpressionsSeeThePatient(t *testing.T) {
	const sd = "http://hl7.org/fhir/StructureDefinition/RelatedPerson"
	q := decode(t, `{"resourceType":"Questionnaire","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-launchContext","extension":[{"url":"name","valueCoding":{"code":"patient"}},{"url":"type","valueCode":"Patient"}]},
	  {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-launchContext","extension":[{"url":"name","valueCoding":{"code":"user"}},{"url":"type","valueCode":"Practitioner"}]}],
	 "item":[{"linkId":"spouse","type":"group",
	   "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-definitionExtract","extension":[{"url":"definition","valueCanonical":"`+sd+`"}]},
	    {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-definitionExtractValue","extension":[{"url":"definition","valueCanonical":"`+sd+`#RelatedPerson.name.family"},{"url":"expression","valueExpression":{"language":"text/fhirpath","expression":"%patient.name.family"}}]},
	    {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-definitionExtractValue","extension":[{"url":"definition","valueCanonical":"`+sd+`#RelatedPerson.telecom.value"},{"url":"expression","valueExpression":{"language":"text/fhirpath","expression":"%user.telecom.value"}}]},
	    {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-definitionExtractValue","extension":[{"url":"definition","valueCanonical":"`+sd+`#RelatedPerson.patient"},{"url":"expression","valueExpression":{"language":"text/fhirpath","expression":"%resource.subject"}}]}],
	   "item":[{"linkId":"given","type":"string","definition":"`+sd+`#RelatedPerson.name.given"}]}]}`)
	qr := decode(t, `{"resourceType":"QuestionnaireResponse","status":"completed","subject":{"reference":"Patient/p1"},"item":[{"linkId":"spouse","item":[{"linkId":"given","answer":[{"valueString":"Bo"}]}]}]}`)
	b, issues, err := sdc.Extract(context.Background(), patientRecord(t), sdc.ExtractRequest{Response: qr, Questionnaire: q})
	if err != nil || b == nil || len(issues) > 0 {
		t.Fatalf("extract: %v\n%s", err, issuesText(issues))
	}
	want := `{"name":[{"family":"Jerde","given":["Bo"]}],"patient":{"reference":"Patient/p1"},"resourceType":"RelatedPerson"}`
	if got := jsonText(resourcesOf(t, b)[0]); got != want {
		t.Errorf("related person\n got %s\nwant %s", got, want)
	}
}

func TestExtractRelatesItemsToTheirGroupsObservation(t *testing.T) {
	const oe = "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observationExtract"
	q := decode(t, `{"resourceType":"Questionnaire","status":"active","item":[
	 {"linkId":"bp","type":"group","code":[{"system":"http://loinc.org","code":"85354-9"}],"extension":[{"url":"`+oe+`","valueBoolean":true}],"item":[
	  {"linkId":"sys","type":"integer","code":[{"system":"http://loinc.org","code":"8480-6"}],"extension":[{"url":"`+oe+`","valueCode":"component"}]},
	  {"linkId":"dia","type":"integer","code":[{"system":"http://loinc.org","code":"8462-4"}],"extension":[{"url":"`+oe+`","valueCode":"component"}]}]},
	 {"linkId":"phq2","type":"group","code":[{"system":"http://loinc.org","code":"55757-9"}],"extension":[{"url":"`+oe+`","valueBoolean":true}],"item":[
	  {"linkId":"q1","type":"coding","code":[{"system":"http://loinc.org","code":"44250-9"}],"extension":[{"url":"`+oe+`","valueCode":"member"}]},
	  {"linkId":"score","type":"integer","code":[{"system":"http://loinc.org","code":"55758-7"}],"extension":[{"url":"`+oe+`","valueCode":"derived"}]}]},
	 {"linkId":"empty","type":"group","code":[{"system":"http://loinc.org","code":"00000-0"}],"extension":[{"url":"`+oe+`","valueBoolean":true}],"item":[
	  {"linkId":"plain","type":"string","code":[{"system":"http://loinc.org","code":"11111-1"}]}]}]}`)
	qr := decode(t, `{"resourceType":"QuestionnaireResponse","id":"r1","status":"completed","item":[
	 {"linkId":"bp","item":[{"linkId":"sys","answer":[{"valueInteger":128}]},{"linkId":"dia","answer":[{"valueInteger":82}]}]},
	 {"linkId":"phq2","item":[{"linkId":"q1","answer":[{"valueCoding":{"system":"http://loinc.org","code":"LA6569-3"}}]},{"linkId":"score","answer":[{"valueInteger":1}]}]},
	 {"linkId":"empty","item":[{"linkId":"plain","answer":[{"valueString":"x"}]}]}]}`)
	b, issues, err := sdc.Extract(context.Background(), newRecords(), sdc.ExtractRequest{Response: qr, Questionnaire: q})
	if err != nil || b == nil || len(issues) > 0 {
		t.Fatalf("extract: %v\n%s", err, issuesText(issues))
	}
	urls := map[string]string{} // code → fullUrl
	obs := map[string]map[string]any{}
	for _, e := range b["entry"].([]any) {
		entry := e.(map[string]any)
		res := entry["resource"].(map[string]any)
		code := res["code"].(map[string]any)["coding"].([]any)[0].(map[string]any)["code"].(string)
		urls[code], obs[code] = entry["fullUrl"].(string), res
	}
	// A group none of whose items relate to it is no Observation; its
	// coded items are extracted on their own.
	if len(obs) != 5 || obs["00000-0"] != nil || obs["11111-1"] == nil {
		t.Fatalf("%d observations, want the panel, the PHQ-2 group, its member, its score and the plain item: %v", len(obs), jsonText(b))
	}
	if got := jsonText(obs["85354-9"]["component"]); got != `[{"code":{"coding":[{"code":"8480-6","system":"http://loinc.org"}]},"valueInteger":128},{"code":{"coding":[{"code":"8462-4","system":"http://loinc.org"}]},"valueInteger":82}]` {
		t.Errorf("blood pressure components %s", got)
	}
	if got := jsonText(obs["55757-9"]["hasMember"]); got != `[{"reference":"`+urls["44250-9"]+`"}]` {
		t.Errorf("PHQ-2 members %s", got)
	}
	if got := jsonText(obs["55758-7"]["derivedFrom"]); got != `[{"reference":"QuestionnaireResponse/r1"},{"reference":"`+urls["55757-9"]+`"}]` {
		t.Errorf("score derived from %s", got)
	}
}
