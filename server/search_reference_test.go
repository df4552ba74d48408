package server_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestReferenceSearchByURL: a reference or canonical search by absolute URL
// matches the stored URL as written, and this server's Type/id form.
func TestReferenceSearchByURL(t *testing.T) {
	e := newEnv(t)
	q := e.create("Questionnaire", `{"resourceType":"Questionnaire","status":"active","url":"http://example.org/Questionnaire/intake"}`)
	byURL := e.create("QuestionnaireResponse", `{"resourceType":"QuestionnaireResponse","status":"completed","questionnaire":"http://example.org/Questionnaire/intake"}`)
	byVersion := e.create("QuestionnaireResponse", `{"resourceType":"QuestionnaireResponse","status":"completed","questionnaire":"http://example.org/Questionnaire/intake|2"}`)
	local := e.create("QuestionnaireResponse", `{"resourceType":"QuestionnaireResponse","status":"completed","questionnaire":"Questionnaire/`+q+`"}`)
	p := e.create("Patient", `{"resourceType":"Patient"}`)
	absolute := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"http://elsewhere.example.org/fhir/Patient/`+p+`"}}`)
	relative := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/`+p+`"}}`)
	cases := []struct {
		query string
		want  []string
	}{
		{"QuestionnaireResponse?questionnaire=" + url.QueryEscape("http://example.org/Questionnaire/intake"), []string{"QuestionnaireResponse/" + byURL, "QuestionnaireResponse/" + byVersion}},
		{"QuestionnaireResponse?questionnaire=" + url.QueryEscape("http://example.org/Questionnaire/intake|2"), []string{"QuestionnaireResponse/" + byVersion}},
		{"QuestionnaireResponse?questionnaire=Questionnaire/" + q, []string{"QuestionnaireResponse/" + local}},
		{"Observation?subject=" + url.QueryEscape("http://elsewhere.example.org/fhir/Patient/"+p), []string{"Observation/" + absolute, "Observation/" + relative}},
		{"Observation?subject=Patient/" + p, []string{"Observation/" + relative}},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			r := e.get("/" + c.query)
			if r.Status != http.StatusOK {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			wantIDs(t, ids(t, r, ""), c.want...)
		})
	}
}
