package server_test

// Benchmarks of profile validation over HTTP:
//
//	go test ./server -run '^$' -bench ValidateUSCorePatient -benchtime 2000x
//
// and the switch of the ingest benchmarks, FHIRSTORE_BENCH_PROFILES: "on"
// installs US Core 6.1.0 in the tenant before the ingest, so that its
// Patients, Encounters, Conditions, Observations and the rest are checked
// against the profiles they claim; "off" does not. "off,on,off,on" measures
// the cost alternately in one sitting:
//
//	FHIRSTORE_BENCH_PROFILES=off,on,off,on FHIRSTORE_BENCH_SIZES=3000 go test ./server -run '^$' -bench EngineTargets -benchtime 1x -timeout 60m
//	FHIRSTORE_BENCH_PROFILES=off,on go test ./server -run '^$' -bench SyntheaIngest -benchtime 1x
//
// Figures: docs/performance.md, section "Profiles".

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchProfiles lists the runs of FHIRSTORE_BENCH_PROFILES (default off).
func benchProfiles(b *testing.B) []string {
	v := os.Getenv("FHIRSTORE_BENCH_PROFILES")
	if v == "" {
		return []string{"off"}
	}
	out := strings.Split(v, ",")
	for _, m := range out {
		if m != "on" && m != "off" {
			b.Fatalf("FHIRSTORE_BENCH_PROFILES=%q: want on or off, comma-separated", v)
		}
	}
	return out
}

// withProfiles installs US Core 6.1.0 in the env's tenant when mode is on.
func withProfiles(b *testing.B, e *env, mode string) {
	b.Helper()
	if mode == "on" {
		e.install(usCorePackage(b, "6.1.0"))
	}
}

// BenchmarkValidateUSCorePatient times $validate of US Core's Patient
// example over HTTP, with the package installed: the profile compiled
// once, then each request checks the base definition, the core invariants
// and US Core Patient with its extensions and bindings.
func BenchmarkValidateUSCorePatient(b *testing.B) {
	e := newEnv(b)
	e.install(usCorePackage(b, "6.1.0"))
	patient := toJSON(b, example(b, "Patient-example.json"))
	validate := func() {
		r := e.post("/Patient/$validate", patient)
		if r.Status != http.StatusOK {
			b.Fatalf("$validate: %d %.500s", r.Status, r.Body)
		}
	}
	for range 20 { // compile the profile, warm the caches and connections
		validate()
	}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		validate()
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(ms(times[len(times)/2]), "p50-ms")
	b.ReportMetric(ms(times[len(times)*9/10]), "p90-ms")
	b.ReportMetric(ms(times[len(times)*99/100]), "p99-ms")
}
