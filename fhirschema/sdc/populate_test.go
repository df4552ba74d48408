package sdc_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"fhirstore/fhirschema/sdc"
)

// fixedNow is the clock of the tests that look at time stamps.
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
