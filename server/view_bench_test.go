package server_test

// SQL on FHIR throughput: a tenant of Synthea-shaped data (as
// BenchmarkEngineTargets builds it); a view over every Observation (id,
// patient, code, value, unit, effective) run with $viewdefinition-run over
// HTTP (ndjson, read to the end), alternately with an $export of the
// Observations (ndjson files, through the job manager) three times each in
// the same run, and $sqlquery-run counting the view's rows by code:
//
//	FHIRSTORE_BENCH_SIZES=10000,100000 go test ./server -run '^$' -bench ViewThroughput -benchtime 1x -timeout 60m
//
// Figures and their reading: docs/performance.md, section "SQL on FHIR".

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"fhirstore/server/bulkexport"
	"fhirstore/store/storetest"
)

// observationView is the view of the benchmark.
const observationView = `{"resourceType":"ViewDefinition","url":"http://example.org/ViewDefinition/observations","name":"observations",` +
	`"status":"active","resource":"Observation","select":[{"column":[` +
	`{"name":"id","path":"getResourceKey()"},{"name":"patient","path":"subject.getReferenceKey(Patient)"},` +
	`{"name":"code","path":"code.coding.first().code"},{"name":"value","path":"value.ofType(Quantity).value","type":"decimal"},` +
	`{"name":"unit","path":"value.ofType(Quantity).unit"},{"name":"effective","path":"effective.ofType(dateTime)","type":"dateTime"}]}]}`

// exportObservations runs one $export job of the Observations to its end.
func exportObservations(b *testing.B, x *exportEnv) (int64, time.Duration) {
	ctx := context.Background()
	start := time.Now()
	job, err := x.m.Kickoff(ctx, x.tenant, bulkexport.Request{URL: "bench", Level: bulkexport.LevelSystem, Types: []string{"Observation"}})
	if err != nil {
		b.Fatal(err)
	}
	for job.Active() {
		time.Sleep(2 * time.Millisecond)
		if job, err = x.m.Status(ctx, x.tenant, job.ID); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	if job.State != bulkexport.StateCompleted {
		b.Fatalf("export %s: %s", job.State, job.Failure)
	}
	if err := x.m.Cancel(ctx, x.tenant, job.ID); err != nil {
		b.Fatal(err)
	}
	return job.Exported, elapsed
}

// runObservationView streams the view's rows and counts them.
func runObservationView(b *testing.B, x *exportEnv, id string) (int, time.Duration) {
	start := time.Now()
	req, _ := http.NewRequest(http.MethodGet, x.srv.URL+"/fhir/r4/ViewDefinition/"+id+"/$viewdefinition-run?_format=ndjson", nil)
	req.Host = x.tenant + ".localhost"
	req.Header.Set("Authorization", "Bearer "+x.token)
	resp, err := x.srv.Client().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("view run: %d %v %.300s", resp.StatusCode, err, body)
	}
	return strings.Count(string(body), "\n"), time.Since(start)
}

func BenchmarkViewThroughput(b *testing.B) {
	for _, n := range benchSizes(b) {
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) {
			x := newExportEnv(b)
			loadSynthea(b, x.env, n)
			id := x.create("ViewDefinition", observationView)
			var exp, run []time.Duration
			var exported int64
			var rows int
			var expCPU, runCPU time.Duration
			for range 3 {
				var d time.Duration
				cpu := storetest.ProcessCPU(b)
				exported, d = exportObservations(b, x)
				expCPU += storetest.ProcessCPU(b) - cpu
				exp = append(exp, d)
				cpu = storetest.ProcessCPU(b)
				rows, d = runObservationView(b, x, id)
				runCPU += storetest.ProcessCPU(b) - cpu
				run = append(run, d)
			}
			// CPU-seconds per 1,000 Observations: what each costs whatever
			// else the machine runs.
			expPerK := expCPU.Seconds() * 1000 / float64(3*exported)
			runPerK := runCPU.Seconds() * 1000 / float64(3*rows)
			if int64(rows) != exported {
				b.Fatalf("the view gave %d rows for %d Observations", rows, exported)
			}
			slices.Sort(exp)
			slices.Sort(run)
			expRate, runRate := float64(exported)/exp[1].Seconds(), float64(rows)/run[1].Seconds()
			start := time.Now()
			r := x.post("/$sqlquery-run", sqlQueryBody("SELECT code, count(*) AS n FROM observations GROUP BY code ORDER BY n DESC"))
			sqlTime := time.Since(start)
			var groups []map[string]any
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &groups) != nil || len(groups) == 0 {
				b.Fatalf("sqlquery-run: %d %.300s", r.Status, r.Body)
			}
			b.ReportMetric(runRate, "view-rows/s")
			b.ReportMetric(expRate, "export-resources/s")
			b.ReportMetric(runRate/expRate, "ratio")
			b.ReportMetric(sqlTime.Seconds(), "sqlquery-s")
			b.ReportMetric(runPerK, "view-cpu-s/1k")
			b.ReportMetric(expPerK, "export-cpu-s/1k")
			b.Logf("%d Observations: view run median %.2fs (runs %v) %.0f rows/s; $export median %.2fs (runs %v) %.0f resources/s; ratio %.2f; "+
				"CPU-seconds per 1,000: view %.3f, $export %.3f (ratio %.2f); $sqlquery-run grouping by code: %d groups in %.2fs",
				exported, run[1].Seconds(), run, runRate, exp[1].Seconds(), exp, expRate, runRate/expRate,
				runPerK, expPerK, expPerK/runPerK, len(groups), sqlTime.Seconds())
		})
	}
}

// sqlQueryBody is a $sqlquery-run body over the observations view.
func sqlQueryBody(sql string) string {
	lib := map[string]any{"resourceType": "Library", "status": "active",
		"type":            map[string]any{"coding": []any{map[string]any{"system": "https://sql-on-fhir.org/ig/CodeSystem/LibraryTypesCodes", "code": "sql-query"}}},
		"relatedArtifact": []any{map[string]any{"type": "depends-on", "resource": "http://example.org/ViewDefinition/observations", "label": "observations"}},
		"content":         []any{map[string]any{"contentType": "application/sql", "data": b64(sql)}}}
	body, _ := json.Marshal(map[string]any{"resourceType": "Parameters", "parameter": []any{
		map[string]any{"name": "queryResource", "resource": lib}, map[string]any{"name": "_format", "valueCode": "json"}}})
	return string(body)
}
