package restadapter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/restadapter"
	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// testKey signs the tokens of the tests.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// env is one test's server (FHIR and REST) on a fresh tenant.
type env struct {
	t      testing.TB
	srv    *httptest.Server
	store  *store.Store
	tenant string
	token  string
}

// newEnv starts the full HTTP stack with the REST interface mounted.
func newEnv(t testing.TB) *env {
	t.Helper()
	opts := db.Options()
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	rest := restadapter.New(restadapter.Config{TenantOf: func(ctx context.Context) (string, bool) {
		c, ok := server.CallerFrom(ctx)
		if !ok {
			return "", false
		}
		return c.Tenant, true
	}, Store: st, Registry: db.Registry(), Allows: server.Allows})
	h := server.New(server.Config{DefaultTenant: tenant, REST: rest, Registry: db.Registry()}, st, auth.HS256{Key: testKey, Issuer: auth.DevIssuer}, zap.NewNop())
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tok, err := auth.SignHS256(testKey, auth.TokenRequest{Tenant: tenant, Scope: "system/*.*", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, srv: srv, store: st, tenant: tenant, token: tok}
}

// reply is an HTTP response read whole.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as an object.
func (r *reply) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("status %d, body is not a JSON object: %v: %s", r.Status, err, r.Body)
	}
	return m
}

// call sends a request with the env's token; a non-empty body is sent with
// contentType (application/json when empty).
func (e *env) call(method, path, body, contentType string) *reply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	if body != "" {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// api calls the REST interface: path is below /api/v1.
func (e *env) api(method, path, body string) *reply {
	e.t.Helper()
	return e.call(method, "/api/v1"+path, body, "")
}

// fhir calls the FHIR interface: path is below /fhir/r4.
func (e *env) fhir(method, path, body string) *reply {
	e.t.Helper()
	return e.call(method, "/fhir/r4"+path, body, "application/fhir+json")
}

// create stores a FHIR resource and returns its id.
func (e *env) create(typ, body string) string {
	e.t.Helper()
	r := e.fhir(http.MethodPost, "/"+typ, body)
	if r.Status != http.StatusCreated {
		e.t.Fatalf("create %s: %d %s", typ, r.Status, r.Body)
	}
	id, _ := r.JSON(e.t)["id"].(string)
	return id
}

// wantError checks a REST error: its status, the error JSON and, when
// field is set, that the message or details name it.
func wantError(t testing.TB, r *reply, status int, field string) {
	t.Helper()
	var body restadapter.ErrorBody
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Error.Code == "" || body.Error.Message == "" {
		t.Fatalf("status %d, body is not the REST error JSON: %s", r.Status, r.Body)
	}
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if field != "" && !bytes.Contains(r.Body, []byte(field)) {
		t.Fatalf("error does not name %q: %s", field, r.Body)
	}
}
