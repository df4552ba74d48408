package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
	"fhirstore/store/engine/mongodb"
	"fhirstore/store/ferretdb"
)

// JSON nested deeper than 100 levels is a 400: see
// TestInvalidRequestsAreOperationOutcomesAndChangeNothing and
// TestJSONNestingLimit in errors_test.go.

// faultBound is how long any answer may take while the database is away:
// the store gives up selecting a server after one second.
const faultBound = 5 * time.Second

// faultProxy forwards TCP connections to the database. Cutting it closes
// every connection and refuses new ones, as a partition or a stopped
// database does; client-to-database traffic containing stall is never
// delivered, as a database busy with that command would look.
type faultProxy struct {
	ln    net.Listener
	stall []byte

	mu     sync.Mutex
	target string // "" while cut
	conns  map[net.Conn]struct{}
}

func newFaultProxy(t *testing.T, target, stall string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, stall: []byte(stall), target: target, conns: map[net.Conn]struct{}{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); p.setTarget("") })
	return p
}

// setTarget forwards new connections to target; every open one is cut.
func (p *faultProxy) setTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *faultProxy) forward(c net.Conn) {
	defer c.Close()
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	if target == "" {
		return
	}
	up, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	p.mu.Lock()
	if p.target != target { // cut while dialling
		p.mu.Unlock()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, up)
		p.mu.Unlock()
	}()
	go func() {
		_, _ = io.Copy(c, up)
		_ = c.Close()
	}()
	buf := make([]byte, 32<<10)
	var tail []byte // the end of the previous read, for a stall split across two
	for {
		n, err := c.Read(buf)
		if n > 0 {
			seen := append(tail, buf[:n]...)
			if len(p.stall) > 0 && bytes.Contains(seen, p.stall) {
				_, _ = io.Copy(io.Discard, c) // held until the client gives up
				return
			}
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
			tail = append([]byte(nil), seen[max(0, len(seen)-len(p.stall)):]...)
		}
		if err != nil {
			return
		}
	}
}

// faultDB is a private embedded database reached through a faultProxy.
type faultDB struct {
	dir    string
	engine *ferretdb.Server
	proxy  *faultProxy
	uri    string // the proxy's address in the engine's URI
}

func startFaultDB(t *testing.T, stall string) *faultDB {
	t.Helper()
	if db.Kind != "mongodb" {
		t.Skip("network faults between the server and MongoDB: run with FHIRSTORE_TEST_ENGINE=ferretdb")
	}
	f := &faultDB{dir: t.TempDir()}
	t.Cleanup(func() { // registered first, so it runs after the store is closed
		if f.engine != nil {
			f.stopEngine(t)
		}
	})
	f.startEngine(t)
	f.proxy = newFaultProxy(t, hostOf(t, f.engine.URI()), stall)
	u, err := url.Parse(f.engine.URI())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = f.proxy.ln.Addr().String()
	f.uri = u.String()
	return f
}

func (f *faultDB) startEngine(t *testing.T) {
	t.Helper()
	eng, err := ferretdb.Start(context.Background(), f.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.engine = eng
}

func (f *faultDB) stopEngine(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ferretdb.StopTimeout)
	defer cancel()
	if err := f.engine.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	f.engine = nil
}

func hostOf(t *testing.T, uri string) string {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// newFaultEnv serves tenant "faults" (the default tenant) of a store on
// fdb, FHIR and REST, logging to logger.
func newFaultEnv(t *testing.T, fdb *faultDB, monitor *event.CommandMonitor, logger *zap.Logger) *env {
	t.Helper()
	ctx := context.Background()
	opts := db.Options()
	opts.Monitor = monitor
	eng, err := mongodb.Open(fdb.uri, mongodb.Options{ServerSelectionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = st.Close(cctx)
	})
	if err := st.CreateTenant(ctx, "faults"); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{DefaultTenant: "faults", Registry: db.Registry(), REST: injREST(st)}
	srv := httptest.NewServer(server.New(cfg, st, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, logger))
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, store: st, tenant: "faults", token: signToken(t, "faults", time.Hour), cfg: cfg}
}

// forTest is e reporting failures to t, one of its subtests.
func (e *env) forTest(t testing.TB) *env {
	c := *e
	c.t = t
	return &c
}

// faultRequests are the interactions that must answer 503 while the
// database is away; they would otherwise change Patient/kept.
var faultRequests = []struct {
	name string
	req  request
}{
	{"read", request{Method: http.MethodGet, Path: "/Patient/kept"}},
	{"vread", request{Method: http.MethodGet, Path: "/Patient/kept/_history/1"}},
	{"search", request{Method: http.MethodGet, Path: "/Patient?name=Kept"}},
	{"instance history", request{Method: http.MethodGet, Path: "/Patient/kept/_history"}},
	{"system history", request{Method: http.MethodGet, Path: "/_history"}},
	{"create", request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","name":[{"family":"Lost"}]}`}},
	{"update", request{Method: http.MethodPut, Path: "/Patient/kept", Body: `{"resourceType":"Patient","id":"kept","name":[{"family":"Lost"}]}`}},
	{"delete", request{Method: http.MethodDelete, Path: "/Patient/kept"}},
	{"transaction", request{Method: http.MethodPost, Path: "", Body: `{"resourceType":"Bundle","type":"transaction","entry":[{"resource":{"resourceType":"Patient","name":[{"family":"Lost"}]},"request":{"method":"POST","url":"Patient"}}]}`}},
	{"REST read", request{Method: http.MethodGet, Path: "/api/v1/patients/kept"}},
	{"REST update", request{Method: http.MethodPut, Path: "/api/v1/patients/kept", Body: `{"lastName":"Lost"}`, Header: map[string]string{"Content-Type": "application/json"}}},
}

// faultSend is env.do that reports a failed exchange instead of failing
// the test, for requests sent together from several goroutines.
func faultSend(e *env, rq request) (*response, error) {
	u := e.srv.URL + "/fhir/r4" + rq.Path
	if strings.HasPrefix(rq.Path, "/api/") {
		u = e.srv.URL + rq.Path
	}
	var body io.Reader
	if rq.Body != "" {
		body = strings.NewReader(rq.Body)
	}
	req, err := http.NewRequest(rq.Method, u, body)
	if err != nil {
		return nil, err
	}
	req.Host = e.tenant + ".localhost"
	req.Header.Set("Authorization", "Bearer "+e.token)
	if rq.Body != "" {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	for k, v := range rq.Header {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// wantUnavailable checks that every interaction answers 503 promptly (all
// sent at once, each waits for the database), saying nothing of the
// database's address, that /readyz fails and that /healthz still answers.
func wantUnavailable(t *testing.T, e *env, fdb *faultDB) {
	t.Helper()
	type answer struct {
		r    *response
		err  error
		took time.Duration
	}
	answers := make([]answer, len(faultRequests))
	var wg sync.WaitGroup
	for i, fr := range faultRequests {
		wg.Go(func() {
			start := time.Now()
			r, err := faultSend(e, fr.req)
			answers[i] = answer{r, err, time.Since(start)}
		})
	}
	wg.Wait()
	for i, fr := range faultRequests {
		t.Run(fr.name+" answers 503", func(t *testing.T) {
			r := answers[i].r
			if answers[i].err != nil {
				t.Fatal(answers[i].err)
			}
			if took := answers[i].took; took > faultBound {
				t.Fatalf("answered after %v", took)
			}
			e2eKnownBug(t, r.Status == http.StatusInternalServerError, "store/store.go dbError does not count the driver's "+
				"\"connection pool ... was cleared\" error as ErrUnavailable, so an outage is at times a 500: %s", r.Body)
			if strings.HasPrefix(fr.req.Path, "/api/") {
				e2eWantStatus(t, r, http.StatusServiceUnavailable)
				if code, _ := r.JSON(t)["error"].(map[string]any)["code"].(string); code != "service_unavailable" {
					t.Fatalf("REST error code %q: %s", code, r.Body)
				}
			} else {
				wantOutcome(t, r, http.StatusServiceUnavailable, "")
			}
			if port := fdb.proxy.ln.Addr().(*net.TCPAddr).Port; bytes.Contains(r.Body, []byte(fmt.Sprint(port))) {
				t.Fatalf("the answer names the database address: %s", r.Body)
			}
		})
	}
	start := time.Now()
	if r := e.get("/readyz"); r.Status == http.StatusOK || time.Since(start) > faultBound {
		t.Fatalf("readyz while the database is away: %d after %v", r.Status, time.Since(start))
	}
	if r := e.get("/healthz"); r.Status != http.StatusOK {
		t.Fatalf("healthz while the database is away: %d", r.Status)
	}
}

// wantResumed polls until the database answers again (up to 15s) and
// checks that Patient/kept is as it was before the outage.
func wantResumed(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for e.get("/readyz").Status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the service did not resume within 15s of the database's return")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var r *response
	for r = e.get("/Patient/kept"); r.Status != http.StatusOK && time.Now().Before(deadline); r = e.get("/Patient/kept") {
		time.Sleep(100 * time.Millisecond)
	}
	e2eWantStatus(t, r, http.StatusOK)
	if got := e2eFamily(t, r); got != "Kept" {
		t.Fatalf("Patient/kept after the outage: family %q", got)
	}
	e2eWantVersion(t, r, 1)
	if n := e2eHistoryTotal(t, e, "/_history"); n != 1 {
		t.Fatalf("%d versions after the outage, want 1: a write of the outage landed", n)
	}
}

// TestFaultDatabaseOutage: while the database is out of reach every
// interaction answers 503 promptly and /readyz fails; when it is back the
// service resumes by itself with the data it had.
func TestFaultDatabaseOutage(t *testing.T) {
	fdb := startFaultDB(t, "")
	e := newFaultEnv(t, fdb, nil, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	e2eWantStatus(t, e.put("/Patient/kept", `{"resourceType":"Patient","id":"kept","name":[{"family":"Kept"}]}`), http.StatusCreated)
	e2eWantStatus(t, e.get("/readyz"), http.StatusOK)
	engine := hostOf(t, fdb.engine.URI())

	t.Run("the network to the database is cut", func(t *testing.T) {
		fdb.proxy.setTarget("")
		wantUnavailable(t, e, fdb)
	})
	t.Run("the network comes back", func(t *testing.T) {
		fdb.proxy.setTarget(engine)
		wantResumed(t, e)
	})
	t.Run("the database stops", func(t *testing.T) {
		fdb.stopEngine(t)
		wantUnavailable(t, e, fdb)
	})
	t.Run("the database starts again on the same files", func(t *testing.T) {
		fdb.startEngine(t)
		fdb.proxy.setTarget(hostOf(t, fdb.engine.URI()))
		wantResumed(t, e)
		e.create("Patient", `{"resourceType":"Patient","name":[{"family":"After"}]}`)
	})
}

// faultCommands records the database commands holding a marker.
type faultCommands struct {
	marker  []byte
	sent    chan struct{} // closed when the first one is sent
	once    sync.Once
	mu      sync.Mutex
	started map[int64]string // request id → command name
	failed  map[int64]error
}

func newFaultCommands(marker string) *faultCommands {
	return &faultCommands{marker: []byte(marker), sent: make(chan struct{}), started: map[int64]string{}, failed: map[int64]error{}}
}

func (fc *faultCommands) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(_ context.Context, ev *event.CommandStartedEvent) {
			if !bytes.Contains(ev.Command, fc.marker) {
				return
			}
			fc.mu.Lock()
			fc.started[ev.RequestID] = ev.CommandName
			fc.mu.Unlock()
			fc.once.Do(func() { close(fc.sent) })
		},
		Failed: func(_ context.Context, ev *event.CommandFailedEvent) {
			fc.mu.Lock()
			fc.failed[ev.RequestID] = ev.Failure
			fc.mu.Unlock()
		},
	}
}

// cancelled names a command holding the marker that failed because its
// context was cancelled.
func (fc *faultCommands) cancelled() (string, bool) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for id, name := range fc.started {
		if err := fc.failed[id]; err != nil && (errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "context canceled")) {
			return name, true
		}
	}
	return "", false
}

// TestFaultClientDisconnectCancelsDatabaseWork: when a client gives up on a
// search the database is slow to answer, the server cancels the database
// command and finishes the request instead of waiting for the answer.
func TestFaultClientDisconnectCancelsDatabaseWork(t *testing.T) {
	const marker = "stallmarker" // a search for it never reaches the database
	fdb := startFaultDB(t, marker)
	cmds := newFaultCommands(marker)
	core, logs := observer.New(zapcore.InfoLevel)
	e := newFaultEnv(t, fdb, cmds.monitor(), zap.New(core))
	t.Cleanup(func() { fdb.proxy.setTarget("") }) // frees a handler still waiting, so the server can close
	e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Present"}]}`)

	// The client hangs up once the search's command is on its way.
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	hungUp := make(chan time.Time, 1)
	go func() {
		select {
		case <-cmds.sent:
		case <-time.After(10 * time.Second):
		}
		hangUp()
		hungUp <- time.Now()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/fhir/r4/Patient?name="+marker, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the stalled search answered %d", resp.StatusCode)
	}
	gaveUp := <-hungUp
	select {
	case <-cmds.sent:
	default:
		t.Fatal("the search sent no command holding the marker within 10s")
	}

	deadline := gaveUp.Add(faultBound)
	for {
		if name, ok := cmds.cancelled(); ok {
			t.Logf("%s cancelled %v after the client hung up", name, time.Since(gaveUp))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no database command of the search failed with context canceled within %v of the client hanging up", faultBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	searched := func() int {
		return len(logs.FilterMessage("request").FilterField(zap.String("method", http.MethodGet)).FilterField(zap.String("path", "/fhir/r4/Patient")).All())
	}
	for searched() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the handler of the abandoned search did not finish within %v", faultBound)
		}
		time.Sleep(20 * time.Millisecond)
	}

	t.Run("the next search is served", func(t *testing.T) {
		start := time.Now()
		r := e.get("/Patient?name=Present")
		e2eWantStatus(t, r, http.StatusOK)
		if total := fmt.Sprint(r.JSON(t)["total"]); total != "1" || time.Since(start) > faultBound {
			t.Fatalf("total %s after %v", total, time.Since(start))
		}
	})
}

// faultPanicMarker makes the validator of TestFaultPanicIsOperationOutcome panic.
const faultPanicMarker = "PanicNow"

// TestFaultPanicIsOperationOutcome: a panic while serving a request is a
// 500 that tells nothing of the server's insides, releases what the
// request held and leaves the server serving.
func TestFaultPanicIsOperationOutcome(t *testing.T) {
	mount := &injMount{}
	e := newEnv(t, func(c *server.Config, o *store.Options) {
		c.REST = mount
		validate := o.Validate
		o.LockTimeout = 4 * time.Second // a criteria lock the panic left behind fails the retry fast
		o.Validate = func(ctx context.Context, in store.Validation) ([]store.Issue, error) {
			if bytes.Contains(in.Body, []byte(faultPanicMarker)) {
				panic(fmt.Sprintf("boom: secret at /srv/fhirstore/store/prepare.go:52 in goroutine 7 [running] for %s", in.Type))
			}
			return validate(ctx, in)
		}
	})
	mount.h = injREST(e.store)
	e2eWantStatus(t, e.put("/Patient/p", `{"resourceType":"Patient","id":"p","name":[{"family":"Calm"}]}`), http.StatusCreated)
	before := e2eHistoryTotal(t, e, "/_history")

	panicky := `{"resourceType":"Patient","name":[{"family":"` + faultPanicMarker + `"}]}`
	cases := []struct {
		name string
		req  request
	}{
		{"create", request{Method: http.MethodPost, Path: "/Patient", Body: panicky}},
		{"update", request{Method: http.MethodPut, Path: "/Patient/p", Body: `{"resourceType":"Patient","id":"p","name":[{"family":"` + faultPanicMarker + `"}]}`}},
		{"conditional create", request{Method: http.MethodPost, Path: "/Patient", Body: panicky, Header: map[string]string{"If-None-Exist": "family=" + faultPanicMarker}}},
		{"transaction", request{Method: http.MethodPost, Path: "", Body: `{"resourceType":"Bundle","type":"transaction","entry":[` +
			`{"resource":{"resourceType":"Patient","name":[{"family":"Fine"}]},"request":{"method":"POST","url":"Patient"}},` +
			`{"resource":` + panicky + `,"request":{"method":"POST","url":"Patient"}}]}`}},
		{"batch", request{Method: http.MethodPost, Path: "", Body: `{"resourceType":"Bundle","type":"batch","entry":[` +
			`{"resource":` + panicky + `,"request":{"method":"POST","url":"Patient"}}]}`}},
		{"REST update", request{Method: http.MethodPut, Path: "/api/v1/patients/p", Body: `{"lastName":"` + faultPanicMarker + `"}`,
			Header: map[string]string{"Content-Type": "application/json"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is a bare 500", func(t *testing.T) {
			r := e.forTest(t).do(tc.req)
			if strings.HasPrefix(tc.req.Path, "/api/") {
				e2eWantStatus(t, r, http.StatusInternalServerError)
				if msg, _ := r.JSON(t)["error"].(map[string]any)["message"].(string); msg != "internal server error" {
					t.Fatalf("REST error message %q", msg)
				}
			} else {
				wantOutcome(t, r, http.StatusInternalServerError, "")
			}
			for _, inside := range []string{"goroutine", ".go:", "panic", "boom", "secret", "runtime", "/srv/", faultPanicMarker} {
				if strings.Contains(string(r.Body), inside) {
					t.Fatalf("the answer shows %q: %s", inside, r.Body)
				}
			}
		})
	}

	t.Run("nothing was stored", func(t *testing.T) {
		if n := e2eHistoryTotal(t, e, "/_history"); n != before {
			t.Fatalf("%d versions, want %d", n, before)
		}
		if got := e2eFamily(t, e.get("/Patient/p")); got != "Calm" {
			t.Fatalf("Patient/p: family %q", got)
		}
	})
	t.Run("the criteria lock of the panicked conditional create is released", func(t *testing.T) {
		start := time.Now()
		r := e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","name":[{"family":"Calm"}]}`,
			Header: map[string]string{"If-None-Exist": "family=" + faultPanicMarker}})
		e2eWantStatus(t, r, http.StatusCreated)
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("the conditional create waited %v for the lock", took)
		}
	})
	t.Run("the server goes on serving", func(t *testing.T) {
		e.create("Patient", `{"resourceType":"Patient","name":[{"family":"After"}]}`)
	})
}
