package subscription_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/restadapter"
	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/server/subscription"
	"fhirstore/store"
	"fhirstore/store/storetest"
)

var db *storetest.DB

func TestMain(m *testing.M) { storetest.Run(m, &db) }

var testKey = []byte("0123456789abcdef0123456789abcdef")

// prefixes keeps every env on databases of its own, so that no engine
// sees another test's tenants.
var prefixes atomic.Int64

// env is one test's server with its subscription engine, over HTTP.
type env struct {
	t       testing.TB
	srv     *httptest.Server
	store   *store.Store
	opts    store.Options
	cfg     subscription.Config
	eng     *subscription.Engine
	metrics *server.Metrics
	tenant  string
	token   string
	fault   *atomic.Pointer[func(string) error]
}

// fastConfig retries quickly so that tests of failures stay short.
func fastConfig() subscription.Config {
	return subscription.Config{Registry: db.Registry(), Attempts: 3, Timeout: 2 * time.Second, Backoff: 20 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond, Poll: 100 * time.Millisecond, Logger: testLogger()}
}

func newEnv(t testing.TB, mutate ...func(*subscription.Config)) *env {
	t.Helper()
	cfg := fastConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	if cfg.Endpoints == nil {
		cfg.Endpoints, _ = subscription.ParseAllowList("")
	}
	opts := db.Options()
	opts.DatabasePrefix += fmt.Sprintf("s%d_", prefixes.Add(1))
	if cfg.Topics == nil {
		topics, err := subscription.NewTopics(db.Registry())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Topics = topics
	}
	opts.Validate = subscription.TopicValidator(db.Registry(), cfg.Endpoints, cfg.Topics, opts.Validate)
	fault := &atomic.Pointer[func(string) error]{}
	opts.Fault = func(point string) error {
		if f := fault.Load(); f != nil {
			return (*f)(point)
		}
		return nil
	}
	st := db.Open(t, opts)
	e := &env{t: t, store: st, opts: opts, cfg: cfg, tenant: db.Tenant(t, st), fault: fault}
	e.token = e.sign(e.tenant, "system/*.*")
	e.start()
	e.metrics = server.NewMetrics()
	e.metrics.Registry().MustRegister(e.eng.Collector())
	rest := restadapter.New(restadapter.Config{TenantOf: func(ctx context.Context) (string, bool) {
		c, ok := server.CallerFrom(ctx)
		return c.Tenant, ok
	}, Store: st, Registry: db.Registry(), Logger: zap.NewNop(), Allows: server.Allows})
	h := server.New(server.Config{BaseDomain: "localhost", DefaultTenant: e.tenant, Registry: db.Registry(), REST: rest,
		Metrics: e.metrics, SubscriptionChannels: []string{subscription.RestHook, subscription.Websocket}, Topics: currentEngine{e}}, st, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// currentEngine serves the topic operations with the env's engine of the
// moment (a restart replaces it).
type currentEngine struct{ e *env }

func (c currentEngine) Status(ctx context.Context, tenant string, ids []string) (map[string]any, error) {
	return c.e.eng.Status(ctx, tenant, ids)
}

func (c currentEngine) Events(ctx context.Context, tenant, id string, since, until int64, content string) (map[string]any, error) {
	return c.e.eng.Events(ctx, tenant, id, since, until, content)
}

func (c currentEngine) BindingToken(ctx context.Context, tenant string, ids []string, url string) (map[string]any, error) {
	return c.e.eng.BindingToken(ctx, tenant, ids, url)
}

func (c currentEngine) TopicCanonicals(ctx context.Context, tenant string) ([]string, error) {
	return c.e.eng.TopicCanonicals(ctx, tenant)
}

func (c currentEngine) TopicResources(ctx context.Context, tenant, canonical string) ([]string, bool, error) {
	return c.e.eng.TopicResources(ctx, tenant, canonical)
}

func (c currentEngine) ServeWebsocket(w http.ResponseWriter, r *http.Request, tenant string) {
	c.e.eng.ServeWebsocket(w, r, tenant)
}

// start starts a subscription engine on the env's store, as a server
// start does; stop stops it as a shutdown (or crash) would.
func (e *env) start() {
	e.t.Helper()
	cfg := e.cfg
	cfg.Store = e.store
	eng, err := subscription.Start(context.Background(), cfg)
	if err != nil {
		e.t.Fatalf("start subscriptions: %v", err)
	}
	e.eng = eng
	e.t.Cleanup(eng.Close)
}

func (e *env) sign(tenant, scope string) string {
	e.t.Helper()
	tok, err := auth.SignHS256(testKey, auth.TokenRequest{Tenant: tenant, Scope: scope, TTL: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// response is a finished exchange.
type response struct {
	Status int
	Body   []byte
}

func (r *response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("not JSON (%d): %s", r.Status, r.Body)
	}
	return m
}

// call sends a FHIR request (path under /fhir/r4, or /api/... or /metrics)
// to tenant with token.
func (e *env) call(tenant, token, method, path, body string) *response {
	e.t.Helper()
	url := e.srv.URL + "/fhir/r4" + path
	if strings.HasPrefix(path, "/api/") || path == "/metrics" {
		url = e.srv.URL + path
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = tenant + ".localhost"
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/fhir+json")
		if strings.HasPrefix(path, "/api/") {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &response{Status: resp.StatusCode, Body: b}
}

func (e *env) do(method, path, body string) *response {
	e.t.Helper()
	return e.call(e.tenant, e.token, method, path, body)
}

// create posts a resource and returns its id.
func (e *env) create(typ, body string) string {
	e.t.Helper()
	r := e.do(http.MethodPost, "/"+typ, body)
	if r.Status != http.StatusCreated {
		e.t.Fatalf("create %s: %d %s", typ, r.Status, r.Body)
	}
	return r.JSON(e.t)["id"].(string)
}

// subscribe creates an active subscription and waits for it to be active.
func (e *env) subscribe(criteria, endpoint, payload string, headers ...string) string {
	e.t.Helper()
	id := e.create("Subscription", subscriptionJSON(criteria, endpoint, payload, headers...))
	e.waitStatus(id, subscription.StatusActive)
	return id
}

func subscriptionJSON(criteria, endpoint, payload string, headers ...string) string {
	ch := map[string]any{"type": "rest-hook", "endpoint": endpoint}
	if payload != "" {
		ch["payload"] = payload
	}
	if len(headers) > 0 {
		ch["header"] = headers
	}
	b, _ := json.Marshal(map[string]any{"resourceType": "Subscription", "status": "requested", "reason": "test", "criteria": criteria, "channel": ch})
	return string(b)
}

// waitStatus waits until the subscription has status want and returns it.
func (e *env) waitStatus(id, want string) map[string]any {
	e.t.Helper()
	var last map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := e.do(http.MethodGet, "/Subscription/"+id, "")
		if r.Status != http.StatusOK {
			e.t.Fatalf("read subscription: %d %s", r.Status, r.Body)
		}
		if last = r.JSON(e.t); last["status"] == want {
			return last
		}
	}
	e.t.Fatalf("subscription %s never became %s: %v", id, want, last)
	return nil
}

// delivery is one request a receiver got.
type delivery struct {
	Method, Path, ContentType string
	Header                    http.Header
	Body                      string
	At                        time.Time // arrival
}

// receiver is a subscriber's endpoint on loopback that records what it
// gets; fail makes it answer 500 while it is set.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []delivery
	at   []time.Time // arrival of each delivery
	fail atomic.Bool
	more chan struct{}
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{more: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if r.fail.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		r.mu.Lock()
		now := time.Now()
		r.at = append(r.at, now)
		r.got = append(r.got, delivery{Method: req.Method, Path: req.URL.Path, ContentType: req.Header.Get("Content-Type"), Header: req.Header.Clone(), Body: string(b), At: now})
		r.mu.Unlock()
		select {
		case r.more <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// url is the receiver's address with path.
func (r *receiver) url(path string) string { return r.srv.URL + path }

// deliveries returns what arrived so far.
func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// wait waits until cond holds over the deliveries (10s at most).
func (r *receiver) wait(t testing.TB, what string, cond func([]delivery) bool) []delivery {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		got := r.deliveries()
		if cond(got) {
			return got
		}
		select {
		case <-r.more:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; got %d deliveries: %+v", what, len(got), got)
		}
	}
}

// onPath keeps the deliveries whose path starts with prefix.
func onPath(got []delivery, prefix string) []delivery {
	var out []delivery
	for _, d := range got {
		if strings.HasPrefix(d.Path, prefix) {
			out = append(out, d)
		}
	}
	return out
}

// mentions tells whether some delivery's path or body contains s.
func mentions(got []delivery, s string) bool {
	for _, d := range got {
		if strings.Contains(d.Path, s) || strings.Contains(d.Body, s) {
			return true
		}
	}
	return false
}

// faults makes f decide at each fault point of the store's commits.
func (e *env) faults(f func(point string) error) { e.fault.Store(&f) }

// atomicString is a string shared with the store's goroutines.
type atomicString struct{ v atomic.Value }

func (a *atomicString) load() string { s, _ := a.v.Load().(string); return s }

func (a *atomicString) store(s string) { a.v.Store(s) }

// testLogger shows the engine's log when SUBSCRIPTION_TEST_LOG is set.
func testLogger() *zap.Logger {
	if os.Getenv("SUBSCRIPTION_TEST_LOG") == "" {
		return zap.NewNop()
	}
	l, _ := zap.NewDevelopment()
	return l
}

// awaitDrained waits until the tenant has no notification queued and no
// change left to match, failing after within.
func awaitDrained(t testing.TB, st *store.Store, tenant string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		queued, unmatched, err := st.PendingNotifications(context.Background(), tenant)
		if err != nil {
			t.Fatal(err)
		}
		if queued+unmatched == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d queued and %d unmatched after %s", queued, unmatched, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
