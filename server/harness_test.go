package server_test

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

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
	"fhirstore/store/storetest"
)

var db *storetest.DB

func TestMain(m *testing.M) { storetest.Run(m, &db) }

// testKey signs the tokens of the tests.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// env is one test's server: a fresh tenant on the shared test database,
// served through the real handler over HTTP.
type env struct {
	t      testing.TB
	srv    *httptest.Server
	store  *store.Store
	tenant string
	token  string
	cfg    server.Config
	h      *server.Server
}

// newEnv starts a server whose default tenant is a fresh tenant of its own.
func newEnv(t testing.TB, mutate ...func(*server.Config, *store.Options)) *env {
	t.Helper()
	opts := db.Options()
	opts.Exclusive = true // each env owns its tenant, like a server its embedded database
	cfg := server.Config{BaseDomain: "localhost", MaxBodyBytes: server.DefaultMaxBodyBytes, Registry: db.Registry()}
	for _, m := range mutate {
		m(&cfg, &opts)
	}
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	if cfg.DefaultTenant == "" {
		cfg.DefaultTenant = tenant
	}
	h := server.New(cfg, st, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	t.Cleanup(func() { closeServer(t, h) }) // after the HTTP server's, registered next
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, store: st, tenant: tenant, token: signToken(t, tenant, time.Hour), cfg: cfg, h: h}
}

// closeServer stops h's background work (the audit trail), as a server
// that shuts down does.
func closeServer(t testing.TB, h *server.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Errorf("close the server: %v", err)
	}
}

func signToken(t testing.TB, tenant string, ttl time.Duration) string {
	t.Helper()
	tok, err := auth.SignHS256(testKey, auth.TokenRequest{Tenant: tenant, Scope: "system/*.*", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// response is a finished HTTP exchange.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map (numbers as json.Number).
func (r *response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("response is not JSON (%d): %v\n%s", r.Status, err, r.Body)
	}
	return m
}

// request describes one call; zero values mean: the env's token, tenant
// host and FHIR JSON content type.
type request struct {
	Method, Path string
	Body         string
	Host         string            // default: the tenant's host
	Token        *string           // nil: the env's token; "" sends none
	Header       map[string]string // extra headers (override defaults)
}

// do sends a request to /fhir/r4 + Path (or to Path itself when it starts with "/" and not "/fhir").
func (e *env) do(r request) *response {
	e.t.Helper()
	url := e.srv.URL + "/fhir/r4" + r.Path
	if strings.HasPrefix(r.Path, "/healthz") || strings.HasPrefix(r.Path, "/readyz") || strings.HasPrefix(r.Path, "/api/") {
		url = e.srv.URL + r.Path
	}
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequest(r.Method, url, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = r.Host
	if req.Host == "" {
		req.Host = e.tenant + ".localhost"
	}
	tok := e.token
	if r.Token != nil {
		tok = *r.Token
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func (e *env) get(path string) *response { return e.do(request{Method: http.MethodGet, Path: path}) }

func (e *env) post(path, body string) *response {
	return e.do(request{Method: http.MethodPost, Path: path, Body: body})
}

func (e *env) put(path, body string) *response {
	return e.do(request{Method: http.MethodPut, Path: path, Body: body})
}

// create posts a resource and returns its id, failing the test unless 201.
func (e *env) create(typ, body string) string {
	e.t.Helper()
	r := e.post("/"+typ, body)
	if r.Status != http.StatusCreated {
		e.t.Fatalf("create %s: %d %s", typ, r.Status, r.Body)
	}
	return r.JSON(e.t)["id"].(string)
}

// wantOutcome checks an OperationOutcome error with the given status and,
// when expr is not empty, an issue whose expression contains expr.
func wantOutcome(t testing.TB, r *response, status int, expr string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	m := r.JSON(t)
	if m["resourceType"] != "OperationOutcome" {
		t.Fatalf("body is not an OperationOutcome: %s", r.Body)
	}
	issues, _ := m["issue"].([]any)
	if len(issues) == 0 {
		t.Fatalf("OperationOutcome without issues: %s", r.Body)
	}
	if expr == "" {
		return
	}
	for _, is := range issues {
		exprs, _ := is.(map[string]any)["expression"].([]any)
		for _, x := range exprs {
			if strings.Contains(x.(string), expr) {
				return
			}
		}
	}
	t.Fatalf("no issue with expression %q: %s", expr, r.Body)
}
