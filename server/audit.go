package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/store"
)

// Audit trail tuning: how many records wait at most, how many are written
// at once and how long a record waits for others to join its write.
const (
	auditQueue      = 10000
	auditBatch      = 200
	auditLinger     = 500 * time.Millisecond
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

// auditor writes audit records as AuditEvent resources into each tenant's
// database, in the background and in batches. Close drains the queue, so
// a clean shutdown loses no record; records the database refuses are
// logged in full at error level instead.
type auditor struct {
	store *store.Store
	log   *zap.Logger
	queue chan auditRecord
	done  chan struct{}
	once  sync.Once
}

func newAuditor(st *store.Store, log *zap.Logger) *auditor {
	a := &auditor{store: st, log: log, queue: make(chan auditRecord, auditQueue), done: make(chan struct{})}
	go a.run()
	return a
}

// add queues a record; when the queue is full it waits, so that the trail
// slows requests down rather than dropping records.
func (a *auditor) add(r auditRecord) {
	a.queue <- r
}

// close stops taking records and waits until every queued one is written
// or ctx ends.
func (a *auditor) close(ctx context.Context) error {
	a.once.Do(func() { close(a.queue) })
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return errors.New("audit trail: shutdown ended before every record was written")
	}
}

// run batches records until the queue is closed and drained.
func (a *auditor) run() {
	defer close(a.done)
	var pending []auditRecord
	timer := time.NewTimer(auditLinger)
	defer timer.Stop()
	for {
		select {
		case r, ok := <-a.queue:
			if !ok {
				a.flush(pending)
				return
			}
			pending = append(pending, r)
			if len(pending) >= auditBatch {
				a.flush(pending)
				pending = pending[:0]
			}
		case <-timer.C:
			a.flush(pending)
			pending = pending[:0]
			timer.Reset(auditLinger)
		}
	}
}

// flush writes records grouped by tenant, one batch per tenant.
func (a *auditor) flush(records []auditRecord) {
	byTenant := map[string][]store.Op{}
	owners := map[string][]auditRecord{}
	for _, r := range records {
		body, err := json.Marshal(r.auditEvent())
		if err != nil {
			a.lost(r, err)
			continue
		}
		byTenant[r.tenant] = append(byTenant[r.tenant], store.Op{Method: http.MethodPost, Type: "AuditEvent", Body: body})
		owners[r.tenant] = append(owners[r.tenant], r)
	}
	for tenant, ops := range byTenant {
		a.write(tenant, ops, owners[tenant])
	}
}

// write stores one tenant's events: all in one transaction (a handful of
// database writes for the lot), else one by one, retrying those that fail.
func (a *auditor) write(tenant string, ops []store.Op, records []auditRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), auditWriteLimit)
	_, err := a.store.Transaction(ctx, tenant, ops)
	cancel()
	if err == nil {
		return
	}
	for attempt := 0; len(ops) > 0; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), auditWriteLimit)
		_, errs := a.store.Batch(ctx, tenant, ops)
		cancel()
		var retry []store.Op
		var retryRecords []auditRecord
		for i, err := range errs {
			switch {
			case err == nil:
			case attempt+1 < auditRetries && !errors.Is(err, store.ErrTenantNotFound):
				retry, retryRecords = append(retry, ops[i]), append(retryRecords, records[i])
			default:
				a.lost(records[i], err)
			}
		}
		ops, records = retry, retryRecords
		if len(ops) > 0 {
			time.Sleep(time.Duration(attempt+1) * time.Second)
		}
	}
}

// lost logs a record that could not be stored, in full.
func (a *auditor) lost(r auditRecord, err error) {
	a.log.Error("audit record not stored", zap.Error(err), zap.String("tenant", r.tenant), zap.String("request_id", r.requestID),
		zap.Time("at", r.at), zap.String("method", r.method), zap.String("path", r.path), zap.Int("status", r.status),
		zap.String("subject", r.subject), zap.String("client_id", r.clientID), zap.String("type", r.typ), zap.String("id", r.id))
}

// auditEvent is the FHIR AuditEvent of a record.
func (r auditRecord) auditEvent() map[string]any {
	interaction, action := r.interaction()
	who := map[string]any{"display": "anonymous"}
	if r.subject != "" {
		who = map[string]any{"identifier": map[string]any{"system": r.issuerOrLocal(), "value": r.subject}, "display": r.subject}
	}
	agent := map[string]any{"who": who, "requestor": true}
	if r.subject != "" {
		agent["name"] = r.subject
	}
	if r.clientID != "" {
		agent["altId"] = r.clientID
	}
	if r.address != "" {
		agent["network"] = map[string]any{"address": r.address, "type": "2"}
	}
	entity := map[string]any{
		"type":        map[string]any{"system": "http://terminology.hl7.org/CodeSystem/audit-entity-type", "code": "2", "display": "System Object"},
		"description": r.method + " " + r.path + " (request " + r.requestID + ")",
	}
	if ref := r.reference(); ref != "" {
		entity["what"] = map[string]any{"reference": ref}
	}
	if r.query != "" {
		entity["query"] = base64.StdEncoding.EncodeToString([]byte(r.query))
	}
	ev := map[string]any{
		"resourceType": "AuditEvent",
		"type":         map[string]any{"system": "http://terminology.hl7.org/CodeSystem/audit-event-type", "code": "rest", "display": "RESTful Operation"},
		"action":       action,
		"recorded":     r.at.UTC().Format(store.InstantLayout),
		"outcome":      outcomeCode(r.status),
		"outcomeDesc":  statusLine(r.status),
		"agent":        []any{agent},
		"source": map[string]any{
			"site":     r.tenant,
			"observer": map[string]any{"display": "fhirstore"},
			"type":     []any{map[string]any{"system": "http://terminology.hl7.org/CodeSystem/security-source-type", "code": "4", "display": "Application Server"}},
		},
		"entity": []any{entity},
	}
	if interaction != "" {
		ev["subtype"] = []any{map[string]any{"system": "http://hl7.org/fhir/restful-interaction", "code": interaction}}
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
	case strings.HasSuffix(shape, "$validate") || strings.HasSuffix(shape, "$everything"):
		return "operation", "E"
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
