package sdc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"fhirstore/server/sdc"
)

// backend holds a few resources; its check refuses responses marked so.
type backend struct {
	resources map[string]map[string]any
	checked   int
}

var errRefused = errors.New("the response does not conform to its Questionnaire")

func (b *backend) Search(context.Context, string) (map[string]any, error) {
	return map[string]any{"resourceType": "Bundle", "type": "searchset"}, nil
}

func (b *backend) Read(_ context.Context, ref string) (map[string]any, error) {
	return b.resources[ref], nil
}

func (b *backend) Questionnaire(_ context.Context, canonical string) (map[string]any, error) {
	for _, r := range b.resources {
		if r["resourceType"] == "Questionnaire" && (r["url"] == canonical || r["url"].(string)+"|"+r["version"].(string) == canonical) {
			return r, nil
		}
	}
	return nil, nil
}

func (b *backend) CheckResponse(_ context.Context, qr map[string]any) error {
	b.checked++
	if qr["id"] == "bad" {
		return errRefused
	}
	return nil
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func newBackend(t *testing.T) *backend {
	return &backend{resources: map[string]map[string]any{
		"Patient/p1": decode(t, `{"resourceType":"Patient","id":"p1","birthDate":"1961-04-12"}`),
		"Questionnaire/q1": decode(t, `{"resourceType":"Questionnaire","id":"q1","url":"http://example.org/q1","version":"2","status":"active",
		 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-launchContext","extension":[{"url":"name","valueCoding":{"code":"encounter"}},{"url":"type","valueCode":"Encounter"}]}],
		 "item":[{"linkId":"dob","type":"date","code":[{"system":"http://loinc.org","code":"21112-8"}],
		  "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observationExtract","valueBoolean":true},
		   {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/fhirpath","expression":"%patient.birthDate"}}]}]}`),
		"QuestionnaireResponse/good": decode(t, `{"resourceType":"QuestionnaireResponse","id":"good","questionnaire":"http://example.org/q1|2","status":"completed","subject":{"reference":"Patient/p1"},"item":[{"linkId":"dob","answer":[{"valueDate":"1961-04-12"}]}]}`),
		"QuestionnaireResponse/bad":  decode(t, `{"resourceType":"QuestionnaireResponse","id":"bad","questionnaire":"http://example.org/q1|2","status":"completed"}`),
	}}
}

// names are the output parameters' names.
func names(out map[string]any) string {
	var list []string
	for _, p := range out["parameter"].([]any) {
		list = append(list, p.(map[string]any)["name"].(string))
	}
	return strings.Join(list, ",")
}

func TestPopulateByGETWithTheSubjectInTheQuery(t *testing.T) {
	b := newBackend(t)
	out, err := sdc.Populate(context.Background(), b, sdc.Request{Method: http.MethodGet, ID: "q1", Query: url.Values{"subject": {"Patient/p1"}, "_format": {"json"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The encounter context the form declares was not given: a warning.
	if got := names(out); got != "response,issues" {
		t.Fatalf("parameters %s", got)
	}
	qr, _ := json.Marshal(out["parameter"].([]any)[0].(map[string]any)["resource"])
	if !bytes.Contains(qr, []byte(`"valueDate":"1961-04-12"`)) {
		t.Errorf("response %s", qr)
	}
}

func TestRefusalsPointAtTheParameter(t *testing.T) {
	for _, row := range []struct {
		name   string
		run    func(context.Context, sdc.Backend, sdc.Request) (map[string]any, error)
		req    sdc.Request
		status int
		at     string
	}{
		{"a repeated subject", sdc.Populate, sdc.Request{ID: "q1", Body: []byte(`{"resourceType":"Parameters","parameter":[{"name":"subject","valueReference":{"reference":"Patient/p1"}},{"name":"subject","valueReference":{"reference":"Patient/p1"}}]}`)}, 400, "Parameters.parameter[1]"},
		{"a subject that is no reference", sdc.Populate, sdc.Request{ID: "q1", Body: []byte(`{"resourceType":"Parameters","parameter":[{"name":"subject","valueString":"p1"}]}`)}, 400, "Parameters.parameter[0]"},
		{"a context of the wrong type", sdc.Populate, sdc.Request{ID: "q1", Body: []byte(`{"resourceType":"Parameters","parameter":[{"name":"subject","valueReference":{"reference":"Patient/p1"}},{"name":"context","part":[{"name":"name","valueString":"encounter"},{"name":"content","valueReference":{"reference":"Patient/p1"}}]}]}`)}, 422, "Questionnaire.extension[0]"},
		{"parameters that are not an array", sdc.Assemble, sdc.Request{Body: []byte(`{"resourceType":"Parameters","parameter":{}}`)}, 400, "Parameters.parameter"},
		{"an instance and a questionnaire both", sdc.Assemble, sdc.Request{ID: "q1", Body: []byte(`{"resourceType":"Parameters","parameter":[{"name":"url","valueUri":"http://example.org/q1"}]}`)}, 400, "Parameters.parameter[0]"},
		{"a questionnaire-response that is not one", sdc.Extract, sdc.Request{Body: []byte(`{"resourceType":"Parameters","parameter":[{"name":"questionnaire-response","resource":{"resourceType":"Patient"}}]}`)}, 400, "Parameters.parameter[0]"},
	} {
		t.Run(row.name, func(t *testing.T) {
			_, err := row.run(context.Background(), newBackend(t), row.req)
			var se *sdc.Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v, want an *sdc.Error", err)
			}
			if se.Status != row.status || se.Issues[0].Expression != row.at {
				t.Errorf("status %d at %q, want %d at %q: %v", se.Status, se.Issues[0].Expression, row.status, row.at, se.Issues)
			}
		})
	}
}

func TestExtractChecksTheResponseFirst(t *testing.T) {
	b := newBackend(t)
	if _, err := sdc.Extract(context.Background(), b, sdc.Request{ID: "bad"}); !errors.Is(err, errRefused) {
		t.Fatalf("error %v, want the check's", err)
	}
	out, err := sdc.Extract(context.Background(), b, sdc.Request{ID: "good"})
	if err != nil {
		t.Fatal(err)
	}
	if b.checked != 2 || names(out) != "return" {
		t.Errorf("checked %d, parameters %s", b.checked, names(out))
	}
	bundle, _ := json.Marshal(out)
	if !bytes.Contains(bundle, []byte(`"valueDateTime":"1961-04-12"`)) || !bytes.Contains(bundle, []byte(`"reference":"QuestionnaireResponse/good"`)) {
		t.Errorf("bundle %s", bundle)
	}
}
