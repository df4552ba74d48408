package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"fhirstore/server"
	"fhirstore/store"
)

// scrape fetches /metrics without a token and returns its text.
func (e *env) scrape() string {
	e.t.Helper()
	resp, err := e.srv.Client().Get(e.srv.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		e.t.Fatalf("GET /metrics: Content-Type %q, want the Prometheus text format", ct)
	}
	return string(b)
}

// sample is one line of the Prometheus text format: name{labels} value.
var sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$`)

// labelPair is one name="value" of a sample; values may hold braces.
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// seriesValue finds the sample of a series whose labels include all of
// want, in any label order; ok is false when none does.
func seriesValue(text, name string, want map[string]string) (v float64, ok bool) {
	for _, l := range strings.Split(text, "\n") {
		m := sample.FindStringSubmatch(l)
		if m == nil || m[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, kv := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[kv[1]] = kv[2]
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if match {
			f, err := strconv.ParseFloat(m[3], 64)
			return f, err == nil
		}
	}
	return 0, false
}

// newMetricsEnv is an env whose server and store report to fresh Metrics,
// with the REST interface mounted.
func newMetricsEnv(t *testing.T, fault func(string) error) *env {
	m := server.NewMetrics()
	rest := &lateREST{}
	e := newEnv(t, func(c *server.Config, o *store.Options) {
		c.Metrics = m
		c.REST = rest
		o.Monitor = m.CommandMonitor()
		o.Fault = fault
	})
	rest.h = injREST(e.store)
	return e
}

// lateREST is the REST interface of a store that newEnv opens after the
// server's Config is made.
type lateREST struct{ h http.Handler }

func (l *lateREST) ServeHTTP(w http.ResponseWriter, r *http.Request) { l.h.ServeHTTP(w, r) }

// TestMetricsAfterRealTraffic: after reads, a search, a 404, an unknown
// type and a transaction, /metrics reports each by route template, type,
// method, status and tenant, times the database commands, counts the bundle
// entries, carries the Go and process series — and names no resource id.
func TestMetricsAfterRealTraffic(t *testing.T) {
	e := newMetricsEnv(t, nil)
	created := e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","name":[{"family":"Metric"}]}`})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	pid := created.JSON(t)["id"].(string)
	for range 2 {
		if r := e.do(request{Method: http.MethodGet, Path: "/Patient/" + pid}); r.Status != http.StatusOK {
			t.Fatalf("read: %d %s", r.Status, r.Body)
		}
	}
	if r := e.do(request{Method: http.MethodGet, Path: "/Patient?family=Metric"}); r.Status != http.StatusOK {
		t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	const missing = "no-such-patient-4711"
	if r := e.do(request{Method: http.MethodGet, Path: "/Patient/" + missing}); r.Status != http.StatusNotFound {
		t.Fatalf("read of a missing patient: %d %s", r.Status, r.Body)
	}
	if r := e.do(request{Method: http.MethodGet, Path: "/NoSuchType12345/abc"}); r.Status != http.StatusNotFound {
		t.Fatalf("unknown type: %d %s", r.Status, r.Body)
	}
	txn := e.do(request{Method: http.MethodPost, Path: "", Body: `{"resourceType":"Bundle","type":"transaction","entry":[
		{"fullUrl":"urn:uuid:0c3a4f7e-1111-4a4a-9a9a-000000000001","resource":{"resourceType":"Patient","name":[{"family":"Bundled"}]},"request":{"method":"POST","url":"Patient"}},
		{"fullUrl":"urn:uuid:0c3a4f7e-1111-4a4a-9a9a-000000000002","resource":{"resourceType":"Patient","name":[{"family":"Bundled"}]},"request":{"method":"POST","url":"Patient"}},
		{"resource":{"resourceType":"List","id":"metrics-list-0001","status":"current","mode":"working","subject":{"reference":"urn:uuid:0c3a4f7e-1111-4a4a-9a9a-000000000001"}},"request":{"method":"PUT","url":"List/metrics-list-0001"}}]}`})
	if txn.Status != http.StatusOK {
		t.Fatalf("transaction: %d %s", txn.Status, txn.Body)
	}
	var ids []string
	for _, entry := range txn.JSON(t)["entry"].([]any) {
		loc := entry.(map[string]any)["response"].(map[string]any)["location"].(string)
		_, rel, _ := strings.Cut(loc, "/fhir/r4/")
		ids = append(ids, strings.Split(rel, "/")[1])
	}
	if r := e.do(request{Method: http.MethodGet, Path: "/api/v1/patients/" + pid}); r.Status != http.StatusOK {
		t.Fatalf("REST read: %d %s", r.Status, r.Body)
	}
	if r := e.do(request{Method: http.MethodGet, Path: "/api/v1/nothing/" + pid}); r.Status != http.StatusNotFound {
		t.Fatalf("REST unknown path: %d %s", r.Status, r.Body)
	}
	if r := e.do(request{Method: http.MethodGet, Path: "/metadata", Token: new(string)}); r.Status != http.StatusOK {
		t.Fatalf("metadata: %d", r.Status)
	}
	if r := e.do(request{Method: http.MethodGet, Path: "/.well-known/smart-configuration", Token: new(string)}); r.Status != http.StatusOK {
		t.Fatalf("SMART configuration: %d", r.Status)
	}

	text := e.scrape()
	requests := []struct {
		name    string
		labels  map[string]string
		atLeast float64
	}{
		{"reads by template, with the type as a label", map[string]string{"route": "/fhir/r4/{type}/{id}", "type": "Patient", "method": "GET", "status": "200", "tenant": e.tenant}, 2},
		{"the read of a missing patient", map[string]string{"route": "/fhir/r4/{type}/{id}", "type": "Patient", "method": "GET", "status": "404", "tenant": e.tenant}, 1},
		{"the search", map[string]string{"route": "/fhir/r4/{type}", "type": "Patient", "method": "GET", "status": "200", "tenant": e.tenant}, 1},
		{"the create", map[string]string{"route": "/fhir/r4/{type}", "type": "Patient", "method": "POST", "status": "201", "tenant": e.tenant}, 1},
		{"an unknown type collapses into one label value", map[string]string{"route": "/fhir/r4/{type}/{id}", "type": "unknown", "method": "GET", "status": "404"}, 1},
		{"the transaction", map[string]string{"route": "/fhir/r4", "type": "", "method": "POST", "status": "200", "tenant": e.tenant}, 1},
		{"a REST read by its pattern", map[string]string{"route": "/api/v1/patients/{patientId}", "method": "GET", "status": "200", "tenant": e.tenant}, 1},
		{"a REST path no route matched", map[string]string{"route": "/api/v1/{unknown}", "method": "GET", "status": "404", "tenant": e.tenant}, 1},
		{"SMART discovery by its own route", map[string]string{"route": "/fhir/r4/.well-known/smart-configuration", "type": "", "method": "GET", "status": "200"}, 1},
		{"the capability statement needs no tenant", map[string]string{"route": "/fhir/r4/metadata", "method": "GET", "status": "200", "tenant": ""}, 1},
	}
	for _, r := range requests {
		if v, ok := seriesValue(text, "fhirstore_http_requests_total", r.labels); !ok || v < r.atLeast {
			t.Errorf("%s: fhirstore_http_requests_total%v = %v (found %v), want ≥ %v", r.name, r.labels, v, ok, r.atLeast)
		}
		if v, ok := seriesValue(text, "fhirstore_http_request_duration_seconds_count", r.labels); !ok || v < r.atLeast {
			t.Errorf("%s: latency histogram count%v = %v (found %v), want ≥ %v", r.name, r.labels, v, ok, r.atLeast)
		}
	}
	entries := []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"bundle_type": "transaction", "method": "POST", "type": "Patient"}, 2},
		{map[string]string{"bundle_type": "transaction", "method": "PUT", "type": "List"}, 1},
	}
	for _, en := range entries {
		if v, ok := seriesValue(text, "fhirstore_bundle_entries_total", en.labels); !ok || v != en.want {
			t.Errorf("fhirstore_bundle_entries_total%v = %v (found %v), want %v", en.labels, v, ok, en.want)
		}
	}
	for _, cmd := range []string{"insert", "find"} {
		if v, ok := seriesValue(text, "fhirstore_db_command_duration_seconds_count", map[string]string{"command": cmd, "outcome": "ok"}); !ok || v < 1 {
			t.Errorf("database %s commands timed: %v (found %v), want ≥ 1", cmd, v, ok)
		}
	}
	for _, want := range []string{"go_goroutines ", "process_resident_memory_bytes ", `fhirstore_txn_recoveries_total{outcome="rolled_forward"} 0`} {
		if !strings.Contains(text, "\n"+want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, id := range append(ids, pid, missing, "NoSuchType12345", "metrics-list-0001") {
		if strings.Contains(text, id) {
			t.Errorf("/metrics names %q, an id or a client's free text", id)
		}
	}
}

// TestMetricsCountTransactionRecoveries: a transaction cut off after its
// commit point is rolled forward by recovery, and /metrics counts it.
func TestMetricsCountTransactionRecoveries(t *testing.T) {
	var crash atomic.Bool
	e := newMetricsEnv(t, func(point string) error {
		if point == store.FaultCurrent && crash.Load() {
			return errors.New("simulated crash after the commit point")
		}
		return nil
	})
	crash.Store(true)
	r := e.do(request{Method: http.MethodPost, Body: `{"resourceType":"Bundle","type":"transaction","entry":[
		{"resource":{"resourceType":"Patient","name":[{"family":"Recovered"}]},"request":{"method":"POST","url":"Patient"}},
		{"resource":{"resourceType":"Patient","name":[{"family":"Recovered"}]},"request":{"method":"POST","url":"Patient"}}]}`})
	if r.Status == http.StatusOK {
		t.Fatalf("the simulated crash should fail the request: %d %s", r.Status, r.Body)
	}
	crash.Store(false)
	rep, err := e.store.RecoverTenant(context.Background(), e.tenant, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RolledForward != 1 {
		t.Fatalf("recovery rolled %d forward, want 1", rep.RolledForward)
	}
	text := e.scrape()
	if v, ok := seriesValue(text, "fhirstore_txn_recoveries_total", map[string]string{"outcome": "rolled_forward"}); !ok || v != 1 {
		t.Errorf("fhirstore_txn_recoveries_total{outcome=rolled_forward} = %v (found %v), want 1", v, ok)
	}
}

// TestMetricsOffServesNoEndpoint: without Metrics, /metrics is a 404.
func TestMetricsOffServesNoEndpoint(t *testing.T) {
	e := newEnv(t)
	resp, err := e.srv.Client().Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics with metrics off: %d, want 404", resp.StatusCode)
	}
}
