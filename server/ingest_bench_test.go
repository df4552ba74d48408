package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"fhirstore/store/document"
	"fhirstore/store/engine/mongodb"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ingestBundles are the Synthea patient bundles (transactions); the
// hospital and practitioner batches they refer to are loaded first.
func ingestBundles(b *testing.B) [][]byte {
	b.Helper()
	files, err := filepath.Glob(filepath.Join(synDir, "*_*.json"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no Synthea patient bundles in %s: %v", synDir, err)
	}
	var out [][]byte
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, body)
	}
	return out
}

// postBundle posts a Bundle and fails unless it answers 200.
func postBundle(b *testing.B, e *env, body []byte) {
	b.Helper()
	r := e.do(request{Method: http.MethodPost, Path: "/", Body: string(body)})
	if r.Status != http.StatusOK {
		b.Fatalf("POST bundle: %d %.500s", r.Status, r.Body)
	}
}

// postSyntheaProviders posts the hospital and clinician batches the
// patient bundles refer to.
func postSyntheaProviders(b *testing.B, e *env) {
	b.Helper()
	for _, f := range []string{"hospitalInformation.json", "practitionerInformation.json"} {
		body, err := os.ReadFile(filepath.Join(synDir, f))
		if err != nil {
			b.Fatal(err)
		}
		postBundle(b, e, body)
	}
}

// bundleDocuments decodes the resources of a Bundle's entries by type, as
// the store decodes them.
func bundleDocuments(b *testing.B, body []byte) map[string][]any {
	b.Helper()
	var bundle struct {
		Entry []struct {
			Resource json.RawMessage `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &bundle); err != nil {
		b.Fatal(err)
	}
	docs := map[string][]any{}
	for _, en := range bundle.Entry {
		dec, err := document.FromJSON(en.Resource, document.DefaultMaxDepth)
		if err != nil {
			b.Fatal(err)
		}
		var typ string
		for _, el := range dec.Doc {
			if el.Key == "resourceType" {
				typ, _ = el.Value.(string)
			}
		}
		docs[typ] = append(docs[typ], dec.Doc)
	}
	return docs
}

// BenchmarkSyntheaIngest loads the Synthea patient bundles as transactions
// through POST / (one client, then one per bundle) and, in the same run on
// the same database, inserts the same resources with one InsertMany per
// type and bundle through the database engine; it reports resources/s of both and
// their ratio. FHIRSTORE_BENCH_PROFILES=off,on runs it without and with US
// Core 6.1.0 installed (profiles_bench_test.go).
func BenchmarkSyntheaIngest(b *testing.B) {
	profiles := benchProfiles(b)
	if len(profiles) == 1 && profiles[0] == "off" {
		syntheaIngest(b, "off")
		return
	}
	for _, uscore := range profiles {
		b.Run("uscore="+uscore, func(b *testing.B) { syntheaIngest(b, uscore) })
	}
}

// syntheaIngest is BenchmarkSyntheaIngest with US Core 6.1.0 installed or
// not (uscore on or off).
func syntheaIngest(b *testing.B, uscore string) {
	ctx := context.Background()
	e := newEnv(b)
	withProfiles(b, e, uscore)
	postSyntheaProviders(b, e)
	bundles := ingestBundles(b)
	docs := make([]map[string][]any, len(bundles))
	resources := 0
	for i, body := range bundles {
		docs[i] = bundleDocuments(b, body)
		for _, d := range docs[i] {
			resources += len(d)
		}
	}
	eng, err := db.Engine(ctx, mongodb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = eng.Close(ctx) }()
	raw := eng.Database(fmt.Sprintf("fhirstore_bench_raw_%d", time.Now().UnixNano()%1_000_000))
	defer func() { _ = raw.Drop(ctx) }()

	for _, workers := range []int{1, len(bundles)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var ingest, insert time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				postConcurrently(b, e, bundles, workers)
				ingest += time.Since(start)
				start = time.Now()
				for j, byType := range docs {
					for typ, list := range byType {
						if err := raw.Collection(typ).InsertMany(ctx, withIDs(list, fmt.Sprintf("%d-%d-%d-", time.Now().UnixNano(), i, j))); err != nil {
							b.Fatal(err)
						}
					}
				}
				insert += time.Since(start)
			}
			n := float64(resources * b.N)
			ingestRate, insertRate := n/ingest.Seconds(), n/insert.Seconds()
			b.ReportMetric(ingestRate, "ingest-resources/s")
			b.ReportMetric(insertRate, "insertmany-resources/s")
			b.ReportMetric(ingestRate/insertRate, "ratio")
		})
	}
}

// withIDs wraps each resource in a document with a fresh _id (prefix and
// position), so that every round inserts new documents.
func withIDs(list []any, prefix string) []any {
	out := make([]any, len(list))
	for k, doc := range list {
		out[k] = bson.D{{Key: "_id", Value: prefix + strconv.Itoa(k)}, {Key: "resource", Value: doc}}
	}
	return out
}

// postConcurrently posts the bundles with the given number of clients.
func postConcurrently(b *testing.B, e *env, bundles [][]byte, workers int) {
	b.Helper()
	next := make(chan []byte)
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for body := range next {
				r := e.do(request{Method: http.MethodPost, Path: "/", Body: string(body)})
				if r.Status != http.StatusOK {
					b.Errorf("POST bundle: %d %.300s", r.Status, r.Body)
				}
			}
		}()
	}
	for _, body := range bundles {
		next <- body
	}
	close(next)
	for range workers {
		<-done
	}
}
