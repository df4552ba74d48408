package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/errgroup"

	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// compartmentSearch serves GET Patient/{id}/{type}: the search of type
// restricted to the patient's compartment; the other parameters apply as in
// a type search.
func (s *Server) compartmentSearch(c *gin.Context, compartment, id, typ string) {
	if _, err := s.checkCompartment(c, compartment, id, typ); err != nil {
		s.abort(c, err)
		return
	}
	params := c.Request.URL.Query()
	opts := search.ParseOptions{Strict: prefer(c, "handling") == "strict"}
	q, page, err := s.compartmentPage(c.Request.Context(), c.GetString(tenantKey), typ, id, params, opts)
	if err != nil {
		s.abort(c, searchError(err))
		return
	}
	page.Included = s.visibleOnly(c, page.Included)
	b, err := searchBundle(c, compartment+"/"+id+"/"+typ, params, q, page)
	if err != nil {
		s.abort(c, err)
		return
	}
	writeJSON(c, http.StatusOK, b)
}

// checkCompartment returns the patient of a compartment request: 404
// unless compartment is Patient and the patient exists (410 if deleted, as
// a read), 404 for an unknown type, 400 for a type outside the Patient
// compartment; typ "" ($everything) names no type.
func (s *Server) checkCompartment(c *gin.Context, compartment, id, typ string) (*store.Resource, error) {
	if compartment != "Patient" {
		return nil, fail(http.StatusNotFound, "not-supported", "only the Patient compartment is supported, not "+quote(compartment), "")
	}
	if s.cfg.Registry == nil {
		return nil, fail(http.StatusNotImplemented, "not-supported", "search is not configured", "")
	}
	if typ != "" && !isResourceType(typ) {
		return nil, fail(http.StatusNotFound, "not-supported", "unknown resource type "+quote(typ), "")
	}
	if _, ok := search.PatientCompartmentParams(typ); typ != "" && !ok {
		return nil, fail(http.StatusBadRequest, "not-supported", typ+" resources are never in a Patient compartment", "")
	}
	if typ != "" && !accessOf(c.Request.Context()).searchesCompartment(typ, id) {
		return nil, outsideCompartment("Patient", id)
	}
	patient, err := s.store.Read(c.Request.Context(), c.GetString(tenantKey), "Patient", id)
	if err != nil {
		return nil, fmt.Errorf("patient compartment: %w", err)
	}
	return patient, nil
}

// compartmentPage runs the search of typ with params in the compartment of
// patient id (see compartmentQuery).
func (s *Server) compartmentPage(ctx context.Context, tenant, typ, id string, params url.Values, opts search.ParseOptions) (*search.Query, *store.SearchPage, error) {
	q, none, err := s.compartmentQuery(ctx, tenant, typ, id, params, opts)
	if err != nil {
		return nil, nil, err
	}
	if none {
		return q, emptyPage(q), nil
	}
	page, err := s.store.Search(ctx, tenant, q)
	return q, page, err
}

// compartmentQuery is the search of typ with params in the compartment of
// patient id. With one linking parameter that is one engine search. With
// several, the ids matching each are collected first, and the query is the
// search with _id in their union, which pages and sorts as any search;
// none tells that no resource can match (the query then only carries the
// result parameters).
func (s *Server) compartmentQuery(ctx context.Context, tenant, typ, id string, params url.Values, opts search.ParseOptions) (q *search.Query, none bool, err error) {
	reg, err := s.tenantRegistry(ctx, tenant)
	if err != nil {
		return nil, false, err
	}
	queries, err := reg.CompartmentQueries(typ, id, params, opts)
	if err != nil {
		return nil, false, err
	}
	if len(queries) == 1 {
		return queries[0], false, nil
	}
	ids, err := s.matchingIDs(ctx, tenant, queries)
	if err != nil {
		return nil, false, err
	}
	union := cloneValues(params)
	if len(ids) > 0 { // _id needs a value; without one, parse the rest and answer nothing
		union.Add("_id", strings.Join(ids, ","))
	}
	q, err = reg.Parse(typ, union, opts)
	return q, len(ids) == 0, err
}

// matchingIDs are the sorted ids of the resources matching any of queries,
// read from the index alone.
func (s *Server) matchingIDs(ctx context.Context, tenant string, queries []*search.Query) ([]string, error) {
	seen := map[string]bool{}
	for _, q := range queries {
		ids, err := s.store.MatchingIDs(ctx, tenant, q)
		if err != nil {
			return nil, fmt.Errorf("patient compartment of %s: %w", q.Type, err)
		}
		for _, id := range ids {
			seen[id] = true
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// everything serves GET Patient/{id}/$everything: the patient, then the
// resources of every compartment type (Patient first, then alphabetically),
// each type ordered by id. It pages like a search: _count entries a page
// (default 10, at most everythingMaxCount) and a next link whose opaque cursor names the
// type reached and the engine's keyset cursor within it, so following the
// links visits every resource once. _type restricts the types (as do the
// caller's read rights, see mayRead); start and end keep the resources
// whose care date (search.Registry.CareDateParam) overlaps that range,
// and the resources of types without one; _since keeps the resources
// changed at or after it, the patient included. Other parameters are
// ignored. The total counts every resource of every page; the first page
// counts it and its links carry it, so later pages repeat it.
func (s *Server) everything(c *gin.Context, compartment, id string) {
	patient, err := s.checkCompartment(c, compartment, id, "")
	if err != nil {
		s.abort(c, err)
		return
	}
	params, err := everythingParams(c.Request.URL.Query())
	if err != nil {
		s.abort(c, err)
		return
	}
	count := search.DefaultCount
	if v := params.Get("_count"); v != "" {
		count, _ = strconv.Atoi(v) // checked by everythingParams
	}
	a := accessOf(c.Request.Context())
	types := slices.DeleteFunc(everythingTypes(params.Get("_type")), func(t string) bool { return !a.searchesCompartment(t, id) })
	ctx, tenant := c.Request.Context(), c.GetString(tenantKey)
	types = s.heldCompartmentTypes(ctx, tenant, types, params.Get("_cursor"))
	start, cur, total, err := decodeEverythingCursor(params.Get("_cursor"), types)
	if err != nil {
		s.abort(c, err)
		return
	}
	if !a.canSee(patient) && !slices.ContainsFunc(types, func(t string) bool { return a.grant(t, auth.Search) == auth.Full }) {
		s.abort(c, outsideCompartment("Patient", id))
		return
	}
	withPatient := slices.Contains(types, "Patient") && a.canSee(patient) && changedSince(patient, params)
	if total < 0 {
		if total, err = s.everythingTotal(ctx, tenant, types, id, params, withPatient); err != nil {
			s.abort(c, searchError(err))
			return
		}
	}
	page := &store.SearchPage{Total: total}
	if params.Get("_cursor") == "" && withPatient {
		page.Entries = append(page.Entries, patient)
	}
	if err := s.everythingEntries(ctx, tenant, id, types, start, cur, params, count, page); err != nil {
		s.abort(c, searchError(err))
		return
	}
	q := &search.Query{Type: "Patient", Count: count, Cursor: params.Get("_cursor")}
	b, err := searchBundle(c, compartment+"/"+id+"/$everything", params, q, page)
	if err != nil {
		s.abort(c, err)
		return
	}
	writeJSON(c, http.StatusOK, b)
}

// everythingEntries fills page with the resources of the compartment
// types from types[start] at the engine cursor cur, up to count, reading
// each type a search page (at most search.MaxCount) at a time, and sets
// page.Next when resources remain.
func (s *Server) everythingEntries(ctx context.Context, tenant, id string, types []string, start int, cur string, params url.Values, count int, page *store.SearchPage) error {
	for i := start; i < len(types) && page.Next == ""; i++ {
		if i > start {
			cur = ""
		}
		for {
			// When the page is full, read one more resource only to learn whether a next page exists.
			remaining := count - len(page.Entries)
			sub := url.Values{"_count": {strconv.Itoa(min(max(remaining, 1), search.MaxCount))}, "_sort": {"_id"}, "_total": {"none"}}
			if cur != "" {
				sub.Set("_cursor", cur)
			}
			if types[i] == "Patient" { // the patient itself came first
				sub.Set("_id:not", id)
			}
			s.everythingFilters(sub, types[i], params)
			_, typePage, err := s.compartmentPage(ctx, tenant, types[i], id, sub, search.ParseOptions{})
			if err != nil {
				return err
			}
			if remaining == 0 {
				if len(typePage.Entries) > 0 {
					page.Next = encodeEverythingCursor(types[i], cur, page.Total)
				}
				break
			}
			page.Entries = append(page.Entries, typePage.Entries...)
			if typePage.Next == "" {
				break
			}
			if len(page.Entries) >= count {
				page.Next = encodeEverythingCursor(types[i], typePage.Next, page.Total)
				break
			}
			cur = typePage.Next
		}
	}
	return nil
}

// everythingMaxCount is the largest page of $everything: a patient's
// record in a page or a few, read a search page at a time.
const everythingMaxCount = 1000

// everythingParams keeps the parameters $everything reads (_count, _type,
// _cursor) after checking them.
func everythingParams(all url.Values) (url.Values, error) {
	params := url.Values{}
	if v := all.Get("_count"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > everythingMaxCount {
			return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("must be an integer from 1 to %d, not %q", everythingMaxCount, v), "_count")
		}
		params.Set("_count", v)
	}
	if v := all.Get("_type"); v != "" {
		for _, t := range strings.Split(v, ",") {
			if _, ok := search.PatientCompartmentParams(t); !ok {
				return nil, fail(http.StatusBadRequest, "value", quote(t)+" is not a type of the Patient compartment", "_type")
			}
		}
		params.Set("_type", v)
	}
	if v := all.Get("_cursor"); v != "" {
		params.Set("_cursor", v)
	}
	for _, name := range []string{"start", "end", "_since"} {
		v := all.Get(name)
		if v == "" {
			continue
		}
		if _, err := search.ParseDateRange(v); err != nil {
			return nil, fail(http.StatusBadRequest, "value", name+": "+err.Error(), name)
		}
		params.Set(name, v)
	}
	return params, nil
}

// everythingFilters adds to the search of one type what start, end and
// _since ask: a care date overlapping [start, end] (on types that have
// one) and a lastUpdated at or after _since.
func (s *Server) everythingFilters(sub url.Values, typ string, params url.Values) {
	if care := s.cfg.Registry.CareDateParam(typ); care != "" {
		if v := params.Get("start"); v != "" {
			sub.Add(care, "ge"+v)
		}
		if v := params.Get("end"); v != "" {
			sub.Add(care, "le"+v)
		}
	}
	if v := params.Get("_since"); v != "" {
		sub.Add("_lastUpdated", "ge"+v)
	}
}

// changedSince tells whether res changed at or after $everything's _since.
func changedSince(res *store.Resource, params url.Values) bool {
	v := params.Get("_since")
	if v == "" {
		return true
	}
	r, err := search.ParseDateRange(v)
	return err == nil && !res.LastUpdated.Before(r.Lo)
}

// everythingTypes are the compartment types $everything reads, in order:
// Patient, then the others alphabetically; only those of _type when given.
func everythingTypes(only string) []string {
	types := []string{"Patient"}
	for _, t := range search.PatientCompartmentTypes() {
		if t != "Patient" {
			types = append(types, t)
		}
	}
	if only == "" {
		return types
	}
	wanted := strings.Split(only, ",")
	return slices.DeleteFunc(types, func(t string) bool { return !slices.Contains(wanted, t) })
}

// heldCompartmentTypes keeps the types the tenant holds resources of (and
// the one a paging cursor names): one listing of the database's
// collections spares a count and a search per empty type, most of the
// compartment's.
func (s *Server) heldCompartmentTypes(ctx context.Context, tenant string, types []string, cursor string) []string {
	held, err := s.store.HeldTypes(ctx, tenant)
	if err != nil {
		return types // every type is read, as without the listing
	}
	var named string
	if raw, err := base64.RawURLEncoding.DecodeString(cursor); err == nil {
		named, _, _ = strings.Cut(string(raw), "\n")
	}
	return slices.DeleteFunc(types, func(t string) bool { return t != named && !slices.Contains(held, t) })
}

// everythingTotal counts the resources of $everything: the patient when
// it is one of them, and the matches of each type's compartment search
// with the same filters as its pages.
func (s *Server) everythingTotal(ctx context.Context, tenant string, types []string, id string, params url.Values, withPatient bool) (int64, error) {
	counts := make([]int64, len(types))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(everythingCounters)
	for i, typ := range types {
		g.Go(func() error {
			sub := url.Values{"_summary": {"count"}}
			if typ == "Patient" {
				sub.Set("_id:not", id)
			}
			s.everythingFilters(sub, typ, params)
			n, err := s.compartmentCount(gctx, tenant, typ, id, sub)
			counts[i] = n
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	var total int64
	if withPatient {
		total = 1
	}
	for _, n := range counts {
		total += n
	}
	return total, nil
}

// everythingCounters is how many types $everything counts at once.
const everythingCounters = 4

// compartmentCount counts the resources of typ in the compartment of
// patient id that params select: one count, or, for a type linked to the
// patient by several parameters, the union of their matches' ids.
func (s *Server) compartmentCount(ctx context.Context, tenant, typ, id string, params url.Values) (int64, error) {
	reg, err := s.tenantRegistry(ctx, tenant)
	if err != nil {
		return 0, err
	}
	queries, err := reg.CompartmentQueries(typ, id, params, search.ParseOptions{})
	if err != nil {
		return 0, err
	}
	if len(queries) == 1 {
		page, err := s.store.Search(ctx, tenant, queries[0])
		if err != nil {
			return 0, err
		}
		return max(page.Total, 0), nil
	}
	ids, err := s.matchingIDs(ctx, tenant, queries)
	return int64(len(ids)), err
}

// encodeEverythingCursor is the opaque position of a $everything page: a
// type, the engine's cursor within its compartment search and the total
// the first page counted.
func encodeEverythingCursor(typ, cursor string, total int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typ + "\n" + cursor + "\n" + strconv.FormatInt(total, 10)))
}

// decodeEverythingCursor returns the index in types, the engine cursor
// and the total of a position; 0, "" and -1 (not counted yet) for the
// first page. A position without a total (an older link) counts again.
func decodeEverythingCursor(v string, types []string) (int, string, int64, error) {
	if v == "" {
		return 0, "", -1, nil
	}
	bad := fail(http.StatusBadRequest, "value", "the paging cursor is not valid; start again from the first page", "_cursor")
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return 0, "", 0, bad
	}
	parts := strings.Split(string(raw), "\n")
	if len(parts) != 2 && len(parts) != 3 {
		return 0, "", 0, bad
	}
	i := slices.Index(types, parts[0])
	if i < 0 {
		return 0, "", 0, bad
	}
	total := int64(-1)
	if len(parts) == 3 {
		if total, err = strconv.ParseInt(parts[2], 10, 64); err != nil || total < 0 {
			return 0, "", 0, bad
		}
	}
	return i, parts[1], total, nil
}
