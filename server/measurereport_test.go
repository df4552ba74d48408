package server_test

import (
	"net/http"
	"testing"
)

func TestMeasureReportsAreCheckedAgainstTheirMeasure(t *testing.T) {
	e := newEnv(t)
	pop := func(code string) string {
		return `{"code":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/measure-population","code":"` + code + `"}]}`
	}
	measure := `{"resourceType":"Measure","url":"http://example.org/Measure/visits","status":"active",
	  "scoring":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/measure-scoring","code":"cohort"}]},
	  "group":[{"population":[` + pop("initial-population") + `,"criteria":{"language":"text/cql","expression":"Initial"}}]}]}`
	if r := e.post("/Measure", measure); r.Status != http.StatusCreated {
		t.Fatalf("store the Measure: %d %s", r.Status, r.Body)
	}
	report := func(typ, group string) string {
		return `{"resourceType":"MeasureReport","status":"complete","type":"` + typ + `","measure":"http://example.org/Measure/visits",
		  "period":{"start":"2026-01-01","end":"2026-03-31"},"group":[` + group + `]}`
	}
	for _, tc := range []struct{ name, body, at string }{
		{"a population the Measure defines", report("summary", `{"population":[`+pop("initial-population")+`,"count":12}]}`), ""},
		{"a population the Measure does not define", report("summary", `{"population":[`+pop("initial-population")+`,"count":12},`+pop("numerator")+`,"count":3}]}`), "MeasureReport.group[0].population[1]"},
		{"a subject list in a summary", report("summary", `{"population":[`+pop("initial-population")+`,"subjectResults":{"reference":"List/l1"}}]}`), "MeasureReport.group[0].population[0]"},
		{"a subject list in a subject-list report", report("subject-list", `{"population":[`+pop("initial-population")+`,"subjectResults":{"reference":"List/l1"}}]}`), ""},
		{"a score for a cohort is only a warning", report("summary", `{"population":[`+pop("initial-population")+`,"count":12}],"measureScore":{"value":0.5}}`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantStoredOrRefusedAt(t, e.post("/MeasureReport", tc.body), tc.at)
		})
	}
}
