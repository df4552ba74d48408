package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/store"
)

// Audit trail tuning: how many records one write takes at most, how many
// writers take turns, how often a failed write is tried, how long one may
// take, and how long a request may wait for its record before the trail
// counts it as falling behind (and logs it, at most once per auditWarnEvery).
const (
	auditQueue      = 10000
	auditWriters    = 2
	auditBatch      = 500
	auditRetries    = 3
	auditWriteLimit = 30 * time.Second
	auditSlow       = 100 * time.Millisecond
	auditWarnEvery  = 10 * time.Second
)

// errAuditClosed: the trail was closed before the request ended.
var errAuditClosed = errors.New("audit trail: closed")

// auditClientKey holds the id of a client that authenticated at the token
// endpoint, for its audit record.
const auditClientKey = "fhirstore.auditClient"

// pendingAudit is a request's record on its way to the database: done is
// closed once it is stored (or logged as lost).
type pendingAudit struct {
	tenant string
	rec    store.AuditRecord
	done   chan struct{}
}

// auditor makes each request's record durable before the request ends
// (see auditindex.go for what becomes of it): appended to the trail's log
// by the request itself (Config.AuditSpoolDir), or else spooled in its
// tenant's database by two writers, in batches of whatever records are
// waiting when a writer takes its turn (group commit), so that a request
// waits about one small write. Records refused auditRetries times are
// logged in full at error level. When the trail falls behind (its
// backlog at its cap), requests wait rather than records being dropped:
// the metrics count the requests that waited more than auditSlow for
// their record (fhirstore_audit_queue_waits_total) and the log says so.
type auditor struct {
	store   *store.Store
	log     *zap.Logger
	indexer *auditIndexer
	file    *auditLog // where records wait, when set; else the tenants' spools
	queue   chan *pendingAudit
	wg      sync.WaitGroup
	done    chan struct{}
	once    sync.Once
	closing atomic.Bool

	stored, dropped, waits atomic.Int64
	waited                 atomic.Int64 // nanoseconds requests waited past auditSlow
	warned                 atomic.Int64 // when the trail last logged that it falls behind
}

func newAuditor(st *store.Store, log *zap.Logger, indexer *auditIndexer, file *auditLog) *auditor {
	a := &auditor{store: st, log: log, indexer: indexer, file: file, queue: make(chan *pendingAudit, auditQueue), done: make(chan struct{})}
	for range auditWriters {
		a.wg.Add(1)
		go a.run()
	}
	go func() { a.wg.Wait(); close(a.done) }()
	return a
}

// record spools r in tenant's database and returns once it is durable.
func (a *auditor) record(tenant string, r store.AuditRecord) {
	if a.closing.Load() { // a request after Close: nothing writes records any more
		a.lost(tenant, r, errAuditClosed)
		return
	}
	start := time.Now()
	if a.file != nil { // a write of its own: cheaper than handing it to a writer
		a.indexer.waitForRoom(a.closing.Load)
		a.logRecords(tenant, []store.AuditRecord{r})
	} else {
		p := &pendingAudit{tenant: tenant, rec: r, done: make(chan struct{})}
		a.queue <- p
		<-p.done
	}
	if took := time.Since(start); took > auditSlow {
		a.waits.Add(1)
		a.waited.Add(int64(took))
		a.behind(took)
	}
}

// behind logs, at most once per auditWarnEvery, that requests wait for
// their records.
func (a *auditor) behind(took time.Duration) {
	now := time.Now().UnixNano()
	last := a.warned.Load()
	if now-last < int64(auditWarnEvery) || !a.warned.CompareAndSwap(last, now) {
		return
	}
	a.log.Warn("audit trail: the database falls behind, requests wait for their records", zap.Duration("waited", took),
		zap.Int("queued", len(a.queue)), zap.Int64("requests_waited", a.waits.Load()))
}

// close stops taking records and waits until every queued one is written
// or ctx ends.
func (a *auditor) close(ctx context.Context) error {
	a.once.Do(func() {
		a.closing.Store(true)
		close(a.queue)
	})
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return errors.New("audit trail: shutdown ended before every record was written")
	}
}

// run writes batches until the queue is closed and drained: a batch is
// the records waiting when the writer takes its turn, auditBatch at most.
func (a *auditor) run() {
	defer a.wg.Done()
	for {
		first, ok := <-a.queue
		if !ok {
			return
		}
		batch := []*pendingAudit{first}
	gather:
		for len(batch) < auditBatch {
			select {
			case p, ok := <-a.queue:
				if !ok {
					break gather
				}
				batch = append(batch, p)
			default:
				break gather
			}
		}
		a.flush(batch)
	}
}

// flush stores records grouped by tenant, one write per tenant, and lets
// their requests go.
func (a *auditor) flush(batch []*pendingAudit) {
	byTenant := map[string][]*pendingAudit{}
	for _, p := range batch {
		byTenant[p.tenant] = append(byTenant[p.tenant], p)
	}
	for tenant, list := range byTenant {
		a.write(tenant, list)
		for _, p := range list {
			close(p.done)
		}
	}
}

// write spools one tenant's records in one write, once the backlog is
// under its cap or the trail is closing, retrying a failed write
// auditRetries times before the records are logged as lost.
func (a *auditor) write(tenant string, list []*pendingAudit) {
	recs := make([]store.AuditRecord, 0, len(list))
	spooled := make([]store.SpoolRecord, 0, len(list))
	for _, p := range list {
		sr, err := p.rec.SpoolRecord()
		if err != nil {
			a.lost(tenant, p.rec, err)
			continue
		}
		recs, spooled = append(recs, p.rec), append(spooled, sr)
	}
	a.indexer.waitForRoom(a.closing.Load)
	if a.file != nil {
		a.logRecords(tenant, recs)
		return
	}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), auditWriteLimit)
		err := a.store.Spool(ctx, tenant, spooled)
		cancel()
		if err == nil {
			a.stored.Add(int64(len(recs)))
			a.indexer.add(tenant, int64(len(recs)))
			return
		}
		if attempt == auditRetries {
			for _, r := range recs {
				a.lost(tenant, r, err)
			}
			return
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// logRecords appends records to the trail's log, retrying a failed write
// auditRetries times before they are logged as lost, and hands them to
// the converter.
func (a *auditor) logRecords(tenant string, recs []store.AuditRecord) {
	for attempt := 1; ; attempt++ {
		err := a.file.append(recs)
		if err == nil {
			a.stored.Add(int64(len(recs)))
			a.indexer.push(recs)
			return
		}
		if attempt == auditRetries {
			for _, r := range recs {
				a.lost(tenant, r, err)
			}
			return
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// lost logs a record that could not be stored, in full.
func (a *auditor) lost(tenant string, r store.AuditRecord, err error) {
	a.dropped.Add(1)
	a.log.Error("audit record not stored", zap.Error(err), zap.String("tenant", tenant), zap.String("request_id", r.RequestID),
		zap.Time("at", time.Unix(0, r.At)), zap.String("method", r.Method), zap.String("path", r.Path), zap.Int("status", r.Status),
		zap.String("subject", r.Subject), zap.String("client_id", r.ClientID), zap.String("type", r.Type), zap.String("id", r.ID))
}

// auditRecord is what is known of one request once it is answered.
type auditRecord struct {
	method, path string
}

// interaction names the FHIR interaction (restful-interaction code) and
// the AuditEvent action (C, R, U, D, E) of the request.
func (r auditRecord) interaction() (string, string) {
	segs := strings.Split(strings.Trim(strings.TrimPrefix(r.path, "/fhir/r4"), "/"), "/")
	shape := shapeOf(segs)
	if !strings.HasPrefix(r.path, "/fhir/r4") {
		shape = "rest"
	}
	switch {
	case shape == "rest" || strings.HasPrefix(r.path, "/oauth2"):
		return "", map[string]string{http.MethodGet: "R", http.MethodPut: "U", http.MethodPost: "E", http.MethodDelete: "D"}[r.method]
	case strings.HasPrefix(segs[len(segs)-1], "$"):
		return "operation", "E" // $validate, $everything, $populate, $expand…: none writes
	case shape == "" && r.method == http.MethodPost:
		return "batch", "E"
	case strings.HasSuffix(shape, "_history") || shape == "_history":
		return map[int]string{1: "history-system", 2: "history-type", 3: "history-instance"}[len(segs)], "R"
	case shape == "T/I/_history/V":
		return "vread", "R"
	}
	switch r.method {
	case http.MethodGet, http.MethodHead:
		if shape == "T/I" {
			return "read", "R"
		}
		return "search-type", "E"
	case http.MethodPost:
		if shape == "T/_search" {
			return "search-type", "E"
		}
		return "create", "C"
	case http.MethodPut:
		return "update", "U"
	case http.MethodPatch:
		return "patch", "U"
	case http.MethodDelete:
		return "delete", "D"
	}
	return "", "E"
}

// audit is the middleware form of recordAudit, for routes served by a
// handler chain (the REST interface).
func (s *Server) audit(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.recordAudit(c, start)
}

// recordAudit spools the audit record of an answered request whose tenant
// the host named, before the response ends. Requests for tenants that do
// not exist have no database to be recorded in and are skipped.
func (s *Server) recordAudit(c *gin.Context, start time.Time) {
	if s.auditor == nil || c.GetString(tenantKey) == "" {
		return
	}
	tenant := c.GetString(tenantKey)
	r := store.AuditRecord{
		Site: tenant, At: start.UnixNano(), RequestID: requestID(c),
		Method: c.Request.Method, Path: c.Request.URL.Path, Status: c.Writer.Status(),
		Address: c.ClientIP(),
	}
	if c.Request.Method == http.MethodGet || strings.HasSuffix(r.Path, "/_search") {
		r.Query = c.Request.URL.RawQuery
	}
	r.Type, r.ID = auditTarget(r.Path, c.Writer.Header().Get("Location"))
	r.Patient = auditPatient(r.Type, r.ID, r.Query)
	r.Interaction, r.Action = auditRecord{method: r.Method, path: r.Path}.interaction()
	if caller, ok := CallerFrom(c.Request.Context()); ok {
		r.Subject, r.Issuer, r.ClientID = caller.Principal.Subject, caller.Principal.Issuer, caller.Principal.ClientID
	} else if id := c.GetString(auditClientKey); id != "" { // a client that authenticated at the token endpoint
		r.Subject, r.ClientID = id, id
	} else if exists, err := s.tenants.exists(context.WithoutCancel(c.Request.Context()), tenant, s.store.TenantExists); err != nil || !exists {
		return
	}
	s.auditor.record(tenant, r)
}

// auditPatient is the id of the patient a request concerned: the Patient
// it addressed, or the one a search was limited to (patient=, subject=).
func auditPatient(typ, id, query string) string {
	if typ == "Patient" && id != "" {
		return id
	}
	if query == "" {
		return ""
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return ""
	}
	for _, key := range []string{"patient", "subject", "subject:Patient", "patient:Patient"} {
		v := strings.TrimPrefix(values.Get(key), "Patient/")
		if v != "" && !strings.ContainsAny(v, "/,|:") && store.ValidateID(v) == nil {
			return v
		}
	}
	return ""
}

// auditTarget is the resource type and id a FHIR request addressed; a
// create's id comes from its Location.
func auditTarget(path, location string) (string, string) {
	rest, ok := strings.CutPrefix(path, "/fhir/r4/")
	if !ok {
		return "", ""
	}
	segs := strings.Split(rest, "/")
	if !isResourceType(segs[0]) {
		return "", ""
	}
	if len(segs) > 1 && !strings.HasPrefix(segs[1], "_") && !strings.HasPrefix(segs[1], "$") {
		return segs[0], segs[1]
	}
	prefix := "/fhir/r4/" + segs[0] + "/"
	if i := strings.Index(location, prefix); i >= 0 {
		id, _, _ := strings.Cut(location[i+len(prefix):], "/")
		return segs[0], id
	}
	return segs[0], ""
}
