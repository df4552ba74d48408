package server_test

// Bulk export throughput: a tenant of Synthea-shaped data (as
// BenchmarkEngineTargets builds it), exported whole through the job
// manager to ndjson files, next to two raw cursors of the engine over the
// same collections (whole documents in storage order, and the export's own
// plan: id order, the fields it reads), alternately five times each in the
// same run (the medians are reported), with the peak RSS of the exports:
//
//	FHIRSTORE_BENCH_SIZES=10000,100000 go test ./server -run '^$' -bench ExportThroughput -benchtime 1x -timeout 60m
//
// Figures and their reading: docs/performance.md, section "Bulk export".

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/server/bulkexport"
	"fhirstore/store/engine"
)

// peakRSS is the process's peak resident set (VmHWM) in MiB (Linux).
func peakRSS() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// resetPeakRSS starts a new peak from the current resident set (Linux).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// syntheaTypes are the types of the Synthea sample.
var syntheaTypes = []string{"AllergyIntolerance", "CarePlan", "CareTeam", "Claim", "Condition", "Device", "DiagnosticReport",
	"DocumentReference", "Encounter", "ExplanationOfBenefit", "ImagingStudy", "Immunization", "Location", "Medication",
	"MedicationAdministration", "MedicationRequest", "Observation", "Organization", "Patient", "Practitioner",
	"PractitionerRole", "Procedure", "Provenance", "SupplyDelivery"}

// liveHeap is the Go heap that survived the last garbage collection, in MiB.
func liveHeap() float64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64()) / (1 << 20)
}

// exportOnce runs one whole export job and returns it with its duration
// and the largest live heap seen while it ran.
func exportOnce(b *testing.B, x *exportEnv) (*bulkexport.Job, time.Duration, float64) {
	ctx := context.Background()
	runtime.GC()
	peak := liveHeap()
	start := time.Now()
	job, err := x.m.Kickoff(ctx, x.tenant, bulkexport.Request{URL: "bench", Level: bulkexport.LevelSystem, Types: syntheaTypes})
	if err != nil {
		b.Fatal(err)
	}
	for job.Active() {
		time.Sleep(2 * time.Millisecond) // the end is seen within 2 ms
		peak = max(peak, liveHeap())
		if job, err = x.m.Status(ctx, x.tenant, job.ID); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	if job.State != bulkexport.StateCompleted {
		b.Fatalf("export %s: %s", job.State, job.Failure)
	}
	if err := x.m.Cancel(ctx, x.tenant, job.ID); err != nil { // frees the slot and the disk
		b.Fatal(err)
	}
	return job, elapsed, peak
}

// rawCursor reads every document of the types with the engine's cursor,
// with opts (nil: in storage order, whole documents).
func rawCursor(b *testing.B, eng engine.Engine, dbName string, opts *engine.FindOptions) (int64, time.Duration) {
	ctx := context.Background()
	start := time.Now()
	var n int64
	for _, typ := range syntheaTypes {
		cur, err := eng.Database(dbName).Collection(typ).Find(ctx, bson.D{}, opts)
		if err != nil {
			b.Fatal(err)
		}
		for cur.Next(ctx) {
			n++
		}
		if err := cur.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return n, time.Since(start)
}

// snapshotPlan is the engine call an export makes of each type: every
// current row in id order, the fields a snapshot reads (store.Snapshot).
var snapshotPlan = &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}, Projection: bson.D{{Key: "vid", Value: 1},
	{Key: "lastUpdated", Value: 1}, {Key: "deleted", Value: 1}, {Key: "resource", Value: 1}, {Key: "numText", Value: 1}}}

func BenchmarkExportThroughput(b *testing.B) {
	raw, ok := db.SQLite()
	if !ok {
		b.Skip("the export benchmark compares with a raw cursor of the embedded engine")
	}
	for _, n := range benchSizes(b) {
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) {
			x := newExportEnv(b)
			loadSynthea(b, x.env, n)
			dbName := db.Options().DatabasePrefix + x.tenant
			resetPeakRSS()
			rssBefore := peakRSS()
			var exp, cur, plan []time.Duration
			var exported, files, docs int64
			runtime.GC()
			heapBefore, heapPeak := liveHeap(), 0.0
			for range 5 {
				job, d, h := exportOnce(b, x)
				heapPeak = max(heapPeak, h)
				exp = append(exp, d)
				exported, files = job.Exported, int64(len(job.Output))
				var rd, pd time.Duration
				docs, rd = rawCursor(b, raw, dbName, nil)
				_, pd = rawCursor(b, raw, dbName, snapshotPlan)
				cur, plan = append(cur, rd), append(plan, pd)
			}
			slices.Sort(exp)
			slices.Sort(cur)
			slices.Sort(plan)
			rate := float64(exported) / exp[2].Seconds()
			rawRate := float64(docs) / cur[2].Seconds()
			planRate := float64(docs) / plan[2].Seconds()
			rss := peakRSS()
			b.ReportMetric(rate, "export-resources/s")
			b.ReportMetric(rawRate, "raw-cursor-docs/s")
			b.ReportMetric(planRate, "same-plan-cursor-docs/s")
			b.ReportMetric(rss, "peak-rss-MiB")
			b.ReportMetric(heapPeak-heapBefore, "live-heap-growth-MiB")
			b.Logf("export: %d resources in %d files, median %.2fs (runs %v), %.0f resources/s; "+
				"raw cursor (storage order, whole documents): %d documents, median %.2fs (runs %v), %.0f documents/s, ratio %.2f; "+
				"same plan (id order, the fields the export reads): median %.2fs (runs %v), %.0f documents/s, ratio %.2f; "+
				"peak RSS %.0f MiB (%.0f MiB before the exports); live heap at most %.0f MiB during the exports (%.0f MiB before)",
				exported, files, exp[2].Seconds(), exp, rate, docs, cur[2].Seconds(), cur, rawRate, rate/rawRate,
				plan[2].Seconds(), plan, planRate, rate/planRate, rss, rssBefore, heapPeak, heapBefore)
		})
	}
}
