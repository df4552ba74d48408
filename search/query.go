package search

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Paging limits of the search API (FHIR default 10, at most 100).
const (
	DefaultCount = 10
	MaxCount     = 100
)

// Error is a search request the server cannot answer (400); Param names
// the offending parameter.
type Error struct {
	Param string
	Msg   string
}

func (e *Error) Error() string { return e.Param + ": " + e.Msg }

func errorf(param, format string, args ...any) *Error {
	return &Error{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// SortKey is one _sort key: a field of the stored sort document.
type SortKey struct {
	Param      string
	Descending bool
}

// Query is a parsed search: a database filter over idx, the checks the
// filter cannot express exactly (PostFilter), and the result controls.
type Query struct {
	Type string
	// Conditions are ANDed; see Filter.
	Conditions []bson.D
	// PostFilter drops false positives of two-sided range conditions on
	// resources with several values; nil when the filter is exact.
	PostFilter func(idx bson.Raw) bool
	Sort       []SortKey
	Count      int
	Summary    string   // "", true, text, data, count, false
	Elements   []string // _elements
	Total      string   // none, estimate, accurate ("" = accurate)
	Cursor     string   // opaque position of a next/previous page
	// Has are reverse chains (_has): resources of another type that must
	// refer to each match.
	Has []*Has
	// Ignored are the unknown parameters a lenient parse skipped.
	Ignored []string
}

// Has is one _has condition: some Type resource matching Query refers to
// the match through its reference parameter Param.
type Has struct {
	Type, Param string
	Query       *Query
}

// aliases name searches of the service contract that are another query
// under a FHIR name: Patient?episode-status=x is
// Patient?_has:EpisodeOfCare:patient:status=x.
var aliases = map[string]map[string]string{
	"Patient": {"episode-status": "_has:EpisodeOfCare:patient:status"},
}

// ParseOptions tune parsing.
type ParseOptions struct {
	// Strict rejects unknown parameters; by default they are ignored and
	// listed in Query.Ignored (FHIR's lenient handling).
	Strict bool
}

// resultParams are handled by the server, not turned into conditions.
var resultParams = map[string]bool{
	"_count": true, "_sort": true, "_summary": true, "_elements": true, "_total": true,
	"_format": true, "_pretty": true, "_cursor": true,
}

// unsupportedParams are parts of the FHIR grammar this server refuses
// explicitly rather than ignore.
var unsupportedParams = map[string]string{
	"_include": "_include is not supported yet", "_revinclude": "_revinclude is not supported yet",
	"_contained":     "_contained is not supported",
	"_containedType": "_containedType is not supported", "_text": "_text is not supported",
	"_content": "_content is not supported", "_list": "_list is not supported",
	"_query": "_query is not supported", "_filter": "_filter is not supported",
}

// Parse turns query parameters into a Query for resourceType. Repeated
// parameters are ANDed, comma-separated values ORed.
func (r *Registry) Parse(resourceType string, params url.Values, opts ParseOptions) (*Query, error) {
	q := &Query{Type: resourceType, Count: DefaultCount}
	if err := q.parseResultParams(r, params); err != nil {
		return nil, err
	}
	var post []func(bson.Raw) bool
	for _, name := range sortedKeys(params) {
		values := params[name]
		if alias, ok := aliases[resourceType][name]; ok {
			name = alias
		}
		code, modifier, _ := strings.Cut(name, ":")
		if resultParams[code] {
			continue
		}
		if code == "_has" {
			h, err := r.parseHas(name, modifier, values, opts)
			if err != nil {
				return nil, err
			}
			q.Has = append(q.Has, h)
			continue
		}
		if msg, ok := unsupportedParams[code]; ok {
			return nil, errorf(name, "%s", msg)
		}
		if strings.Contains(code, ".") || strings.Contains(modifier, ".") {
			return nil, errorf(name, "chained parameters are not supported yet")
		}
		p, ok := r.Lookup(resourceType, code)
		if !ok {
			if !opts.Strict {
				q.Ignored = append(q.Ignored, name)
				continue
			}
			return nil, errorf(name, "unknown search parameter %q for %s", code, resourceType)
		}
		for _, value := range values {
			cond, check, err := condition(p, name, modifier, value)
			if err != nil {
				return nil, err
			}
			q.Conditions = append(q.Conditions, cond)
			if check != nil {
				post = append(post, check)
			}
		}
	}
	if len(post) > 0 {
		q.PostFilter = func(idx bson.Raw) bool {
			for _, ok := range post {
				if !ok(idx) {
					return false
				}
			}
			return true
		}
	}
	return q, nil
}

// Aliases lists the alias parameters of a resource type (see aliases).
func Aliases(resourceType string) []string {
	var out []string
	for name := range aliases[resourceType] {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// parseHas reads _has:Type:param:rest=values; rest is a parameter of Type
// (itself possibly another _has).
func (r *Registry) parseHas(name, spec string, values []string, opts ParseOptions) (*Has, error) {
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil, errorf(name, "_has takes _has:Type:reference-parameter:parameter=value")
	}
	typ, ref, rest := parts[0], parts[1], parts[2]
	p, ok := r.Lookup(typ, ref)
	if !ok || p.Type != "reference" {
		return nil, errorf(name, "%q is not a reference parameter of %s", ref, typ)
	}
	sub, err := r.Parse(typ, url.Values{rest: values}, opts)
	if err != nil {
		return nil, errorf(name, "%v", err)
	}
	if len(sub.Conditions) == 0 && len(sub.Has) == 0 {
		return nil, errorf(name, "_has needs a condition on %s", typ)
	}
	return &Has{Type: typ, Param: ref, Query: sub}, nil
}

// Filter is the database filter over the stored document (idx fields).
func (q *Query) Filter() bson.D {
	if len(q.Conditions) == 0 {
		return bson.D{}
	}
	all := make(bson.A, len(q.Conditions))
	for i, c := range q.Conditions {
		all[i] = c
	}
	return bson.D{{Key: "$and", Value: all}}
}

func (q *Query) parseResultParams(r *Registry, params url.Values) error {
	switch v := params.Get("_summary"); v {
	case "", "true", "text", "data", "count", "false":
		q.Summary = v
	default:
		return errorf("_summary", "must be true, text, data, count or false, not %q", v)
	}
	if v := params.Get("_count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxCount {
			return errorf("_count", "must be an integer from 1 to %d (use _summary=count for the total only), not %q", MaxCount, v)
		}
		q.Count = n
	}
	switch v := params.Get("_total"); v {
	case "", "none", "estimate", "accurate":
		q.Total = v
	default:
		return errorf("_total", "must be none, estimate or accurate, not %q", v)
	}
	if v := params.Get("_elements"); v != "" {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				q.Elements = append(q.Elements, e)
			}
		}
	}
	q.Cursor = params.Get("_cursor")
	return q.parseSort(r, params.Get("_sort"))
}

func (q *Query) parseSort(r *Registry, v string) error {
	if v == "" {
		return nil
	}
	for _, key := range strings.Split(v, ",") {
		key = strings.TrimSpace(key)
		desc := strings.HasPrefix(key, "-")
		code := strings.TrimPrefix(key, "-")
		p, ok := r.Lookup(q.Type, code)
		if !ok || !sortable[p.Type] {
			return errorf("_sort", "cannot sort %s by %q", q.Type, code)
		}
		q.Sort = append(q.Sort, SortKey{Param: code, Descending: desc})
	}
	return nil
}

// sortable are the parameter types with sort values.
var sortable = map[string]bool{"string": true, "token": true, "reference": true, "date": true, "number": true, "quantity": true, "uri": true}

func sortedKeys(v url.Values) []string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
