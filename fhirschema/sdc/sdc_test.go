package sdc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

func TestPopulateRepeatsAGroupPerPopulationContextItem(t *testing.T) {
	rec := patientRecord(t)
	q := decode(t, `{"resourceType":"Questionnaire","url":"http://example.org/q/meds","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-launchContext","extension":[{"url":"name","valueCoding":{"code":"patient"}},{"url":"type","valueCode":"Patient"}]}],
	 "item":[{"linkId":"names","type":"group","repeats":true,
	   "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-itemPopulationContext","valueExpression":{"name":"name","language":"text/fhirpath","expression":"%patient.name"}}],
	   "item":[{"linkId":"family","type":"string","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/fhirpath","expression":"%name.family"}}]},
	     {"linkId":"kind","type":"choice","answerOption":[{"valueCoding":{"code":"official"}},{"valueCoding":{"code":"usual"},"initialSelected":true}]}]},
	  {"linkId":"smoker","type":"boolean","initial":[{"valueBoolean":false}]},
	  {"linkId":"count","type":"integer","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/fhirpath","expression":"%patient.name.count()"}}]},
	  {"linkId":"weight","type":"quantity","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/questionnaire-unit","valueCoding":{"system":"http://unitsofmeasure.org","code":"kg"}},
	    {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/fhirpath","expression":"80.5 'kg'"}}]},
	  {"linkId":"info","type":"display","text":"not in the response"}]}`)
	rec.byRef["Patient/p1"]["name"] = []any{map[string]any{"family": "Jerde"}, map[string]any{"family": "Smith"}}
	qr, issues, err := sdc.Populate(context.Background(), rec, sdc.PopulateRequest{Questionnaire: q, Subject: rec.byRef["Patient/p1"], Now: fixedNow})
	if err != nil || qr == nil {
		t.Fatalf("populate: %v\n%s", err, issuesText(issues))
	}
	want := `[{"item":[{"answer":[{"valueString":"Jerde"}],"linkId":"family"},{"answer":[{"valueCoding":{"code":"usual"}}],"linkId":"kind"}],"linkId":"names"},` +
		`{"item":[{"answer":[{"valueString":"Smith"}],"linkId":"family"},{"answer":[{"valueCoding":{"code":"usual"}}],"linkId":"kind"}],"linkId":"names"},` +
		`{"answer":[{"valueBoolean":false}],"linkId":"smoker"},{"answer":[{"valueInteger":2}],"linkId":"count"},` +
		`{"answer":[{"valueQuantity":{"code":"kg","system":"http://unitsofmeasure.org","unit":"kg","value":80.5}}],"linkId":"weight"}]`
	if got := jsonText(qr["item"]); got != want {
		t.Errorf("items\n got %s\nwant %s", got, want)
	}
}

func TestPopulateCalculatesUntilStable(t *testing.T) {
	q := decode(t, `{"resourceType":"Questionnaire","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/StructureDefinition/variable","valueExpression":{"name":"a","language":"text/fhirpath","expression":"%resource.repeat(item).where(linkId='a').answer.value"}}],
	 "item":[{"linkId":"c","type":"integer","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression","valueExpression":{"language":"text/fhirpath","expression":"%resource.repeat(item).where(linkId='b').answer.value * 2"}}]},
	  {"linkId":"b","type":"integer","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression","valueExpression":{"language":"text/fhirpath","expression":"%a + 1"}}]},
	  {"linkId":"a","type":"integer","initial":[{"valueInteger":3}]}]}`)
	qr, issues, err := sdc.Populate(context.Background(), newRecords(), sdc.PopulateRequest{Questionnaire: q, Now: fixedNow})
	if err != nil || qr == nil {
		t.Fatalf("populate: %v\n%s", err, issuesText(issues))
	}
	if b, c := jsonText(answerOf(qr, "b")), jsonText(answerOf(qr, "c")); b != "4" || c != "8" {
		t.Errorf("b = %s, c = %s; want 4 and 8", b, c)
	}
}

func TestPopulateReportsWhatItCannotFill(t *testing.T) {
	for _, row := range []struct {
		name, items string
		wantAt      string
		wantFailed  bool
	}{
		{"an expression that does not parse fails at its item",
			`[{"linkId":"g","type":"group","item":[{"linkId":"x","type":"string"},{"linkId":"bad","type":"string","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/fhirpath","expression":"%patient.name.("}}]}]}]`,
			"Questionnaire.item[0].item[1]", true},
		{"an expression past its bounds fails, it does not hang",
			`[{"linkId":"slow","type":"integer","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression","valueExpression":{"language":"text/fhirpath","expression":"(1).repeat($this + 1).count()"}}]}]`,
			"Questionnaire.item[0]", true},
		{"an unknown variable fails",
			`[{"linkId":"u","type":"string","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/fhirpath","expression":"%nobody.name"}}]}]`,
			"Questionnaire.item[0]", true},
		{"an unsupported language fails",
			`[{"linkId":"cql","type":"string","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/cql","expression":"Patient.name"}}]}]`,
			"Questionnaire.item[0]", true},
		{"a value that does not fit the item is a warning",
			`[{"linkId":"n","type":"integer","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/fhirpath","expression":"'many'"}}]}]`,
			"Questionnaire.item[0]", false},
	} {
		t.Run(row.name, func(t *testing.T) {
			q := decode(t, `{"resourceType":"Questionnaire","status":"active","item":`+row.items+`}`)
			qr, issues, err := sdc.Populate(context.Background(), newRecords(), sdc.PopulateRequest{Questionnaire: q, Limits: sdc.Limits{MaxSteps: 10_000}})
			if err != nil {
				t.Fatal(err)
			}
			if sdc.Failed(issues) != row.wantFailed || (qr == nil) != row.wantFailed {
				t.Fatalf("failed %v, response %v; issues:\n%s", sdc.Failed(issues), qr != nil, issuesText(issues))
			}
			found := false
			for _, is := range issues {
				found = found || is.Expression == row.wantAt
			}
			if !found {
				t.Errorf("no issue at %s:\n%s", row.wantAt, issuesText(issues))
			}
		})
	}
}

func TestPopulateWarnsOfAMissingLaunchContext(t *testing.T) {
	q := load(t, "Questionnaire-hh-visit.json")
	qr, issues, err := sdc.Populate(context.Background(), newRecords(), sdc.PopulateRequest{Questionnaire: q})
	if err != nil || qr == nil {
		t.Fatalf("populate: %v\n%s", err, issuesText(issues))
	}
	if len(issues) == 0 || issues[0].Severity != "warning" || issues[0].Expression != "Questionnaire.extension[0]" {
		t.Errorf("issues:\n%s", issuesText(issues))
	}
	if answerOf(qr, "birthdate") != nil {
		t.Errorf("birthdate filled without a patient")
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

const subQ = "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-subQuestionnaire"

func TestAssembleInlinesModules(t *testing.T) {
	module := decode(t, `{"resourceType":"Questionnaire","id":"pain","url":"http://example.org/q/pain","version":"1","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/StructureDefinition/variable","valueExpression":{"name":"score","language":"text/fhirpath","expression":"%resource.item.answer.value"}},
	   {"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assemble-expectation","valueCode":"assemble-child"}],
	 "item":[{"linkId":"pain","type":"integer","text":"Pain score"},
	  {"linkId":"where","type":"string","enableWhen":[{"question":"pain","operator":">","answerInteger":0}],"item":[{"linkId":"nested","type":"display","extension":[{"url":"`+subQ+`","valueCanonical":"http://example.org/q/tiny"}]}]}]}`)
	tiny := decode(t, `{"resourceType":"Questionnaire","id":"tiny","url":"http://example.org/q/tiny","status":"active","item":[{"linkId":"t","type":"boolean"}]}`)
	root := decode(t, `{"resourceType":"Questionnaire","id":"root","url":"http://example.org/q/root","version":"2","status":"active",
	 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assemble-expectation","valueCode":"assemble-root"}],
	 "item":[{"linkId":"first","type":"string"},
	  {"linkId":"m1","type":"display","extension":[{"url":"`+subQ+`","valueCanonical":"http://example.org/q/pain|1"},{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-linkIdPrefix","valueString":"a."}]},
	  {"linkId":"g","type":"group","item":[{"linkId":"m2","type":"display","extension":[{"url":"`+subQ+`","valueCanonical":"http://example.org/q/pain"},{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-linkIdPrefix","valueString":"b."}]}]}]}`)
	rec := newRecords(module, tiny, root)
	out, issues, err := sdc.Assemble(context.Background(), rec, sdc.AssembleRequest{Questionnaire: root})
	if err != nil || out == nil {
		t.Fatalf("assemble: %v\n%s", err, issuesText(issues))
	}
	got := jsonText(out)
	if strings.Contains(got, subQ) || strings.Contains(got, "assemble-expectation") {
		t.Errorf("sub-questionnaire or expectation left: %s", got)
	}
	wantItems := `[{"linkId":"first","type":"string"},` +
		`{"linkId":"a.pain","text":"Pain score","type":"integer"},{"enableWhen":[{"answerInteger":0,"operator":"\u003e","question":"a.pain"}],"item":[{"linkId":"a.t","type":"boolean"}],"linkId":"a.where","type":"string"},` +
		`{"item":[{"linkId":"b.pain","text":"Pain score","type":"integer"},{"enableWhen":[{"answerInteger":0,"operator":"\u003e","question":"b.pain"}],"item":[{"linkId":"b.t","type":"boolean"}],"linkId":"b.where","type":"string"}],"linkId":"g","type":"group"}]`
	if items := jsonText(out["item"]); items != wantItems {
		t.Errorf("items\n got %s\nwant %s", items, wantItems)
	}
	wantExt := `[{"url":"http://hl7.org/fhir/StructureDefinition/variable","valueExpression":{"expression":"%resource.item.answer.value","language":"text/fhirpath","name":"score"}},` +
		`{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assembledFrom","valueCanonical":"http://example.org/q/root|2"}]`
	if ext := jsonText(out["extension"]); ext != wantExt {
		t.Errorf("extensions\n got %s\nwant %s", ext, wantExt)
	}
	if strings.Contains(jsonText(root), "a.pain") || strings.Contains(jsonText(module), "a.pain") {
		t.Error("the stored forms were changed")
	}
}

func TestAssembleRefusesWhatItCannotResolve(t *testing.T) {
	for _, row := range []struct{ name, items, wantAt string }{
		{"an unknown module", `[{"linkId":"x","type":"string"},{"linkId":"m","type":"display","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/none"}]}]`, "Questionnaire.item[1]"},
		{"a module including itself", `[{"linkId":"m","type":"display","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/self"}]}]`, "Questionnaire.item[0]"},
		{"a root form as a module", `[{"linkId":"m","type":"display","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/root-only"}]}]`, "Questionnaire.item[0]"},
		{"a module on a question", `[{"linkId":"m","type":"string","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/none"}]}]`, "Questionnaire.item[0]"},
	} {
		t.Run(row.name, func(t *testing.T) {
			root := decode(t, `{"resourceType":"Questionnaire","url":"http://example.org/q/self","status":"active","item":`+row.items+`}`)
			rootOnly := decode(t, `{"resourceType":"Questionnaire","id":"root-only","url":"http://example.org/q/root-only","status":"active",
			 "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-assemble-expectation","valueCode":"assemble-root"}],"item":[{"linkId":"r","type":"string"}]}`)
			out, issues, err := sdc.Assemble(context.Background(), newRecords(rootOnly), sdc.AssembleRequest{Questionnaire: root})
			if err != nil || out != nil || !sdc.Failed(issues) || issues[0].Expression != row.wantAt {
				t.Fatalf("out %v, err %v, issues:\n%s", out != nil, err, issuesText(issues))
			}
		})
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

// TestPopulateTheIGsPrepopulationExample fills the implementation guide's
// FHIRPath pre-population example with a patient and a user context.
func TestPopulateTheIGsPrepopulationExample(t *testing.T) {
	rec := newRecords(
		decode(t, `{"resourceType":"Patient","id":"p2","birthDate":"1980-02-29",
		 "identifier":[{"system":"http://ns.electronichealth.net.au/id/medicare-number","value":"2123 45670 1"}],
		 "name":[{"family":"Wuckert","given":["Kimberly","Ann"]},{"family":"Other"}],
		 "telecom":[{"system":"email","value":"k@example.org"},{"system":"phone","use":"work","value":"03 9999 0000"},{"system":"phone","use":"mobile","value":"0491 570 006"}]}`),
		decode(t, `{"resourceType":"Practitioner","id":"u1","identifier":[{"system":"http://ns.electronichealth.net.au/id/hi/prn","value":"4321102W"}],"name":[{"family":"Carter","given":["Ravi"]}]}`),
	)
	qr, issues, err := sdc.Populate(context.Background(), rec, sdc.PopulateRequest{
		Questionnaire: load(t, "Questionnaire-sdc-test-fhirpath-prepop-initialexpr.json"),
		Subject:       rec.byRef["Patient/p2"],
		Contexts:      []sdc.LaunchContext{{Name: "patient", Reference: "Patient/p2"}, {Name: "user", Resource: rec.byRef["Practitioner/u1"]}},
		Now:           fixedNow,
	})
	if err != nil || qr == nil || len(issues) > 0 {
		t.Fatalf("populate: %v\n%s", err, issuesText(issues))
	}
	for linkID, want := range map[string]any{
		"participant-id": nil, "medicare-number": "2123 45670 1", "dva-number": nil, "family-name": "Wuckert", "given-names": "Kimberly",
		"dob": "1980-02-29", "contact-number": "0491 570 006", "provider-number": "4321102W", "date-consult": "2026-12-01", "provider-name": "Ravi Carter",
	} {
		if got := answerOf(qr, linkID); got != want {
			t.Errorf("%s = %v, want %v", linkID, got, want)
		}
	}
	// The question's nested item sits under its answer.
	if !strings.Contains(jsonText(qr), `{"answer":[{"item":[{"linkId":"contact-number-tooltip","text":"(mobile or land line including area code)"}],"valueString":"0491 570 006"}],"linkId":"contact-number","text":"Contact telephone number"}`) {
		t.Errorf("contact number: %s", jsonText(qr))
	}
	if qr["questionnaire"] != "Questionnaire/questionnaire-sdc-test-fhirpath-prepop-initialexpression" {
		t.Errorf("questionnaire %v", qr["questionnaire"])
	}
}

// failingData is a Data whose searches fail, as a server does when a
// search is refused or the store does not answer.
type failingData struct{ *records }

var errStoreDown = errors.New("store down")

func (failingData) Search(context.Context, string) (map[string]any, error) { return nil, errStoreDown }

func TestPopulateQueriesThroughData(t *testing.T) {
	q := decode(t, `{"resourceType":"Questionnaire","status":"active",
	 "item":[{"linkId":"obs","type":"group","repeats":true,
	   "extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-itemPopulationContext","valueExpression":{"name":"obs","language":"application/x-fhir-query","expression":"Observation?patient={{%patient.id}}&code=http://loinc.org|{{'29463-7' | '8302-2'}}"}}],
	   "item":[{"linkId":"value","type":"decimal","extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-initialExpression","valueExpression":{"language":"text/fhirpath","expression":"%obs.value"}}]}]}]}`)
	t.Run("each resource found is a group", func(t *testing.T) {
		rec := patientRecord(t)
		qr, issues, err := sdc.Populate(context.Background(), rec, sdc.PopulateRequest{Questionnaire: q, Subject: rec.byRef["Patient/p1"]})
		if err != nil || qr == nil {
			t.Fatalf("populate: %v\n%s", err, issuesText(issues))
		}
		if want := "Observation?patient=p1&code=http://loinc.org|29463-7,8302-2"; len(rec.queries) != 1 || rec.queries[0] != want {
			t.Errorf("queries %q, want %q", rec.queries, want)
		}
		if n := len(qr["item"].([]any)); n != 1 { // the record's matcher takes the first code only
			t.Errorf("%d groups: %s", n, jsonText(qr["item"]))
		}
	})
	t.Run("a search that fails fails the operation", func(t *testing.T) {
		rec := patientRecord(t)
		_, _, err := sdc.Populate(context.Background(), failingData{rec}, sdc.PopulateRequest{Questionnaire: q, Subject: rec.byRef["Patient/p1"]})
		var de *sdc.DataError
		if !errors.As(err, &de) || !errors.Is(err, errStoreDown) {
			t.Fatalf("error %v, want the Data's", err)
		}
	})
	t.Run("queries are bounded", func(t *testing.T) {
		rec := patientRecord(t)
		var vars []string
		for _, id := range []string{"a", "b", "c"} {
			vars = append(vars, `{"url":"http://hl7.org/fhir/StructureDefinition/variable","valueExpression":{"name":"`+id+`","language":"application/x-fhir-query","expression":"Patient?_id=`+id+`"}}`)
		}
		many := decode(t, `{"resourceType":"Questionnaire","status":"active","extension":[`+strings.Join(vars, ",")+`]}`)
		_, issues, err := sdc.Populate(context.Background(), rec, sdc.PopulateRequest{Questionnaire: many, Limits: sdc.Limits{MaxQueries: 2}})
		if err != nil || !sdc.Failed(issues) || !strings.Contains(issuesText(issues), "more than 2 queries") {
			t.Fatalf("err %v, issues:\n%s", err, issuesText(issues))
		}
	})
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

func TestAssembleIsBoundedWhenModulesMultiply(t *testing.T) {
	// Each level uses the next twice: 2^9 copies of the last one.
	var forms []map[string]any
	for i := range 10 {
		items := `[{"linkId":"q","type":"string"}]`
		if i < 9 {
			next := `{"linkId":"m","type":"display","extension":[{"url":"` + subQ + `","valueCanonical":"http://example.org/q/level` + string(rune('1'+i)) + `"}]}`
			items = "[" + next + "," + next + "]"
		}
		forms = append(forms, decode(t, `{"resourceType":"Questionnaire","id":"level`+string(rune('0'+i))+`","url":"http://example.org/q/level`+string(rune('0'+i))+`","status":"active","item":`+items+`}`))
	}
	out, issues, err := sdc.Assemble(context.Background(), newRecords(forms...), sdc.AssembleRequest{Questionnaire: forms[0], MaxModules: 100})
	if err != nil || out != nil || !strings.Contains(issuesText(issues), "more than 100 sub-questionnaires") {
		t.Fatalf("out %v, err %v, issues:\n%.500s", out != nil, err, issuesText(issues))
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
