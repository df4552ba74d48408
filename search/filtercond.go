package search

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// filterPart is a translated _filter node: a database condition and, when
// the condition is wider than the test (two-sided ranges on resources with
// several values, ew), the exact check on the index values.
type filterPart struct {
	cond  bson.D
	check func(idx bson.Raw) bool
}

// parseFilter turns one _filter value into a condition over resources of
// typ, with the same conditions the parameters' own searches use.
func (r *Registry) parseFilter(typ, expr string) (bson.D, func(bson.Raw) bool, error) {
	n, err := parseFilterExpr(expr)
	if err != nil {
		return nil, nil, err
	}
	part, err := r.filterPart(typ, n)
	if err != nil {
		return nil, nil, err
	}
	return part.cond, part.check, nil
}

func (r *Registry) filterPart(typ string, n *filterNode) (filterPart, error) {
	switch n.logic {
	case "and":
		return r.filterAnd(typ, n.kids)
	case "or":
		return r.filterOr(typ, n.kids)
	case "not":
		return r.filterNot(typ, n.kids[0])
	}
	return r.filterTest(typ, n, n.path)
}

func (r *Registry) filterAnd(typ string, kids []*filterNode) (filterPart, error) {
	conds := bson.A{}
	var checks []func(bson.Raw) bool
	for _, k := range kids {
		p, err := r.filterPart(typ, k)
		if err != nil {
			return filterPart{}, err
		}
		conds = append(conds, p.cond)
		if p.check != nil {
			checks = append(checks, p.check)
		}
	}
	out := filterPart{cond: bson.D{{Key: "$and", Value: conds}}}
	if len(checks) > 0 {
		out.check = func(idx bson.Raw) bool {
			for _, c := range checks {
				if !c(idx) {
					return false
				}
			}
			return true
		}
	}
	return out, nil
}

// filterOr ORs the children. A child whose condition is wider than its
// test becomes the ids of its exact matches, so the OR stays exact.
func (r *Registry) filterOr(typ string, kids []*filterNode) (filterPart, error) {
	alts := bson.A{}
	for _, k := range kids {
		p, err := r.filterPart(typ, k)
		if err != nil {
			return filterPart{}, err
		}
		if p.check != nil {
			p = matchesOf(typ, p, false)
		}
		alts = append(alts, p.cond)
	}
	if merged, ok := mergeEqualities(alts); ok {
		return filterPart{cond: merged}, nil
	}
	return filterPart{cond: bson.D{{Key: "$or", Value: alts}}}, nil
}

// mergeEqualities turns an OR of equalities and $in on one field into one
// $in, which the database answers in one index range scan.
func mergeEqualities(alts bson.A) (bson.D, bool) {
	field := ""
	var values bson.A
	for _, a := range alts {
		d, ok := a.(bson.D)
		if !ok || len(d) != 1 || !searchPath(d[0].Key) || field != "" && d[0].Key != field {
			return nil, false
		}
		field = d[0].Key
		switch v := d[0].Value.(type) {
		case string:
			values = append(values, v)
		case bson.D:
			if len(v) != 1 || v[0].Key != "$in" {
				return nil, false
			}
			list, isList := v[0].Value.([]string)
			if !isList {
				return nil, false
			}
			for _, s := range list {
				values = append(values, s)
			}
		default:
			return nil, false
		}
	}
	return bson.D{{Key: field, Value: bson.D{{Key: "$in", Value: values}}}}, field != ""
}

// filterNot negates a child: an equality or $in on one field becomes $nin
// (no value of the resource matches); anything else excludes the ids of
// the child's matches.
func (r *Registry) filterNot(typ string, kid *filterNode) (filterPart, error) {
	p, err := r.filterPart(typ, kid)
	if err != nil {
		return filterPart{}, err
	}
	if p.check == nil {
		if neg, ok := negate(p.cond); ok {
			return filterPart{cond: neg}, nil
		}
	}
	return matchesOf(typ, p, true), nil
}

// matchesOf is the condition "_id is (not) one of p's matches".
func matchesOf(typ string, p filterPart, not bool) filterPart {
	sub := &Query{Type: typ, Conditions: []bson.D{p.cond}, PostFilter: p.check}
	return filterPart{cond: bson.D{{Key: "_id", Value: &Deferred{Field: "_id", Not: not, Query: sub}}}}
}

// searchPath tells a path a parameter's search filters on (Param.field).
func searchPath(key string) bool { return strings.HasPrefix(key, "idx.") || key == "_id" }

// negate turns {idx.x: v} and {idx.x: {$in: vs}} into $nin; a deferred
// code or chain list flips between $in and $nin.
func negate(cond bson.D) (bson.D, bool) {
	if len(cond) != 1 || !searchPath(cond[0].Key) {
		return nil, false
	}
	field := cond[0].Key
	switch v := cond[0].Value.(type) {
	case string:
		return bson.D{{Key: field, Value: bson.D{{Key: "$nin", Value: bson.A{v}}}}}, true
	case *Deferred:
		flipped := *v
		flipped.Not = !v.Not
		return bson.D{{Key: field, Value: &flipped}}, true
	case bson.D:
		if len(v) == 1 && v[0].Key == "$in" {
			return bson.D{{Key: field, Value: bson.D{{Key: "$nin", Value: v[0].Value}}}}, true
		}
	}
	return nil, false
}

// filterTest translates path op value. A path of several parameters is a
// chain: the first must be a reference parameter.
func (r *Registry) filterTest(typ string, n *filterNode, path []pathStep) (filterPart, error) {
	step := path[0]
	if step.inner != nil {
		return filterPart{}, errorf("_filter", "at position %d: filtered parameter paths (%s[...]) are not supported", step.pos, step.name)
	}
	p, ok := r.Lookup(typ, step.name)
	if !ok {
		return filterPart{}, errorf("_filter", "at position %d: %q is not a search parameter of %s", step.pos, step.name, typ)
	}
	if len(path) > 1 {
		return r.filterChain(typ, n, p, path)
	}
	return filterLeaf(p, n)
}

// filterChain translates ref.rest op value into the references to the
// matches of rest op value among ref's target types.
func (r *Registry) filterChain(typ string, n *filterNode, p *Param, path []pathStep) (filterPart, error) {
	if p.Type != "reference" {
		return filterPart{}, errorf("_filter", "at position %d: %q is a %s parameter; only reference parameters can be chained", path[0].pos, p.Code, p.Type)
	}
	ch := &Chain{Param: p.Code}
	for _, target := range p.Target {
		if _, ok := r.Lookup(target, path[1].name); !ok {
			continue
		}
		sub, err := r.filterTest(target, n, path[1:])
		if err != nil {
			return filterPart{}, err
		}
		q := &Query{Type: target, Conditions: []bson.D{sub.cond}, PostFilter: sub.check}
		ch.Targets = append(ch.Targets, &ChainTarget{Type: target, Query: q})
	}
	if len(ch.Targets) == 0 {
		return filterPart{}, errorf("_filter", "at position %d: no resource type %s can refer to has a parameter %q", path[1].pos, p.Code, path[1].name)
	}
	field := "idx." + p.Code
	return filterPart{cond: bson.D{{Key: field, Value: &Deferred{Field: field, Chain: ch}}}}, nil
}

// filterModifiers map an operator to the search modifier that answers it,
// per parameter type; prefixed marks the ones written as a search prefix
// (gt2020) on date, number and quantity parameters.
var filterModifiers = map[string]map[string]string{
	"token":     {"eq": "", "ne": "not", "in": "in", "ni": "not-in", "ss": "below", "sb": "above"},
	"reference": {"eq": "", "re": ""},
	"uri":       {"eq": "", "ss": "below", "sb": "above"},
	"string":    {"sw": "", "co": "contains"},
}

// prefixed are the operators dates, numbers and quantities take as prefixes.
var prefixed = map[string]bool{"eq": true, "ne": true, "gt": true, "lt": true, "ge": true, "le": true, "sa": true, "eb": true, "ap": true}

// filterLeaf translates one test on parameter p.
func filterLeaf(p *Param, n *filterNode) (filterPart, error) {
	field, name, v := p.field(), "_filter", n.value
	if n.op == "pr" {
		switch strings.ToLower(v) {
		case "true":
			return filterPart{cond: bson.D{{Key: field, Value: bson.D{{Key: "$exists", Value: true}}}}}, nil
		case "false":
			return filterPart{cond: bson.D{{Key: field, Value: bson.D{{Key: "$exists", Value: false}}}}}, nil
		}
		return filterPart{}, errorf(name, "at position %d: pr takes true or false, not %q", n.pos, v)
	}
	wrap := func(cond bson.D, check func(bson.Raw) bool, err error) (filterPart, error) {
		if se, ok := err.(*Error); ok {
			return filterPart{}, errorf(name, "at position %d (%s %s): %s", n.pos, p.Code, n.op, se.Msg)
		}
		return filterPart{cond: cond, check: check}, err
	}
	if modifier, ok := filterModifiers[p.Type][n.op]; ok {
		return wrap(condition(p, "_filter", modifier, escapeValue(v)))
	}
	switch p.Type {
	case "date", "number", "quantity":
		if prefixed[n.op] {
			return wrap(condition(p, "_filter", "", n.op+escapeValue(v)))
		}
		if n.op == "po" && p.Type == "date" {
			return wrap(overlapCondition(field, v))
		}
	case "string":
		return wrap(stringFilter(field, n.op, v))
	case "reference", "uri":
		return wrap(otherFilter(p, field, n.op, v))
	}
	return filterPart{}, errorf(name, "at position %d: the %s operator does not apply to %s (a %s parameter)", n.pos, n.op, p.Code, p.Type)
}

// escapeValue keeps a filter value one search value: commas and dollar
// signs are data, not separators.
func escapeValue(v string) string {
	return strings.NewReplacer(`\`, `\\`, `,`, `\,`, `$`, `\$`).Replace(v)
}

// stringFilter answers eq, ne, ew and the orderings on the folded values.
func stringFilter(field, op, v string) (bson.D, func(bson.Raw) bool, error) {
	f := Fold(v)
	switch op {
	case "eq":
		return bson.D{{Key: field, Value: f}}, nil, nil
	case "ne":
		return bson.D{{Key: field, Value: bson.D{{Key: "$nin", Value: bson.A{f}}}}}, nil, nil
	case "gt", "lt", "ge", "le":
		return bson.D{{Key: field, Value: bson.D{{Key: "$" + strings.Replace(op, "e", "te", 1), Value: f}}}}, nil, nil
	case "ew":
		code := strings.TrimPrefix(field, "idx.")
		return bson.D{{Key: field, Value: bson.Regex{Pattern: literal(f)}}}, func(idx bson.Raw) bool {
			return anyString(idx, code, func(s string) bool { return strings.HasSuffix(s, f) })
		}, nil
	}
	return nil, nil, errorf("_filter", "the %s operator does not apply to string parameters", op)
}

// otherFilter answers ne on references and uris, and sw, co on uris.
func otherFilter(p *Param, field, op, v string) (bson.D, func(bson.Raw) bool, error) {
	switch {
	case op == "ne":
		cond, _, err := condition(p, "_filter", "", escapeValue(v))
		if err != nil {
			return nil, nil, err
		}
		neg, _ := negate(cond)
		return neg, nil, nil
	case op == "sw" && p.Type == "uri":
		return bson.D{{Key: field, Value: prefix(v)}}, nil, nil
	case op == "co" && p.Type == "uri":
		return bson.D{{Key: field, Value: bson.Regex{Pattern: literal(v)}}}, nil, nil
	}
	return nil, nil, errorf("_filter", "the %s operator does not apply to %s parameters", op, p.Type)
}

// overlapCondition is po: a stored period overlaps the value's range.
func overlapCondition(field, v string) (bson.D, func(bson.Raw) bool, error) {
	rg, err := ParseDateRange(v)
	if err != nil {
		return nil, nil, errorf("_filter", "%v", err)
	}
	cond := bson.D{{Key: field + ".lo", Value: bson.D{{Key: "$lte", Value: rg.Hi}}}, {Key: field + ".hi", Value: bson.D{{Key: "$gte", Value: rg.Lo}}}}
	overlaps := func(el bson.Raw) bool { return le(el, "lo", rg.Hi) && ge(el, "hi", rg.Lo) }
	code := strings.TrimPrefix(field, "idx.")
	return cond, func(idx bson.Raw) bool { return anyElement(idx, code, []rangeCheck{overlaps}) }, nil
}

// anyString reports whether some stored string of code passes ok.
func anyString(idx bson.Raw, code string, ok func(string) bool) bool {
	arr, found := idx.Lookup(code).ArrayOK()
	if !found {
		return false
	}
	vals, err := arr.Values()
	if err != nil {
		return false
	}
	for _, v := range vals {
		if s, isStr := v.StringValueOK(); isStr && ok(s) {
			return true
		}
	}
	return false
}
