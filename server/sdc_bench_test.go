package server_test

// Assessment benchmarks: a tenant of Synthea-shaped data (as
// BenchmarkEngineTargets builds it), the home-health visit assessment of
// testdata/assessments stored, then $populate for a Synthea patient and
// $extract of a completed response over HTTP, each next to the database
// statements the operation ran, executed raw on the same database in the
// same run. Sizes come from FHIRSTORE_BENCH_SIZES (default 3000):
//
//	FHIRSTORE_BENCH_SIZES=3000,10000,100000 go test ./server -run '^$' -bench Assessments -benchtime 1x -timeout 60m
//
// Figures: docs/performance.md, section "Assessments".

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"fhirstore/server"
	"fhirstore/store"
)

func BenchmarkAssessments(b *testing.B) {
	raw, ok := rawEngine()
	if !ok {
		b.Skip("the assessment benchmark compares with raw SQL: run it on the embedded engine")
	}
	for _, n := range benchSizes(b) {
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) { assessmentTargets(b, raw, n) })
	}
}

// assessmentTargets loads n resources and times $populate, the write of a
// completed response and its $extract.
func assessmentTargets(b *testing.B, raw rawSQL, n int) {
	log := &commandLog{}
	e := newEnv(b, withCommandLog(log))
	loaded := loadSynthea(b, e, n)
	b.Logf("%d resources loaded", loaded)
	for _, f := range []string{"ValueSet-phq-answers.json", "Questionnaire-hh-visit-assessment.json"} {
		body := readTestdata(b, "../testdata/assessments/"+f)
		typ, _, _ := strings.Cut(f, "-")
		if r := e.post("/"+typ, body); r.Status != http.StatusCreated {
			b.Fatalf("store %s: %d %s", f, r.Status, r.Body)
		}
	}
	form := e.get("/Questionnaire?url=http://fhirstore.example/fhir/Questionnaire/hh-visit-assessment").JSON(b)
	formID := form["entry"].([]any)[0].(map[string]any)["resource"].(map[string]any)["id"].(string)
	patient := newestSubjectOf(b, e, "/Observation?code=http://loinc.org|29463-7&_sort=-_lastUpdated&_count=1")
	populate := `{"resourceType":"Parameters","parameter":[{"name":"subject","valueReference":{"reference":"` + patient + `"}},` +
		`{"name":"context","part":[{"name":"name","valueString":"patient"},{"name":"content","valueReference":{"reference":"` + patient + `"}}]}]}`
	response := strings.ReplaceAll(readTestdata(b, "../testdata/assessments/QuestionnaireResponse-hh-visit-assessment.json"), "Patient/PATIENT_ID", patient)
	created := e.post("/QuestionnaireResponse", response)
	if created.Status != http.StatusCreated {
		b.Fatalf("store the response: %d %s", created.Status, created.Body)
	}
	qrID := created.JSON(b)["id"].(string)
	for _, tg := range []struct{ name, path, body string }{
		{"populate", "/Questionnaire/" + formID + "/$populate", populate},
		{"extract", "/QuestionnaireResponse/" + qrID + "/$extract", `{"resourceType":"Parameters"}`},
		{"validate-response", "/QuestionnaireResponse/$validate", response},
	} {
		post := func() {
			if r := e.post(tg.path, tg.body); r.Status != http.StatusOK {
				b.Fatalf("POST %s: %d %.300s", tg.path, r.Status, r.Body)
			}
		}
		cmds := log.capture(post)
		httpT := median(31, post)
		rawT := median(31, func() {
			for _, c := range cmds {
				if err := raw.run(context.Background(), c); err != nil {
					b.Fatalf("%s: raw %s: %v", tg.name, c.body, err)
				}
			}
		})
		b.ReportMetric(ms(httpT), tg.name+"-http-ms")
		b.ReportMetric(ms(rawT), tg.name+"-raw-ms")
		b.Logf("%-18s http %8.2f ms   raw SQL %8.3f ms (%d statements)", tg.name, ms(httpT), ms(rawT), len(cmds))
	}
}

// newestSubjectOf returns the subject reference of the first resource a
// search finds.
func newestSubjectOf(b *testing.B, e *env, path string) string {
	b.Helper()
	r := e.get(path)
	entries, _ := r.JSON(b)["entry"].([]any)
	if r.Status != http.StatusOK || len(entries) == 0 {
		b.Fatalf("GET %s: %d, no entries", path, r.Status)
	}
	return entries[0].(map[string]any)["resource"].(map[string]any)["subject"].(map[string]any)["reference"].(string)
}

func readTestdata(b *testing.B, path string) string {
	b.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return string(body)
}

// withCommandLog records the database commands of the env's store in log.
func withCommandLog(log *commandLog) func(*server.Config, *store.Options) {
	return func(_ *server.Config, o *store.Options) { o.Monitor = log.monitor() }
}
