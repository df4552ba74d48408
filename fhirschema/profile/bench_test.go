package profile_test

import (
	"context"
	"os"
	"syscall"
	"testing"

	"fhirstore/fhirschema/profile"
)

// benchValidate validates r against url once to compile, then b.N times.
func benchValidate(b *testing.B, r map[string]any, url string) {
	defs := profile.Merge(usCore(b, "6.1.0").defs, profile.Core())
	v := profile.NewValidator()
	ctx := context.Background()
	issues, err := v.Validate(ctx, defs, r, url)
	if err != nil {
		b.Fatal(err)
	}
	if errs := errorsOf(issues); len(errs) > 0 {
		b.Fatalf("errors: %q", errs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := v.Validate(ctx, defs, r, url); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's CPU time in nanoseconds: on a shared machine it
// tells the work done where the wall clock tells the waiting too.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkValidateUSCorePatientExample(b *testing.B) {
	benchValidate(b, usCore(b, "6.1.0").examples["Patient-example.json"], uc+"us-core-patient")
}

func BenchmarkValidateSyntheaBodyWeight(b *testing.B) {
	benchValidate(b, readJSON(b, "testdata/synthea-body-weight.json"), uc+"us-core-body-weight")
}

func BenchmarkValidateSyntheaBloodPressure(b *testing.B) {
	benchValidate(b, readJSON(b, "testdata/synthea-blood-pressure.json"), uc+"us-core-blood-pressure")
}

func readJSON(tb testing.TB, path string) map[string]any {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := decode(data)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}
