package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// visitForm is a small home-health visit form: a value set bound choice,
// an enableWhen, a bounded integer.
const visitForm = `{"resourceType":"Questionnaire","id":"visit","url":"http://example.org/Questionnaire/visit","version":"2","status":"active","item":[
 {"linkId":"mood","type":"choice","required":true,"answerValueSet":"http://example.org/ValueSet/mood"},
 {"linkId":"fell","type":"boolean","required":true},
 {"linkId":"falls","type":"integer","required":true,"enableWhen":[{"question":"fell","operator":"=","answerBoolean":true}],
  "extension":[{"url":"http://hl7.org/fhir/StructureDefinition/maxValue","valueInteger":20}]}]}`

const moodValueSet = `{"resourceType":"ValueSet","id":"mood","url":"http://example.org/ValueSet/mood","status":"active",
 "compose":{"include":[{"system":"http://example.org/mood","concept":[{"code":"good"},{"code":"low"}]}]}}`

// visitResponse answers visitForm; version is the questionnaire's "|2" or "".
func visitResponse(status, version, mood, fell, falls string) string {
	items := `{"linkId":"mood","answer":[{"valueCoding":{"system":"http://example.org/mood","code":"` + mood + `"}}]}`
	if fell != "" {
		items += `,{"linkId":"fell","answer":[{"valueBoolean":` + fell + `}]}`
	}
	if falls != "" {
		items += `,{"linkId":"falls","answer":[{"valueInteger":` + falls + `}]}`
	}
	return `{"resourceType":"QuestionnaireResponse","questionnaire":"http://example.org/Questionnaire/visit` + version + `","status":"` + status + `","item":[` + items + `]}`
}

func formEnv(t *testing.T) *env {
	e := newEnv(t)
	for path, body := range map[string]string{"/ValueSet/mood": moodValueSet, "/Questionnaire/visit": visitForm} {
		if r := e.put(path, body); r.Status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", path, r.Status, r.Body)
		}
	}
	return e
}

func TestResponsesAreCheckedAgainstTheirQuestionnaireOnWrite(t *testing.T) {
	e := formEnv(t)
	for _, tc := range []struct {
		name, body string
		status     int
		at         string
	}{
		{"a complete valid response", visitResponse("completed", "|2", "good", "true", "2"), http.StatusCreated, ""},
		{"a valid response naming no version", visitResponse("completed", "", "low", "false", ""), http.StatusCreated, ""},
		{"a code outside the value set", visitResponse("completed", "|2", "angry", "false", ""), http.StatusUnprocessableEntity, "QuestionnaireResponse.item[0].answer[0]"},
		{"an answer to a disabled question", visitResponse("completed", "|2", "good", "false", "1"), http.StatusUnprocessableEntity, "QuestionnaireResponse.item[2]"},
		{"an answer beyond maxValue", visitResponse("completed", "|2", "good", "true", "21"), http.StatusUnprocessableEntity, "QuestionnaireResponse.item[2].answer[0].valueInteger"},
		{"a required question unanswered", visitResponse("completed", "|2", "good", "true", ""), http.StatusUnprocessableEntity, "QuestionnaireResponse"},
		{"an in-progress response may be incomplete", visitResponse("in-progress", "|2", "good", "", ""), http.StatusCreated, ""},
		{"an answer of the wrong type", strings.Replace(visitResponse("completed", "|2", "good", "true", "2"), `"valueInteger":2`, `"valueString":"2"`, 1), http.StatusUnprocessableEntity, "QuestionnaireResponse.item[2].answer[0].valueString"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.get("/QuestionnaireResponse?_summary=count").JSON(t)["total"]
			r := e.post("/QuestionnaireResponse", tc.body)
			if tc.status == http.StatusCreated {
				if r.Status != http.StatusCreated {
					t.Fatalf("status %d: %s", r.Status, r.Body)
				}
				return
			}
			wantOutcome(t, r, tc.status, tc.at)
			if after := e.get("/QuestionnaireResponse?_summary=count").JSON(t)["total"]; after != before {
				t.Fatalf("a refused response changed the store: %v responses, then %v", before, after)
			}
			// $validate answers the same.
			wantValidateError(t, e.post("/QuestionnaireResponse/$validate", tc.body), tc.at)
		})
	}
}

// wantValidateError checks a $validate answer with an error at at.
func wantValidateError(t *testing.T, r *response, at string) {
	t.Helper()
	if r.Status != http.StatusOK && r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("$validate: %d %s", r.Status, r.Body)
	}
	for _, is := range r.JSON(t)["issue"].([]any) {
		m := is.(map[string]any)
		exprs, _ := m["expression"].([]any)
		if m["severity"] == "error" && len(exprs) > 0 && exprs[0] == at {
			return
		}
	}
	t.Fatalf("$validate has no error at %s: %s", at, r.Body)
}

func TestAResponseToAnUnknownQuestionnaireIsStoredWithAWarning(t *testing.T) {
	e := newEnv(t)
	r := e.post("/QuestionnaireResponse/$validate", visitResponse("completed", "|2", "good", "true", "2"))
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "not known to the server") {
		t.Fatalf("$validate: %d %s", r.Status, r.Body)
	}
	if r := e.post("/QuestionnaireResponse", visitResponse("completed", "|2", "good", "true", "2")); r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
}

func TestAResponseIsCheckedAgainstAQuestionnaireOfTheSameTransaction(t *testing.T) {
	e := newEnv(t)
	entry := func(typ, body string) string {
		return `{"resource":` + body + `,"request":{"method":"POST","url":"` + typ + `"}}`
	}
	bundle := func(qr string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` + entry("ValueSet", moodValueSet) + `,` + entry("Questionnaire", visitForm) + `,` + entry("QuestionnaireResponse", qr) + `]}`
	}
	r := e.post("", bundle(visitResponse("completed", "|2", "good", "false", "3")))
	if r.Status != http.StatusBadRequest && r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("a transaction with a broken response: %d %s", r.Status, r.Body)
	}
	if !strings.Contains(string(r.Body), "Bundle.entry[2].resource.item[2]") {
		t.Fatalf("the refusal does not point at the item: %s", r.Body)
	}
	if r := e.post("", bundle(visitResponse("completed", "|2", "good", "false", ""))); r.Status != http.StatusOK {
		t.Fatalf("a valid transaction: %d %s", r.Status, r.Body)
	}
}

func TestBrokenQuestionnairesAreRefusedAtTheElement(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ name, body, at string }{
		{"a linkId used twice", `{"resourceType":"Questionnaire","status":"active","item":[{"linkId":"a","type":"string"},{"linkId":"a","type":"integer"}]}`, "Questionnaire.item[1].linkId"},
		{"an enableWhen on a missing question", `{"resourceType":"Questionnaire","status":"active","item":[{"linkId":"a","type":"string","enableWhen":[{"question":"zz","operator":"exists","answerBoolean":true}]}]}`, "Questionnaire.item[0].enableWhen[0].question"},
		{"an expression that does not parse", `{"resourceType":"Questionnaire","status":"active","item":[{"linkId":"a","type":"decimal","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression","valueExpression":{"language":"text/fhirpath","expression":"%resource.item.where("}}]}]}`, "Questionnaire.item[0].extension[0].valueExpression.expression"},
		{"two enableWhen without enableBehavior (que-12)", `{"resourceType":"Questionnaire","status":"active","item":[{"linkId":"a","type":"boolean"},{"linkId":"b","type":"boolean"},{"linkId":"c","type":"string","enableWhen":[{"question":"a","operator":"exists","answerBoolean":true},{"question":"b","operator":"exists","answerBoolean":true}]}]}`, "Questionnaire.item[2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantOutcome(t, e.post("/Questionnaire", tc.body), http.StatusUnprocessableEntity, tc.at)
		})
	}
}

func TestAChangedQuestionnaireChecksTheNextResponse(t *testing.T) {
	e := formEnv(t)
	body := visitResponse("completed", "", "good", "true", "15")
	if r := e.post("/QuestionnaireResponse", body); r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	stricter := strings.Replace(visitForm, `"valueInteger":20`, `"valueInteger":10`, 1)
	if r := e.put("/Questionnaire/visit", stricter); r.Status != http.StatusOK {
		t.Fatalf("update the form: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, e.post("/QuestionnaireResponse", body), http.StatusUnprocessableEntity, "QuestionnaireResponse.item[2].answer[0].valueInteger")
}

func TestAResponseToAModularFormIsCheckedAgainstTheAssembledForm(t *testing.T) {
	e := newEnv(t)
	for path, body := range map[string]string{
		"/Questionnaire/pain": `{"resourceType":"Questionnaire","id":"pain","url":"http://example.org/Questionnaire/pain","version":"1","status":"active","item":[{"linkId":"pain","type":"integer","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/maxValue","valueInteger":10}]}]}`,
		"/Questionnaire/root": `{"resourceType":"Questionnaire","id":"root","url":"http://example.org/Questionnaire/root","version":"1","status":"active",
		  "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assemble-expectation","valueCode":"assemble-root"}],
		  "item":[{"linkId":"m","type":"display","text":"module","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-subQuestionnaire","valueCanonical":"http://example.org/Questionnaire/pain|1"}]}]}`,
	} {
		if r := e.put(path, body); r.Status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", path, r.Status, r.Body)
		}
	}
	response := func(pain string) string {
		return `{"resourceType":"QuestionnaireResponse","questionnaire":"http://example.org/Questionnaire/root|1","status":"completed","item":[{"linkId":"pain","answer":[{"valueInteger":` + pain + `}]}]}`
	}
	if r := e.post("/QuestionnaireResponse", response("4")); r.Status != http.StatusCreated {
		t.Fatalf("a response to the assembled form: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, e.post("/QuestionnaireResponse", response("11")), http.StatusUnprocessableEntity, "QuestionnaireResponse.item[0].answer[0].valueInteger")
}
