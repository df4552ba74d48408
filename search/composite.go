package search

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/fhirschema/fhirpath"
)

// Component is one part of a composite parameter: a parameter of its own
// type, evaluated on each element the composite's expression selects.
type Component struct {
	Code, Type, Expression string
	expr                   *fhirpath.Expr
}

// componentKeys name the components inside a stored composite element.
// They are letters, not positions: MongoDB reads a number in a path as an
// array index.
const componentKeys = "abcdefgh"

// componentFixes correct official component expressions that are swapped
// in R4 (DocumentReference relationship names relatesto by the element
// "code" and relation by "target").
var componentFixes = map[string][]string{
	"DocumentReference.relationship": {"target", "code"},
}

// addComposite registers a composite parameter on each of its bases.
func (r *Registry) addComposite(d definition, byURL map[string]definition, compiled map[string]*fhirpath.Expr) {
	skip := func(reason string) { r.skipped = append(r.skipped, Skip{d.Code, d.Type, d.Base, reason}) }
	if len(d.Component) < 2 || len(d.Component) > len(componentKeys) {
		skip(fmt.Sprintf("%d components", len(d.Component)))
		return
	}
	for _, base := range d.Base {
		comps := make([]Component, len(d.Component))
		for i, c := range d.Component {
			def, ok := byURL[c.Definition]
			if !ok {
				skip("component " + c.Definition + " is not defined")
				return
			}
			src := c.Expression
			if fix, ok := componentFixes[base+"."+d.Code]; ok {
				src = fix[i]
			}
			expr, err := compile(src, compiled)
			if err != nil {
				skip(fmt.Sprintf("component %s: %v", def.Code, err))
				return
			}
			comps[i] = Component{Code: def.Code, Type: def.Type, Expression: src, expr: expr}
		}
		src := branchesFor(d.Expression, base, d.Base)
		expr, err := compile(src, compiled)
		if err != nil {
			skip(fmt.Sprintf("%s: %v", base, err))
			continue
		}
		r.register(base, &Param{Code: d.Code, Type: d.Type, Base: d.Base, Expression: d.Expression,
			Description: d.Description, URL: d.URL, Tenant: d.tenant, Components: comps, expr: expr, single: strings.TrimSpace(src) == base,
			pointKey: len(comps) == 2 && comps[0].Type == "token" && (comps[1].Type == "quantity" || comps[1].Type == "number")})
	}
}

// linkCombos makes each combo-X parameter of a type the union of X and
// component-X when its branches are exactly theirs: Observation's
// combo-code ("Observation.code | Observation.component.code") is code
// and component-code, combo-code-value-quantity ("Observation |
// Observation.component") is code-value-quantity and
// component-code-value-quantity. A search of it searches both, and it
// stores no search values of its own, rather than a copy of both (a
// token or quantity keeps its sort values: _sort reads one field).
func (r *Registry) linkCombos() {
	for typ, params := range r.byType {
		for code, p := range params {
			rest, ok := strings.CutPrefix(code, "combo-")
			if !ok {
				continue
			}
			own, comp := params[rest], params["component-"+rest]
			if own == nil || comp == nil || own.Type != p.Type || comp.Type != p.Type {
				continue
			}
			if p.Type == "composite" && sameComponents(p, own) && sameComponents(p, comp) ||
				p.Type != "composite" && p.system == own.system && p.system == comp.system && sameBranches(typ, p, own, comp) {
				p.union = []*Param{own, comp}
			}
		}
	}
}

// sameBranches tells whether p's expression on typ is the union of own's
// and comp's, branch for branch.
func sameBranches(typ string, p, own, comp *Param) bool {
	branches := func(q *Param) []string {
		out := splitUnion(branchesFor(q.Expression, typ, q.Base))
		slices.Sort(out)
		return out
	}
	both := append(branches(own), branches(comp)...)
	slices.Sort(both)
	return slices.Equal(branches(p), both)
}

func sameComponents(a, b *Param) bool {
	if len(a.Components) != len(b.Components) {
		return false
	}
	for i := range a.Components {
		if a.Components[i].Type != b.Components[i].Type || a.Components[i].Expression != b.Components[i].Expression {
			return false
		}
	}
	return true
}

func compile(src string, compiled map[string]*fhirpath.Expr) (*fhirpath.Expr, error) {
	if expr, ok := compiled[src]; ok {
		return expr, nil
	}
	expr, err := fhirpath.Compile(src)
	if err != nil {
		return nil, err
	}
	compiled[src] = expr
	return expr, nil
}

// maxCompositeTuples bounds the stored entries of one element whose range
// components hold several values each.
const maxCompositeTuples = 16

// compositeValues are the stored entries of a composite parameter: one
// document per element of its expression, holding every component's index
// values under its key, so that a search matches the components of one
// element together. A range component (date, number, quantity) holds one
// {lo, hi} value; an element with several gets one document per value.
func (x *extractor) compositeValues(p *Param, resource map[string]any) bson.A {
	if len(p.union) > 0 {
		return nil
	}
	var out bson.A
	for _, el := range p.expr.Evaluate(resource) {
		docs := []bson.D{{}}
		for i, c := range p.Components {
			vals := x.componentValues(c, resource, el)
			if len(vals) == 0 {
				docs = nil
				break
			}
			docs = withComponent(docs, string(componentKeys[i]), vals)
		}
		for _, d := range docs {
			if p.pointKey {
				d = withPointKeys(d)
			}
			out = append(out, d)
		}
	}
	return out
}

// pointKeyField holds an element's point keys (see withPointKeys); it is
// not a component key.
const pointKeyField = "k"

// withPointKeys adds to an element of a token$quantity (or token$number)
// composite its value (the middle of its range, as quantity comparisons
// use) once under each of its token forms: {k: {h<hash of form>: value}}.
// "Systolic over 140" is then one range on one path,
// idx.<code>.k.h<hash of http://loinc.org|8480-6> > 140, and a stored
// value there is the value of an element with that code, never a code of
// one element and a value of another. The hash keeps dots and dollars of
// the form out of the path, and a letter first keeps it from reading as an
// array index.
func withPointKeys(d bson.D) bson.D {
	forms, _ := d[0].Value.([]string)
	rng, _ := d[1].Value.(bson.D)
	if len(forms) == 0 || len(rng) < 2 {
		return d
	}
	lo, ok1 := rng[0].Value.(float64)
	hi, ok2 := rng[1].Value.(float64)
	if !ok1 || !ok2 {
		return d
	}
	keys := make(bson.D, len(forms))
	for i, f := range forms {
		keys[i] = bson.E{Key: pointKey(f), Value: lo/2 + hi/2}
	}
	return append(d, bson.E{Key: pointKeyField, Value: keys})
}

// pointKey names a token form's point key.
func pointKey(form string) string {
	h := fnv.New64a()
	h.Write([]byte(form))
	return fmt.Sprintf("h%016x", h.Sum64())
}

// pointKeyCondition is the condition of a token$quantity tuple with a
// one-sided prefix and no unit on the point key of the form. It decides
// exactly what the element check does: the stored value compared with
// the searched one beyond float rounding (near), so with it the tuple
// needs no check. It reports false when the tuple has another shape.
func pointKeyCondition(field, form, value string) (bson.D, bool) {
	cmp, rest := splitPrefix(value)
	if strings.Contains(rest, "|") || systemOnly(form) { // a system's codes have no key of their own
		return nil, false
	}
	v, err := strconv.ParseFloat(rest, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return nil, false
	}
	margin := 1e-9 * math.Max(1, math.Abs(v)) // as near
	var op bson.E
	switch cmp {
	case "gt", "sa": // m > v and not near
		op = bson.E{Key: "$gt", Value: v + margin}
	case "ge": // m > v or near
		op = bson.E{Key: "$gte", Value: v - margin}
	case "lt", "eb": // m < v and not near
		op = bson.E{Key: "$lt", Value: v - margin}
	case "le": // m < v or near
		op = bson.E{Key: "$lte", Value: v + margin}
	default:
		return nil, false
	}
	path := field + "." + pointKeyField + "." + pointKey(form)
	return bson.D{{Key: path, Value: bson.D{op}}}, true
}

// componentValues are the index values of one component on an element:
// one []string for a string-like component, one document per range.
func (x *extractor) componentValues(c Component, resource map[string]any, el fhirpath.Node) []any {
	sub := extractor{isType: x.isType}
	cp := &Param{Code: c.Code, Type: c.Type}
	for _, n := range c.expr.EvaluateAt(resource, el) {
		sub.node(cp, n)
	}
	switch {
	case len(sub.dates) > 0:
		return dateValues(sub.dates)
	case len(sub.nums) > 0:
		return numValues(sub.nums, c.Type == "quantity")
	case len(sub.main.list) > 0:
		return []any{append([]string(nil), sub.main.list...)}
	}
	return nil
}

// withComponent adds a component's values to each partial document: a
// single value to each, several as the product (bounded).
func withComponent(docs []bson.D, key string, vals []any) []bson.D {
	out := make([]bson.D, 0, len(docs)*len(vals))
	for _, d := range docs {
		for _, v := range vals {
			if len(out) == maxCompositeTuples {
				return out
			}
			nd := append(bson.D(nil), d...)
			out = append(out, append(nd, bson.E{Key: key, Value: v}))
		}
	}
	return out
}

// elementCheck tells whether one stored composite element matches.
type elementCheck func(el bson.Raw) bool

// compositeCondition translates a composite search: comma-separated
// alternatives, each the components' values joined by $ in the
// parameter's order, each in its own type's syntax. The database narrows
// by every component's condition on the stored elements; the post-filter
// keeps the resources where one element meets all of them. A composite of
// the resource itself (Observation code-value-concept) has one element,
// so when each component's condition is exact, so is the database's.
func compositeCondition(p *Param, name, modifier, value string) (bson.D, func(bson.Raw) bool, error) {
	if modifier != "" {
		return nil, nil, errorf(name, "the :%s modifier does not apply to composite parameters", modifier)
	}
	if len(p.union) == 0 {
		cond, check, exact, err := compositeMatch(p, name, value)
		if exact {
			check = nil
		}
		return cond, check, err
	}
	var conds []bson.D
	var checks []func(bson.Raw) bool
	for _, u := range p.union {
		cond, check, _, err := compositeMatch(u, name, value)
		if err != nil {
			return nil, nil, err
		}
		conds, checks = append(conds, cond), append(checks, check)
	}
	return anyOf(conds), func(idx bson.Raw) bool { return checks[0](idx) || checks[1](idx) }, nil
}

// compositeMatch is the database condition of a composite search on p's
// stored elements, the check of one element meeting a whole alternative,
// and whether the condition is exact without it.
func compositeMatch(p *Param, name, value string) (bson.D, func(bson.Raw) bool, bool, error) {
	field := "idx." + p.Code
	var conds []bson.D
	var checks []elementCheck
	exact := true
	for _, alt := range splitUnescaped(value, ',') {
		if alt == "" {
			continue
		}
		cond, check, ex, err := tupleCondition(p, field, name, alt)
		if err != nil {
			return nil, nil, false, err
		}
		conds, checks, exact = append(conds, cond), append(checks, check), exact && ex
	}
	if len(conds) == 0 {
		return nil, nil, false, errorf(name, "no value given")
	}
	return anyOf(conds), func(idx bson.Raw) bool { return anyCompositeElement(idx, p.Code, checks) }, exact, nil
}

// tupleCondition is one alternative: every component's condition, the
// same test on one element, and whether the database condition is exact:
// a composite of the resource itself whose components' conditions are
// (see componentCondition), or a point key condition.
func tupleCondition(p *Param, field, name, alt string) (bson.D, elementCheck, bool, error) {
	parts := splitUnescaped(alt, '$')
	if len(parts) != len(p.Components) {
		return nil, nil, false, errorf(name, "%q has %d parts; %s takes %d joined by $ (%s)", alt, len(parts), p.Code, len(p.Components), componentNames(p))
	}
	all := make(bson.A, 0, len(parts))
	checks := make([]elementCheck, 0, len(parts))
	exact := true
	for i, part := range parts {
		c := p.Components[i]
		v := unescape(part)
		if v == "" {
			return nil, nil, false, errorf(name, "the %s part of %q is empty", c.Code, alt)
		}
		key := string(componentKeys[i])
		cond, check, ex, err := componentCondition(c, field+"."+key, key, name, v)
		if err != nil {
			return nil, nil, false, err
		}
		all, checks, exact = append(all, cond), append(checks, check), exact && ex
	}
	exact = exact && p.single
	if p.pointKey {
		if cond, ok := pointKeyCondition(field, unescape(parts[0]), unescape(parts[1])); ok {
			all, exact = append(all, cond), true
		}
	}
	return bson.D{{Key: "$and", Value: all}}, func(el bson.Raw) bool {
		for _, ok := range checks {
			if !ok(el) {
				return false
			}
		}
		return true
	}, exact, nil
}

func componentNames(p *Param) string {
	names := make([]string, len(p.Components))
	for i, c := range p.Components {
		names[i] = c.Code
	}
	return strings.Join(names, "$")
}

// componentCondition is one component's condition on field (the stored
// element's key), the same test on one element, and whether the condition
// alone decides it for an element (a range component holds one value per
// stored element, so only the conditions a value's bounds cannot express,
// such as a quantity's exact value, need the test).
func componentCondition(c Component, field, key, name, v string) (bson.D, elementCheck, bool, error) {
	switch c.Type {
	case "token":
		if systemOnly(v) {
			return bson.D{{Key: field, Value: prefix(v)}}, hasString(key, func(s string) bool { return strings.HasPrefix(s, v) }), true, nil
		}
		return bson.D{{Key: field, Value: v}}, hasString(key, func(s string) bool { return s == v }), true, nil
	case "uri":
		return bson.D{{Key: field, Value: v}}, hasString(key, func(s string) bool { return s == v }), true, nil
	case "reference":
		forms := []string{v}
		if f := referenceForm(v); f != v {
			forms = append(forms, f)
		}
		return eqAny(field, forms), hasString(key, func(s string) bool { return s == forms[0] || s == forms[len(forms)-1] }), true, nil
	case "string":
		f := Fold(v)
		return bson.D{{Key: field, Value: prefix(f)}}, hasString(key, func(s string) bool { return strings.HasPrefix(s, f) }), true, nil
	case "date", "number", "quantity":
		cmp, rest := splitPrefix(v)
		b, unit, err := parseBounds(c.Type, rest)
		if err != nil {
			return nil, nil, false, errorf(name, "%s: %v", c.Code, err)
		}
		cond, check, twoSided := boundCondition(field, cmp, b, unit)
		return cond, func(el bson.Raw) bool {
			d, ok := el.Lookup(key).DocumentOK()
			return ok && check(d)
		}, !twoSided, nil
	}
	return nil, nil, false, errorf(name, "%s components are not supported", c.Type)
}

// hasString tests the strings stored at key of an element.
func hasString(key string, match func(string) bool) elementCheck {
	return func(el bson.Raw) bool {
		arr, ok := el.Lookup(key).ArrayOK()
		if !ok {
			return false
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if s, ok := v.StringValueOK(); ok && match(s) {
				return true
			}
		}
		return false
	}
}

// anyCompositeElement reports whether one stored element of code passes
// one of the checks.
func anyCompositeElement(idx bson.Raw, code string, checks []elementCheck) bool {
	arr, ok := idx.Lookup(code).ArrayOK()
	if !ok {
		return false
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		el, ok := v.DocumentOK()
		if !ok {
			continue
		}
		for _, check := range checks {
			if check(el) {
				return true
			}
		}
	}
	return false
}

// splitUnescaped splits v at the separators not escaped with a backslash,
// keeping the escapes for unescape.
func splitUnescaped(v string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '\\' && i+1 < len(v):
			i++
		case v[i] == sep:
			out = append(out, v[start:i])
			start = i + 1
		}
	}
	return append(out, v[start:])
}

// unescape removes the backslashes of \, \$ and \\ (as splitValues does).
func unescape(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) && strings.IndexByte(`,$\`, v[i+1]) >= 0 {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// negating are the modifiers whose condition holds when no value matches:
// a union's holds when it holds on every parameter united.
var negating = map[string]bool{"not": true, "not-in": true}

// unionCondition is a search of a token or quantity parameter stored as
// its union's: the same search of each parameter united, any of them
// matching (every one, for a negating modifier).
func unionCondition(p *Param, name, modifier, value string) (bson.D, func(bson.Raw) bool, error) {
	conds := make([]bson.D, 0, len(p.union))
	var checks []func(bson.Raw) bool
	for _, u := range p.union {
		cond, check, err := condition(u, name, modifier, value)
		if err != nil {
			return nil, nil, err
		}
		conds = append(conds, cond)
		if check != nil {
			checks = append(checks, check)
		}
	}
	switch {
	case negating[modifier] && len(checks) == 0:
		all := make(bson.A, len(conds))
		for i, c := range conds {
			all[i] = c
		}
		return bson.D{{Key: "$and", Value: all}}, nil, nil
	case negating[modifier]: // no negating modifier applies to ranges, which have checks
	case len(checks) == 0:
		return anyOf(conds), nil, nil
	case len(checks) == len(conds):
		// each check decides its own parameter's stored values entirely
		return anyOf(conds), func(idx bson.Raw) bool {
			return slices.ContainsFunc(checks, func(c func(bson.Raw) bool) bool { return c(idx) })
		}, nil
	}
	return nil, nil, fmt.Errorf("search %s: its united parameters' conditions cannot be combined exactly", name)
}

// unionMissing is :missing of a parameter stored as its union's: missing
// from all of them, or present in one.
func unionMissing(p *Param, name, value string) (bson.D, func(bson.Raw) bool, error) {
	var conds []bson.D
	for _, u := range p.union {
		present := value == "false"
		conds = append(conds, bson.D{{Key: "idx." + u.Code, Value: bson.D{{Key: "$exists", Value: present}}}})
	}
	switch value {
	case "true":
		all := bson.A{}
		for _, c := range conds {
			all = append(all, c)
		}
		return bson.D{{Key: "$and", Value: all}}, nil, nil
	case "false":
		return anyOf(conds), nil, nil
	}
	return nil, nil, errorf(name, "the :missing modifier takes true or false, not %q", value)
}
