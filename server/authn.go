package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"fhirstore/server/auth"
)

// authenticate requires a bearer token valid for the request's tenant:
// 401 with WWW-Authenticate when it is missing or bad, 403 when it was
// issued for another tenant. Scope checks hook in after it.
func (s *Server) authenticate(c *gin.Context) {
	token, ok := bearer(c.GetHeader("Authorization"))
	if !ok {
		s.abort(c, unauthorized("", "a bearer token is required"))
		return
	}
	p, err := s.auth.Authenticate(c.Request.Context(), token)
	if err != nil {
		s.abort(c, unauthorized("invalid_token", "the bearer token is not valid"))
		return
	}
	if tenant := c.GetString(tenantKey); p.Tenant != tenant {
		s.abort(c, fail(http.StatusForbidden, "forbidden", "the token is not valid for tenant "+quote(tenant), ""))
		return
	}
	caller := &Caller{Tenant: c.GetString(tenantKey), Principal: p, access: newAccess(p, s.cfg.Registry)}
	if s.cfg.Topics != nil {
		ctx, tenant := c.Request.Context(), caller.Tenant
		caller.access.topicTypes = func(canonical string) ([]string, bool, error) {
			return s.cfg.Topics.TopicResources(ctx, tenant, canonical)
		}
	}
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), callerKey{}, caller))
	s.requireTenant(c)
}

// Caller is who called and for which tenant, once authenticated.
type Caller struct {
	Tenant    string
	Principal *auth.Principal
	access    *access
}

// Allows tells whether the caller's scopes grant interaction i on
// resourceType without a patient restriction (the REST interface, which
// has no patient compartment filtering, asks this).
func (c *Caller) Allows(resourceType string, i auth.Interaction) bool {
	return c.access.grant(resourceType, i) == auth.Full
}

type callerKey struct{}

// CallerFrom returns the authenticated caller of a request's context.
func CallerFrom(ctx context.Context) (*Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(*Caller)
	return c, ok
}

func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func unauthorized(code, msg string) *httpError {
	challenge := `Bearer realm="fhirstore"`
	if code != "" {
		challenge += `, error="` + code + `"`
	}
	e := fail(http.StatusUnauthorized, "login", msg, "")
	e.header = http.Header{"Www-Authenticate": {challenge}}
	return e
}

// Allows tells whether the caller of ctx may do interaction i on every
// resource of resourceType: false without a caller or with only a
// patient-restricted grant. The REST interface's Config.Allows.
func Allows(ctx context.Context, resourceType string, i auth.Interaction) bool {
	c, ok := CallerFrom(ctx)
	return ok && c.Allows(resourceType, i)
}
