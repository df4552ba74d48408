package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/server/bulkexport"
	"fhirstore/server/subscription"
	"fhirstore/store"
	"fhirstore/store/storetest"
)

var db *storetest.DB

func TestMain(m *testing.M) {
	d, err := storetest.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "start test database:", err)
		os.Exit(1)
	}
	db = d
	code := m.Run()
	closeBrowser()
	d.Close()
	os.Exit(code)
}

// testKey signs the tokens of the tests.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// env is a server on 127.0.0.1 whose default tenant is a fresh one.
type env struct {
	t      testing.TB
	srv    *httptest.Server
	store  *store.Store
	tenant string
	token  string
}

func newEnv(t testing.TB) *env { t.Helper(); return newEnvExport(t, true) }

// newEnvExport is newEnv with Bulk Data export on or off, and the store
// options changed by mutate.
func newEnvExport(t testing.TB, export bool, mutate ...func(*store.Options)) *env {
	t.Helper()
	return newEnvWith(t, envOptions{export: export, mutate: mutate})
}

// envOptions say what a test server runs besides the FHIR API.
type envOptions struct {
	export        bool // Bulk Data export
	subscriptions bool // the subscription engine, topic-based subscriptions included
	mutate        []func(*store.Options)
}

// newEnvWith is newEnv with the given options.
func newEnvWith(t testing.TB, o envOptions) *env {
	t.Helper()
	opts := db.Options()
	opts.Exclusive = true
	for _, m := range o.mutate {
		m(&opts)
	}
	var topics *subscription.Topics
	allow, err := subscription.ParseAllowList("")
	if err != nil {
		t.Fatal(err)
	}
	if o.subscriptions {
		if topics, err = subscription.NewTopics(db.Registry()); err != nil {
			t.Fatal(err)
		}
		opts.Validate = subscription.TopicValidator(db.Registry(), allow, topics, opts.Validate)
	}
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	cfg := server.Config{BaseDomain: "localhost", DefaultTenant: tenant, Registry: db.Registry(), Version: "test-version"}
	if o.subscriptions { // as the server runs them
		eng, err := subscription.Start(context.Background(), subscription.Config{Store: st, Registry: db.Registry(), Endpoints: allow, Topics: topics, Exclusive: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(eng.Close)
		cfg.Topics, cfg.SubscriptionChannels = eng, []string{subscription.RestHook, subscription.Websocket}
	}
	// Dev tokens, and the server's own token endpoint (client credentials).
	key, err := st.SigningKey(context.Background(), auth.GenerateLocalKey)
	if err != nil {
		t.Fatal(err)
	}
	local, err := auth.NewLocalIssuer(key, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	v := &auth.Verifier{Local: local, Dev: &auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, Leeway: time.Minute}
	if o.export { // Bulk Data export, as the server runs it
		exports := bulkexport.New(st, bulkexport.Config{Dir: t.TempDir(), Registry: db.Registry(), Exclusive: true})
		if err := exports.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(exports.Close)
		cfg.Export = exports
	}
	h := server.New(cfg, st, v, zap.NewNop())
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv, store: st, tenant: tenant}
	e.token = e.tokenFor("system/*.*")
	return e
}

// client registers an OAuth client of the env's tenant and returns its
// id and secret.
func (e *env) client(scopes ...string) (id, secret string) {
	e.t.Helper()
	secret = auth.NewClientSecret()
	hash, err := auth.HashSecret(secret)
	if err != nil {
		e.t.Fatal(err)
	}
	id = "console-client-" + e.tenant
	c := store.Client{ID: id, Tenant: e.tenant, Name: "console test", Scopes: scopes, SecretHash: hash, CreatedAt: time.Now()}
	if err := e.store.CreateClient(context.Background(), c); err != nil {
		e.t.Fatal(err)
	}
	return id, secret
}

// tokenFor signs a token of the env's tenant with the given scopes.
func (e *env) tokenFor(scope string) string {
	e.t.Helper()
	tok, err := auth.SignHS256(testKey, auth.TokenRequest{Tenant: e.tenant, Scope: scope, Subject: "console-test", TTL: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// call sends a request to a path of the server with the env's token unless
// headers set Authorization; it returns the status, headers and body.
func (e *env) call(method, path, body string, headers map[string]string) (int, http.Header, []byte) {
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
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// fhir sends a FHIR request and decodes the JSON answer, failing unless
// the status is want.
func (e *env) fhir(method, path, body string, want int) map[string]any {
	e.t.Helper()
	status, _, b := e.call(method, "/fhir/r4"+path, body, nil)
	if status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	var m map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			e.t.Fatalf("%s %s: not JSON: %v", method, path, err)
		}
	}
	return m
}

// create stores a resource and returns its id.
func (e *env) create(typ, body string) string {
	e.t.Helper()
	return e.fhir(http.MethodPost, "/"+typ, body, http.StatusCreated)["id"].(string)
}
