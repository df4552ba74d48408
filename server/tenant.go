package server

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"fhirstore/store"
)

const tenantKey = "fhirstore.tenant"

// tenantFromHost names the tenant a Host header addresses: the first label
// under baseDomain, or def for hosts without one (IP addresses, the bare
// base domain, other names). ok is false when no tenant can be named.
func tenantFromHost(host, baseDomain, def string) (name string, ok bool) {
	h := host
	if hp, _, err := net.SplitHostPort(host); err == nil {
		h = hp
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	suffix := "." + strings.ToLower(baseDomain)
	if !strings.HasSuffix(h, suffix) {
		return def, def != ""
	}
	label := strings.TrimSuffix(h, suffix)
	if store.ValidateTenantName(label) != nil {
		return "", false
	}
	return label, true
}

// tenant resolves the tenant from the Host header (404 when none).
func (s *Server) tenant(c *gin.Context) {
	name, ok := tenantFromHost(c.Request.Host, s.cfg.BaseDomain, s.cfg.DefaultTenant)
	if !ok {
		s.abort(c, fail(http.StatusNotFound, "not-found", "no tenant is addressed by host "+quote(c.Request.Host), ""))
		return
	}
	c.Set(tenantKey, name)
}

// requireTenant checks the tenant exists; it runs after authentication so
// that strangers cannot probe which tenants exist. Reads may trust a recent
// answer; writes ask the registry, so that nothing is written into a tenant
// deleted a moment ago.
func (s *Server) requireTenant(c *gin.Context) {
	name := c.GetString(tenantKey)
	lookup := s.tenants.exists
	if m := c.Request.Method; m != http.MethodGet && m != http.MethodHead {
		lookup = s.tenants.refresh
	}
	ok, err := lookup(c.Request.Context(), name, s.store.TenantExists)
	if err != nil {
		s.abort(c, err)
		return
	}
	if !ok {
		s.abort(c, fail(http.StatusNotFound, "not-found", "unknown tenant "+quote(name), ""))
	}
}

// tenantCache remembers tenants that exist for a short time; unknown names
// are always asked again so a new tenant is served at once.
type tenantCache struct {
	ttl  time.Duration
	mu   sync.Mutex
	seen map[string]time.Time
}

func newTenantCache(ttl time.Duration) *tenantCache {
	return &tenantCache{ttl: ttl, seen: map[string]time.Time{}}
}

func (tc *tenantCache) exists(ctx context.Context, name string, lookup func(context.Context, string) (bool, error)) (bool, error) {
	tc.mu.Lock()
	until, ok := tc.seen[name]
	tc.mu.Unlock()
	if ok && time.Now().Before(until) {
		return true, nil
	}
	return tc.refresh(ctx, name, lookup)
}

// refresh asks lookup and remembers the answer.
func (tc *tenantCache) refresh(ctx context.Context, name string, lookup func(context.Context, string) (bool, error)) (bool, error) {
	found, err := lookup(ctx, name)
	if err != nil {
		return false, err
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if found {
		tc.seen[name] = time.Now().Add(tc.ttl)
	} else {
		delete(tc.seen, name)
	}
	return found, nil
}
