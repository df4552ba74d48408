package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// reindexStatusOp is the operation that reports the re-indexing of the
// tenant's own search parameters.
const reindexStatusOp = "$reindex-status"

// registry is the search registry of the request's tenant: the built-in
// parameters and the tenant's own SearchParameters in force.
func (s *Server) registry(c *gin.Context) (*search.Registry, error) {
	return s.tenantRegistry(c.Request.Context(), c.GetString(tenantKey))
}

// tenantRegistry is registry for tenant; nil when search is not configured.
func (s *Server) tenantRegistry(ctx context.Context, tenant string) (*search.Registry, error) {
	if s.cfg.Registry == nil {
		return nil, nil
	}
	reg, err := s.store.Registry(ctx, tenant)
	if err != nil || reg == nil {
		return s.cfg.Registry, err
	}
	return reg, nil
}

// publicRegistry is the registry the CapabilityStatement lists, which
// needs no token: a request with a valid token of the tenant it addresses
// gets the tenant's, any other the built-in parameters, so that strangers
// cannot tell which tenants exist.
func (s *Server) publicRegistry(c *gin.Context) *search.Registry {
	ctx := c.Request.Context()
	name, ok := tenantFromHost(c.Request.Host, s.cfg.BaseDomain, s.cfg.DefaultTenant)
	token, hasToken := bearer(c.GetHeader("Authorization"))
	if !ok || !hasToken || s.cfg.Registry == nil {
		return s.cfg.Registry
	}
	if p, err := s.auth.Authenticate(ctx, token); err != nil || p.Tenant != name {
		return s.cfg.Registry
	}
	if exists, err := s.tenants.exists(ctx, name, s.store.TenantExists); err != nil || !exists {
		return s.cfg.Registry
	}
	reg, err := s.tenantRegistry(ctx, name)
	if err != nil {
		return s.cfg.Registry
	}
	return reg
}

// reindexingOutcome is the entry a search Bundle starts with when a
// tenant parameter it uses is still being re-indexed: its matches among
// the resources written before the parameter are not all found yet.
func (s *Server) reindexingOutcome(c *gin.Context, q *search.Query) (*searchEntry, error) {
	if q == nil || len(q.Uses) == 0 {
		return nil, nil
	}
	progress, err := s.store.Reindexing(c.Request.Context(), c.GetString(tenantKey), q.Uses)
	if err != nil || len(progress) == 0 {
		return nil, err
	}
	issues := make([]Issue, len(progress))
	for i, p := range progress {
		issues[i] = Issue{Severity: "warning", Code: "incomplete", Expression: p.Code,
			Diagnostics: fmt.Sprintf("the search parameter %s of %s is being re-indexed (%s): resources written before it was defined are missing from the results until it finishes; see %s",
				p.Code, p.Type, progressText(p), reindexStatusOp)}
	}
	body, err := json.Marshal(operationOutcome(issues))
	if err != nil {
		return nil, fmt.Errorf("encode the re-indexing outcome: %w", err)
	}
	return &searchEntry{FullURL: "urn:uuid:" + uuid.NewString(), Resource: body, Search: map[string]string{"mode": "outcome"}}, nil
}

// progressText says how far a re-indexing is.
func progressText(p store.IndexProgress) string {
	if p.Total == 0 && p.Done == 0 {
		return "starting"
	}
	return fmt.Sprintf("%d of %d resources done", p.Done, p.Total)
}

// reindexStatus serves GET [base]/$reindex-status: a Parameters resource
// with, for each resource type that has search parameters of the
// tenant's own, the codes its resources hold completely, those being
// re-indexed, and the progress of the job.
func (s *Server) reindexStatus(c *gin.Context) {
	if _, err := s.permit(c, "SearchParameter", auth.Search); err != nil {
		s.abort(c, err)
		return
	}
	list, err := s.store.SearchIndexStatus(c.Request.Context(), c.GetString(tenantKey))
	if err != nil {
		s.abort(c, err)
		return
	}
	status := "complete"
	params := []map[string]any{}
	for _, st := range list {
		if len(st.Pending) > 0 {
			status = "in-progress"
		}
		params = append(params, map[string]any{"name": "type", "part": typeStatusParts(st)})
	}
	params = append([]map[string]any{{"name": "status", "valueCode": status}}, params...)
	writeJSON(c, http.StatusOK, map[string]any{"resourceType": "Parameters", "parameter": params})
}

// typeStatusParts are the parts of one type's entry in $reindex-status.
func typeStatusParts(st store.IndexStatus) []map[string]any {
	status := "complete"
	if len(st.Pending) > 0 {
		status = "in-progress"
	}
	parts := []map[string]any{{"name": "type", "valueCode": st.Type}, {"name": "status", "valueCode": status}}
	for _, code := range st.Complete {
		parts = append(parts, map[string]any{"name": "complete", "valueString": code})
	}
	for _, code := range st.Pending {
		parts = append(parts, map[string]any{"name": "pending", "valueString": code})
	}
	if st.Running {
		parts = append(parts,
			map[string]any{"name": "done", "valueInteger": st.Done},
			map[string]any{"name": "total", "valueInteger": st.Total},
			map[string]any{"name": "started", "valueInstant": st.Started.UTC().Format(time.RFC3339)},
			map[string]any{"name": "updated", "valueInstant": st.Updated.UTC().Format(time.RFC3339)})
	}
	return parts
}
