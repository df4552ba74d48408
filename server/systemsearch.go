package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// systemParams are the parameters of a system search: those every resource
// type has, and the result parameters (_has is recognised by its prefix).
var systemParams = map[string]bool{
	"_id": true, "_lastUpdated": true, "_tag": true, "_profile": true, "_security": true, "_source": true,
	"_list": true, "_type": true, "_has": true,
	"_sort": true, "_count": true, "_summary": true, "_elements": true, "_total": true, "_cursor": true,
	"_include": true, "_revinclude": true, "_format": true, "_pretty": true,
}

// systemSorts are the keys a system search sorts by: the only ones every type has a value for.
var systemSorts = []string{"_lastUpdated", "_id"}

// searchSystem serves GET [base]?params and POST [base]/_search: one search
// across the types the caller may search (or those of _type), merged into
// one searchset (see store.SearchSystem).
func (s *Server) searchSystem(c *gin.Context) {
	params, ok := s.searchRequest(c)
	if !ok {
		return
	}
	opts := search.ParseOptions{Strict: prefer(c, "handling") == "strict"}
	ignored, err := checkSystemParams(params, opts)
	if err != nil {
		s.abort(c, err)
		return
	}
	parts, result, err := s.systemParts(c, params, opts)
	if err != nil {
		s.abort(c, searchError(err))
		return
	}
	page, err := s.store.SearchSystem(c.Request.Context(), c.GetString(tenantKey), parts)
	if err != nil {
		s.abort(c, searchError(err))
		return
	}
	page.Included = s.visibleOnly(c, page.Included)
	result.Ignored = append(result.Ignored, ignored...)
	b, err := searchBundle(c, "", params, result, page)
	if err != nil {
		s.abort(c, err)
		return
	}
	writeJSON(c, http.StatusOK, b)
}

// checkSystemParams refuses (strict) or lists for removal (lenient) the
// parameters that are not common to every type, and checks _sort.
func checkSystemParams(params url.Values, opts search.ParseOptions) ([]string, error) {
	var ignored []string
	for name := range params {
		code, _, _ := strings.Cut(name, ":")
		if systemParams[code] && !strings.Contains(name, ".") {
			continue
		}
		if opts.Strict {
			return nil, fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("%q is not a parameter of every resource type; a system search takes %s", name, "_id, _lastUpdated, _tag, _profile, _security, _source, _list, _has, _type and the result parameters"), name)
		}
		ignored = append(ignored, name)
	}
	for _, name := range ignored {
		params.Del(name)
	}
	for _, key := range strings.Split(params.Get("_sort"), ",") {
		if key = strings.TrimPrefix(strings.TrimSpace(key), "-"); key != "" && !slices.Contains(systemSorts, key) {
			return nil, fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("a system search sorts by _lastUpdated or _id, not %q", key), "_sort")
		}
	}
	return ignored, nil
}

// systemParts builds the query of each type the search covers, and the
// query whose result parameters the Bundle reflects.
func (s *Server) systemParts(c *gin.Context, params url.Values, opts search.ParseOptions) ([]*search.Query, *search.Query, error) {
	ctx, tenant := c.Request.Context(), c.GetString(tenantKey)
	types, err := s.systemTypes(c, params)
	if err != nil {
		return nil, nil, err
	}
	members, err := s.listMembers(c, params.Get("_list"))
	if err != nil {
		return nil, nil, err
	}
	result, err := s.cfg.Registry.Parse("Patient", resultParams(params), opts)
	if err != nil {
		return nil, nil, err
	}
	var parts []*search.Query
	for _, typ := range types {
		p := typeParams(params, typ)
		if members != nil {
			if len(members[typ]) == 0 {
				continue
			}
			p.Add("_id", strings.Join(members[typ], ","))
		}
		q, none, err := s.systemPart(ctx, tenant, typ, p, opts)
		if err != nil {
			return nil, nil, err
		}
		if !none {
			parts = append(parts, q)
		}
	}
	return parts, result, nil
}

// systemPart is the query of one type, narrowed to the token patient's
// compartment when the caller's scope on the type is a patient scope.
func (s *Server) systemPart(ctx context.Context, tenant, typ string, params url.Values, opts search.ParseOptions) (*search.Query, bool, error) {
	a := accessOf(ctx)
	g := a.grant(typ, auth.Search)
	switch {
	case g == auth.PatientOnly && hasReverseChain(params):
		return nil, false, fail(http.StatusForbidden, "forbidden", "_has is not available to a patient scope on "+typ, "_has")
	case restricted(g, typ) && typ == "Patient":
		params.Add("_id", a.patient)
	case restricted(g, typ):
		return s.compartmentQuery(ctx, tenant, typ, a.patient, params, opts)
	}
	reg, err := s.tenantRegistry(ctx, tenant)
	if err != nil {
		return nil, false, err
	}
	q, err := reg.Parse(typ, params, opts)
	return q, false, err
}

// systemTypes are the types a system search covers: those of _type, or
// every type the caller may search; _has narrows them to the types its
// reference parameters can point at.
func (s *Server) systemTypes(c *gin.Context, params url.Values) ([]string, error) {
	a := accessOf(c.Request.Context())
	var types []string
	if vs := params["_type"]; len(vs) > 0 {
		for _, t := range strings.Split(strings.Join(vs, ","), ",") {
			t = strings.TrimSpace(t)
			switch {
			case !isResourceType(t):
				return nil, fail(http.StatusBadRequest, "value", "_type: unknown resource type "+quote(t), "_type")
			case a.grant(t, auth.Search) == auth.Denied:
				return nil, denied(t, auth.Search)
			case !slices.Contains(types, t):
				types = append(types, t)
			}
		}
	} else {
		for _, t := range fhirschema.ResourceTypes() {
			if a.grant(t, auth.Search) != auth.Denied {
				types = append(types, t)
			}
		}
	}
	held, err := s.store.HeldTypes(c.Request.Context(), c.GetString(tenantKey))
	if err != nil {
		return nil, err
	}
	types = slices.DeleteFunc(types, func(t string) bool { return !slices.Contains(held, t) })
	for name := range params {
		if !strings.HasPrefix(name, "_has:") {
			continue
		}
		parts := strings.SplitN(name, ":", 4)
		if len(parts) < 3 {
			continue // the parse reports it
		}
		if p, ok := s.cfg.Registry.Lookup(parts[1], parts[2]); ok && p.Type == "reference" {
			types = slices.DeleteFunc(types, func(t string) bool { return !slices.Contains(p.Target, t) })
		}
	}
	slices.Sort(types)
	return types, nil
}

// typeParams are the parameters of one type's part: _type and _list are
// resolved already, and each _include applies to the type it names.
func typeParams(params url.Values, typ string) url.Values {
	out := url.Values{}
	for name, vs := range params {
		code, modifier, _ := strings.Cut(name, ":")
		switch {
		case code == "_type" || code == "_list":
		case code == "_include" && modifier == "":
			for _, v := range vs {
				if v == "*" || strings.HasPrefix(v, typ+":") {
					out.Add(name, v)
				}
			}
		default:
			out[name] = slices.Clone(vs)
		}
	}
	return out
}

// resultParams are the result parameters of params, which every part shares.
func resultParams(params url.Values) url.Values {
	out := url.Values{}
	for _, name := range []string{"_count", "_sort", "_summary", "_elements", "_total", "_cursor"} {
		if vs, ok := params[name]; ok {
			out[name] = vs
		}
	}
	return out
}

// listMembers resolves _list=id to the ids of the List's items by type (nil
// when _list is not given; empty when the List is unknown or lists nothing
// this server holds). Items marked deleted are not members.
func (s *Server) listMembers(c *gin.Context, id string) (map[string][]string, error) {
	if id == "" {
		return nil, nil
	}
	if strings.HasPrefix(id, "$") {
		return nil, fail(http.StatusBadRequest, "not-supported", "functional lists such as "+quote(id)+" are not supported; _list takes the id of a List", "_list")
	}
	members := map[string][]string{}
	list, err := s.store.Read(c.Request.Context(), c.GetString(tenantKey), "List", id)
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrGone):
		return members, nil
	case err != nil:
		return nil, err
	case !accessOf(c.Request.Context()).canSee(list):
		return nil, outsideCompartment("List", id)
	}
	var body struct {
		Entry []struct {
			Deleted bool `json:"deleted"`
			Item    struct {
				Reference string `json:"reference"`
			} `json:"item"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(list.JSON, &body); err != nil {
		return nil, fmt.Errorf("read List/%s: %w", id, err)
	}
	for _, e := range body.Entry {
		typ, itemID, ok := localReference(e.Item.Reference)
		if ok && !e.Deleted && !slices.Contains(members[typ], itemID) {
			members[typ] = append(members[typ], itemID)
		}
	}
	return members, nil
}

// localReference splits a Type/id reference, or an absolute URL ending in
// Type/id, into its type and id.
func localReference(ref string) (string, string, bool) {
	parts := strings.Split(strings.TrimRight(ref, "/"), "/")
	if n := len(parts); n >= 2 && isResourceType(parts[n-2]) && store.ValidateID(parts[n-1]) == nil {
		return parts[n-2], parts[n-1], true
	}
	return "", "", false
}
