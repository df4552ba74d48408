package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// op is one kind of operation of the workload.
type op int

const (
	opRead op = iota
	opSearch
	opCreate
	opUpdate
	opTransaction
	opCrud
	// The requests of a crud cycle, each also reported on its own; the mix
	// never picks them.
	opCrudCreate
	opCrudRead
	opCrudUpdate
	opCrudDelete
	numOps
)

// numPicked is the number of operations a mix may weigh (opRead..opCrud).
const numPicked = opCrud + 1

var opNames = [numOps]string{"read", "search", "create", "update", "transaction", "crud", "crud.create", "crud.read", "crud.update", "crud.delete"}

func (k op) String() string { return opNames[k] }

const defaultMix = "read=40,search=25,create=15,update=15,transaction=5"

// crudMix is what --mix crud stands for: crud cycles only.
const crudMix = "crud=1"

// mix holds the weight of each operation; an operation not named has weight 0.
type mix [numOps]int

func parseMix(s string) (mix, error) {
	var m mix
	if strings.TrimSpace(s) == "crud" {
		s = crudMix
	}
	seen := map[op]bool{}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return m, fmt.Errorf("%q is not name=weight", part)
		}
		k := op(slices.Index(opNames[:numPicked], strings.TrimSpace(name)))
		if k < 0 {
			return m, fmt.Errorf("unknown operation %q (want %s)", name, strings.Join(opNames[:numPicked], ", "))
		}
		if seen[k] {
			return m, fmt.Errorf("%s is given twice", k)
		}
		seen[k] = true
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 0 {
			return m, fmt.Errorf("weight of %s: %q is not a whole number ≥ 0", k, val)
		}
		m[k] = n
	}
	if m.total() == 0 {
		return m, errors.New("every weight is 0")
	}
	return m, nil
}

func (m mix) total() int {
	n := 0
	for _, w := range m {
		n += w
	}
	return n
}

func (m mix) String() string {
	parts := make([]string, 0, numOps)
	for k, w := range m {
		if w > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", op(k), w))
		}
	}
	return strings.Join(parts, ",")
}

// pick draws an operation with probability weight/total.
func (m mix) pick(r *rand.Rand) op {
	n := r.IntN(m.total())
	for k, w := range m {
		if n < w {
			return op(k)
		}
		n -= w
	}
	panic("unreachable")
}

// families are the family names of the Patients the run writes; the Patient
// search asks for one of them.
var families = []string{"Okafor", "Lindqvist", "Moreau", "Tanaka", "Castellano", "Novak", "Haddad", "Brennan", "Kowalczyk", "Achterberg"}

// seeded is a Patient created before the workload: reads and updates use them.
type seeded struct{ id, family string }

// bench is one run against one server.
type bench struct {
	o      *options
	client *http.Client
	log    io.Writer
	seeds  []seeded
	track  *tracker
	// ops and errs are the live counts of the workload, for progress lines.
	ops, errs atomic.Int64
}

func newBench(o *options, log io.Writer) *bench {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:         localhostDial(dialer),
		MaxIdleConns:        2 * o.clients,
		MaxIdleConnsPerHost: o.clients,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if o.allowRemote {
		tr.Proxy = http.ProxyFromEnvironment
	} else {
		// The URL check looks at the name; this looks at where the name led.
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, _ := net.SplitHostPort(address)
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("%s is not a loopback address (see --allow-remote)", address)
			}
			return nil
		}
	}
	return &bench{o: o, client: &http.Client{Transport: tr, Timeout: o.timeout}, log: log, track: newTracker()}
}

func (b *bench) close() { b.client.CloseIdleConnections() }

// localhostDial dials with d, reaching *.localhost names on 127.0.0.1
// (RFC 6761 reserves them for loopback; the resolver would ask DNS).
func localhostDial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && strings.HasSuffix(strings.ToLower(strings.TrimSuffix(host, ".")), ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return d.DialContext(ctx, network, addr)
	}
}

// exchange is a finished HTTP request; status 0 means no answer (err says why).
type exchange struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// describe is the one-line account of a failed exchange.
func (x exchange) describe(method, target string) string {
	if x.status == 0 {
		return fmt.Sprintf("%s %s: %v", method, target, x.err)
	}
	body := strings.Join(strings.Fields(string(x.body)), " ")
	if len(body) > 400 {
		body = body[:400] + "…"
	}
	return fmt.Sprintf("%s %s: %d %s", method, target, x.status, body)
}

// send performs one request. target is a path under the base URL ("" for the
// base itself) or an absolute URL such as a paging link.
func (b *bench) send(ctx context.Context, method, target string, body []byte, ifMatch string) exchange {
	u := target
	if !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://") {
		u = b.o.base + target
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return exchange{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+b.o.token)
	req.Header.Set("Accept", "application/fhir+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return exchange{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return exchange{err: fmt.Errorf("read response: %w", err)}
	}
	return exchange{status: resp.StatusCode, header: resp.Header, body: data}
}

// ping checks that the server answers before anything is written.
func (b *bench) ping(ctx context.Context) error {
	x := b.send(ctx, http.MethodGet, "/metadata", nil, "")
	if x.status != http.StatusOK {
		return fmt.Errorf("the server at %s does not answer: %s", b.o.base, x.describe("GET", "/metadata"))
	}
	return nil
}

// seedPatients creates the Patients that reads and updates use.
func (b *bench) seedPatients(ctx context.Context) error {
	b.seeds = make([]seeded, b.o.seed)
	var next atomic.Int64
	var failed atomic.Bool
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range min(b.o.clients, b.o.seed) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.o.seed || ctx.Err() != nil || failed.Load() {
					return
				}
				family := families[i%len(families)]
				x := b.send(ctx, http.MethodPost, "/Patient", patientJSON(family, fmt.Sprintf("Seed%d", i)), "")
				id, vid, ok := createdID(x, "Patient")
				if !ok {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("seed: %s", x.describe("POST", "/Patient"))
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
				b.track.ack("Patient", id, vid)
				b.seeds[i] = seeded{id: id, family: family}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// createdID reads the id and version of a 201 answer from its Location.
func createdID(x exchange, typ string) (string, int, bool) {
	if x.status != http.StatusCreated {
		return "", 0, false
	}
	t, id, vid, ok := parseLocation(x.header.Get("Location"))
	return id, vid, ok && t == typ
}

// parseLocation splits [base/]Type/id/_history/vid.
func parseLocation(loc string) (typ, id string, vid int, ok bool) {
	parts := strings.Split(loc, "/")
	if len(parts) < 4 || parts[len(parts)-2] != "_history" {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(parts[len(parts)-1])
	if err != nil {
		return "", "", 0, false
	}
	return parts[len(parts)-4], parts[len(parts)-3], n, true
}

// parseETag reads the version of W/"n".
func parseETag(s string) (int, bool) {
	s = strings.TrimPrefix(s, "W/")
	n, err := strconv.Atoi(strings.Trim(s, `"`))
	return n, err == nil && n > 0
}

func patientJSON(family, given string) []byte {
	b, _ := json.Marshal(map[string]any{
		"resourceType": "Patient",
		"identifier":   []any{map[string]any{"system": "urn:fhirbench:patient", "value": uuid.NewString()}},
		"active":       true,
		"name":         []any{map[string]any{"family": family, "given": []string{given}}},
		"gender":       "female",
		"birthDate":    "1948-03-17",
		"telecom":      []any{map[string]any{"system": "phone", "value": "555-0100"}},
	})
	return b
}

func observationJSON(subject, code, display string, value float64, unit, ucum string) map[string]any {
	return map[string]any{
		"resourceType": "Observation",
		"status":       "final",
		"code": map[string]any{"coding": []any{map[string]any{
			"system": "http://loinc.org", "code": code, "display": display,
		}}},
		"subject":           map[string]any{"reference": subject},
		"effectiveDateTime": time.Now().UTC().Format(time.RFC3339),
		"valueQuantity":     map[string]any{"value": value, "unit": unit, "system": "http://unitsofmeasure.org", "code": ucum},
	}
}

// outcome is how one operation ended.
type outcome int

const (
	outOK outcome = iota
	outPrecondition
	outError
)

// worker is one client: it keeps its own tallies, merged after the run.
type worker struct {
	b   *bench
	r   *rand.Rand
	rec *recorder
}

// call sends one request of operation k and records it: a status outside
// want is an error of that status.
func (w *worker) call(ctx context.Context, k op, method, target string, body []byte, ifMatch string, want ...int) (exchange, bool) {
	x := w.b.send(ctx, method, target, body, ifMatch)
	w.rec.request(x.status)
	if !slices.Contains(want, x.status) {
		w.rec.fail(k, x.status, x.describe(method, target))
		return x, false
	}
	return x, true
}

// wrong records an answer with an expected status but wrong content.
func (w *worker) wrong(k op, x exchange, format string, args ...any) outcome {
	w.rec.fail(k, x.status, fmt.Sprintf(format, args...))
	return outError
}

func (w *worker) run(ctx context.Context, k op) outcome {
	switch k {
	case opRead:
		return w.read(ctx)
	case opSearch:
		return w.search(ctx)
	case opCreate:
		return w.create(ctx)
	case opUpdate:
		return w.update(ctx)
	case opCrud:
		return w.crud(ctx)
	default:
		return w.transaction(ctx)
	}
}

func (w *worker) seed() seeded { return w.b.seeds[w.r.IntN(len(w.b.seeds))] }

func (w *worker) read(ctx context.Context) outcome {
	p := w.seed()
	if _, ok := w.call(ctx, opRead, http.MethodGet, "/Patient/"+p.id, nil, "", http.StatusOK); !ok {
		return outError
	}
	return outOK
}

// searchset is the part of a search Bundle the checks read.
type searchset struct {
	ResourceType string `json:"resourceType"`
	Total        *int   `json:"total"`
	Entry        []struct {
		Resource struct {
			ID string `json:"id"`
		} `json:"resource"`
	} `json:"entry"`
}

// search asks for Patients by a seeded family name (at least that one must
// match) or for the Observations of a transaction's Patient (exactly its two).
func (w *worker) search(ctx context.Context) outcome {
	if patient, ok := w.b.track.txnPatient(w.r); ok && w.r.IntN(2) == 0 {
		target := "/Observation?subject=Patient/" + patient + "&_count=10"
		x, ok := w.call(ctx, opSearch, http.MethodGet, target, nil, "", http.StatusOK)
		if !ok {
			return outError
		}
		var s searchset
		if err := json.Unmarshal(x.body, &s); err != nil || s.ResourceType != "Bundle" || len(s.Entry) != 2 {
			return w.wrong(opSearch, x, "GET %s: %d matches, want the transaction's 2 Observations: %.300s", target, len(s.Entry), x.body)
		}
		return outOK
	}
	target := "/Patient?family=" + url.QueryEscape(w.seed().family) + "&_count=10"
	x, ok := w.call(ctx, opSearch, http.MethodGet, target, nil, "", http.StatusOK)
	if !ok {
		return outError
	}
	var s searchset
	if err := json.Unmarshal(x.body, &s); err != nil || s.ResourceType != "Bundle" || len(s.Entry) == 0 {
		return w.wrong(opSearch, x, "GET %s: no match, want at least the seeded Patients: %.300s", target, x.body)
	}
	return outOK
}

func (w *worker) create(ctx context.Context) outcome {
	body := patientJSON(families[w.r.IntN(len(families))], fmt.Sprintf("Given%d", w.r.IntN(1_000_000)))
	x, ok := w.call(ctx, opCreate, http.MethodPost, "/Patient", body, "", http.StatusCreated)
	if !ok {
		return outError
	}
	id, vid, ok := createdID(x, "Patient")
	if !ok || vid != 1 {
		return w.wrong(opCreate, x, "POST /Patient: 201 with Location %q, want Patient/{id}/_history/1", x.header.Get("Location"))
	}
	w.b.track.ack("Patient", id, vid)
	return outOK
}

// update reads a seeded Patient and writes it back changed, on the condition
// that nobody wrote it in between; under contention some get 412.
func (w *worker) update(ctx context.Context) outcome {
	p := w.seed()
	target := "/Patient/" + p.id
	x, ok := w.call(ctx, opUpdate, http.MethodGet, target, nil, "", http.StatusOK)
	if !ok {
		return outError
	}
	vid, ok := parseETag(x.header.Get("ETag"))
	if !ok {
		return w.wrong(opUpdate, x, "GET %s: ETag %q is not W/\"n\"", target, x.header.Get("ETag"))
	}
	var res map[string]any
	if err := json.Unmarshal(x.body, &res); err != nil {
		return w.wrong(opUpdate, x, "GET %s: body is not JSON: %v", target, err)
	}
	delete(res, "meta")
	res["telecom"] = []any{map[string]any{"system": "phone", "value": fmt.Sprintf("555-%04d", w.r.IntN(10000))}}
	body, _ := json.Marshal(res)
	x, ok = w.call(ctx, opUpdate, http.MethodPut, target, body, fmt.Sprintf(`W/"%d"`, vid), http.StatusOK, http.StatusPreconditionFailed)
	if !ok {
		return outError
	}
	if x.status == http.StatusPreconditionFailed {
		return outPrecondition
	}
	got, ok := parseETag(x.header.Get("ETag"))
	if !ok || got != vid+1 {
		return w.wrong(opUpdate, x, "PUT %s with If-Match W/\"%d\": ETag %q, want W/\"%d\"", target, vid, x.header.Get("ETag"), vid+1)
	}
	w.b.track.ack("Patient", p.id, got)
	return outOK
}

// transaction creates a Patient and two Observations referring to it by its
// urn:uuid, all or nothing.
func (w *worker) transaction(ctx context.Context) outcome {
	pu := "urn:uuid:" + uuid.NewString()
	var patient map[string]any
	_ = json.Unmarshal(patientJSON(families[w.r.IntN(len(families))], "Txn"), &patient)
	entry := func(fullURL string, res map[string]any) map[string]any {
		return map[string]any{"fullUrl": fullURL, "resource": res,
			"request": map[string]any{"method": "POST", "url": res["resourceType"]}}
	}
	body, _ := json.Marshal(map[string]any{
		"resourceType": "Bundle",
		"type":         "transaction",
		"entry": []any{
			entry(pu, patient),
			entry("urn:uuid:"+uuid.NewString(), observationJSON(pu, "8867-4", "Heart rate", float64(55+w.r.IntN(50)), "beats/minute", "/min")),
			entry("urn:uuid:"+uuid.NewString(), observationJSON(pu, "8310-5", "Body temperature", 36.5, "Cel", "Cel")),
		},
	})
	x, ok := w.call(ctx, opTransaction, http.MethodPost, "", body, "", http.StatusOK)
	if !ok {
		return outError
	}
	var resp struct {
		Type  string `json:"type"`
		Entry []struct {
			Response struct {
				Status   string `json:"status"`
				Location string `json:"location"`
			} `json:"response"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(x.body, &resp); err != nil || resp.Type != "transaction-response" || len(resp.Entry) != 3 {
		return w.wrong(opTransaction, x, "POST transaction: not a transaction-response of 3 entries: %.300s", x.body)
	}
	wantTypes := []string{"Patient", "Observation", "Observation"}
	var patientID string
	for i, e := range resp.Entry {
		typ, id, vid, ok := parseLocation(e.Response.Location)
		if !ok || typ != wantTypes[i] || vid != 1 || !strings.HasPrefix(e.Response.Status, "201") {
			return w.wrong(opTransaction, x, "POST transaction: entry %d answered %q at %q, want 201 %s/{id}/_history/1", i, e.Response.Status, e.Response.Location, wantTypes[i])
		}
		w.b.track.ack(typ, id, vid)
		if i == 0 {
			patientID = id
		}
	}
	w.b.track.addTxnPatient(patientID)
	return outOK
}

// runWorkload runs the clients until the duration is over (or ctx ends) and
// returns their merged tallies, with the server's samples when smp is not nil.
func (b *bench) runWorkload(ctx context.Context, smp *sampler) *report {
	start := time.Now()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		if smp != nil {
			smp.run(ctx, start, b.o.duration)
		}
	}()
	deadline := start.Add(b.o.duration)
	recs := make([]*recorder, b.o.clients)
	// Requests outlive an interrupt: a client finishes its operation and stops.
	reqCtx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for i := range recs {
		recs[i] = newRecorder()
		w := &worker{b: b, r: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i))), rec: recs[i]}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				k := b.o.mix.pick(w.r)
				t0 := time.Now()
				out := w.run(reqCtx, k)
				w.rec.op(k, out, time.Since(t0))
				b.ops.Add(1)
				if out == outError {
					b.errs.Add(1)
				}
			}
		}()
	}
	stopProgress := b.progress(start)
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	<-sampled
	rep := newReport(b.o, mergeRecorders(recs), elapsed)
	if smp != nil {
		rep.Sampling = smp.report()
		rep.Sampling.MaxRSSGrowthPercent = b.o.maxRSSGrowth
		rep.Sampling.MaxGoroutineGrowth = b.o.maxGoroutineGrowth
	}
	return rep
}

// progress prints a line every 10 seconds on the log until stopped.
func (b *bench) progress(start time.Time) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				secs := now.Sub(start).Seconds()
				n := b.ops.Load()
				fmt.Fprintf(b.log, "fhirbench: %3.0fs %d operations (%.1f/s), %d errors\n", secs, n, float64(n)/secs, b.errs.Load())
			}
		}
	}()
	return func() { close(done); <-finished }
}

// tracker remembers every version the server acknowledged, for the check.
type tracker struct {
	mu          sync.Mutex
	written     map[string]*written
	order       []*written
	txnPatients []string
}

// written is one resource the run wrote and the versions it was told of;
// gone marks one the run deleted last.
type written struct {
	typ, id string
	acked   []int
	gone    bool
}

func newTracker() *tracker { return &tracker{written: map[string]*written{}} }

func (t *tracker) ack(typ, id string, vid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := typ + "/" + id
	wr := t.written[key]
	if wr == nil {
		wr = &written{typ: typ, id: id}
		t.written[key] = wr
		t.order = append(t.order, wr)
	}
	wr.acked = append(wr.acked, vid)
}

// deleted records that the run deleted typ/id (its last write).
func (t *tracker) deleted(typ, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if wr := t.written[typ+"/"+id]; wr != nil {
		wr.gone = true
	}
}

func (t *tracker) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.order)
}

// all lists the written resources in the order first written.
func (t *tracker) all() []*written {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.order)
}

func (t *tracker) addTxnPatient(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.txnPatients = append(t.txnPatients, id)
}

func (t *tracker) txnPatient(r *rand.Rand) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.txnPatients) == 0 {
		return "", false
	}
	return t.txnPatients[r.IntN(len(t.txnPatients))], true
}
