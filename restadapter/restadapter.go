// Package restadapter serves /api/v1, the clinicians' REST interface: JSON
// projections of the FHIR resources in the store, with its own error JSON.
package restadapter

import (
	"context"
	"encoding/json"
	"net/http"
)

// ErrorBody is the JSON of every REST error.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: a stable code, a readable message and,
// for invalid input, one detail per problem.
type ErrorDetail struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Details []string `json:"details,omitempty"`
}

// WriteError answers with a REST error.
func WriteError(w http.ResponseWriter, status int, code, msg string, details ...string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: ErrorDetail{Code: code, Message: msg, Details: details}})
}

// TenantOf names the tenant of an authenticated request.
type TenantOf func(ctx context.Context) (string, bool)

// Handler serves the REST interface. It expects requests that have already
// passed the server's tenant and token checks.
type Handler struct {
	tenantOf TenantOf
	mux      *http.ServeMux
}

// New builds the REST handler.
func New(tenantOf TenantOf) *Handler {
	h := &Handler{tenantOf: tenantOf, mux: http.NewServeMux()}
	h.mux.HandleFunc("/", h.notFound)
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.tenantOf(r.Context()); !ok {
		WriteError(w, http.StatusUnauthorized, "unauthorized", "a bearer token is required")
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
}
