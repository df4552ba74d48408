package server

import (
	"errors"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
	"fhirstore/store/document"
)

// searchType serves GET [type]?params and POST [type]/_search (params in a
// form body, merged with the URL's).
func (s *Server) searchType(c *gin.Context, typ string) {
	params, ok := s.searchRequest(c)
	if !ok {
		return
	}
	q, page, err := s.runSearch(c, typ, params, search.ParseOptions{Strict: prefer(c, "handling") == "strict"})
	if err != nil {
		s.abort(c, err)
		return
	}
	page.Included = s.visibleOnly(c, page.Included)
	b, err := searchBundle(c, typ, params, q, page)
	if err != nil {
		s.abort(c, err)
		return
	}
	warning, err := s.reindexingOutcome(c, q)
	if err != nil {
		s.abort(c, err)
		return
	}
	if warning != nil {
		b.Entry = append([]searchEntry{*warning}, b.Entry...)
	}
	writeJSON(c, http.StatusOK, b)
}

// runSearch runs the search of typ with params. A caller whose scopes
// reach only its patient's compartment searches that compartment, and
// cannot use _has from outside it (it would reveal other patients' data).
func (s *Server) runSearch(c *gin.Context, typ string, params url.Values, opts search.ParseOptions) (*search.Query, *store.SearchPage, error) {
	ctx, tenant := c.Request.Context(), c.GetString(tenantKey)
	g, err := s.permit(c, typ, auth.Search)
	if err != nil {
		return nil, nil, err
	}
	reg, err := s.registry(c)
	if err != nil {
		return nil, nil, err
	}
	if id := params.Get("_list"); id != "" {
		members, err := s.listMembers(c, id)
		if err != nil {
			return nil, nil, err
		}
		params = cloneValues(params)
		params.Del("_list")
		if len(members[typ]) == 0 { // parse the rest for its errors and answer nothing
			q, err := reg.Parse(typ, params, opts)
			return q, emptyPage(q), searchError(err)
		}
		params.Add("_id", strings.Join(members[typ], ","))
	}
	if restricted(g, typ) && typ == "Patient" { // the patient itself, not the records it links to
		params = cloneValues(params)
		params.Add("_id", accessOf(ctx).patient)
	} else if restricted(g, typ) {
		q, page, err := s.compartmentPage(ctx, tenant, typ, accessOf(ctx).patient, params, opts)
		return q, page, searchError(err)
	}
	if g == auth.PatientOnly && hasReverseChain(params) {
		return nil, nil, fail(http.StatusForbidden, "forbidden", "_has is not available to a patient scope on "+typ, "_has")
	}
	q, err := reg.Parse(typ, params, opts)
	if err != nil {
		return nil, nil, searchError(err)
	}
	page, err := s.store.Search(ctx, tenant, q)
	return q, page, searchError(err)
}

// emptyPage is the answer of a search that cannot match.
func emptyPage(q *search.Query) *store.SearchPage {
	if q != nil && q.Total == "none" {
		return &store.SearchPage{Total: -1}
	}
	return &store.SearchPage{Total: 0}
}

// hasReverseChain tells whether params use _has.
func hasReverseChain(params url.Values) bool {
	for k := range params {
		if strings.HasPrefix(k, "_has:") || k == "_has" {
			return true
		}
	}
	return false
}

// searchRequest reads a search's parameters, answering the request itself
// (and reporting false) when they are bad or search is not configured.
func (s *Server) searchRequest(c *gin.Context) (url.Values, bool) {
	params, err := s.searchParams(c)
	if err != nil {
		s.abort(c, err)
		return nil, false
	}
	if s.cfg.Registry == nil {
		s.notSupported(c, "search is not configured")
		return nil, false
	}
	return params, true
}

// searchParams are the URL's parameters plus, for POST _search, the form body's.
func (s *Server) searchParams(c *gin.Context) (url.Values, error) {
	params := c.Request.URL.Query()
	if c.Request.Method != http.MethodPost {
		return params, nil
	}
	ct := c.GetHeader("Content-Type")
	if mt, _, _ := mime.ParseMediaType(ct); ct != "" && mt != "application/x-www-form-urlencoded" {
		return nil, fail(http.StatusUnsupportedMediaType, "not-supported", "POST _search takes application/x-www-form-urlencoded parameters", "")
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.MaxBodyBytes)
	if err := c.Request.ParseForm(); err != nil {
		return nil, fail(http.StatusBadRequest, "structure", "the form body is not valid: "+err.Error(), "")
	}
	for k, vs := range c.Request.PostForm {
		params[k] = append(params[k], vs...)
	}
	return params, nil
}

func searchError(err error) error {
	var se *search.Error
	if errors.As(err, &se) {
		return fail(http.StatusBadRequest, "value", se.Msg, se.Param)
	}
	if errors.Is(err, store.ErrBadCursor) {
		return fail(http.StatusBadRequest, "value", "the paging cursor is not valid; start again from the first page", "_cursor")
	}
	return err
}

// searchEntry is one match of a searchset Bundle.
type searchEntry struct {
	FullURL  string            `json:"fullUrl"`
	Resource bsonJSON          `json:"resource"`
	Search   map[string]string `json:"search"`
}

// bsonJSON is an already rendered JSON value.
type bsonJSON []byte

// MarshalJSON returns the value as is.
func (b bsonJSON) MarshalJSON() ([]byte, error) { return b, nil }

type searchBundleBody struct {
	ResourceType string         `json:"resourceType"`
	ID           string         `json:"id"`
	Meta         map[string]any `json:"meta"`
	Type         string         `json:"type"`
	Total        *int64         `json:"total,omitempty"`
	Link         []bundleLink   `json:"link"`
	Entry        []searchEntry  `json:"entry,omitempty"`
}

func searchBundle(c *gin.Context, typ string, params url.Values, q *search.Query, page *store.SearchPage) (*searchBundleBody, error) {
	base := baseURL(c)
	for _, name := range q.Ignored { // the links show the search that was run
		params.Del(name)
	}
	b := &searchBundleBody{
		ResourceType: "Bundle",
		ID:           uuid.NewString(),
		Meta:         map[string]any{"lastUpdated": time.Now().UTC().Format(store.InstantLayout)},
		Type:         "searchset",
		Link:         []bundleLink{{Relation: "self", URL: searchURL(base, typ, params, q.Cursor)}},
	}
	if page.Total >= 0 {
		b.Total = &page.Total
	}
	if page.Next != "" {
		b.Link = append(b.Link, bundleLink{Relation: "next", URL: searchURL(base, typ, params, page.Next)})
	}
	if page.Previous != "" {
		b.Link = append(b.Link, bundleLink{Relation: "previous", URL: searchURL(base, typ, params, page.Previous)})
	}
	if err := b.add(base, q, page.Entries, "match"); err != nil {
		return nil, err
	}
	if err := b.add(base, q, page.Included, "include"); err != nil {
		return nil, err
	}
	return b, nil
}

// add appends resources as entries of the given search mode.
func (b *searchBundleBody) add(base string, q *search.Query, resources []*store.Resource, mode string) error {
	for _, r := range resources {
		body, err := subset(r.Type, r.JSON, q)
		if err != nil {
			return err
		}
		b.Entry = append(b.Entry, searchEntry{
			FullURL:  base + "/" + r.Type + "/" + r.ID,
			Resource: body,
			Search:   map[string]string{"mode": mode},
		})
	}
	return nil
}

// searchURL is the GET form of the search with the paging cursor replaced.
func searchURL(base, typ string, params url.Values, cursor string) string {
	q := url.Values{}
	for k, vs := range params {
		if k != "_cursor" {
			q[k] = vs
		}
	}
	if cursor != "" {
		q.Set("_cursor", cursor)
	}
	u := base
	if typ != "" { // "" is the system search, at the base itself
		u += "/" + typ
	}
	if enc := q.Encode(); enc != "" {
		u += "?" + enc
	}
	return u
}

// alwaysKept are returned whatever _elements or _summary select.
var alwaysKept = []string{"resourceType", "id", "meta"}

// subset applies _elements and _summary=true|text|data to a resource,
// keeping its key order and number text.
func subset(typ string, resourceJSON []byte, q *search.Query) ([]byte, error) {
	var keep func(key string) bool
	switch {
	case q.Summary == "true":
		keep = func(k string) bool { return slices.Contains(alwaysKept, k) || fhirschema.IsSummaryElement(typ, k) }
	case len(q.Elements) > 0:
		keep = func(k string) bool { return slices.Contains(alwaysKept, k) || fhirschema.NamedBy(k, q.Elements) }
	case q.Summary == "text":
		keep = func(k string) bool { return slices.Contains(alwaysKept, k) || k == "text" }
	case q.Summary == "data":
		keep = func(k string) bool { return k != "text" }
	default:
		return resourceJSON, nil
	}
	return document.Subset(resourceJSON, keep)
}

// cloneValues copies params so that a handler can add to them.
func cloneValues(params url.Values) url.Values {
	out := make(url.Values, len(params))
	for k, vs := range params {
		out[k] = slices.Clone(vs)
	}
	return out
}
