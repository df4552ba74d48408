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

	"fhirstore/search"
	"fhirstore/server/auth"
	sdcop "fhirstore/server/sdc"
	"fhirstore/store"
)

// sdcOperation is an SDC operation of package server/sdc.
type sdcOperation func(ctx context.Context, b sdcop.Backend, r sdcop.Request) (map[string]any, error)

// sdcOps are the SDC operations by path segment and the type they serve.
var sdcOps = map[string]struct {
	typ string
	run sdcOperation
}{
	"$populate": {"Questionnaire", sdcop.Populate},
	"$assemble": {"Questionnaire", sdcop.Assemble},
	"$extract":  {"QuestionnaireResponse", sdcop.Extract},
}

// sdcRoute serves [type]/$op and [type]/[id]/$op for the SDC operations,
// GET or POST; nothing they do writes.
func sdcRoute(s *Server, c *gin.Context, segs []string) {
	op := sdcOps[segs[len(segs)-1]]
	if segs[0] != op.typ {
		s.abort(c, fail(http.StatusNotFound, "not-supported", fmt.Sprintf("%s is an operation on %s, not %s", segs[len(segs)-1], op.typ, segs[0]), ""))
		return
	}
	// Read access to what the operation reads: the form, and the response
	// for $extract. The records a form's queries search are checked as
	// each search runs.
	for _, typ := range []string{op.typ, "Questionnaire"} {
		if _, err := s.permit(c, typ, auth.Read); err != nil {
			s.abort(c, err)
			return
		}
	}
	req := sdcop.Request{Method: c.Request.Method, Query: c.Request.URL.Query()}
	if len(segs) == 3 {
		req.ID = segs[1]
	}
	if c.Request.Method == http.MethodPost && (c.Request.ContentLength != 0 || c.GetHeader("Content-Type") != "") {
		body, err := s.readBody(c)
		if err != nil {
			s.abort(c, err)
			return
		}
		req.Body = body
	}
	out, err := op.run(c.Request.Context(), &sdcBackend{s: s, c: c}, req)
	if err != nil {
		s.abort(c, sdcError(err))
		return
	}
	writeJSON(c, http.StatusOK, out)
}

// sdcError is the httpError of an SDC operation's refusal; other errors
// (the server's own, from the backend) are reported as they are.
func sdcError(err error) error {
	var se *sdcop.Error
	if !errors.As(err, &se) {
		return err
	}
	issues := make([]Issue, len(se.Issues))
	for i, is := range se.Issues {
		issues[i] = Issue{Severity: is.Severity, Code: is.Code, Diagnostics: is.Diagnostics, Expression: is.Expression, Key: is.Key, Source: is.Source}
	}
	return &httpError{status: se.Status, issues: issues}
}

// sdcBackend gives the SDC operations the tenant's data with the rights
// of the request's caller: searches run as the caller's own (their SMART
// scopes and patient compartment), reads see only what the caller may.
type sdcBackend struct {
	s *Server
	c *gin.Context
}

// Search runs a search such as "Observation?code=...&patient=1" and
// returns its first page as a searchset Bundle.
func (b *sdcBackend) Search(ctx context.Context, query string) (map[string]any, error) {
	typ, raw, _ := strings.Cut(query, "?")
	if !isResourceType(typ) {
		return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("the query %q does not search a resource type", query), "")
	}
	if b.s.cfg.Registry == nil {
		return nil, fail(http.StatusNotImplemented, "not-supported", "search is not configured", "")
	}
	params, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("the query %q is not a valid query string: %v", query, err), "")
	}
	_, page, err := b.s.runSearch(b.c, typ, params, search.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", query, err)
	}
	base := baseURL(b.c)
	entries := make([]any, 0, len(page.Entries)+len(page.Included))
	add := func(list []*store.Resource, mode string) error {
		for _, r := range list {
			res, err := decodeResource(r.JSON)
			if err != nil {
				return fmt.Errorf("search %s: decode %s/%s: %w", query, r.Type, r.ID, err)
			}
			entries = append(entries, map[string]any{"fullUrl": base + "/" + r.Type + "/" + r.ID, "resource": res, "search": map[string]any{"mode": mode}})
		}
		return nil
	}
	if err := add(page.Entries, "match"); err != nil {
		return nil, err
	}
	if err := add(b.s.visibleOnly(b.c, page.Included), "include"); err != nil {
		return nil, err
	}
	bundle := map[string]any{"resourceType": "Bundle", "type": "searchset", "entry": entries}
	if page.Total >= 0 {
		bundle["total"] = page.Total
	}
	return bundle, nil
}

// Read reads a resource by reference ("Patient/1"): nil when it does not
// exist, is deleted, or the caller may not see it.
func (b *sdcBackend) Read(ctx context.Context, reference string) (map[string]any, error) {
	typ, id, ok := strings.Cut(reference, "/")
	if !ok || !isResourceType(typ) || id == "" || strings.Contains(id, "/") {
		return nil, nil
	}
	a := accessOf(ctx)
	if a == nil || max(a.grant(typ, auth.Read), a.grant(typ, auth.Search)) == auth.Denied {
		return nil, nil
	}
	res, err := b.s.store.Read(ctx, b.c.GetString(tenantKey), typ, id)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrGone), errors.Is(err, store.ErrInvalidID):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", reference, err)
	case b.s.checkVisible(b.c, res) != nil:
		return nil, nil
	}
	return decodeResource(res.JSON)
}

// Questionnaire finds the tenant's Questionnaire of a canonical URL (with
// an optional |version; without, the one written last).
func (b *sdcBackend) Questionnaire(ctx context.Context, canonical string) (map[string]any, error) {
	if _, err := b.s.permit(b.c, "Questionnaire", auth.Read); err != nil {
		return nil, err
	}
	tenant := b.c.GetString(tenantKey)
	if store.IsConformanceType("Questionnaire") {
		q, err := b.s.store.Definitions(tenant).Resource(ctx, "Questionnaire", canonical)
		if err != nil {
			return nil, fmt.Errorf("find Questionnaire %s: %w", canonical, err)
		}
		return q, nil // shared with the cache: the operations copy what they change
	}
	if b.s.cfg.Registry == nil {
		return nil, fail(http.StatusNotImplemented, "not-supported", "finding Questionnaires by canonical URL needs search, which is off", "")
	}
	u, version, _ := strings.Cut(canonical, "|")
	query := url.Values{"url": {u}}
	if version != "" {
		query.Set("version", version)
	}
	q, err := b.s.cfg.Registry.Parse("Questionnaire", query, search.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("find Questionnaire %s: %w", canonical, searchError(err))
	}
	page, err := b.s.store.Search(ctx, tenant, q)
	if err != nil {
		return nil, fmt.Errorf("find Questionnaire %s: %w", canonical, err)
	}
	var latest *store.Resource
	for _, r := range page.Entries {
		if latest == nil || r.LastUpdated.After(latest.LastUpdated) {
			latest = r
		}
	}
	if latest == nil {
		return nil, nil
	}
	return decodeResource(latest.JSON)
}

// CheckResponse runs the checks a create of the response would make,
// its Questionnaire's rules included.
func (b *sdcBackend) CheckResponse(ctx context.Context, response map[string]any) error {
	body, err := json.Marshal(response)
	if err != nil {
		return fmt.Errorf("encode the QuestionnaireResponse: %w", err)
	}
	if _, err := b.s.store.Check(ctx, b.c.GetString(tenantKey), "QuestionnaireResponse", "", body, store.WriteOptions{}); err != nil {
		return fmt.Errorf("check the QuestionnaireResponse: %w", err)
	}
	return nil
}
