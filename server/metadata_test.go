package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// specTypes are the resource types of the service contract.
var specTypes = []string{"Patient", "QuestionnaireResponse", "Practitioner", "EpisodeOfCare", "DiagnosticReport", "CarePlan", "List", "Questionnaire"}

// sampleValue is a well-formed value for a parameter type.
var sampleValue = map[string]string{
	"string": "a", "token": "x", "reference": "Patient/x", "date": "ge2020-01-01",
	"number": "1", "quantity": "1", "uri": "http://example.org/x",
	"special":   "a",   // _text and _content
	"composite": "x$1", // token$quantity and token$token on the contract's types
}

// sampleByName are values for parameters whose type says too little.
var sampleByName = map[string]string{"_filter": "_id eq x"}

// TestEverySearchParameterTheStatementDeclaresWorks reads /metadata and runs
// one search with each parameter it declares for the contract's types.
func TestEverySearchParameterTheStatementDeclaresWorks(t *testing.T) {
	e := newEnv(t)
	r := e.get("/metadata")
	if r.Status != http.StatusOK {
		t.Fatalf("metadata: %d", r.Status)
	}
	cs := r.JSON(t)
	if cs["fhirVersion"] != "4.0.1" {
		t.Fatalf("fhirVersion %v", cs["fhirVersion"])
	}
	declared := map[string][]map[string]any{}
	for _, res := range cs["rest"].([]any)[0].(map[string]any)["resource"].([]any) {
		m := res.(map[string]any)
		for _, sp := range asList(m["searchParam"]) {
			declared[m["type"].(string)] = append(declared[m["type"].(string)], sp.(map[string]any))
		}
	}
	for _, typ := range specTypes {
		if len(declared[typ]) == 0 {
			t.Fatalf("%s declares no search parameters", typ)
		}
		for _, sp := range declared[typ] {
			name, ptype := sp["name"].(string), sp["type"].(string)
			value, ok := sampleValue[ptype]
			if v, named := sampleByName[name]; named {
				value = v
			}
			if !ok {
				t.Errorf("%s.%s has type %s, which cannot be searched", typ, name, ptype)
				continue
			}
			if sp["documentation"] == nil {
				t.Errorf("%s.%s has no documentation", typ, name)
			}
			q := url.Values{name: {value}}.Encode()
			resp := e.do(request{Method: http.MethodGet, Path: "/" + typ + "?" + q, Header: map[string]string{"Prefer": "handling=strict"}})
			if resp.Status != http.StatusOK {
				t.Errorf("%s?%s: %d %s", typ, q, resp.Status, resp.Body)
			}
		}
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// TestStatementDeclaresBundlesAndConditionals: what the statement promises
// about batch, transaction, PATCH and conditional interactions is served.
func TestStatementDeclaresBundlesAndConditionals(t *testing.T) {
	e := newEnv(t)
	cs := e.get("/metadata").JSON(t)
	rest := cs["rest"].([]any)[0].(map[string]any)
	codes := map[any]bool{}
	for _, in := range asList(rest["interaction"]) {
		codes[in.(map[string]any)["code"]] = true
	}
	if !codes["transaction"] || !codes["batch"] {
		t.Fatalf("system interactions %v lack transaction or batch", codes)
	}
	if pf := fmt.Sprint(cs["patchFormat"]); pf != "[application/fhir+json application/fhir+xml application/json-patch+json]" {
		t.Fatalf("patchFormat %s, want FHIRPath Patch in JSON and XML, and JSON Patch", pf)
	}
	for _, res := range asList(rest["resource"]) {
		m := res.(map[string]any)
		if m["type"] != "Patient" {
			continue
		}
		if m["conditionalCreate"] != true || m["conditionalUpdate"] != true || m["conditionalDelete"] != "single" {
			t.Fatalf("Patient conditional support %v %v %v", m["conditionalCreate"], m["conditionalUpdate"], m["conditionalDelete"])
		}
		// each declared conditional answers as declared
		if r := e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient"}`, Header: map[string]string{"If-None-Exist": "identifier=urn:x|1"}}); r.Status != http.StatusCreated {
			t.Fatalf("conditional create: %d", r.Status)
		}
		if r := e.put("/Patient?identifier=urn:x|2", `{"resourceType":"Patient"}`); r.Status != http.StatusCreated {
			t.Fatalf("conditional update: %d", r.Status)
		}
		if r := e.do(request{Method: http.MethodDelete, Path: "/Patient?identifier=urn:x|1"}); r.Status != http.StatusNoContent {
			t.Fatalf("conditional delete: %d", r.Status)
		}
		return
	}
	t.Fatal("no Patient in the statement")
}

// TestStatementDeclaresSystemSearch: the statement declares search-system
// with its parameters, and each declared parameter is served at the base.
func TestStatementDeclaresSystemSearch(t *testing.T) {
	e := newEnv(t)
	e.create("Patient", `{"resourceType":"Patient","meta":{"tag":[{"system":"urn:t","code":"x"}]}}`)
	rest := e.get("/metadata").JSON(t)["rest"].([]any)[0].(map[string]any)
	declared := false
	for _, in := range asList(rest["interaction"]) {
		declared = declared || in.(map[string]any)["code"] == "search-system"
	}
	if !declared {
		t.Fatalf("no search-system interaction: %v", rest["interaction"])
	}
	samples := map[string]string{"_id": "x", "_lastUpdated": "ge2000", "_tag": "urn:t|x", "_profile": "http://x/p",
		"_security": "urn:s|c", "_source": "urn:src", "_list": "l", "_has:Observation:subject:code": "c", "_type": "Patient"}
	params := asList(rest["searchParam"])
	if len(params) != len(samples) {
		t.Fatalf("%d system parameters declared, %d sampled", len(params), len(samples))
	}
	for _, p := range params {
		name := p.(map[string]any)["name"].(string)
		key := name
		if name == "_has" {
			key = "_has:Observation:subject:code"
		}
		v, ok := samples[key]
		if !ok {
			t.Fatalf("no sample for %s", name)
		}
		r := e.do(request{Method: http.MethodGet, Path: "?" + key + "=" + v, Header: map[string]string{"Prefer": "handling=strict"}})
		if r.Status != http.StatusOK {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
}
