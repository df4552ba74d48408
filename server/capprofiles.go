package server

import (
	"context"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
)

// capabilityTenant names the tenant whose own definitions the
// CapabilityStatement shows: the host's, when the request carries a valid
// token for it and the tenant exists. Without one the statement is the
// server's alone, so that strangers learn nothing of which tenants exist.
func (s *Server) capabilityTenant(c *gin.Context) (string, bool) {
	name, ok := tenantFromHost(c.Request.Host, s.cfg.BaseDomain, s.cfg.DefaultTenant)
	if !ok {
		return "", false
	}
	token, ok := bearer(c.GetHeader("Authorization"))
	if !ok {
		return "", false
	}
	ctx := c.Request.Context()
	if p, err := s.auth.Authenticate(ctx, token); err != nil || p.Tenant != name {
		return "", false
	}
	exists, err := s.tenants.exists(ctx, name, s.store.TenantExists)
	return name, err == nil && exists
}

// addSupportedProfiles lists in each resource of the statement the
// tenant's profiles of its type (supportedProfile).
func (s *Server) addSupportedProfiles(ctx context.Context, cs map[string]any, tenant string) {
	profiles, err := s.store.Definitions(tenant).Profiles(ctx)
	if err != nil {
		s.log.Warn("list the tenant's profiles for the CapabilityStatement", zap.String("tenant", tenant), zap.Error(err))
		return
	}
	for _, r := range cs["rest"].([]map[string]any)[0]["resource"].([]map[string]any) {
		if urls := profiles[r["type"].(string)]; len(urls) > 0 {
			r["supportedProfile"] = urls
		}
	}
}
