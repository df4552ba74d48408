package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/server/graphql"
	"fhirstore/store"
)

// graphqlRoutes serve $graphql by GET or POST.
var graphqlRoutes = map[string]route{http.MethodGet: graphqlRoute, http.MethodPost: graphqlRoute}

// graphqlRoute serves [base]/$graphql and [base]/[type]/[id]/$graphql.
// Every resource the query reads, searches or follows passes the caller's
// scopes and patient compartment, as REST reads and searches do.
func graphqlRoute(s *Server, c *gin.Context, segs []string) {
	var body []byte
	if c.Request.Method == http.MethodPost {
		var err error
		if body, err = s.readLimited(c); err != nil {
			s.abort(c, err)
			return
		}
	}
	req, err := graphql.ParseRequest(c.Request.Method, c.GetHeader("Content-Type"), c.Request.URL.Query(), body)
	if err != nil {
		s.graphqlError(c, err)
		return
	}
	b := &graphqlBackend{s: s, c: c}
	var focus map[string]any
	if len(segs) == 3 {
		if focus, err = b.read(c.Request.Context(), segs[0], segs[1], true); err != nil {
			s.graphqlError(c, err)
			return
		}
	}
	data, err := graphql.Execute(c.Request.Context(), b, req, focus, s.cfg.GraphQL)
	if err != nil {
		s.graphqlError(c, err)
		return
	}
	writeGraphQL(c, http.StatusOK, map[string]any{"data": data})
}

// graphqlError answers a failed query with GraphQL's errors, each carrying
// the OperationOutcome a FHIR client reads: the failing field as its
// expression, its line and column in the query as its location.
func (s *Server) graphqlError(c *gin.Context, err error) {
	status, issue := s.graphqlIssue(c, err)
	outcome := operationOutcome([]Issue{issue})
	entry := map[string]any{"message": issue.Diagnostics, "extensions": map[string]any{"outcome": outcome}}
	var ge *graphql.Error
	if errors.As(err, &ge) && ge.Line > 0 {
		entry["locations"] = []any{map[string]int{"line": ge.Line, "column": ge.Column}}
		for _, is := range outcome["issue"].([]map[string]any) {
			is["location"] = []string{fmt.Sprintf("line %d, column %d", ge.Line, ge.Column)}
		}
	}
	if ge != nil && len(ge.Path) > 0 {
		entry["path"] = ge.Path
	}
	writeGraphQL(c, status, map[string]any{"errors": []any{entry}})
	c.Abort()
}

// graphqlIssue is the status and issue of a failed query: the engine's
// own refusals, or the error of a read or search it made (a 403, a bad
// search value) placed at the field that made it.
func (s *Server) graphqlIssue(c *gin.Context, err error) (int, Issue) {
	var ge *graphql.Error
	if errors.As(err, &ge) && ge.Status != 0 {
		return ge.Status, Issue{Severity: "error", Code: ge.Code, Diagnostics: ge.Error(), Expression: ge.Expression()}
	}
	he := toHTTPError(err)
	if he.status >= 500 && !errors.Is(err, context.Canceled) {
		s.log.Error("graphql query failed", zap.String("request_id", requestID(c)), zap.Error(err))
	}
	issue := Issue{Severity: "error", Code: "exception", Diagnostics: he.Error()}
	if len(he.issues) > 0 {
		issue = he.issues[0]
	}
	if ge != nil {
		issue.Expression = ge.Expression()
		if ge.Line > 0 {
			issue.Diagnostics = fmt.Sprintf("%s (line %d, column %d)", he.Error(), ge.Line, ge.Column)
		}
	}
	return he.status, issue
}

// writeGraphQL writes a GraphQL answer as application/json.
func writeGraphQL(c *gin.Context, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		c.Status(http.StatusInternalServerError)
		return
	}
	ct := "application/json; charset=utf-8"
	if strings.Contains(c.GetHeader("Accept"), graphqlResponseType) {
		ct = graphqlResponseType + "; charset=utf-8"
	}
	c.Data(status, ct, body)
}

// graphqlResponseType is the media type of GraphQL over HTTP's answers,
// which GraphQL clients may ask for in place of application/json.
const graphqlResponseType = "application/graphql-response+json"

// graphqlBackend reads and searches for a query with the rights of the
// request's caller.
type graphqlBackend struct {
	s *Server
	c *gin.Context
}

// Read reads typ/id: nil when it does not exist or was deleted, a 403
// when the caller may not see it.
func (b *graphqlBackend) Read(ctx context.Context, typ, id string) (map[string]any, error) {
	return b.read(ctx, typ, id, false)
}

// read reads typ/id; must tells a resource the query cannot go without
// (the focus of an instance-level query), whose absence is an error.
func (b *graphqlBackend) read(ctx context.Context, typ, id string, must bool) (map[string]any, error) {
	a := accessOf(ctx)
	if a == nil || max(a.grant(typ, auth.Read), a.grant(typ, auth.Search)) == auth.Denied {
		return nil, denied(typ, auth.Read)
	}
	res, err := b.s.store.Read(ctx, b.c.GetString(tenantKey), typ, id)
	if err := b.s.checkVisible(b.c, res); err != nil {
		return nil, err
	}
	switch {
	case !must && (errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrGone) || errors.Is(err, store.ErrInvalidID)):
		return nil, nil
	case err != nil:
		return nil, err // the store's error names the resource
	}
	return decodeResource(res.JSON)
}

// Search runs a search as GET [type]?params would, strictly: a parameter
// the server does not know is an error, not ignored.
func (b *graphqlBackend) Search(ctx context.Context, typ string, params url.Values) (*graphql.Page, error) {
	if b.s.cfg.Registry == nil {
		return nil, fail(http.StatusNotImplemented, "not-supported", "search is not configured", "")
	}
	req := b.c.Request
	b.c.Request = req.WithContext(ctx) // the query's time limit bounds its searches
	defer func() { b.c.Request = req }()
	_, page, err := b.s.runSearch(b.c, typ, params, search.ParseOptions{Strict: true})
	if he := (*httpError)(nil); errors.As(err, &he) && he.status == http.StatusBadRequest && len(he.issues) > 0 && he.issues[0].Expression != "" {
		return nil, &graphql.ParamError{Param: he.issues[0].Expression, Err: err}
	}
	if err != nil {
		return nil, err
	}
	out := &graphql.Page{Total: page.Total, Next: page.Next, Previous: page.Previous}
	for _, r := range page.Entries {
		m, err := decodeResource(r.JSON)
		if err != nil {
			return nil, fmt.Errorf("decode %s/%s: %w", r.Type, r.ID, err)
		}
		out.Resources = append(out.Resources, m)
	}
	return out, nil
}
