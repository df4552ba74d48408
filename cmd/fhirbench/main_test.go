package main

// Tests of fhirbench against the real server: server.New on the test
// database, on an httptest server bound to 127.0.0.1.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store/storetest"
)

var db *storetest.DB

func TestMain(m *testing.M) { storetest.Run(m, &db) }

// startServer serves a fresh tenant as the default tenant of a server whose
// dev key is in a new data dir, as `fhirstore serve` keeps it; configure
// changes the server's configuration.
func startServer(t *testing.T, configure ...func(*server.Config)) (base, tenant, dataDir string) {
	t.Helper()
	dataDir = t.TempDir()
	key, err := auth.LoadOrCreateDevKey(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	opts := db.Options()
	opts.Exclusive = true
	st := db.Open(t, opts)
	tenant = db.Tenant(t, st)
	cfg := server.Config{DefaultTenant: tenant, Registry: db.Registry()}
	for _, f := range configure {
		f(&cfg)
	}
	srv := httptest.NewServer(server.New(cfg, st, auth.HS256{Key: key, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop()))
	t.Cleanup(srv.Close)
	return srv.URL + "/fhir/r4", tenant, dataDir
}

// runBench runs fhirbench in-process.
func runBench(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err = run(ctx, args, &out, &errb)
	if ctx.Err() != nil {
		t.Fatalf("fhirbench %q did not finish within 60s", args)
	}
	return out.String(), errb.String(), err
}

func TestMixedLoadHasNoErrorsAndLosesNoVersion(t *testing.T) {
	base, tenant, dataDir := startServer(t)
	// Equal weights, so that in 3 seconds every operation runs; few seeds,
	// so that concurrent updates meet.
	out, log, err := runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "4", "--duration", "3s",
		"--seed", "8", "--mix", "read=1,search=1,create=1,update=1,transaction=1", "--json")
	if err != nil {
		t.Fatalf("fhirbench: %v\nstdout:\n%s\nstderr:\n%s", err, out, log)
	}
	var rep report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if rep.Total.Errors != 0 || len(rep.ErrorsByStatus) != 0 {
		t.Errorf("%d errors %v: %v", rep.Total.Errors, rep.ErrorsByStatus, rep.ErrorSamples)
	}
	if len(rep.Operations) != int(opCrud) {
		t.Fatalf("%d operations in the report, want the %d of the mix", len(rep.Operations), opCrud)
	}
	for _, o := range rep.Operations {
		if o.Count == 0 || o.OK == 0 {
			t.Errorf("%s never ran (or never succeeded): %+v", o.Name, o)
		}
		if o.P50Ms > o.P99Ms || o.P99Ms > o.MaxMs || o.P50Ms <= 0 {
			t.Errorf("%s: p50 %.3f ms, p99 %.3f ms, max %.3f ms: want 0 < p50 ≤ p99 ≤ max", o.Name, o.P50Ms, o.P99Ms, o.MaxMs)
		}
		if o.Name != "update" && o.PreconditionFailed != 0 {
			t.Errorf("%s: %d precondition failures, only updates are conditional", o.Name, o.PreconditionFailed)
		}
	}
	if rep.Total.PerSecond <= 0 || rep.Total.Requests < rep.Total.Operations {
		t.Errorf("throughput %.1f/s, %d requests for %d operations", rep.Total.PerSecond, rep.Total.Requests, rep.Total.Operations)
	}
	c := rep.Check
	if c == nil {
		t.Fatal("no check in the report")
	}
	// Seeds, creates, and three resources per transaction.
	if c.Resources < 8+2 || c.Versions < c.Resources {
		t.Errorf("check saw %d resources with %d versions", c.Resources, c.Versions)
	}
	if c.Lost != 0 || c.Duplicated != 0 || c.CurrentMismatch != 0 || c.Errors != 0 || c.PagingDisagreements != 0 {
		t.Errorf("check: %+v", *c)
	}
}

func TestTextReportNamesEveryOperationAndTheCheck(t *testing.T) {
	base, tenant, dataDir := startServer(t)
	out, log, err := runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "2", "--duration", "1s", "--seed", "3")
	if err != nil {
		t.Fatalf("fhirbench: %v\n%s\n%s", err, out, log)
	}
	for _, want := range append(slices.Clone(opNames[:opCrud]), "p50 ms", "p99 ms", "requests: ", "errors by status: none", "lost 0, duplicated 0") {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestATokenForAnotherTenantStopsTheRunBeforeTheLoad(t *testing.T) {
	base, _, dataDir := startServer(t)
	_, _, err := runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", "someone-else", "--duration", "1s")
	if err == nil || !strings.Contains(err.Error(), "seed: POST /Patient: 403") {
		t.Fatalf("err = %v, want the seed's 403", err)
	}
}

func TestADevTokenNeedsTheServersExistingKey(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no token and no data dir", nil, "no --token given"},
		{"a data dir without a key", []string{"--data-dir", empty}, "no dev signing key"},
		{"a data dir that does not exist", []string{"--data-dir", filepath.Join(empty, "nowhere")}, "no dev signing key"},
		{"a tenant that cannot be", []string{"--data-dir", empty, "--tenant", "Not_A_Tenant"}, "--tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOptions(tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("fhirbench wrote into the data dir: %v", entries)
	}
}

func TestOnlyLoopbackURLsWithoutAllowRemote(t *testing.T) {
	for _, tc := range []struct {
		url    string
		remote bool
	}{
		{"http://localhost:8080/fhir/r4", false},
		{"http://127.0.0.1:18080/fhir/r4", false},
		{"http://[::1]:8080/fhir/r4", false},
		{"http://acme.localhost:8080/fhir/r4", false},
		{"https://fhir.example.org/fhir/r4", true},
		{"http://10.0.0.5:8080/fhir/r4", true},
		{"http://localhost.example.org/fhir/r4", true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := parseOptions([]string{"--url", tc.url, "--token", "t"}, &bytes.Buffer{})
			if tc.remote != (err != nil && strings.Contains(err.Error(), "--allow-remote")) {
				t.Fatalf("err = %v, want refused: %v", err, tc.remote)
			}
			if _, err := parseOptions([]string{"--url", tc.url, "--token", "t", "--allow-remote"}, &bytes.Buffer{}); err != nil {
				t.Fatalf("with --allow-remote: %v", err)
			}
		})
	}
}

func TestMixWeights(t *testing.T) {
	for _, tc := range []struct {
		name, mix string
		want      mix
		err       string
	}{
		{"the default", defaultMix, mix{40, 25, 15, 15, 5}, ""},
		{"an operation left out never runs", "read=3, update=1", mix{3, 0, 0, 1, 0}, ""},
		{"a zero weight is allowed", "read=1,search=0", mix{1, 0, 0, 0, 0}, ""},
		{"an unknown operation", "read=1,delete=2", mix{}, `unknown operation "delete"`},
		{"crud alone is crud cycles only", "crud", mix{opCrud: 1}, ""},
		{"crud beside others", "read=1,crud=3", mix{opRead: 1, opCrud: 3}, ""},
		{"the requests of a cycle are not operations of the mix", "crud.read=1", mix{}, `unknown operation "crud.read"`},
		{"an operation twice", "read=1,read=2", mix{}, "twice"},
		{"a negative weight", "read=-1", mix{}, "not a whole number"},
		{"no weight", "read", mix{}, "not name=weight"},
		{"nothing to run", "read=0,create=0", mix{}, "every weight is 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMix(tc.mix)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestHistoryVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name             string
		acked, history   []int
		current          int
		gone             bool
		lost, dup        int
		currentNotNewest bool
	}{
		{"versions 1..n once each, current n", []int{1, 2, 3}, []int{3, 2, 1}, 3, false, 0, 0, false},
		{"a version in the middle is missing", []int{1, 2, 3}, []int{3, 1}, 3, false, 1, 0, false},
		{"an acknowledged version beyond history is lost", []int{1, 2, 3}, []int{1, 2}, 2, false, 1, 0, false},
		{"a version twice", []int{1, 2}, []int{2, 2, 1}, 2, false, 0, 1, false},
		{"current behind the newest history version", []int{1, 2}, []int{1, 2}, 1, false, 0, 0, true},
		{"someone else's newer versions are fine", []int{1}, []int{1, 2, 3}, 3, false, 0, 0, false},
		{"no history at all", []int{1}, nil, 0, false, 1, 0, false},
		{"a deleted resource has no current version", []int{1, 2, 3}, []int{1, 2, 3}, 0, true, 0, 0, false},
		{"a deleted resource still found current", []int{1, 2, 3}, []int{1, 2, 3}, 3, true, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost, dup, mismatch := verify(tc.acked, tc.history, tc.current, tc.gone)
			if lost != tc.lost || dup != tc.dup || mismatch != tc.currentNotNewest {
				t.Fatalf("lost %d, duplicated %d, current not newest %v; want %d, %d, %v", lost, dup, mismatch, tc.lost, tc.dup, tc.currentNotNewest)
			}
		})
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"no samples", nil, 50, 0},
		{"one sample is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"median of an odd count", ms(1, 2, 3), 50, 2 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the maximum", ms(hundred...), 100, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.samples, tc.p); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
