package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.mongodb.org/mongo-driver/v2/event"

	"fhirstore/store"
)

// Metrics holds the Prometheus series of one server in a registry of its
// own, so two servers in one process (tests, load --direct) never mix
// their counts. Labels carry route templates, methods, statuses, resource
// types and tenants — never an id or anything a client typed freely.
type Metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	dbLatency     *prometheus.HistogramVec
	bundleEntries *prometheus.CounterVec
	handler       http.Handler
	// store is the store whose transaction recoveries are reported; the
	// metrics exist before the store opens (the command monitor goes into
	// its client options), so the server attaches it later.
	store atomic.Pointer[store.Store]
	// audit is the audit trail whose records are counted, when it is on.
	audit atomic.Pointer[auditor]
}

// NewMetrics makes the series, with Go runtime and process collectors.
// Pass CommandMonitor to store.Options.Monitor and the Metrics to
// Config.Metrics.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fhirstore_http_requests_total",
		Help: "HTTP requests served, by route template, resource type, method, status and tenant.",
	}, []string{"route", "type", "method", "status", "tenant"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fhirstore_http_request_duration_seconds",
		Help:    "Time to serve an HTTP request, by route template, resource type, method, status and tenant.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "type", "method", "status", "tenant"})
	m.dbLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fhirstore_db_command_duration_seconds",
		Help:    "Time of a database command as the MongoDB driver saw it, by command and outcome (ok or error).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"command", "outcome"})
	m.bundleEntries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fhirstore_bundle_entries_total",
		Help: "Entries of batch and transaction Bundles that were processed (answered 200), by bundle type, entry method and resource type.",
	}, []string{"bundle_type", "method", "type"})
	m.reg.MustRegister(m.requests, m.latency, m.dbLatency, m.bundleEntries,
		recoveryCollector{m},
		auditCollector{m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	return m
}

// Registry is where the series live, for callers that add their own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the series in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// CommandMonitor times every command the store sends to the database; it
// is nil for nil Metrics, which store.Options takes as no monitor.
func (m *Metrics) CommandMonitor() *event.CommandMonitor {
	if m == nil {
		return nil
	}
	observe := func(name string, d time.Duration, outcome string) {
		m.dbLatency.WithLabelValues(dbCommandLabel(name), outcome).Observe(d.Seconds())
	}
	return &event.CommandMonitor{
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			observe(e.CommandName, e.Duration, "ok")
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			observe(e.CommandName, e.Duration, "error")
		},
	}
}

// dbCommands are the command names kept as label values; the driver sends
// others rarely, and they share "other".
var dbCommands = map[string]bool{
	"find": true, "getMore": true, "insert": true, "update": true, "delete": true,
	"findAndModify": true, "aggregate": true, "count": true, "distinct": true,
	"bulkWrite": true, "createIndexes": true, "listIndexes": true, "dropIndexes": true,
	"listCollections": true, "listDatabases": true, "create": true, "drop": true,
	"dropDatabase": true, "killCursors": true, "endSessions": true, "ping": true,
}

func dbCommandLabel(name string) string {
	if dbCommands[name] {
		return name
	}
	return "other"
}

var (
	recoveryDesc = prometheus.NewDesc("fhirstore_txn_recoveries_total",
		"Unfinished transactions the journal recovery finished since the process started, by outcome (rolled_forward, rolled_back), "+
			"and committed ones it gave up (quarantined) or an operator undid (abandoned).",
		[]string{"outcome"}, nil)
	applyFailuresDesc = prometheus.NewDesc("fhirstore_txn_apply_failures_total",
		"Failed attempts to apply a committed transaction (the database refused its current rows) since the process started.",
		nil, nil)
	heldDesc = prometheus.NewDesc("fhirstore_txn_held",
		"Committed transactions not applied, whose resources answer 5xx, by state: retrying (with a backoff) or quarantined (until fhirstore recover).",
		[]string{"state"}, nil)
)

// recoveryCollector reports the store's recovery counts at each scrape.
type recoveryCollector struct{ m *Metrics }

func (rc recoveryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- recoveryDesc
	ch <- applyFailuresDesc
	ch <- heldDesc
}

func (rc recoveryCollector) Collect(ch chan<- prometheus.Metric) {
	var r store.RecoveryReport
	var retrying, quarantined int
	if st := rc.m.store.Load(); st != nil {
		r = st.Recovered()
		retrying, quarantined = st.HeldTransactions()
	}
	for _, o := range []struct {
		outcome string
		n       int
	}{{"rolled_forward", r.RolledForward}, {"rolled_back", r.RolledBack}, {"quarantined", r.Quarantined}, {"abandoned", r.Abandoned}} {
		ch <- prometheus.MustNewConstMetric(recoveryDesc, prometheus.CounterValue, float64(o.n), o.outcome)
	}
	ch <- prometheus.MustNewConstMetric(applyFailuresDesc, prometheus.CounterValue, float64(r.Failed))
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(retrying), "retrying")
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(quarantined), "quarantined")
}

var (
	auditRecordsDesc = prometheus.NewDesc("fhirstore_audit_records_total",
		"Audit records since the process started, by outcome: spooled (logged durably before the response ended), stored as audit rows (read as AuditEvents), or lost (the database refused them; each is logged in full at error level).",
		[]string{"outcome"}, nil)
	auditQueueDesc = prometheus.NewDesc("fhirstore_audit_queue_length",
		"Audit records waiting to be written.", nil, nil)
	auditWaitsDesc = prometheus.NewDesc("fhirstore_audit_queue_waits_total",
		"Requests that waited for room in the full audit queue before they ended (the trail slows requests down rather than dropping records).",
		nil, nil)
	auditWaitedDesc = prometheus.NewDesc("fhirstore_audit_queue_wait_seconds_total",
		"Time requests spent waiting for room in the full audit queue.", nil, nil)
	auditSpooledDesc = prometheus.NewDesc("fhirstore_audit_spooled_records",
		"Audit records logged and not yet stored as audit rows (the backlog: past --audit-backlog of them, requests wait for room).", nil, nil)
)

// auditCollector reports the audit trail's counts at each scrape.
type auditCollector struct{ m *Metrics }

func (ac auditCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- auditRecordsDesc
	ch <- auditQueueDesc
	ch <- auditWaitsDesc
	ch <- auditWaitedDesc
	ch <- auditSpooledDesc
}

func (ac auditCollector) Collect(ch chan<- prometheus.Metric) {
	a := ac.m.audit.Load()
	if a == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(auditRecordsDesc, prometheus.CounterValue, float64(a.stored.Load()), "spooled")
	ch <- prometheus.MustNewConstMetric(auditRecordsDesc, prometheus.CounterValue, float64(a.indexer.indexed.Load()), "stored")
	ch <- prometheus.MustNewConstMetric(auditRecordsDesc, prometheus.CounterValue, float64(a.dropped.Load()+a.indexer.lost.Load()), "lost")
	ch <- prometheus.MustNewConstMetric(auditSpooledDesc, prometheus.GaugeValue, float64(a.indexer.spooled.Load()))
	ch <- prometheus.MustNewConstMetric(auditQueueDesc, prometheus.GaugeValue, float64(len(a.queue)))
	ch <- prometheus.MustNewConstMetric(auditWaitsDesc, prometheus.CounterValue, float64(a.waits.Load()))
	ch <- prometheus.MustNewConstMetric(auditWaitedDesc, prometheus.CounterValue, time.Duration(a.waited.Load()).Seconds())
}

// metricsHandler serves /metrics without a token, like /healthz: the
// series hold no ids or personal data. Config.Metrics nil serves nothing.
func (s *Server) metricsHandler(c *gin.Context) {
	m := s.cfg.Metrics
	if m == nil {
		s.abort(c, fail(http.StatusNotFound, "not-found", "metrics are turned off", ""))
		return
	}
	m.store.Store(s.store)
	m.Handler().ServeHTTP(c.Writer, c.Request)
}

// observe is the middleware that counts and times each request once the
// handlers are done with it.
func (s *Server) observe(c *gin.Context) {
	m := s.cfg.Metrics
	if m == nil {
		c.Next()
		return
	}
	start := time.Now()
	route, typ := routeOf(c.Request.URL.Path)
	c.Next()
	if strings.HasPrefix(route, restPrefix) {
		route = restRoute(c.Request.Pattern)
	}
	tenant := ""
	if caller, ok := CallerFrom(c.Request.Context()); ok {
		tenant = caller.Tenant // signed into the token: not a free-form Host header
	}
	labels := []string{route, typ, methodLabel(c.Request.Method), strconv.Itoa(c.Writer.Status()), tenant}
	m.requests.WithLabelValues(labels...).Inc()
	m.latency.WithLabelValues(labels...).Observe(time.Since(start).Seconds())
}

// countBundle counts the entries of a processed batch or transaction by
// entry method and the resource type they address.
func (m *Metrics) countBundle(bundleType string, entries []*entry) {
	if m == nil {
		return
	}
	for _, e := range entries {
		if e == nil || e.in.Request == nil {
			continue
		}
		typ := ""
		if e.op != nil {
			typ = e.op.Type
		} else {
			typ, _, _ = strings.Cut(strings.TrimPrefix(e.read, "/"), "/")
			typ, _, _ = strings.Cut(typ, "?")
		}
		m.bundleEntries.WithLabelValues(bundleType, methodLabel(e.in.Request.Method), typeLabel(typ)).Inc()
	}
}

// routeOf names the route template of a path and the resource type it
// addresses: FHIR paths by their shape ("/fhir/r4/{type}/{id}"), with the
// type as a separate label; ids never appear.
func routeOf(path string) (route, typ string) {
	switch path {
	case "/healthz", "/readyz", "/metrics", "/oauth2/token", "/oauth2/jwks", "/fhir/r4", "/fhir/r4/",
		"/fhir/r4" + smartConfigPath:
		return strings.TrimSuffix(path, "/"), ""
	}
	if strings.HasPrefix(path, restPrefix+"/") {
		return restPrefix, "" // refined by the pattern the REST mux matched
	}
	rest, ok := strings.CutPrefix(path, "/fhir/r4/")
	if !ok {
		return "other", ""
	}
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	if len(segs) == 1 && (segs[0] == "metadata" || segs[0] == "_history") {
		return "/fhir/r4/" + segs[0], ""
	}
	shape := shapeOf(segs)
	if _, ok := fhirRoutes[shape]; !ok {
		return "/fhir/r4/{unknown}", ""
	}
	parts := strings.Split(shape, "/")
	for i, p := range parts {
		switch p {
		case "T":
			parts[i] = "{type}"
		case "I":
			parts[i] = "{id}"
		case "V":
			parts[i] = "{vid}"
		case "T2":
			parts[i] = "{compartment_type}"
		}
	}
	if segs[0] != "_history" {
		typ = typeLabel(segs[0])
	}
	return "/fhir/r4/" + strings.Join(parts, "/"), typ
}

// restRoute turns the REST mux's pattern ("GET /api/v1/patients/{patientId}")
// into a route label; requests no pattern matched share one.
func restRoute(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok {
		pattern = path
	}
	if !strings.HasPrefix(pattern, restPrefix+"/") {
		return restPrefix + "/{unknown}"
	}
	return pattern
}

// typeLabel keeps resource type names and collapses anything else.
func typeLabel(name string) string {
	if isResourceType(name) {
		return name
	}
	return "unknown"
}

// methodLabel keeps the HTTP methods the server knows and collapses others.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
