package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"fhirstore/store"
)

// Audit trail tuning: how many records wait at most in memory, how many
// writers spool them, how many records one spool write takes at most and
// how long a record waits for others to join its write (see auditindex.go
// for what becomes of spooled records).
const (
	auditQueue      = 10000
	auditWriters    = 2
	auditBatch      = 200
	auditLinger     = 100 * time.Millisecond
	auditRetries    = 3
	auditWriteLimit = 30 * time.Second
)

// auditClientKey holds the id of a client that authenticated at the token
// endpoint, for its audit record.
const auditClientKey = "fhirstore.auditClient"

// auditRecord is what is known of one request once it is answered.
type auditRecord struct {
	tenant    string
	at        time.Time
	requestID string
	method    string
	path      string
	query     string
	status    int
	typ, id   string
	subject   string
	issuer    string
	clientID  string
	address   string
}

// auditor spools audit records into each tenant's database, in the
// background and in batches, for its indexer to turn into AuditEvents.
// Close drains the queue, so a clean shutdown loses no record; records
// the database refuses are logged in full at error level instead.
//
// Two writers take records from the queue: while one waits for the
// database, the other encodes its batch. A request waits only when the
// queue is full, which the metrics count
// (fhirstore_audit_queue_waits_total).
type auditor struct {
	store   *store.Store
	log     *zap.Logger
	indexer *auditIndexer
	queue   chan auditRecord
	wg      sync.WaitGroup
	done    chan struct{}
	once    sync.Once
	closing atomic.Bool

	stored, dropped, waits atomic.Int64
	waited                 atomic.Int64 // nanoseconds requests waited for room
}

func newAuditor(st *store.Store, log *zap.Logger, indexer *auditIndexer) *auditor {
	a := &auditor{store: st, log: log, indexer: indexer, queue: make(chan auditRecord, auditQueue), done: make(chan struct{})}
	for range auditWriters {
		a.wg.Add(1)
		go a.run()
	}
	go func() { a.wg.Wait(); close(a.done) }()
	return a
}

// add queues a record; when the queue is full it waits, so that the trail
// slows requests down rather than dropping records.
func (a *auditor) add(r auditRecord) {
	select {
	case a.queue <- r:
		return
	default:
	}
	start := time.Now()
	a.queue <- r
	a.waits.Add(1)
	a.waited.Add(int64(time.Since(start)))
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
// the records that arrive within auditLinger of its first, or auditBatch
// of them, whichever comes first.
func (a *auditor) run() {
	defer a.wg.Done()
	timer := time.NewTimer(auditLinger)
	defer timer.Stop()
	for {
		first, ok := <-a.queue
		if !ok {
			return
		}
		batch := []auditRecord{first}
		timer.Reset(auditLinger)
	gather:
		for len(batch) < auditBatch {
			select {
			case r, ok := <-a.queue:
				if !ok {
					break gather
				}
				batch = append(batch, r)
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		a.flush(batch)
	}
}

// flush spools records grouped by tenant, one write per tenant.
func (a *auditor) flush(records []auditRecord) {
	spooled := map[string][]store.SpoolRecord{}
	owners := map[string][]auditRecord{}
	for _, r := range records {
		rec, err := r.spoolRecord()
		if err != nil {
			a.lost(r, err)
			continue
		}
		spooled[r.tenant] = append(spooled[r.tenant], rec)
		owners[r.tenant] = append(owners[r.tenant], r)
	}
	for tenant, list := range spooled {
		a.write(tenant, list, owners[tenant])
	}
}

// write spools one tenant's records in one write, once the backlog is
// under its cap or the trail is closing (the queue is spooled whole then).
func (a *auditor) write(tenant string, recs []store.SpoolRecord, records []auditRecord) {
	a.indexer.waitForRoom(a.closing.Load)
	a.spool(tenant, recs, records)
}

// spool stores records in tenant's spool in one write, retrying a failed
// write auditRetries times before the records are logged as lost.
func (a *auditor) spool(tenant string, recs []store.SpoolRecord, records []auditRecord) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), auditWriteLimit)
		err := a.store.Spool(ctx, tenant, recs)
		cancel()
		if err == nil {
			a.stored.Add(int64(len(recs)))
			a.indexer.add(tenant, int64(len(recs)))
			return
		}
		if attempt == auditRetries {
			for _, r := range records {
				a.lost(r, err)
			}
			return
		}
		time.Sleep(time.Duration(attempt) * time.Second)
	}
}

// lost logs a record that could not be stored, in full.
func (a *auditor) lost(r auditRecord, err error) {
	a.dropped.Add(1)
	a.log.Error("audit record not stored", zap.Error(err), zap.String("tenant", r.tenant), zap.String("request_id", r.requestID),
		zap.Time("at", r.at), zap.String("method", r.method), zap.String("path", r.path), zap.Int("status", r.status),
		zap.String("subject", r.subject), zap.String("client_id", r.clientID), zap.String("type", r.typ), zap.String("id", r.id))
}

// spoolRecord is r as it waits in its tenant's spool, keyed by a
// time-ordered UUID that becomes its AuditEvent's id.
func (r auditRecord) spoolRecord() (store.SpoolRecord, error) {
	key, err := uuid.NewV7()
	if err != nil {
		return store.SpoolRecord{}, fmt.Errorf("audit record key: %w", err)
	}
	data, err := r.spoolData()
	if err != nil {
		return store.SpoolRecord{}, fmt.Errorf("encode audit record: %w", err)
	}
	return store.SpoolRecord{Key: key.String(), Data: data}, nil
}

// The AuditEvent of a record, as JSON: typed, so that the trail's
// writers spend little time on it (a map marshalled sorts its keys).
type (
	auditEventJSON struct {
		ResourceType string        `json:"resourceType"`
		Type         codingJSON    `json:"type"`
		Subtype      []codingJSON  `json:"subtype,omitempty"`
		Action       string        `json:"action"`
		Recorded     string        `json:"recorded"`
		Outcome      string        `json:"outcome"`
		OutcomeDesc  string        `json:"outcomeDesc"`
		Agent        []auditAgent  `json:"agent"`
		Source       auditSource   `json:"source"`
		Entity       []auditEntity `json:"entity"`
	}
	codingJSON struct {
		System  string `json:"system"`
		Code    string `json:"code"`
		Display string `json:"display,omitempty"`
	}
	auditAgent struct {
		Who       auditWho      `json:"who"`
		AltID     string        `json:"altId,omitempty"`
		Name      string        `json:"name,omitempty"`
		Requestor bool          `json:"requestor"`
		Network   *auditNetwork `json:"network,omitempty"`
	}
	auditWho struct {
		Identifier *identifierJSON `json:"identifier,omitempty"`
		Display    string          `json:"display"`
	}
	identifierJSON struct {
		System string `json:"system"`
		Value  string `json:"value"`
	}
	auditNetwork struct {
		Address string `json:"address"`
		Type    string `json:"type"`
	}
	auditSource struct {
		Site     string       `json:"site"`
		Observer displayJSON  `json:"observer"`
		Type     []codingJSON `json:"type"`
	}
	displayJSON struct {
		Display string `json:"display"`
	}
	auditEntity struct {
		What        *referenceJSON `json:"what,omitempty"`
		Type        codingJSON     `json:"type"`
		Description string         `json:"description"`
		Query       string         `json:"query,omitempty"`
	}
	referenceJSON struct {
		Reference string `json:"reference"`
	}
)

// Codings every AuditEvent of the trail carries.
var (
	auditRESTType     = codingJSON{System: "http://terminology.hl7.org/CodeSystem/audit-event-type", Code: "rest", Display: "RESTful Operation"}
	auditEntityObject = codingJSON{System: "http://terminology.hl7.org/CodeSystem/audit-entity-type", Code: "2", Display: "System Object"}
	auditServerSource = []codingJSON{{System: "http://terminology.hl7.org/CodeSystem/security-source-type", Code: "4", Display: "Application Server"}}
)

// auditEvent is the FHIR AuditEvent of a record.
func (r auditRecord) auditEvent() auditEventJSON {
	interaction, action := r.interaction()
	agent := auditAgent{Who: auditWho{Display: "anonymous"}, Requestor: true, AltID: r.clientID}
	if r.subject != "" {
		agent.Who = auditWho{Identifier: &identifierJSON{System: r.issuerOrLocal(), Value: r.subject}, Display: r.subject}
		agent.Name = r.subject
	}
	if r.address != "" {
		agent.Network = &auditNetwork{Address: r.address, Type: "2"}
	}
	entity := auditEntity{Type: auditEntityObject, Description: r.method + " " + r.path + " (request " + r.requestID + ")"}
	if ref := r.reference(); ref != "" {
		entity.What = &referenceJSON{Reference: ref}
	}
	if r.query != "" {
		entity.Query = base64.StdEncoding.EncodeToString([]byte(r.query))
	}
	ev := auditEventJSON{
		ResourceType: "AuditEvent",
		Type:         auditRESTType,
		Action:       action,
		Recorded:     r.at.UTC().Format(store.InstantLayout),
		Outcome:      outcomeCode(r.status),
		OutcomeDesc:  statusLine(r.status),
		Agent:        []auditAgent{agent},
		Source:       auditSource{Site: r.tenant, Observer: displayJSON{Display: "fhirstore"}, Type: auditServerSource},
		Entity:       []auditEntity{entity},
	}
	if interaction != "" {
		ev.Subtype = []codingJSON{{System: "http://hl7.org/fhir/restful-interaction", Code: interaction}}
	}
	return ev
}

func (r auditRecord) issuerOrLocal() string {
	if r.issuer != "" {
		return r.issuer
	}
	return "urn:fhirstore:subject"
}

// reference is the resource or type the request addressed: Type/id or Type.
func (r auditRecord) reference() string {
	switch {
	case r.typ != "" && r.id != "":
		return r.typ + "/" + r.id
	default:
		return ""
	}
}

// outcomeCode is the AuditEvent outcome of an HTTP status: 0 success, 4
// minor failure (the client's), 8 serious failure (the server's).
func outcomeCode(status int) string {
	switch {
	case status < 400:
		return "0"
	case status < 500:
		return "4"
	default:
		return "8"
	}
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

// recordAudit queues the audit record of an answered request whose tenant
// the host named. Requests for tenants that do not exist have no database
// to be recorded in and are skipped.
func (s *Server) recordAudit(c *gin.Context, start time.Time) {
	if s.auditor == nil || c.GetString(tenantKey) == "" {
		return
	}
	r := auditRecord{
		tenant: c.GetString(tenantKey), at: start, requestID: requestID(c),
		method: c.Request.Method, path: c.Request.URL.Path, status: c.Writer.Status(),
		address: c.ClientIP(),
	}
	if c.Request.Method == http.MethodGet || strings.HasSuffix(r.path, "/_search") {
		r.query = c.Request.URL.RawQuery
	}
	r.typ, r.id = auditTarget(r.path, c.Writer.Header().Get("Location"))
	if caller, ok := CallerFrom(c.Request.Context()); ok {
		r.subject, r.issuer, r.clientID = caller.Principal.Subject, caller.Principal.Issuer, caller.Principal.ClientID
	} else if id := c.GetString(auditClientKey); id != "" { // a client that authenticated at the token endpoint
		r.subject, r.clientID = id, id
	} else if exists, err := s.tenants.exists(context.WithoutCancel(c.Request.Context()), r.tenant, s.store.TenantExists); err != nil || !exists {
		return
	}
	s.auditor.add(r)
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
