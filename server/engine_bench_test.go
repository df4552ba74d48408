package server_test

// Engine benchmarks: a tenant of Synthea-shaped data built through the
// real server (transaction Bundles over HTTP, as fhirstore load sends
// them), then each hot read over HTTP next to the SQL statements the
// embedded engine runs for it, executed raw on the same database file in
// the same run. Sizes come from FHIRSTORE_BENCH_SIZES (resources,
// comma-separated; default 3000):
//
//	FHIRSTORE_BENCH_SIZES=3000,10000,100000 go test ./server -run '^$' -bench EngineTargets -benchtime 1x -timeout 60m
//
// FHIRSTORE_BENCH_INVARIANTS lists, comma-separated, whether each run checks
// the core invariants on write ("on", the product's way, or "off"): "on,off,on,off"
// measures the cost of the invariants alternately in one sitting.
//
// Figures and their reading: docs/performance.md, section "Engine".

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"fhirstore/fhirschema"
	"fhirstore/server"
	"fhirstore/store"
	"fhirstore/store/engine"
	"fhirstore/store/engine/sqlite"
	"fhirstore/store/schemacheck"
	"fhirstore/store/storetest"
)

// benchSizes are the tenant sizes of BenchmarkEngineTargets.
func benchSizes(b *testing.B) []int {
	v := os.Getenv("FHIRSTORE_BENCH_SIZES")
	if v == "" {
		v = "3000"
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("FHIRSTORE_BENCH_SIZES=%q: want resource counts such as 3000,10000,100000", v)
		}
		out = append(out, n)
	}
	return out
}

// benchInvariants lists the runs of each size, FHIRSTORE_BENCH_INVARIANTS:
// "on" checks the core invariants on write, "off" the structure only.
func benchInvariants(b *testing.B) []string {
	v := os.Getenv("FHIRSTORE_BENCH_INVARIANTS")
	if v == "" {
		return []string{"on"}
	}
	out := strings.Split(v, ",")
	for _, m := range out {
		if m != "on" && m != "off" {
			b.Fatalf("FHIRSTORE_BENCH_INVARIANTS=%q: want on or off, comma-separated", v)
		}
	}
	return out
}

// withoutInvariants makes a store validate the structure only.
func withoutInvariants(b *testing.B) func(*server.Config, *store.Options) {
	v, err := fhirschema.NewValidator()
	if err != nil {
		b.Fatal(err)
	}
	return func(_ *server.Config, o *store.Options) { o.Validate = schemacheck.Validator(v.WithoutInvariants()) }
}

// benchClients is how many clients post the ingest's Bundles at once:
// FHIRSTORE_BENCH_CLIENTS, by default 4 (fhirstore load's default).
func benchClients(b *testing.B) int {
	v := os.Getenv("FHIRSTORE_BENCH_CLIENTS")
	if v == "" {
		return 4
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("FHIRSTORE_BENCH_CLIENTS=%q: want a number of clients", v)
	}
	return n
}

// syntheaCopy is patient bundle body with its Patient's family name made
// unique to copy k, so that every copy is a different person to search for,
// and every time of day in it k minutes later: different people's records
// do not share their instants, as copies of one timeline would (a search
// sorted by date would otherwise meet every copy tied at each date).
func syntheaCopy(b *testing.B, body []byte, k int) ([]byte, int) {
	b.Helper()
	var bundle map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&bundle); err != nil {
		b.Fatal(err)
	}
	entries := bundle["entry"].([]any)
	for _, en := range entries {
		res := en.(map[string]any)["resource"].(map[string]any)
		if res["resourceType"] != "Patient" {
			continue
		}
		for _, n := range res["name"].([]any) {
			name := n.(map[string]any)
			name["family"] = fmt.Sprintf("%sc%d", name["family"], k)
		}
	}
	shiftTimes(bundle, time.Duration(k)*time.Minute)
	out, err := json.Marshal(bundle)
	if err != nil {
		b.Fatal(err)
	}
	return out, len(entries)
}

// shiftTimes moves every dateTime and instant with a time of day in v
// (decoded JSON) by d, keeping its layout; dates without a time stay. It
// returns v, changed in place where it is a map or a slice.
func shiftTimes(v any, d time.Duration) any {
	switch x := v.(type) {
	case string:
		for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05.000Z07:00"} {
			if t, err := time.Parse(layout, x); err == nil && len(x) == len(t.Format(layout)) {
				return t.Add(d).Format(layout)
			}
		}
	case map[string]any:
		for k, e := range x {
			x[k] = shiftTimes(e, d)
		}
	case []any:
		for i, e := range x {
			x[i] = shiftTimes(e, d)
		}
	}
	return v
}

// commandLog records the finds and counts the store sends while on,
// less those that failed (a count abandoned because the page held every
// match).
type commandLog struct {
	mu   sync.Mutex
	on   bool
	cmds []loggedCommand
}

type loggedCommand struct {
	id       int64
	db, name string
	body     bson.Raw
}

func (l *commandLog) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.on && (ev.CommandName == "find" || ev.CommandName == "count") {
			l.cmds = append(l.cmds, loggedCommand{id: ev.RequestID, db: ev.DatabaseName, name: ev.CommandName, body: append(bson.Raw(nil), ev.Command...)})
		}
	}, Failed: func(_ context.Context, ev *event.CommandFailedEvent) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.on {
			l.cmds = slices.DeleteFunc(l.cmds, func(c loggedCommand) bool { return c.id == ev.RequestID })
		}
	}}
}

// capture returns the commands run sends.
func (l *commandLog) capture(run func()) []loggedCommand {
	l.mu.Lock()
	l.on, l.cmds = true, nil
	l.mu.Unlock()
	run()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = false
	return l.cmds
}

// median times f n times and returns the median duration.
func median(n int, f func()) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		f()
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	return ds[n/2]
}

func BenchmarkEngineTargets(b *testing.B) {
	raw, ok := rawEngine()
	if !ok {
		b.Skip("the engine benchmark compares with raw SQL: run it on the embedded engine")
	}
	modes, profiles := benchInvariants(b), benchProfiles(b)
	for _, n := range benchSizes(b) {
		for _, mode := range modes {
			for _, uscore := range profiles {
				name := fmt.Sprintf("resources=%d", n)
				if len(modes) > 1 || mode != "on" {
					name += "/invariants=" + mode
				}
				if len(profiles) > 1 || uscore != "off" {
					name += "/uscore=" + uscore
				}
				b.Run(name, func(b *testing.B) { engineTargets(b, raw, n, mode, uscore) })
			}
		}
	}
}

// engineTargets loads n resources, with the core invariants checked or not
// (mode on or off) and US Core 6.1.0 installed or not (uscore), and times
// each read.
func engineTargets(b *testing.B, raw rawSQL, n int, mode, uscore string) {
	log := &commandLog{}
	mutate := []func(*server.Config, *store.Options){func(_ *server.Config, o *store.Options) { o.Monitor = log.monitor() }}
	if mode == "off" {
		mutate = append(mutate, withoutInvariants(b))
	}
	e := newEnv(b, mutate...)
	withProfiles(b, e, uscore)
	loaded := loadSynthea(b, e, n)
	targets := pickTargets(b, e)
	b.Logf("%d resources loaded", loaded)
	for _, tg := range targets {
		var firstT time.Duration
		cmds := log.capture(func() {
			start := time.Now()
			checkOK(b, e, tg.path)
			firstT = time.Since(start)
		})
		httpT := median(31, func() { checkOK(b, e, tg.path) })
		rawT := median(31, func() {
			for _, c := range cmds {
				if err := raw.run(context.Background(), c); err != nil {
					b.Fatalf("%s: raw %s: %v", tg.name, c.body, err)
				}
			}
		})
		b.ReportMetric(float64(httpT.Microseconds())/1000, tg.name+"-http-ms")
		b.ReportMetric(float64(rawT.Microseconds())/1000, tg.name+"-raw-ms")
		b.ReportMetric(float64(firstT.Microseconds())/1000, tg.name+"-first-ms")
		b.Logf("%-22s http %8.2f ms (first %6.2f ms)   raw SQL %8.3f ms (%d statements)   %s", tg.name, ms(httpT), ms(firstT), ms(rawT), len(cmds), tg.path)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func checkOK(b *testing.B, e *env, path string) {
	r := e.get(path)
	if r.Status != http.StatusOK {
		b.Fatalf("GET %s: %d %.300s", path, r.Status, r.Body)
	}
}

// loadSynthea posts the hospitals and clinicians, then copies of the
// patient bundles with four clients (as fhirstore load does) until n
// resources are stored; it reports the rate of the patient bundles.
func loadSynthea(b *testing.B, e *env, n int) int {
	b.Helper()
	loaded := 0
	postSyntheaProviders(b, e)
	originals := ingestBundles(b)
	var bundles [][]byte
	for k := 0; loaded < n; k++ {
		body, entries := syntheaCopy(b, originals[k%len(originals)], k)
		bundles = append(bundles, body)
		loaded += entries
	}
	clients := benchClients(b)
	cpu := storetest.ProcessCPU(b)
	start := time.Now()
	postConcurrently(b, e, bundles, clients)
	rate := float64(loaded) / time.Since(start).Seconds()
	perK := (storetest.ProcessCPU(b) - cpu).Seconds() * 1000 / float64(loaded)
	b.ReportMetric(rate, "ingest-resources/s")
	b.ReportMetric(perK, "ingest-cpu-s/1k")
	b.Logf("ingest: %d resources in %d transaction Bundles, %d clients: %.0f resources/s, %.2f CPU-seconds per 1,000", loaded, len(bundles), clients, rate, perK)
	return loaded
}

// benchTarget is one measured request.
type benchTarget struct{ name, path string }

// pickTargets chooses the resources the reads ask for: the newest Patient
// and Observation (the worst case for an engine that scans), the newest
// Patient's family name, and a code many Observations share.
func pickTargets(b *testing.B, e *env) []benchTarget {
	b.Helper()
	newest := func(path string) map[string]any {
		r := e.get(path)
		if r.Status != http.StatusOK {
			b.Fatalf("GET %s: %d", path, r.Status)
		}
		entries, _ := r.JSON(b)["entry"].([]any)
		if len(entries) == 0 {
			b.Fatalf("GET %s: no entries", path)
		}
		return entries[0].(map[string]any)["resource"].(map[string]any)
	}
	obs := newest("/Observation?_sort=-_lastUpdated&_count=1")
	pat := newest("/Patient?_sort=-_lastUpdated&_count=1")
	family := pat["name"].([]any)[0].(map[string]any)["family"].(string)
	patient := obs["subject"].(map[string]any)["reference"].(string)
	return []benchTarget{
		{"read", "/Patient/" + pat["id"].(string)},
		{"vread", "/Observation/" + obs["id"].(string) + "/_history/1"},
		{"obs-by-patient", "/Observation?patient=" + patient + "&_count=20"},
		{"code-newest-10", "/Observation?code=http://loinc.org|8867-4&_sort=-date&_count=10"},
		{"patient-by-family", "/Patient?family=" + family},
		{"count-observations", "/Observation?_summary=count"},
		{"instance-history", "/Patient/" + pat["id"].(string) + "/_history"},
		{"type-history", "/Observation/_history?_count=10"},
		{"missing-id", "/Patient?_id=no-such-id"},
		{"system-newest-10", "?_sort=-_lastUpdated&_count=10"},
		{"system-by-id", "?_id=" + pat["id"].(string)},
	}
}

// rawSQL runs the statements the embedded engine plans for a logged
// command directly on a reader connection of its file.
type rawSQL struct{ eng *sqlite.Engine }

func rawEngine() (rawSQL, bool) {
	e, ok := db.SQLite()
	return rawSQL{e}, ok
}

// run plans c again (the same filter, sort and limit give the same plan)
// and steps through every row of each statement.
func (r rawSQL) run(ctx context.Context, c loggedCommand) error {
	coll, _ := c.body.Lookup(c.name).StringValueOK()
	var cmd struct {
		Filter     bson.D `bson:"filter"`
		Sort       bson.D `bson:"sort"`
		Skip       int64  `bson:"skip"`
		Limit      int64  `bson:"limit"`
		Projection bson.D `bson:"projection"`
	}
	if err := bson.Unmarshal(c.body, &cmd); err != nil {
		return err
	}
	opts := &engine.FindOptions{Sort: cmd.Sort, Skip: cmd.Skip, Limit: cmd.Limit}
	stmts, err := r.eng.Statements(ctx, c.db, coll, cmd.Filter, opts, c.name == "count")
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if os.Getenv("FHIRSTORE_BENCH_SQL") == "1" {
			fmt.Fprintf(os.Stderr, "%s %s\n  %s %v\n", c.name, c.body, st.SQL, st.Args)
		}
		if _, err := r.eng.RunStatement(ctx, c.db, st); err != nil {
			return err
		}
	}
	return nil
}
