// Package server is the FHIR R4 HTTP interface: routing, middleware (request
// id, access log, recovery, tenant by host, bearer auth, content
// negotiation), the FHIR interactions and their OperationOutcome errors.
package server

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/server/bulkexport"
	"fhirstore/server/graphql"
	"fhirstore/server/viewsql"
	"fhirstore/store"
)

// Config configures the HTTP interface.
type Config struct {
	// BaseDomain is the domain under which the first host label names the tenant.
	BaseDomain string
	// DefaultTenant serves hosts without a tenant label; empty disables it.
	DefaultTenant string
	// MaxBodyBytes bounds request bodies (413 beyond).
	MaxBodyBytes int64
	// TenantCacheTTL is how long a tenant's existence is remembered.
	TenantCacheTTL time.Duration
	// Version is reported in the CapabilityStatement.
	Version string
	// Registry parses searches; nil disables search.
	Registry *search.Registry
	// MaxBundleEntries bounds the entries of a batch or transaction (413 beyond).
	MaxBundleEntries int
	// Audit, when set, records every FHIR and REST request as an AuditEvent
	// in its tenant's database (see Server.Close).
	Audit bool
	// AuditBacklog is how many spooled audit records may wait to become
	// audit rows before the trail spools no faster than it converts
	// (requests wait for room); 0 means DefaultAuditBacklog.
	AuditBacklog int
	// AuditSpoolDir, when set, is where audit records wait to become
	// audit rows: a log appended to before each request ends (auditlog.go);
	// otherwise they wait in each tenant's spool.
	AuditSpoolDir string
	// AuditRetention, when positive, is how long the trail's records are
	// kept: older ones are purged at the start and every hour.
	AuditRetention time.Duration
	// REST, when set, serves /api/v1 behind the same tenant and token checks
	// as FHIR; it finds the caller with CallerFrom.
	REST http.Handler
	// SubscriptionChannels, when set, are the Subscription channel types
	// the server delivers; the CapabilityStatement lists them.
	SubscriptionChannels []string
	// Metrics, when set, counts and times every request and serves the
	// series at /metrics (no token needed); nil turns both off.
	Metrics *Metrics
	// Export, when set, serves Bulk Data $export with its jobs, and
	// $viewdefinition-export with the same jobs.
	Export *bulkexport.Manager
	// SQL bounds each $sqlquery-run (zero fields: viewsql's defaults).
	SQL viewsql.Limits
	// GraphQL bounds each $graphql query (zero fields: the defaults).
	GraphQL graphql.Limits
	// Topics, when set, serves topic-based subscriptions: $status,
	// $events, $get-ws-binding-token, the websocket channel, and the
	// topics in the CapabilityStatement.
	Topics TopicService
}

// restPrefix is where the REST interface is mounted.
const restPrefix = "/api/v1"

// DefaultMaxBodyBytes is the request body limit when none is configured.
const DefaultMaxBodyBytes = 16 << 20

// Server serves FHIR over HTTP for every tenant of a store.
type Server struct {
	cfg     Config
	store   *store.Store
	auth    auth.Authenticator
	log     *zap.Logger
	tenants *tenantCache
	engine  *gin.Engine
	auditor *auditor

	activity *activity     // when requests last started or ended
	indexer  *auditIndexer // converts spooled audit records, purges old ones
	auditLog *auditLog     // where audit records wait (Config.AuditSpoolDir), if set
}

// New builds the HTTP handler tree.
func New(cfg Config, st *store.Store, authn auth.Authenticator, logger *zap.Logger) *Server {
	if cfg.BaseDomain == "" {
		cfg.BaseDomain = "localhost"
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxBundleEntries <= 0 {
		cfg.MaxBundleEntries = DefaultMaxBundleEntries
	}
	if cfg.TenantCacheTTL == 0 {
		cfg.TenantCacheTTL = 5 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.AuditBacklog <= 0 {
		cfg.AuditBacklog = DefaultAuditBacklog
	}
	s := &Server{cfg: cfg, store: st, auth: authn, log: logger, tenants: newTenantCache(cfg.TenantCacheTTL), activity: &activity{}}
	var left []store.AuditRecord
	if cfg.AuditSpoolDir != "" {
		var err error
		if s.auditLog, left, err = openAuditLog(cfg.AuditSpoolDir, logger); err != nil {
			logger.Error("audit trail: its log cannot be opened; records are spooled in the tenants' databases", zap.Error(err))
		}
	}
	s.indexer = newAuditIndexer(st, logger, int64(cfg.AuditBacklog), cfg.AuditRetention, s.auditLog, left) // also for records spooled before a start with the trail off
	if cfg.Audit {
		s.auditor = newAuditor(st, logger, s.indexer, s.auditLog)
		if cfg.Metrics != nil {
			cfg.Metrics.audit.Store(s.auditor)
		}
	}
	s.engine = s.routes()
	return s
}

// Close spools the audit records still queued and converts the spooled
// ones into audit rows, waiting at most until ctx ends (records left
// spooled are converted after the next start); call it after the HTTP
// server has shut down.
func (s *Server) Close(ctx context.Context) error {
	var err error
	if s.auditor != nil {
		err = s.auditor.close(ctx)
	}
	s.indexer.close(ctx)
	if s.auditLog != nil {
		err = errors.Join(err, s.auditLog.close())
	}
	return err
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.activity.touch()
	defer s.activity.touch()
	s.engine.ServeHTTP(w, r)
}

func (s *Server) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = false
	e.Use(s.requestID, s.accessLog, s.observe, s.recovery)
	e.Use(s.withEndpoint)
	e.POST("/oauth2/token", s.audit, s.oauthToken)
	e.GET("/oauth2/jwks", s.oauthJWKS)
	e.GET("/healthz", s.healthz)
	e.GET("/metrics", s.metricsHandler)
	e.GET("/readyz", s.readyz)
	e.Any("/fhir/r4/*path", s.fhirFormat, s.fhir)
	e.Any("/fhir/r4", s.fhirFormat, s.fhir) // the base itself: POST of a batch or transaction
	if s.cfg.REST != nil {
		e.Any(restPrefix+"/*path", s.tenant, s.audit, s.authenticate, gin.WrapH(s.cfg.REST))
	}
	if s.cfg.Topics != nil {
		e.GET(SubscriptionSocketPath, s.tenant, s.subscriptionSocket)
	}
	s.mountConsole(e)
	e.NoRoute(func(c *gin.Context) {
		s.abort(c, fail(http.StatusNotFound, "not-found", "no such endpoint: "+c.Request.URL.Path, ""))
	})
	return e
}

// fhirFormat rejects requests whose answer the client cannot read.
func (s *Server) fhirFormat(c *gin.Context) {
	if isExportFile(c.Param("path")) || isViewOperation(c.Param("path")) {
		return // ndjson or a table format, whatever Accept says
	}
	err := negotiate(c)
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusNotAcceptable && isBinaryRead(c) {
		// A Binary answers in its own content type, and one that does not
		// exist is a 404 whatever the client accepts: decided after the read.
		c.Set(binaryAcceptKey, c.GetHeader("Accept"))
		return
	}
	if err != nil {
		s.abort(c, err)
	}
}

// fhir serves the CapabilityStatement to anyone and everything else to
// authenticated callers of an existing tenant.
func (s *Server) fhir(c *gin.Context) {
	if c.Request.Method == http.MethodGet {
		switch c.Param("path") {
		case "/metadata":
			s.capabilities(c)
			return
		case smartConfigPath:
			s.smartConfiguration(c)
			return
		}
	}
	if s.tenant(c); c.IsAborted() {
		return
	}
	start := time.Now()
	if s.authenticate(c); !c.IsAborted() {
		s.dispatch(c)
	}
	s.recordAudit(c, start)
}

// route serves one interaction; segs are the path segments after /fhir/r4.
type route func(s *Server, c *gin.Context, segs []string)

// routes maps a path shape (see shapeOf) and method to its interaction.
var fhirRoutes = map[string]map[string]route{
	"": {
		http.MethodPost: func(s *Server, c *gin.Context, _ []string) { s.postBundle(c) },
		http.MethodGet:  func(s *Server, c *gin.Context, _ []string) { s.searchSystem(c) },
	},
	"_search":       {http.MethodPost: func(s *Server, c *gin.Context, _ []string) { s.searchSystem(c) }},
	reindexStatusOp: {http.MethodGet: func(s *Server, c *gin.Context, _ []string) { s.reindexStatus(c) }},
	"$validate":     {http.MethodPost: func(s *Server, c *gin.Context, _ []string) { s.validateOp(c, "", "") }},
	"_history":      {http.MethodGet: func(s *Server, c *gin.Context, _ []string) { s.history(c, "", "") }},
	"T": {
		http.MethodPost:   func(s *Server, c *gin.Context, g []string) { s.create(c, g[0]) },
		http.MethodGet:    func(s *Server, c *gin.Context, g []string) { s.searchType(c, g[0]) },
		http.MethodPut:    func(s *Server, c *gin.Context, g []string) { s.conditionalWrite(c, g[0], "") },
		http.MethodPatch:  func(s *Server, c *gin.Context, g []string) { s.conditionalWrite(c, g[0], "") },
		http.MethodDelete: func(s *Server, c *gin.Context, g []string) { s.conditionalWrite(c, g[0], "") },
	},
	"T/_search":  {http.MethodPost: func(s *Server, c *gin.Context, g []string) { s.searchType(c, g[0]) }},
	"T/_history": {http.MethodGet: func(s *Server, c *gin.Context, g []string) { s.history(c, g[0], "") }},
	"T/I": {
		http.MethodGet:    func(s *Server, c *gin.Context, g []string) { s.read(c, g[0], g[1]) },
		http.MethodPut:    func(s *Server, c *gin.Context, g []string) { s.update(c, g[0], g[1]) },
		http.MethodDelete: func(s *Server, c *gin.Context, g []string) { s.delete(c, g[0], g[1]) },
		http.MethodPatch:  func(s *Server, c *gin.Context, g []string) { s.conditionalWrite(c, g[0], g[1]) },
	},
	"T/$validate":     {http.MethodPost: func(s *Server, c *gin.Context, g []string) { s.validateOp(c, g[0], "") }},
	"T/I/$validate":   {http.MethodPost: func(s *Server, c *gin.Context, g []string) { s.validateOp(c, g[0], g[1]) }},
	"T/I/_history":    {http.MethodGet: func(s *Server, c *gin.Context, g []string) { s.history(c, g[0], g[1]) }},
	"T/I/_history/V":  {http.MethodGet: func(s *Server, c *gin.Context, g []string) { s.vread(c, g[0], g[1], g[3]) }},
	"T/I/T2":          {http.MethodGet: func(s *Server, c *gin.Context, g []string) { s.compartmentSearch(c, g[0], g[1], g[2]) }},
	"T/I/$everything": {http.MethodGet: func(s *Server, c *gin.Context, g []string) { s.everything(c, g[0], g[1]) }},
	"T/$lastn": {
		http.MethodGet:  func(s *Server, c *gin.Context, g []string) { s.lastn(c, g[0]) },
		http.MethodPost: func(s *Server, c *gin.Context, g []string) { s.lastn(c, g[0]) },
	},

	// Terminology operations on stored ValueSets and CodeSystems.
	"T/$expand": terminologyRoute, "T/I/$expand": terminologyRoute,
	"T/$validate-code": terminologyRoute, "T/I/$validate-code": terminologyRoute,
	"T/$lookup": terminologyRoute, "T/I/$lookup": terminologyRoute,

	// Structured Data Capture: forms filled, extracted and assembled.
	"T/$populate": sdcRoutes, "T/I/$populate": sdcRoutes,
	"T/$extract": sdcRoutes, "T/I/$extract": sdcRoutes,
	"T/$assemble": sdcRoutes, "T/I/$assemble": sdcRoutes,

	// Topic-based subscriptions.
	"T/$status": subscriptionOpRoutes, "T/I/$status": subscriptionOpRoutes, "T/I/$events": subscriptionOpRoutes,
	"T/$get-ws-binding-token": subscriptionOpRoutes, "T/I/$get-ws-binding-token": subscriptionOpRoutes,

	// FHIR GraphQL, system and instance level.
	"$graphql": graphqlRoutes, "T/I/$graphql": graphqlRoutes,
}

// sdcRoutes serves an SDC operation by GET or POST.
var sdcRoutes = map[string]route{http.MethodGet: sdcRoute, http.MethodPost: sdcRoute}

// shapeOf names the shape of a FHIR path: T for a type, I for an id, V for
// a version, T2 for a type after an id (compartment search), literal
// _history, _search, $validate, $everything, $lastn and the terminology
// and SDC operations kept.
func shapeOf(segs []string) string {
	shape := make([]string, len(segs))
	for i, seg := range segs {
		switch {
		case seg == "_history" && (i == 0 || i == 2 || (i == 1 && len(segs) == 2)):
			shape[i] = seg
		case seg == "_search" && i <= 1 && i == len(segs)-1:
			shape[i] = seg
		case seg == "$validate" && i <= 2 && i == len(segs)-1:
			shape[i] = seg
		case seg == reindexStatusOp && len(segs) == 1:
			shape[i] = seg
		case seg == "$everything" && i == 2 && len(segs) == 3:
			shape[i] = seg
		case seg == "$lastn" && i == 1 && len(segs) == 2:
			shape[i] = seg
		case terminologyOps[seg].typ != "" && (i == 1 || i == 2) && i == len(segs)-1:
			shape[i] = seg
		case sdcOps[seg].typ != "" && (i == 1 || i == 2) && i == len(segs)-1:
			shape[i] = seg
		case subscriptionOps[seg] && (i == 1 || i == 2) && i == len(segs)-1:
			shape[i] = seg
		case seg == "$graphql" && (i == 0 || i == 2) && i == len(segs)-1:
			shape[i] = seg
		case i == 2 && len(segs) == 3:
			shape[i] = "T2"
		case i == 0:
			shape[i] = "T"
		case i == 1:
			shape[i] = "I"
		default:
			shape[i] = "V"
		}
	}
	return strings.Join(shape, "/")
}

// dispatch routes a FHIR path by its shape: 404 for paths nothing serves,
// 405 with Allow for a method the path does not support.
func (s *Server) dispatch(c *gin.Context) {
	segs := strings.Split(strings.Trim(c.Param("path"), "/"), "/")
	if len(segs) == 1 && segs[0] == "" {
		segs = nil
	}
	if s.serveExport(c, segs) || s.serveViews(c, segs) {
		return
	}
	shape := shapeOf(segs)
	methods, ok := fhirRoutes[shape]
	if !ok {
		s.abort(c, fail(http.StatusNotFound, "not-found", "no such FHIR endpoint: "+c.Request.URL.Path, ""))
		return
	}
	if len(segs) > 0 && strings.HasPrefix(shape, "T") && !isResourceType(segs[0]) {
		s.abort(c, fail(http.StatusNotFound, "not-supported", "unknown resource type "+quote(segs[0]), ""))
		return
	}
	handle, ok := methods[c.Request.Method]
	if !ok {
		allow := make([]string, 0, len(methods))
		for m := range methods {
			allow = append(allow, m)
		}
		sort.Strings(allow)
		c.Header("Allow", strings.Join(allow, ", "))
		s.abort(c, fail(http.StatusMethodNotAllowed, "not-supported", c.Request.Method+" is not allowed on "+c.Request.URL.Path, ""))
		return
	}
	if err := s.permitRoute(c, shape, segs); err != nil {
		s.abort(c, err)
		return
	}
	handle(s, c, segs)
}

func (s *Server) notSupported(c *gin.Context, msg string) {
	s.abort(c, fail(http.StatusNotImplemented, "not-supported", msg, ""))
}
