// Package restadapter serves /api/v1, the clinicians' REST interface: JSON
// projections of the FHIR resources in the store, with its own error JSON.
// It keeps no data of its own: every read is a projection of stored FHIR
// resources and every write stores FHIR resources (so it shows in their
// history), through the same store and search API the FHIR handlers use.
package restadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// Prefix is where the REST interface is mounted.
const Prefix = "/api/v1"

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
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg, Details: details}})
}

// TenantOf names the tenant of an authenticated request.
type TenantOf func(ctx context.Context) (string, bool)

// Config wires the REST interface to the store.
type Config struct {
	// TenantOf names the tenant of an authenticated request.
	TenantOf TenantOf
	// Store holds the FHIR resources the REST objects are projected from.
	Store *store.Store
	// Registry parses the searches the projections run.
	Registry *search.Registry
	// Logger receives internal errors.
	Logger *zap.Logger
	// Allows tells whether the request's caller may do interaction i on
	// every resource of resourceType (the REST interface has no patient
	// compartment filtering, so patient-restricted access does not count).
	// Nil allows everything.
	Allows func(ctx context.Context, resourceType string, i auth.Interaction) bool
}

// Handler serves the REST interface. It expects requests that have already
// passed the server's tenant and token checks.
type Handler struct {
	cfg Config
	mux *http.ServeMux
}

// New builds the REST handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	h.routes()
	return h
}

// routes registers every endpoint; each lives in the file named after it.
func (h *Handler) routes() {
	for _, r := range h.endpoints() {
		h.mux.HandleFunc(r.pattern, h.authorized(r))
	}
	h.mux.HandleFunc("/", h.notFound)
}

// endpoint is one route of the REST interface.
type endpoint struct {
	pattern string
	handle  http.HandlerFunc
	needs   needs
}

// authorized wraps an endpoint's handler with the check of the FHIR access
// it needs: 403 naming the first missing permission.
func (h *Handler) authorized(e endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		missing := ""
		if h.cfg.Allows != nil {
			e.needs.each(func(typ string, i auth.Interaction) bool {
				if h.cfg.Allows(r.Context(), typ, i) {
					return true
				}
				missing = i.String() + " on " + typ
				return false
			})
		}
		if missing != "" {
			WriteError(w, http.StatusForbidden, "forbidden", "the token's scopes do not grant "+missing+" (a user/ or system/ scope is needed)")
			return
		}
		e.handle(w, r)
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.cfg.TenantOf(r.Context()); !ok {
		WriteError(w, http.StatusUnauthorized, "unauthorized", "a bearer token is required")
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
}

// tenant is the tenant of an authenticated request.
func (h *Handler) tenant(r *http.Request) string {
	t, _ := h.cfg.TenantOf(r.Context())
	return t
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// apiError is a REST error with its status.
type apiError struct {
	status  int
	code    string
	msg     string
	details []string
}

func (e *apiError) Error() string { return e.msg }

// badRequest is a 400 naming the offending field or parameter.
func badRequest(field, format string, args ...any) *apiError {
	msg := fmt.Sprintf(format, args...)
	return &apiError{status: http.StatusBadRequest, code: "bad_request", msg: field + ": " + msg, details: []string{field}}
}

// notFound is a 404 for an unknown object.
func notFound(what, id string) *apiError {
	return &apiError{status: http.StatusNotFound, code: "not_found", msg: fmt.Sprintf("%s %q not found", what, id)}
}

// notFoundAs turns a store's not-found (or deleted) into a 404 naming the
// object; other errors pass through.
func notFoundAs(err error, what, id string) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrGone) {
		return notFound(what, id)
	}
	return err
}

// conflict is a 409 for a state that forbids the request.
func conflict(format string, args ...any) *apiError {
	return &apiError{status: http.StatusConflict, code: "conflict", msg: fmt.Sprintf(format, args...)}
}

// fail answers with the REST error for err: its own status for an
// *apiError, the status of a store error, 500 (without detail) otherwise.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		WriteError(w, ae.status, ae.code, ae.msg, ae.details...)
		return
	}
	var inv *store.InvalidError
	switch {
	case errors.As(err, &inv):
		var details []string
		for _, is := range inv.Issues {
			details = append(details, strings.TrimSpace(is.Expression+": "+is.Diagnostics))
		}
		WriteError(w, http.StatusBadRequest, "bad_request", "the change would make an invalid FHIR resource: "+inv.Error(), details...)
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrGone):
		WriteError(w, http.StatusNotFound, "not_found", "not found")
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrPreconditionFailed):
		WriteError(w, http.StatusConflict, "conflict", "the object was changed concurrently; read it again and retry")
	case errors.Is(err, store.ErrUnavailable):
		WriteError(w, http.StatusServiceUnavailable, "service_unavailable", "the database did not answer in time; try again later")
	case errors.Is(err, context.Canceled):
		WriteError(w, http.StatusServiceUnavailable, "service_unavailable", "the request was cancelled")
	default:
		h.cfg.Logger.Error("REST request failed", zap.String("path", r.URL.Path), zap.Error(err))
		WriteError(w, http.StatusInternalServerError, "internal_server_error", "internal server error")
	}
}

// decodeBody reads a JSON request body into v: 415 unless it is JSON, 400
// naming the field for a wrong type or an unknown field.
func decodeBody(r *http.Request, v any) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type",
			msg: fmt.Sprintf("Content-Type %q is not supported; send application/json", r.Header.Get("Content-Type"))}
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return badRequest(te.Field, "must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
		case errors.As(err, &se):
			return badRequest("body", "not valid JSON at offset %d", se.Offset)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return badRequest(field, "is not a field of this request")
		default:
			return badRequest("body", "cannot be read: %v", err)
		}
	}
	if dec.More() {
		return badRequest("body", "holds more than one JSON value")
	}
	return nil
}

// jsonKind names a Go kind as a JSON type.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "slice":
		return "an array"
	default:
		return "an object"
	}
}

// Pagination describes one page of a list response.
type Pagination struct {
	Page       int `json:"page"`
	Limit      int `json:"limit"`
	Total      int `json:"total"`
	TotalPages int `json:"totalPages"`
	Offset     int `json:"offset"`
}

// Paging limits of list endpoints.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// pageParams reads page (from 1) and limit (1..100, default 20).
func pageParams(q url.Values) (page, limit int, err error) {
	page, limit = 1, DefaultLimit
	if v := q.Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 1 {
			return 0, 0, badRequest("page", "must be a whole number from 1, not %q", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxLimit {
			return 0, 0, badRequest("limit", "must be a whole number from 1 to %d, not %q", MaxLimit, v)
		}
	}
	return page, limit, nil
}

// paginate cuts one page out of n items: the slice bounds and the
// Pagination object.
func paginate(n, page, limit int) (from, to int, p Pagination) {
	p = Pagination{Page: page, Limit: limit, Total: n, TotalPages: (n + limit - 1) / limit, Offset: (page - 1) * limit}
	from, to = min(p.Offset, n), min(p.Offset+limit, n)
	return from, to, p
}

// maxListed bounds how many resources a list endpoint reads to page them.
const maxListed = 10000

// searchAll runs a FHIR search and returns every match (up to maxListed).
func (h *Handler) searchAll(ctx context.Context, tenant, typ string, params url.Values) ([]*store.Resource, error) {
	params = cloneValues(params)
	params.Set("_count", strconv.Itoa(search.MaxCount))
	q, err := h.cfg.Registry.Parse(typ, params, search.ParseOptions{Strict: true})
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", typ, err)
	}
	var out []*store.Resource
	for len(out) < maxListed {
		page, err := h.cfg.Store.Search(ctx, tenant, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Entries...)
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	return out, nil
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}
