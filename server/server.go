// Package server is the FHIR R4 HTTP interface: routing, middleware (request
// id, access log, recovery, tenant by host, bearer auth, content
// negotiation), the FHIR interactions and their OperationOutcome errors.
package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/server/auth"
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
	// REST, when set, serves /api/v1 behind the same tenant and token checks
	// as FHIR; it finds the caller with CallerFrom.
	REST http.Handler
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
}

// New builds the HTTP handler tree.
func New(cfg Config, st *store.Store, authn auth.Authenticator, logger *zap.Logger) *Server {
	if cfg.BaseDomain == "" {
		cfg.BaseDomain = "localhost"
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.TenantCacheTTL == 0 {
		cfg.TenantCacheTTL = 5 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{cfg: cfg, store: st, auth: authn, log: logger, tenants: newTenantCache(cfg.TenantCacheTTL)}
	s.engine = s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.engine.ServeHTTP(w, r) }

func (s *Server) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = false
	e.Use(s.requestID, s.accessLog, s.recovery)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.Any("/fhir/r4/*path", s.fhirFormat, s.fhir)
	if s.cfg.REST != nil {
		e.Any(restPrefix+"/*path", s.tenant, s.authenticate, gin.WrapH(s.cfg.REST))
	}
	e.NoRoute(func(c *gin.Context) {
		s.abort(c, fail(http.StatusNotFound, "not-found", "no such endpoint: "+c.Request.URL.Path, ""))
	})
	return e
}

// fhirFormat rejects requests whose answer the client cannot read.
func (s *Server) fhirFormat(c *gin.Context) {
	if err := negotiate(c); err != nil {
		s.abort(c, err)
	}
}

// fhir serves the CapabilityStatement to anyone and everything else to
// authenticated callers of an existing tenant.
func (s *Server) fhir(c *gin.Context) {
	if c.Param("path") == "/metadata" && c.Request.Method == http.MethodGet {
		s.capabilities(c)
		return
	}
	for _, step := range []gin.HandlerFunc{s.tenant, s.authenticate, s.dispatch} {
		if step(c); c.IsAborted() {
			return
		}
	}
}

// dispatch routes a FHIR path by its segments:
// [type] [type/id] [type/id/_history] [type/id/_history/vid] [type/_history] [_history].
func (s *Server) dispatch(c *gin.Context) {
	segs := strings.Split(strings.Trim(c.Param("path"), "/"), "/")
	if len(segs) == 1 && segs[0] == "" {
		segs = nil
	}
	m := c.Request.Method
	switch {
	case len(segs) == 0 && m == http.MethodPost:
		s.notSupported(c, "batch and transaction Bundles are not supported yet")
	case len(segs) == 1 && segs[0] == "_history" && m == http.MethodGet:
		s.history(c, "", "")
	case len(segs) == 1 && m == http.MethodPost:
		s.withType(c, segs[0], func() { s.create(c, segs[0]) })
	case len(segs) == 1 && m == http.MethodGet:
		s.withType(c, segs[0], func() { s.notSupported(c, "search is not supported yet") })
	case len(segs) == 2 && segs[1] == "_history" && m == http.MethodGet:
		s.withType(c, segs[0], func() { s.history(c, segs[0], "") })
	case len(segs) == 2 && m == http.MethodGet:
		s.withType(c, segs[0], func() { s.read(c, segs[0], segs[1]) })
	case len(segs) == 2 && m == http.MethodPut:
		s.withType(c, segs[0], func() { s.update(c, segs[0], segs[1]) })
	case len(segs) == 2 && m == http.MethodDelete:
		s.withType(c, segs[0], func() { s.delete(c, segs[0], segs[1]) })
	case len(segs) == 3 && segs[2] == "_history" && m == http.MethodGet:
		s.withType(c, segs[0], func() { s.history(c, segs[0], segs[1]) })
	case len(segs) == 4 && segs[2] == "_history" && m == http.MethodGet:
		s.withType(c, segs[0], func() { s.vread(c, segs[0], segs[1], segs[3]) })
	case len(segs) <= 4:
		s.abort(c, fail(http.StatusMethodNotAllowed, "not-supported", m+" is not allowed on "+c.Request.URL.Path, ""))
	default:
		s.abort(c, fail(http.StatusNotFound, "not-found", "no such FHIR endpoint: "+c.Request.URL.Path, ""))
	}
}

func (s *Server) withType(c *gin.Context, typ string, next func()) {
	if !isResourceType(typ) {
		s.abort(c, fail(http.StatusNotFound, "not-supported", "unknown resource type "+quote(typ), ""))
		return
	}
	next()
}

func (s *Server) notSupported(c *gin.Context, msg string) {
	s.abort(c, fail(http.StatusNotImplemented, "not-supported", msg, ""))
}
