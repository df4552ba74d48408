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
	"time"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/sdc"
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

var fixedNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func TestPopulateFillsTheVisitFromThePatientsRecord(t *testing.T) {
	rec := patientRecord(t)
	q := load(t, "Questionnaire-hh-visit.json")
	qr, issues, err := sdc.Populate(context.Background(), rec, sdc.PopulateRequest{
		Questionnaire: q, Subject: rec.byRef["Patient/p1"],
		Contexts: []sdc.LaunchContext{{Name: "patient", Reference: "Patient/p1"}}, Now: fixedNow,
	})
	if err != nil || qr == nil {
		t.Fatalf("populate: %v %v", err, issues)
	}
	for _, row := range []struct {
		linkID string
		want   any
	}{
		{"birthdate", "1961-04-12"},
		{"weight", json.Number("80.5")},
		{"height", json.Number("175")},
		{"bmi", json.Number("26.3")},
		{"sbp", nil},
	} {
		if got := answerOf(qr, row.linkID); got != row.want {
			t.Errorf("%s: %v (%T), want %v", row.linkID, got, got, row.want)
		}
	}
	for k, want := range map[string]any{"status": "in-progress", "questionnaire": "http://example.org/fhir/Questionnaire/hh-visit|1.0.0", "authored": "2026-12-01T10:00:00Z"} {
		if qr[k] != want {
			t.Errorf("%s = %v, want %v", k, qr[k], want)
		}
	}
	if subj, _ := qr["subject"].(map[string]any); subj["reference"] != "Patient/p1" {
		t.Errorf("subject %v", qr["subject"])
	}
	items := qr["item"].([]any)
	var order []string
	for _, it := range items {
		order = append(order, it.(map[string]any)["linkId"].(string))
	}
	if got := strings.Join(order, ","); got != "birthdate,vitals,phq2,falls,falls-count,contact-phone,caregiver,notes" {
		t.Errorf("item order %s", got)
	}
	if txt := items[1].(map[string]any)["text"]; txt != "Vital signs" {
		t.Errorf("group text %v", txt)
	}
	if len(rec.queries) != 2 || !strings.Contains(rec.queries[0], "patient=p1") {
		t.Errorf("queries %v", rec.queries)
	}
	for _, is := range issues {
		if is.Severity == "error" {
			t.Errorf("issue %+v", is)
		}
	}
}

func issuesText(issues []fhirschema.Issue) string {
	var b strings.Builder
	for _, is := range issues {
		b.WriteString(is.Severity + " " + is.Expression + " " + is.Diagnostics + "\n")
	}
	return b.String()
}

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

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
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
