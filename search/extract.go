package search

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/fhirschema/fhirpath"
)

// Extract evaluates every parameter of resourceType on resource (decoded
// with json.Decoder.UseNumber) and returns its idx and sort documents as
// described in the package documentation, fields sorted by name.
func (r *Registry) Extract(resourceType string, resource map[string]any) (idx bson.D, sort bson.D) {
	x := extractor{isType: func(t string) bool { return r.types[t] || r.byType[t] != nil }}
	for _, p := range r.Params(resourceType) {
		x.reset()
		if p.Type == "composite" {
			if v := x.compositeValues(p, resource); len(v) > 0 {
				idx = append(idx, bson.E{Key: p.Code, Value: v})
			}
			continue
		}
		if p.expr == nil {
			x.resourceLevel(p, resource)
		} else {
			for _, n := range p.expr.Evaluate(resource) {
				x.node(p, n)
			}
		}
		idx, sort = x.flush(p, idx, sort)
	}
	slices.SortFunc(idx, func(a, b bson.E) int { return strings.Compare(a.Key, b.Key) })
	return idx, sort
}

// extractor gathers the values of one parameter at a time.
type extractor struct {
	isType                          func(string) bool
	main, exact, text, ofType, idns set
	sortKeys                        set
	dates                           []DateRange
	nums                            []numRange
}

func (x *extractor) reset() {
	for _, s := range []*set{&x.main, &x.exact, &x.text, &x.ofType, &x.idns, &x.sortKeys} {
		s.reset()
	}
	x.dates, x.nums = x.dates[:0], x.nums[:0]
}

// resourceLevel computes _id, _lastUpdated, _tag, _security, _profile and _source.
func (x *extractor) resourceLevel(p *Param, resource map[string]any) {
	meta, _ := resource["meta"].(map[string]any)
	switch p.Code {
	case "_id": // searched on the row's own key (Param.field)
	case "_lastUpdated":
		x.date(str(meta, "lastUpdated"))
	case "_tag", "_security":
		for _, c := range maps(meta[p.Code[1:]]) {
			x.tokens(codingTokens(c))
		}
	case "_profile":
		for _, v := range asList(meta["profile"]) {
			if s, ok := v.(string); ok && s != "" {
				x.main.add(canonicalForms(s)...)
				x.sortKeys.add(s)
			}
		}
	case "_source":
		x.uri(str(meta, "source"))
	case "_text", "_content":
		x.main.add(textWords(p.Code, resource)...)
	}
}

// node adds the index values of one FHIRPath result.
func (x *extractor) node(p *Param, n fhirpath.Node) {
	m, isMap := n.Value.(map[string]any)
	switch p.Type {
	case "string":
		x.strings(n, m, isMap)
	case "token":
		if isMap {
			x.tokens(elementTokens(m, n.Type))
		} else if s := primitiveToken(n.Value); s != "" {
			// a code bound to one code system is in that system, not in none
			x.tokens(tokens{forms: codeForms(p.system, s), codes: []string{s}})
		}
	case "reference":
		x.reference(m, n, isMap)
	case "date":
		x.dateNode(m, n, isMap)
	case "number":
		if isMap {
			if r, ok := rangeRange(m); ok {
				x.nums = append(x.nums, r)
			}
		} else if r, ok := numberValue(n.Value); ok {
			x.nums = append(x.nums, r)
		}
	case "quantity":
		if isMap {
			if r, ok := quantityRange(m, n.Type); ok {
				x.nums = append(x.nums, r)
			}
		}
	case "uri":
		s, _ := n.Value.(string)
		x.uri(s)
	}
}

func (x *extractor) strings(n fhirpath.Node, m map[string]any, isMap bool) {
	var values []string
	switch {
	case !isMap:
		if s, ok := n.Value.(string); ok {
			values = []string{s}
		}
	case n.Type == "HumanName" || m["family"] != nil || m["given"] != nil || m["prefix"] != nil || m["suffix"] != nil:
		values = nameStrings(m)
	case n.Type == "Address" || n.Type == "":
		values = addressStrings(m)
	}
	for _, v := range values {
		if f := Fold(v); f != "" {
			x.main.add(f)
			x.sortKeys.add(f)
			x.exact.add(v)
		}
	}
}

func (x *extractor) tokens(t tokens) {
	x.main.add(t.forms...)
	x.text.add(t.text...)
	x.ofType.add(t.ofType...)
	x.sortKeys.add(t.codes...)
}

func (x *extractor) reference(m map[string]any, n fhirpath.Node, isMap bool) {
	if !isMap {
		if s, ok := n.Value.(string); ok && s != "" { // canonical or uri
			x.main.add(canonicalForms(s)...)
			x.sortKeys.add(s)
		}
		return
	}
	if t, ok := m["resourceType"].(string); ok { // a resource, e.g. Bundle.entry[0].resource
		if id := str(m, "id"); id != "" {
			x.main.add(t+"/"+id, id)
			x.sortKeys.add(t + "/" + id)
		}
		return
	}
	if forms := referenceForms(str(m, "reference"), x.isType); len(forms) > 0 {
		x.main.add(forms...)
		x.sortKeys.add(forms[0])
	}
	if id, ok := m["identifier"].(map[string]any); ok {
		x.idns.add(identifierTokens(id).forms...)
	}
}

func (x *extractor) dateNode(m map[string]any, n fhirpath.Node, isMap bool) {
	switch {
	case !isMap: // date, dateTime, instant, or a string that may hold one
		s, _ := n.Value.(string)
		x.date(s)
	case n.Type == "Period" || (n.Type == "" && (m["start"] != nil || m["end"] != nil)):
		if r, ok := periodRange(m); ok {
			x.dates = append(x.dates, r)
		}
	case n.Type == "Timing" || (n.Type == "" && (m["event"] != nil || m["repeat"] != nil)):
		if r, ok := timingRange(m); ok {
			x.dates = append(x.dates, r)
		}
	}
}

func (x *extractor) date(s string) {
	if r, err := ParseDateRange(s); err == nil {
		x.dates = append(x.dates, r)
	}
}

func (x *extractor) uri(s string) {
	if s != "" {
		x.main.add(s)
		x.sortKeys.add(s)
	}
}

// rowSorted are the parameters whose values every stored row holds in
// fields of its own (_id, lastUpdated): they have no sort field.
var rowSorted = map[string]bool{"_id": true, "_lastUpdated": true}

// flush appends the gathered values of p to idx and sort; a union's go to
// sort only, as idx holds them under the parameters it unites.
func (x *extractor) flush(p *Param, idx, sort bson.D) (bson.D, bson.D) {
	field := func(suffix string, s *set) {
		if len(s.list) > 0 && len(p.union) == 0 {
			idx = append(idx, bson.E{Key: p.Code + suffix, Value: append([]string(nil), s.list...)})
		}
	}
	field("", &x.main)
	field(":exact", &x.exact)
	field(":text", &x.text)
	field(":of-type", &x.ofType)
	field(":identifier", &x.idns)
	putSort := func(lo, hi any) {
		if !rowSorted[p.Code] && !p.oneRange {
			sort = append(sort, sortEntry(p, lo, hi))
		}
	}
	switch {
	case len(x.dates) > 0:
		if len(p.union) == 0 {
			idx = append(idx, bson.E{Key: p.Code, Value: oneOrAll(p, dateValues(x.dates))})
		}
		lo, hi := x.dates[0].Lo, x.dates[0].Hi
		for _, r := range x.dates[1:] {
			if r.Lo.Before(lo) {
				lo = r.Lo
			}
			if r.Hi.After(hi) {
				hi = r.Hi
			}
		}
		putSort(lo, hi)
	case len(x.nums) > 0:
		if len(p.union) == 0 {
			idx = append(idx, bson.E{Key: p.Code, Value: oneOrAll(p, numValues(x.nums, p.Type == "quantity"))})
		}
		lo, hi := x.nums[0].Lo, x.nums[0].Hi
		for _, r := range x.nums[1:] {
			lo, hi = min(lo, r.Lo), max(hi, r.Hi)
		}
		putSort(lo, hi)
	case len(x.sortKeys.list) > 0:
		lo, hi := x.sortKeys.list[0], x.sortKeys.list[0]
		for _, s := range x.sortKeys.list[1:] {
			lo, hi = min(lo, s), max(hi, s)
		}
		putSort(lo, hi)
	}
	return idx, sort
}

// oneOrAll is the stored value of p's ranges: the range itself for a
// parameter with one range (a scalar path, idx.<code>.lo, for every
// engine to sort by), else the list.
func oneOrAll(p *Param, ranges bson.A) any {
	if p.oneRange && len(ranges) == 1 {
		return ranges[0]
	}
	return ranges
}

// sortEntry is p's sort values: its least (a), which ascending order
// sorts by, and its greatest (d), for descending order; only a for a
// parameter with one sort value, which both orders read.
func sortEntry(p *Param, lo, hi any) bson.E {
	if p.oneSortValue {
		return bson.E{Key: p.Code, Value: bson.D{{Key: "a", Value: lo}}}
	}
	return bson.E{Key: p.Code, Value: bson.D{{Key: "a", Value: lo}, {Key: "d", Value: hi}}}
}

func dateValues(ranges []DateRange) bson.A {
	out := make(bson.A, 0, len(ranges))
	for i, r := range ranges {
		if !containsDate(ranges[:i], r) {
			out = append(out, bson.D{{Key: "lo", Value: r.Lo.UTC()}, {Key: "hi", Value: r.Hi.UTC()}})
		}
	}
	return out
}

func containsDate(ranges []DateRange, r DateRange) bool {
	for _, o := range ranges {
		if o.Lo.Equal(r.Lo) && o.Hi.Equal(r.Hi) {
			return true
		}
	}
	return false
}

func numValues(ranges []numRange, quantity bool) bson.A {
	out := make(bson.A, 0, len(ranges))
	for i, r := range ranges {
		if containsNum(ranges[:i], r) {
			continue
		}
		d := bson.D{{Key: "lo", Value: r.Lo}, {Key: "hi", Value: r.Hi}}
		if quantity {
			d = append(d, bson.E{Key: "s", Value: r.S}, bson.E{Key: "u", Value: r.U})
		}
		out = append(out, d)
	}
	return out
}

func containsNum(ranges []numRange, r numRange) bool {
	for _, o := range ranges {
		if o == r {
			return true
		}
	}
	return false
}

// set is an insertion-ordered set of non-empty strings.
type set struct {
	list []string
	seen map[string]struct{}
}

func (s *set) reset() {
	s.list = s.list[:0]
	s.seen = nil
}

func (s *set) add(values ...string) {
	for _, v := range values {
		if v == "" {
			continue
		}
		if s.seen == nil && len(s.list) < 16 {
			if !contains(s.list, v) {
				s.list = append(s.list, v)
			}
			continue
		}
		if s.seen == nil {
			s.seen = make(map[string]struct{}, 2*len(s.list))
			for _, e := range s.list {
				s.seen[e] = struct{}{}
			}
		}
		if _, dup := s.seen[v]; !dup {
			s.seen[v] = struct{}{}
			s.list = append(s.list, v)
		}
	}
}

func contains(list []string, v string) bool {
	for _, e := range list {
		if e == v {
			return true
		}
	}
	return false
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}
