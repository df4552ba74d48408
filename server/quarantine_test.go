package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// TestQuarantinedTransactionAnswers5xx: a committed transaction whose
// current rows the database refuses holds its resources — 503 while
// recovery retries it, 500 once quarantined, on reads, writes and
// searches, also after a restart — while /healthz and /metrics report it
// and everything else is served.
func TestQuarantinedTransactionAnswers5xx(t *testing.T) {
	var refuse atomic.Bool
	fault := func(point string) error {
		if refuse.Load() && (point == store.FaultPutCurrent || point == store.FaultRollForward) {
			return errors.New("index row size 3016 exceeds btree version 4 maximum 2704")
		}
		return nil
	}
	m := server.NewMetrics()
	var opts store.Options
	e := newEnv(t, func(c *server.Config, o *store.Options) {
		c.Metrics = m
		o.Monitor = m.CommandMonitor()
		o.Fault = fault
		o.RecoveryAttempts = 2
		o.RecoveryBackoff = time.Nanosecond
		opts = *o
	})
	e.put("/Patient/held", `{"resourceType":"Patient","id":"held","name":[{"family":"Before"}]}`)
	refuse.Store(true)
	r := e.post("", `{"resourceType":"Bundle","type":"transaction","entry":[
		{"resource":{"resourceType":"Patient","id":"held","name":[{"family":"After"}]},"request":{"method":"PUT","url":"Patient/held"}},
		{"resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/held"}},"request":{"method":"POST","url":"Observation"}}]}`)
	if r.Status != http.StatusOK {
		t.Fatalf("a committed transaction answers 200: %d %s", r.Status, r.Body)
	}
	heldChecks := func(t *testing.T, e *env, status int, health string) {
		t.Helper()
		for _, req := range []request{
			{Method: http.MethodGet, Path: "/Patient/held"},
			{Method: http.MethodPut, Path: "/Patient/held", Body: `{"resourceType":"Patient","id":"held"}`},
			{Method: http.MethodDelete, Path: "/Patient/held"},
			{Method: http.MethodGet, Path: "/Patient?_id=held"},
		} {
			r := e.do(req)
			wantOutcome(t, r, status, "")
			if !strings.Contains(string(r.Body), "Patient/held") || strings.Contains(string(r.Body), "Before") {
				t.Fatalf("%s %s: the outcome does not name the resource, or shows stale data: %s", req.Method, req.Path, r.Body)
			}
		}
		if r := e.get("/Patient?_id=other"); r.Status != http.StatusOK {
			t.Fatalf("a search without held resources: %d %s", r.Status, r.Body)
		}
		h := e.do(request{Method: http.MethodGet, Path: "/healthz"})
		body := h.JSON(t)
		if h.Status != http.StatusOK || body["status"] != "degraded" || !strings.Contains(string(h.Body), health) {
			t.Fatalf("healthz: %d %s, want degraded with %s", h.Status, h.Body, health)
		}
	}
	heldChecks(t, e, http.StatusServiceUnavailable, `"retrying":1`)

	if rep, err := e.store.RecoverTenant(context.Background(), e.tenant, 0); err != nil || rep.Quarantined != 1 {
		t.Fatalf("recovery: %+v %v, want the transaction quarantined", rep, err)
	}
	heldChecks(t, e, http.StatusInternalServerError, `"quarantined":1`)
	text := e.scrape()
	for _, s := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"fhirstore_txn_held", map[string]string{"state": "quarantined"}, 1},
		{"fhirstore_txn_held", map[string]string{"state": "retrying"}, 0},
		{"fhirstore_txn_recoveries_total", map[string]string{"outcome": "quarantined"}, 1},
	} {
		if v, ok := seriesValue(text, s.name, s.labels); !ok || v != s.want {
			t.Errorf("%s%v = %v (found %v), want %v", s.name, s.labels, v, ok, s.want)
		}
	}

	if !strings.Contains(text, "\nfhirstore_txn_apply_failures_total 2\n") {
		t.Errorf("fhirstore_txn_apply_failures_total is not 2")
	}

	// A restarted server (a new store on the same database) recovers
	// without error and holds the same resources.
	st2 := db.Open(t, opts)
	if _, err := st2.Recover(context.Background(), 0); err != nil {
		t.Fatalf("recovery at restart: %v", err)
	}
	h2 := server.New(e.cfg, st2, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	srv2 := httptest.NewServer(h2)
	t.Cleanup(srv2.Close)
	e2 := *e
	e2.srv, e2.store, e2.h = srv2, st2, h2
	heldChecks(t, &e2, http.StatusInternalServerError, `"quarantined":1`)
}
