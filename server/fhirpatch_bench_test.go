package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// fpBenchDates alternate so that every write changes the resource.
var fpBenchDates = [2]string{"1974-12-25", "1975-01-01"}

// BenchmarkFHIRPathPatch replaces the birthDate of a Patient with a
// FHIRPath Patch in FHIR JSON; BenchmarkFHIRPathPatchPUT makes the same
// change with the PUT of the whole resource that it replaces.
func BenchmarkFHIRPathPatch(b *testing.B) {
	e := newEnv(b)
	id := seedPatients(b, e, 1)
	var bodies [2]string
	for i, d := range fpBenchDates {
		bodies[i] = fpParams(fpOp(fpType("replace"), fpPath("Patient.birthDate"), fpValue("Date", `"`+d+`"`)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := e.fpPatch("/Patient/"+id, bodies[i%2], nil); r.Status != http.StatusOK {
			b.Fatalf("patch: %d %s", r.Status, r.Body)
		}
	}
}

// BenchmarkFHIRPathPatchPUT is the PUT that BenchmarkFHIRPathPatch's patch
// replaces: the whole Patient with its birthDate changed.
func BenchmarkFHIRPathPatchPUT(b *testing.B) {
	e := newEnv(b)
	id := seedPatients(b, e, 1)
	var bodies [2]string
	for i, d := range fpBenchDates {
		bodies[i] = strings.Replace(benchPatientWithID(id), `"birthDate":"1974-12-25"`, `"birthDate":"`+d+`"`, 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := e.put("/Patient/"+id, bodies[i%2]); r.Status != http.StatusOK {
			b.Fatalf("update: %d %s", r.Status, r.Body)
		}
	}
}

// BenchmarkFHIRPathPatchVsPUT alternates the two writes above, each on a
// Patient of its own, so that both see the same load on a busy machine,
// and reports the median time of each and their ratio.
func BenchmarkFHIRPathPatchVsPUT(b *testing.B) {
	e := newEnv(b)
	patched, put := seedPatients(b, e, 1), seedPatients(b, e, 1)
	var patches, puts [2]string
	for i, d := range fpBenchDates {
		patches[i] = fpParams(fpOp(fpType("replace"), fpPath("Patient.birthDate"), fpValue("Date", `"`+d+`"`)))
		puts[i] = strings.Replace(benchPatientWithID(put), `"birthDate":"1974-12-25"`, `"birthDate":"`+d+`"`, 1)
	}
	patchTimes, putTimes := make([]time.Duration, b.N), make([]time.Duration, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if r := e.fpPatch("/Patient/"+patched, patches[i%2], nil); r.Status != http.StatusOK {
			b.Fatalf("patch: %d %s", r.Status, r.Body)
		}
		mid := time.Now()
		if r := e.put("/Patient/"+put, puts[i%2]); r.Status != http.StatusOK {
			b.Fatalf("update: %d %s", r.Status, r.Body)
		}
		patchTimes[i], putTimes[i] = mid.Sub(start), time.Since(mid)
	}
	patchMedian, putMedian := fpMedian(patchTimes), fpMedian(putTimes)
	b.ReportMetric(float64(patchMedian.Nanoseconds()), "patch-ns/op")
	b.ReportMetric(float64(putMedian.Nanoseconds()), "put-ns/op")
	b.ReportMetric(float64(patchMedian)/float64(putMedian), "patch/put")
}

// fpMedian is the median of ds (sorted in place).
func fpMedian(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}
