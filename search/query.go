package search

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

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
	// Type is the parameter's type, which decides the kind of its sort values.
	Type string
	// OneValue tells that the parameter has at most one sort value on any
	// resource: its sort field holds only the least (a), for both orders.
	OneValue bool
	// Range tells that the parameter has at most one range on any resource:
	// it has no sort field, and sorts by the range's bounds in idx.
	Range bool
}

// MaxSortKeys is how many keys _sort takes.
const MaxSortKeys = 5

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
	// Chains are chained parameters: the reference must point at a
	// resource matching another search.
	Chains []*Chain
	// Includes and Revincludes add referenced and referring resources.
	Includes, Revincludes []*Include
	// Uses are the tenant's own parameters the search reads, chains and
	// _has included (set by a tenant's registry, see Registry.With).
	Uses []ParamUse
}

// Chain is one chained parameter: the reference parameter Param must point
// at a resource of one of the targets' types matching its query.
type Chain struct {
	Param   string
	Targets []*ChainTarget
}

// ChainTarget is a type a chain may lead to, with the search it must match.
type ChainTarget struct {
	Type  string
	Query *Query
}

// Include is one _include or _revinclude: resources of Source refer through
// their reference parameter Param to resources of Targets.
type Include struct {
	Source  string
	Param   string
	Targets []string
	Iterate bool
}

// MaxChainDepth bounds chained parameters (subject.organization.name is 2).
const MaxChainDepth = 2

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
	"_contained":     "_contained is not supported",
	"_containedType": "_containedType is not supported", "_list": "_list is not supported",
	"_query": "_query is not supported",
}

// Parse turns query parameters into a Query for resourceType. Repeated
// parameters are ANDed, comma-separated values ORed.
func (r *Registry) Parse(resourceType string, params url.Values, opts ParseOptions) (*Query, error) {
	if r.builtin == nil || r.uses != nil {
		return r.parse(resourceType, params, opts)
	}
	// A tenant's registry notes the tenant's parameters it looks up while
	// parsing, in sub-queries too, on a copy of its own.
	var uses []ParamUse
	rr := *r
	rr.uses = &uses
	q, err := rr.parse(resourceType, params, opts)
	if q != nil && len(uses) > 0 {
		slices.SortFunc(uses, func(a, b ParamUse) int { return strings.Compare(a.Type+" "+a.Code, b.Type+" "+b.Code) })
		q.Uses = slices.Compact(uses)
	}
	return q, err
}

func (r *Registry) parse(resourceType string, params url.Values, opts ParseOptions) (*Query, error) {
	q := &Query{Type: resourceType, Count: DefaultCount}
	if err := checkUTF8(params); err != nil {
		return nil, err
	}
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
		if code == "_filter" {
			for _, v := range values {
				cond, check, err := r.parseFilter(resourceType, v)
				if err != nil {
					return nil, err
				}
				q.Conditions = append(q.Conditions, cond)
				if check != nil {
					post = append(post, check)
				}
			}
			continue
		}
		if msg, ok := unsupportedParams[code]; ok {
			return nil, errorf(name, "%s", msg)
		}
		if strings.Contains(name, ".") {
			ch, err := r.parseChain(resourceType, name, values)
			if err != nil {
				return nil, err
			}
			q.Chains = append(q.Chains, ch)
			continue
		}
		if code == "_include" || code == "_revinclude" {
			if err := r.parseInclude(q, name, modifier, values); err != nil {
				return nil, err
			}
			continue
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

// parseChain reads ref[:Type].param=value (param may chain again).
func (r *Registry) parseChain(resourceType, name string, values []string) (*Chain, error) {
	if strings.Count(name, ".") > MaxChainDepth {
		return nil, errorf(name, "chains are limited to %d levels", MaxChainDepth)
	}
	head, rest, _ := strings.Cut(name, ".")
	code, typ, _ := strings.Cut(head, ":")
	p, ok := r.Lookup(resourceType, code)
	switch {
	case !ok:
		return nil, errorf(name, "unknown search parameter %q for %s", code, resourceType)
	case p.Type != "reference":
		return nil, errorf(name, "%q is a %s parameter; only reference parameters can be chained", code, p.Type)
	}
	targets := p.Target
	if typ != "" {
		targets = []string{typ}
	}
	restCode, _, _ := strings.Cut(strings.SplitN(rest, ".", 2)[0], ":")
	ch := &Chain{Param: code}
	for _, t := range targets {
		if _, ok := r.Lookup(t, restCode); !ok {
			continue
		}
		sub, err := r.Parse(t, url.Values{rest: values}, ParseOptions{Strict: true})
		if err != nil {
			return nil, errorf(name, "%v", err)
		}
		ch.Targets = append(ch.Targets, &ChainTarget{Type: t, Query: sub})
	}
	if len(ch.Targets) == 0 {
		return nil, errorf(name, "no resource type %s can refer to has a parameter %q", code, restCode)
	}
	return ch, nil
}

// parseInclude reads _include and _revinclude values: Type:param[:target],
// or * for every reference parameter; the :iterate modifier applies them to
// included resources too.
func (r *Registry) parseInclude(q *Query, name, modifier string, values []string) error {
	if modifier != "" && modifier != "iterate" && modifier != "recurse" {
		return errorf(name, "the :%s modifier is not supported", modifier)
	}
	rev := strings.HasPrefix(name, "_revinclude")
	for _, v := range values {
		incs, err := r.includeSpec(q.Type, v, rev, modifier != "")
		if err != nil {
			return errorf(name, "%v", err)
		}
		if rev {
			q.Revincludes = append(q.Revincludes, incs...)
		} else {
			q.Includes = append(q.Includes, incs...)
		}
	}
	return nil
}

func (r *Registry) includeSpec(searched, v string, rev, iterate bool) ([]*Include, error) {
	if v == "*" && !rev {
		var out []*Include
		for _, p := range r.Params(searched) {
			if p.Type == "reference" {
				out = append(out, &Include{Source: searched, Param: p.Code, Targets: p.Target, Iterate: iterate})
			}
		}
		return out, nil
	}
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("%q is not Type:parameter or Type:parameter:targetType", v)
	}
	p, ok := r.Lookup(parts[0], parts[1])
	if !ok || p.Type != "reference" {
		return nil, fmt.Errorf("%q is not a reference parameter of %s", parts[1], parts[0])
	}
	if !rev && !iterate && parts[0] != searched {
		return nil, fmt.Errorf("_include of %s needs :iterate when searching %s", parts[0], searched)
	}
	targets := p.Target
	if len(parts) == 3 {
		targets = []string{parts[2]}
	}
	return []*Include{{Source: parts[0], Param: p.Code, Targets: targets, Iterate: iterate}}, nil
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
	if strings.Count(name, "_has:") > MaxChainDepth { // each level is one more query
		return nil, errorf(name, "_has is limited to %d levels", MaxChainDepth)
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
	keys := strings.Split(v, ",")
	if len(keys) > MaxSortKeys {
		return errorf("_sort", "at most %d sort keys, not %d", MaxSortKeys, len(keys))
	}
	seen := map[string]bool{}
	for _, key := range keys {
		key = strings.TrimSpace(key)
		desc := strings.HasPrefix(key, "-")
		code := strings.TrimPrefix(key, "-")
		p, ok := r.Lookup(q.Type, code)
		if !ok || !sortable[p.Type] {
			return errorf("_sort", "cannot sort %s by %q", q.Type, code)
		}
		if seen[code] {
			return errorf("_sort", "%q is sorted by twice", code)
		}
		seen[code] = true
		q.Sort = append(q.Sort, p.SortKey(desc))
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

// checkUTF8 refuses parameter names and values that are not UTF-8: they
// cannot match any stored text, and a database may reject them in a filter.
func checkUTF8(params url.Values) error {
	for name, values := range params {
		if !utf8.ValidString(name) {
			return errorf(strings.ToValidUTF8(name, "?"), "the parameter name is not valid UTF-8")
		}
		for _, v := range values {
			if !utf8.ValidString(v) {
				return errorf(name, "the value %q is not valid UTF-8", strings.ToValidUTF8(v, "\ufffd"))
			}
		}
	}
	return nil
}
