package sdc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fhirstore/fhirschema"
)

// decode reads JSON as the server does (numbers as json.Number).
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode: %v\n%s", err, s)
	}
	return m
}

// load reads a testdata file.
func load(t testing.TB, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, string(b))
}

// records is a small record of resources: reads by reference, searches
// by type with code and patient (and subject) matched, and
// Questionnaires by canonical.
type records struct {
	byRef   map[string]map[string]any
	queries []string
}

func newRecords(resources ...map[string]any) *records {
	r := &records{byRef: map[string]map[string]any{}}
	for _, res := range resources {
		r.byRef[res["resourceType"].(string)+"/"+res["id"].(string)] = res
	}
	return r
}

func (r *records) Read(_ context.Context, ref string) (map[string]any, error) {
	return r.byRef[ref], nil
}

func (r *records) Questionnaire(_ context.Context, canonical string) (map[string]any, error) {
	u, version, _ := strings.Cut(canonical, "|")
	for _, res := range r.byRef {
		if res["resourceType"] == "Questionnaire" && res["url"] == u && (version == "" || res["version"] == version) {
			return res, nil
		}
	}
	return nil, nil
}

func (r *records) Search(_ context.Context, query string) (map[string]any, error) {
	r.queries = append(r.queries, query)
	typ, raw, _ := strings.Cut(query, "?")
	params, err := url.ParseQuery(raw)
	if err != nil {
		return nil, err
	}
	var entries []any
	for _, res := range r.byRef {
		if res["resourceType"] != typ || !matches(res, params) {
			continue
		}
		entries = append(entries, map[string]any{"resource": res})
	}
	return map[string]any{"resourceType": "Bundle", "type": "searchset", "entry": entries}, nil
}

// matches checks code (system|code) and patient of an Observation-like resource.
func matches(res map[string]any, params url.Values) bool {
	if code := params.Get("code"); code != "" {
		b, _ := json.Marshal(res["code"])
		_, c, _ := strings.Cut(code, "|")
		if !bytes.Contains(b, []byte(`"code":"`+c+`"`)) {
			return false
		}
	}
	if p := params.Get("patient"); p != "" {
		subj, _ := res["subject"].(map[string]any)
		if subj["reference"] != "Patient/"+p {
			return false
		}
	}
	return true
}

// patientRecord is a patient with a weight and a height.
func patientRecord(t testing.TB) *records {
	return newRecords(
		decode(t, `{"resourceType":"Patient","id":"p1","birthDate":"1961-04-12","name":[{"family":"Jerde","given":["Ana"]}]}`),
		decode(t, `{"resourceType":"Observation","id":"w1","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},"subject":{"reference":"Patient/p1"},"valueQuantity":{"value":80.5,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}}`),
		decode(t, `{"resourceType":"Observation","id":"h1","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8302-2"}]},"subject":{"reference":"Patient/p1"},"valueQuantity":{"value":175,"unit":"cm","system":"http://unitsofmeasure.org","code":"cm"}}`),
	)
}

// answerOf finds the first answer value of the item linkID anywhere in a response.
func answerOf(qr map[string]any, linkID string) any {
	var found any
	var walk func(items any)
	walk = func(items any) {
		list, _ := items.([]any)
		for _, x := range list {
			it := x.(map[string]any)
			if it["linkId"] == linkID && found == nil {
				if as, _ := it["answer"].([]any); len(as) > 0 {
					for k, v := range as[0].(map[string]any) {
						if strings.HasPrefix(k, "value") {
							found = v
						}
					}
				}
			}
			walk(it["item"])
			if as, _ := it["answer"].([]any); len(as) > 0 {
				for _, a := range as {
					walk(a.(map[string]any)["item"])
				}
			}
		}
	}
	walk(qr["item"])
	return found
}

func issuesText(issues []fhirschema.Issue) string {
	var b strings.Builder
	for _, is := range issues {
		b.WriteString(is.Severity + " " + is.Expression + " " + is.Diagnostics + "\n")
	}
	return b.String()
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
