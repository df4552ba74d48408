package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// sdcForm is the home-health visit form: a patient launch context,
// x-fhir-query variables, initial and calculated expressions,
// observation- and definition-based extraction.
func sdcForm(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../fhirschema/sdc/testdata/Questionnaire-hh-visit.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const sdcValueSet = `{"resourceType":"ValueSet","id":"phq-frequency","url":"http://example.org/fhir/ValueSet/phq-frequency","version":"1","status":"active",
 "compose":{"include":[{"system":"http://loinc.org","concept":[{"code":"LA6568-5","display":"Not at all"},{"code":"LA6569-3","display":"Several days"},
  {"code":"LA6570-1","display":"More than half the days"},{"code":"LA6571-9","display":"Nearly every day"}]}]}}`

// sdcPatient stores the visit form and a patient with two weights and a
// height, returning the patient's id.
func sdcPatient(t *testing.T, e *env) string {
	t.Helper()
	if r := e.put("/ValueSet/phq-frequency", sdcValueSet); r.Status >= 300 {
		t.Fatalf("store the value set: %d %s", r.Status, r.Body)
	}
	if r := e.put("/Questionnaire/hh-visit", sdcForm(t)); r.Status >= 300 {
		t.Fatalf("store the form: %d %s", r.Status, r.Body)
	}
	pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Jerde"}],"birthDate":"1961-04-12"}`)
	for _, obs := range []struct{ code, date, value, unit string }{
		{"29463-7", "2026-01-10", "79.0", "kg"}, {"29463-7", "2026-11-20", "80.5", "kg"}, {"8302-2", "2026-11-20", "175", "cm"},
	} {
		e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"`+obs.code+`"}]},
		 "subject":{"reference":"Patient/`+pid+`"},"effectiveDateTime":"`+obs.date+`","valueQuantity":{"value":`+obs.value+`,"unit":"`+obs.unit+`","system":"http://unitsofmeasure.org","code":"`+obs.unit+`"}}`)
	}
	return pid
}

// populateBody is a $populate request for a patient.
func populateBody(pid string) string {
	return `{"resourceType":"Parameters","parameter":[{"name":"subject","valueReference":{"reference":"Patient/` + pid + `"}},
	 {"name":"context","part":[{"name":"name","valueString":"patient"},{"name":"content","valueReference":{"reference":"Patient/` + pid + `"}}]}]}`
}

// outParam is the resource of an output parameter of a Parameters.
func outParam(t *testing.T, r *response, name string) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	for _, p := range r.JSON(t)["parameter"].([]any) {
		if pm := p.(map[string]any); pm["name"] == name {
			return pm["resource"].(map[string]any)
		}
	}
	t.Fatalf("no %s parameter: %s", name, r.Body)
	return nil
}

// firstAnswer is the first answer value of item linkID anywhere in a response.
func firstAnswer(qr map[string]any, linkID string) string {
	var found string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["linkId"] == linkID && found == "" {
				if as, _ := x["answer"].([]any); len(as) > 0 {
					for k, v := range as[0].(map[string]any) {
						if strings.HasPrefix(k, "value") {
							b, _ := json.Marshal(v)
							found = string(b)
						}
					}
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(qr)
	return found
}

func TestSDCPopulateFillsTheFormFromThePatientsRecord(t *testing.T) {
	e := newEnv(t)
	pid := sdcPatient(t, e)
	qr := outParam(t, e.post("/Questionnaire/hh-visit/$populate", populateBody(pid)), "response")
	for _, row := range []struct{ linkID, want string }{
		{"birthdate", `"1961-04-12"`},
		{"weight", `80.5`}, // the latest weight
		{"height", `175`},
		{"bmi", `26.3`}, // calculated from the two
		{"sbp", ``},
	} {
		if got := firstAnswer(qr, row.linkID); got != row.want {
			t.Errorf("%s = %s, want %s", row.linkID, got, row.want)
		}
	}
	if qr["status"] != "in-progress" || qr["questionnaire"] != "http://example.org/fhir/Questionnaire/hh-visit|1.0.0" {
		t.Errorf("response %v %v", qr["status"], qr["questionnaire"])
	}
	if subj, _ := qr["subject"].(map[string]any); subj["reference"] != "Patient/"+pid {
		t.Errorf("subject %v", qr["subject"])
	}
	stored, _ := json.Marshal(qr)
	if r := e.post("/QuestionnaireResponse", string(stored)); r.Status != http.StatusCreated {
		t.Errorf("the populated response is not stored as it is: %d %s", r.Status, r.Body)
	}

	t.Run("at type level with the canonical", func(t *testing.T) {
		body := strings.Replace(populateBody(pid), `"parameter":[`, `"parameter":[{"name":"canonical","valueCanonical":"http://example.org/fhir/Questionnaire/hh-visit|1.0.0"},`, 1)
		qr := outParam(t, e.post("/Questionnaire/$populate", body), "response")
		if got := firstAnswer(qr, "bmi"); got != "26.3" {
			t.Errorf("bmi = %s", got)
		}
	})
	t.Run("by GET with the subject in the query", func(t *testing.T) {
		r := e.get("/Questionnaire/hh-visit/$populate?subject=Patient/" + pid)
		qr := outParam(t, r, "response")
		if got := firstAnswer(qr, "birthdate"); got != `"1961-04-12"` {
			t.Errorf("birthdate = %s", got) // the patient context defaults to the subject
		}
	})
}

func TestSDCExtractMakesATransactionThatApplies(t *testing.T) {
	e := newEnv(t)
	pid := sdcPatient(t, e)
	rec := e.create("Practitioner", `{"resourceType":"Practitioner","name":[{"family":"Nurse"}]}`)
	qrBody := `{"resourceType":"QuestionnaireResponse","questionnaire":"http://example.org/fhir/Questionnaire/hh-visit|1.0.0","status":"completed",
	 "subject":{"reference":"Patient/` + pid + `"},"author":{"reference":"Practitioner/` + rec + `"},"authored":"2026-12-01T10:00:00Z","item":[
	 {"linkId":"birthdate","answer":[{"valueDate":"1961-04-12"}]},
	 {"linkId":"vitals","item":[{"linkId":"weight","answer":[{"valueDecimal":80.5}]},{"linkId":"height","answer":[{"valueDecimal":175}]},
	   {"linkId":"bmi","answer":[{"valueDecimal":26.3}]},{"linkId":"sbp","answer":[{"valueInteger":128}]}]},
	 {"linkId":"phq2","item":[{"linkId":"phq2-1","answer":[{"valueCoding":{"system":"http://loinc.org","code":"LA6569-3"}}]},
	   {"linkId":"phq2-2","answer":[{"valueCoding":{"system":"http://loinc.org","code":"LA6568-5"}}]}]},
	 {"linkId":"falls","answer":[{"valueBoolean":true}]},{"linkId":"falls-count","answer":[{"valueInteger":2}]},
	 {"linkId":"caregiver","item":[{"linkId":"caregiver-name","answer":[{"valueString":"Ana Smith"}]}]}]}`
	qrID := e.create("QuestionnaireResponse", qrBody)

	bundle := outParam(t, e.post("/QuestionnaireResponse/"+qrID+"/$extract", `{"resourceType":"Parameters"}`), "return")
	if bundle["type"] != "transaction" {
		t.Fatalf("bundle type %v", bundle["type"])
	}
	kinds := map[string]int{}
	for _, x := range bundle["entry"].([]any) {
		entry := x.(map[string]any)
		res := entry["resource"].(map[string]any)
		kinds[res["resourceType"].(string)]++
		if !strings.HasPrefix(entry["fullUrl"].(string), "urn:uuid:") || entry["request"].(map[string]any)["method"] != "POST" {
			t.Errorf("entry %v", entry)
		}
		switch res["resourceType"] {
		case "Observation":
			if res["subject"].(map[string]any)["reference"] != "Patient/"+pid || res["derivedFrom"].([]any)[0].(map[string]any)["reference"] != "QuestionnaireResponse/"+qrID ||
				res["performer"].([]any)[0].(map[string]any)["reference"] != "Practitioner/"+rec || res["effectiveDateTime"] != "2026-12-01T10:00:00Z" {
				t.Errorf("observation %v", res)
			}
		case "RelatedPerson":
			if res["patient"].(map[string]any)["reference"] != "Patient/"+pid || res["name"].([]any)[0].(map[string]any)["text"] != "Ana Smith" {
				t.Errorf("related person %v", res)
			}
		}
	}
	if kinds["Observation"] != 4 || kinds["RelatedPerson"] != 1 || len(kinds) != 2 {
		t.Errorf("extracted %v, want 4 Observations and a RelatedPerson", kinds)
	}
	tx, _ := json.Marshal(bundle)
	if r := e.post("", string(tx)); r.Status != http.StatusOK {
		t.Fatalf("the extracted transaction: %d %s", r.Status, r.Body)
	}
	if r := e.get("/Observation?derived-from=QuestionnaireResponse/" + qrID + "&_summary=count"); !strings.Contains(string(r.Body), `"total":4`) {
		t.Errorf("observations derived from the response: %s", r.Body)
	}

	t.Run("at type level with the response as the body", func(t *testing.T) {
		bundle := outParam(t, e.post("/QuestionnaireResponse/$extract", qrBody), "return")
		if n := len(bundle["entry"].([]any)); n != 5 {
			t.Errorf("%d entries, want 5", n)
		}
	})
	t.Run("a response that breaks its form is refused", func(t *testing.T) {
		broken := strings.Replace(qrBody, `{"linkId":"sbp","answer":[{"valueInteger":128}]}`, `{"linkId":"sbp","answer":[{"valueString":"128"}]}`, 1)
		wantOutcome(t, e.post("/QuestionnaireResponse/$extract", broken), http.StatusUnprocessableEntity, "QuestionnaireResponse.item")
	})
	t.Run("at type level with the questionnaire-response parameter", func(t *testing.T) {
		bundle := outParam(t, e.post("/QuestionnaireResponse/$extract", `{"resourceType":"Parameters","parameter":[{"name":"questionnaire-response","resource":`+qrBody+`}]}`), "return")
		if n := len(bundle["entry"].([]any)); n != 5 {
			t.Errorf("%d entries, want 5", n)
		}
	})
}

const (
	sdcModule = `{"resourceType":"Questionnaire","id":"hh-module","url":"http://example.org/fhir/Questionnaire/hh-module","version":"1","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/StructureDefinition/variable","valueExpression":{"name":"pain","language":"text/fhirpath","expression":"%resource.item.where(linkId='pain').answer.value"}}],
	 "item":[{"linkId":"pain","text":"Pain score (0-10)","type":"integer"}]}`
	sdcSubQ = "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-subQuestionnaire"
)

// sdcRoot is a root form whose display item points at module.
func sdcRoot(id, module string) string {
	return `{"resourceType":"Questionnaire","id":"` + id + `","url":"http://example.org/fhir/Questionnaire/` + id + `","version":"1","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assemble-expectation","valueCode":"assemble-root"}],
	 "item":[{"linkId":"m","type":"display","text":"module","extension":[{"url":"` + sdcSubQ + `","valueCanonical":"` + module + `"}]}]}`
}

func TestSDCAssembleInlinesSubQuestionnaires(t *testing.T) {
	e := newEnv(t)
	e.put("/Questionnaire/hh-module", sdcModule)
	e.put("/Questionnaire/hh-root", sdcRoot("hh-root", "http://example.org/fhir/Questionnaire/hh-module|1"))
	for _, r := range []*response{
		e.post("/Questionnaire/hh-root/$assemble", `{"resourceType":"Parameters"}`),
		e.get("/Questionnaire/hh-root/$assemble"),
		e.post("/Questionnaire/$assemble", `{"resourceType":"Parameters","parameter":[{"name":"questionnaire","resource":`+sdcRoot("inline", "http://example.org/fhir/Questionnaire/hh-module")+`}]}`),
	} {
		q := outParam(t, r, "return")
		body := string(r.Body)
		if strings.Contains(body, sdcSubQ) || strings.Contains(body, "assemble-expectation") {
			t.Errorf("sub-questionnaire left: %s", body)
		}
		items := q["item"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["linkId"] != "pain" {
			t.Errorf("items %v", items)
		}
		if !strings.Contains(body, `"name":"pain"`) || !strings.Contains(body, "sdc-questionnaire-assembledFrom") {
			t.Errorf("the module's variable or the provenance is missing: %s", body)
		}
	}

	e.put("/Questionnaire/hh-broken", sdcRoot("hh-broken", "http://example.org/fhir/Questionnaire/no-such-module"))
	r := e.post("/Questionnaire/hh-broken/$assemble", `{"resourceType":"Parameters"}`)
	wantOutcome(t, r, http.StatusUnprocessableEntity, "Questionnaire.item[0]")
	if !strings.Contains(string(r.Body), "no-such-module") {
		t.Errorf("the issue does not name the module: %s", r.Body)
	}
}

func TestSDCOperationsAreInTheCapabilityStatement(t *testing.T) {
	e := newEnv(t)
	cs := e.get("/metadata").JSON(t)
	got := map[string]string{}
	for _, x := range cs["rest"].([]any)[0].(map[string]any)["resource"].([]any) {
		res := x.(map[string]any)
		ops, _ := res["operation"].([]any)
		for _, o := range ops {
			op := o.(map[string]any)
			if res["type"] == "Questionnaire" || res["type"] == "QuestionnaireResponse" {
				got[res["type"].(string)+"/"+op["name"].(string)] = op["definition"].(string)
			}
		}
	}
	for k, want := range map[string]string{
		"Questionnaire/populate":        "http://hl7.org/fhir/uv/sdc/OperationDefinition/Questionnaire-populate",
		"Questionnaire/assemble":        "http://hl7.org/fhir/uv/sdc/OperationDefinition/Questionnaire-assemble",
		"QuestionnaireResponse/extract": "http://hl7.org/fhir/uv/sdc/OperationDefinition/QuestionnaireResponse-extract",
	} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q", k, got[k], want)
		}
	}
}

func TestSDCRefusesBadInputWithAnOutcome(t *testing.T) {
	e := newEnv(t)
	pid := sdcPatient(t, e)
	if r := e.put("/Questionnaire/failing", `{"resourceType":"Questionnaire","id":"failing","url":"http://example.org/fhir/Questionnaire/failing","status":"active",
	 "item":[{"linkId":"x","type":"string","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/fhirpath","expression":"(1).repeat($this + 1).count()"}}]}]}`); r.Status >= 300 {
		t.Fatalf("store the failing form: %d %s", r.Status, r.Body)
	}
	subject := `{"name":"subject","valueReference":{"reference":"Patient/` + pid + `"}}`
	for _, row := range []struct {
		name, path, body string
		status           int
		expr             string
	}{
		{"a body that is not JSON", "/Questionnaire/hh-visit/$populate", `{"resourceType":"Parameters",`, 400, "Parameters"},
		{"a body that is not a Parameters", "/Questionnaire/hh-visit/$populate", `{"resourceType":"Patient"}`, 400, "Parameters"},
		{"a parameter without a name", "/Questionnaire/hh-visit/$populate", `{"resourceType":"Parameters","parameter":[` + subject + `,{"valueString":"x"}]}`, 400, "Parameters.parameter[1]"},
		{"a parameter the operation does not take", "/Questionnaire/hh-visit/$populate", `{"resourceType":"Parameters","parameter":[` + subject + `,{"name":"colour","valueString":"x"}]}`, 400, "Parameters.parameter[1]"},
		{"no subject", "/Questionnaire/hh-visit/$populate", `{"resourceType":"Parameters"}`, 400, "Parameters"},
		{"an unknown subject", "/Questionnaire/hh-visit/$populate", `{"resourceType":"Parameters","parameter":[{"name":"subject","valueReference":{"reference":"Patient/nobody"}}]}`, 404, "Parameters.parameter[0]"},
		{"an unknown context", "/Questionnaire/hh-visit/$populate", `{"resourceType":"Parameters","parameter":[` + subject + `,{"name":"context","part":[{"name":"name","valueString":"patient"},{"name":"content","valueReference":{"reference":"Patient/nobody"}}]}]}`, 404, "Parameters.parameter[1].part[1]"},
		{"a context without a name", "/Questionnaire/hh-visit/$populate", `{"resourceType":"Parameters","parameter":[` + subject + `,{"name":"context","part":[{"name":"content","valueReference":{"reference":"Patient/` + pid + `"}}]}]}`, 400, "Parameters.parameter[1]"},
		{"an unknown questionnaire", "/Questionnaire/nothing/$populate", `{"resourceType":"Parameters","parameter":[` + subject + `]}`, 404, ""},
		{"an unknown canonical", "/Questionnaire/$populate", `{"resourceType":"Parameters","parameter":[` + subject + `,{"name":"canonical","valueCanonical":"http://example.org/none"}]}`, 404, "Parameters.parameter[1]"},
		{"an expression that runs past its bounds", "/Questionnaire/failing/$populate", `{"resourceType":"Parameters","parameter":[` + subject + `]}`, 422, "Questionnaire.item[0]"},
		{"an unknown response", "/QuestionnaireResponse/nothing/$extract", `{"resourceType":"Parameters"}`, 404, ""},
		{"no response to extract", "/QuestionnaireResponse/$extract", `{"resourceType":"Parameters"}`, 400, "Parameters"},
		{"a response of an unknown form", "/QuestionnaireResponse/$extract", `{"resourceType":"QuestionnaireResponse","status":"completed","questionnaire":"http://example.org/none"}`, 422, ""},
		{"an unknown form to assemble", "/Questionnaire/$assemble", `{"resourceType":"Parameters","parameter":[{"name":"url","valueUri":"http://example.org/none"}]}`, 404, "Parameters.parameter[0]"},
		{"an operation on the wrong type", "/Patient/" + pid + "/$populate", `{"resourceType":"Parameters"}`, 404, ""},
	} {
		t.Run(row.name, func(t *testing.T) {
			wantOutcome(t, e.post(row.path, row.body), row.status, row.expr)
		})
	}
}

func TestSDCNeedsReadAccessToQuestionnaires(t *testing.T) {
	e := newEnv(t)
	pid := sdcPatient(t, e)
	noForms := scopedToken(t, e.tenant, "system/Patient.read system/Observation.read system/QuestionnaireResponse.read", "")
	for _, path := range []string{"/Questionnaire/hh-visit/$populate", "/Questionnaire/hh-visit/$assemble", "/QuestionnaireResponse/$extract"} {
		r := e.as(noForms, request{Method: http.MethodPost, Path: path, Body: populateBody(pid)})
		wantOutcome(t, r, http.StatusForbidden, "")
	}
	forms := scopedToken(t, e.tenant, "system/Questionnaire.read system/Patient.read system/Observation.read", "")
	r := e.as(forms, request{Method: http.MethodPost, Path: "/Questionnaire/hh-visit/$populate", Body: populateBody(pid)})
	if got := firstAnswer(outParam(t, r, "response"), "bmi"); got != "26.3" {
		t.Errorf("bmi = %s with read access", got)
	}
	noRecords := scopedToken(t, e.tenant, "system/Questionnaire.read system/Patient.read", "")
	r = e.as(noRecords, request{Method: http.MethodPost, Path: "/Questionnaire/hh-visit/$populate", Body: populateBody(pid)})
	wantOutcome(t, r, http.StatusForbidden, "")
}

func TestSDCPopulateUnderAPatientScopeSeesThatPatientOnly(t *testing.T) {
	e := newEnv(t)
	pid := sdcPatient(t, e)
	other := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Other"}],"birthDate":"1990-01-01"}`)
	own := scopedToken(t, e.tenant, "patient/*.read", pid)
	r := e.as(own, request{Method: http.MethodPost, Path: "/Questionnaire/hh-visit/$populate", Body: populateBody(pid)})
	if got := firstAnswer(outParam(t, r, "response"), "bmi"); got != "26.3" {
		t.Errorf("bmi = %s for the token's patient", got)
	}
	r = e.as(own, request{Method: http.MethodPost, Path: "/Questionnaire/hh-visit/$populate", Body: populateBody(other)})
	wantOutcome(t, r, http.StatusNotFound, "Parameters.parameter[0]")
}
