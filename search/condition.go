package search

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// rangeCheck tells whether one stored {lo, hi} element satisfies a value.
type rangeCheck func(el bson.Raw) bool

// condition translates one occurrence of a parameter (name is how the client
// wrote it, with its modifier) into a database condition, plus a check the
// condition cannot express exactly (nil when it is exact).
func condition(p *Param, name, modifier, value string) (bson.D, func(bson.Raw) bool, error) {
	field := p.field()
	if modifier == "missing" && len(p.union) > 0 {
		return unionMissing(p, name, value)
	}
	if modifier == "missing" {
		switch value {
		case "true":
			return bson.D{{Key: field, Value: bson.D{{Key: "$exists", Value: false}}}}, nil, nil
		case "false":
			return bson.D{{Key: field, Value: bson.D{{Key: "$exists", Value: true}}}}, nil, nil
		}
		return nil, nil, errorf(name, "the :missing modifier takes true or false, not %q", value)
	}
	if textParams[p.Code] {
		return textCondition(field, name, modifier, value)
	}
	if p.Type == "composite" {
		return compositeCondition(p, name, modifier, value)
	}
	if len(p.union) > 0 {
		return unionCondition(p, name, modifier, value)
	}
	values := splitValues(value)
	if len(values) == 0 {
		return nil, nil, errorf(name, "no value given")
	}
	switch p.Type {
	case "string":
		return stringCondition(field, name, modifier, values)
	case "token":
		if field == "_id" && (modifier == "text" || modifier == "of-type") {
			return nil, nil, errorf(name, "the :%s modifier does not apply to _id, a resource's id", modifier)
		}
		return tokenCondition(field, name, modifier, values)
	case "reference":
		return referenceCondition(p, field, name, modifier, values)
	case "uri":
		return uriCondition(field, name, modifier, values)
	case "date", "number", "quantity":
		if modifier != "" {
			return nil, nil, errorf(name, "the :%s modifier does not apply to %s parameters", modifier, p.Type)
		}
		return rangeCondition(p, field, name, values)
	}
	return nil, nil, errorf(name, "%s parameters are not supported", p.Type)
}

// splitValues splits on commas not escaped with a backslash and removes the
// escapes of \, \| \$ and \\.
func splitValues(v string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '\\' && i+1 < len(v) && strings.IndexByte(`,$\`, v[i+1]) >= 0:
			i++
			cur.WriteByte(v[i])
		case v[i] == ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(v[i])
		}
	}
	out = append(out, cur.String())
	kept := out[:0]
	for _, s := range out {
		if s != "" {
			kept = append(kept, s)
		}
	}
	return kept
}

// anyOf ORs conditions.
func anyOf(conds []bson.D) bson.D {
	if len(conds) == 1 {
		return conds[0]
	}
	alts := make(bson.A, len(conds))
	for i, c := range conds {
		alts[i] = c
	}
	return bson.D{{Key: "$or", Value: alts}}
}

func eqAny(field string, values []string) bson.D {
	if len(values) == 1 {
		return bson.D{{Key: field, Value: values[0]}}
	}
	return bson.D{{Key: field, Value: bson.D{{Key: "$in", Value: values}}}}
}

// prefix matches strings starting with s: an anchored regular expression
// with every metacharacter of s escaped, so values are data, never patterns.
func prefix(s string) bson.Regex { return bson.Regex{Pattern: "^" + literal(s)} }

// literal is the regular expression matching s: its metacharacters escaped,
// and NUL written as \x00 because a BSON pattern is a C string (a raw NUL
// made bson.Marshal fail and the search answer 500).
func literal(s string) string { return strings.ReplaceAll(regexp.QuoteMeta(s), "\x00", `\x00`) }

func stringCondition(field, name, modifier string, values []string) (bson.D, func(bson.Raw) bool, error) {
	conds := make([]bson.D, 0, len(values))
	for _, v := range values {
		switch modifier {
		case "":
			conds = append(conds, bson.D{{Key: field, Value: prefix(Fold(v))}})
		case "contains":
			conds = append(conds, bson.D{{Key: field, Value: bson.Regex{Pattern: literal(Fold(v))}}})
		case "exact":
			conds = append(conds, bson.D{{Key: field + ":exact", Value: v}})
		default:
			return nil, nil, errorf(name, "the :%s modifier does not apply to string parameters", modifier)
		}
	}
	return anyOf(conds), nil, nil
}

// systemOnly tells a token value naming a code system and no code
// ("http://loinc.org|"): it matches the stored system|code forms (and
// system| of a coding without a code) by prefix.
func systemOnly(v string) bool {
	i := strings.IndexByte(v, '|')
	return i > 0 && i == len(v)-1
}

// tokenAny matches the documents with a token form at field equal to one
// of values, or under a system-only value's system.
func tokenAny(field string, values []string) bson.D {
	var eqs []string
	var conds []bson.D
	for _, v := range values {
		if systemOnly(v) {
			conds = append(conds, bson.D{{Key: field, Value: prefix(v)}})
		} else {
			eqs = append(eqs, v)
		}
	}
	if len(eqs) > 0 {
		conds = append([]bson.D{eqAny(field, eqs)}, conds...)
	}
	return anyOf(conds)
}

// tokenNone matches the documents tokenAny does not.
func tokenNone(field string, values []string) bson.D {
	var eqs []string
	var conds bson.A
	for _, v := range values {
		if systemOnly(v) {
			conds = append(conds, bson.D{{Key: field, Value: bson.D{{Key: "$not", Value: prefix(v)}}}})
		} else {
			eqs = append(eqs, v)
		}
	}
	if len(eqs) > 0 {
		conds = append(bson.A{bson.D{{Key: field, Value: bson.D{{Key: "$nin", Value: eqs}}}}}, conds...)
	}
	if len(conds) == 1 {
		return conds[0].(bson.D)
	}
	return bson.D{{Key: "$and", Value: conds}}
}

func tokenCondition(field, name, modifier string, values []string) (bson.D, func(bson.Raw) bool, error) {
	switch modifier {
	case "":
		return tokenAny(field, values), nil, nil
	case "not":
		return tokenNone(field, values), nil, nil
	case "text":
		conds := make([]bson.D, 0, len(values))
		for _, v := range values {
			conds = append(conds, bson.D{{Key: field + ":text", Value: prefix(Fold(v))}})
		}
		return anyOf(conds), nil, nil
	case "in", "not-in", "below", "above":
		return codeSetCondition(field, name, modifier, values)
	case "of-type":
		for _, v := range values {
			if strings.Count(v, "|") != 2 {
				return nil, nil, errorf(name, "the :of-type modifier takes system|code|value, not %q", v)
			}
		}
		return eqAny(field+":of-type", values), nil, nil
	}
	return nil, nil, errorf(name, "the :%s modifier is not supported for token parameters", modifier)
}

func referenceCondition(p *Param, field, name, modifier string, values []string) (bson.D, func(bson.Raw) bool, error) {
	switch {
	case modifier == "identifier":
		return tokenAny(field+":identifier", values), nil, nil
	case strings.Contains(modifier, "."):
		return nil, nil, errorf(name, "chained parameters are not supported yet")
	case modifier != "":
		if !startsUpper(modifier) {
			return nil, nil, errorf(name, "the :%s modifier is not supported for reference parameters", modifier)
		}
		forms := make([]string, len(values))
		for i, v := range values {
			forms[i] = modifier + "/" + v[strings.LastIndex(v, "/")+1:]
		}
		return eqAny(field, forms), nil, nil
	}
	forms := make([]string, 0, len(values))
	for _, v := range values {
		// An absolute URL matches as written (stored absolute references
		// and canonicals) and, ending in Type/id, as this server's Type/id.
		forms = append(forms, v)
		if f := referenceForm(v); f != v {
			forms = append(forms, f)
		}
	}
	return eqAny(field, forms), nil, nil
}

// referenceForm reduces an absolute URL ending in Type/id to Type/id, the
// form relative references are stored in; other values are used as given.
func referenceForm(v string) string {
	if !strings.Contains(v, "://") {
		return v
	}
	parts := strings.Split(strings.TrimRight(v, "/"), "/")
	if n := len(parts); n >= 2 && startsUpper(parts[n-2]) {
		return parts[n-2] + "/" + parts[n-1]
	}
	return v
}

func startsUpper(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

func uriCondition(field, name, modifier string, values []string) (bson.D, func(bson.Raw) bool, error) {
	switch modifier {
	case "":
		return eqAny(field, values), nil, nil
	case "below":
		conds := make([]bson.D, 0, len(values))
		for _, v := range values {
			conds = append(conds, uriBelow(field, v))
		}
		return anyOf(conds), nil, nil
	case "contains":
		// URIs are case-sensitive: a literal substring of the stored value,
		// matched over the parameter's index entries like string :contains.
		conds := make([]bson.D, 0, len(values))
		for _, v := range values {
			conds = append(conds, bson.D{{Key: field, Value: bson.Regex{Pattern: literal(v)}}})
		}
		return anyOf(conds), nil, nil
	case "above":
		var ups []string
		for _, v := range values {
			ups = append(ups, uriAncestors(v)...)
		}
		return eqAny(field, ups), nil, nil
	}
	return nil, nil, errorf(name, "the :%s modifier is not supported for uri parameters", modifier)
}

// uriBelow matches v and the URIs under it path-wise: http://a/b is below
// http://a, http://ab is not.
func uriBelow(field, v string) bson.D {
	if strings.HasSuffix(v, "/") {
		return bson.D{{Key: field, Value: prefix(v)}}
	}
	return bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: field, Value: v}}, bson.D{{Key: field, Value: prefix(v + "/")}}}}}
}

// uriAncestors lists v and every path prefix of it: the stored URIs that
// are "above" v.
func uriAncestors(v string) []string {
	out := []string{v}
	for i := len(v) - 1; i > 0; i-- {
		if v[i] == '/' && !strings.HasSuffix(v[:i], "/") && !strings.HasSuffix(v[:i], ":") {
			out = append(out, v[:i])
		}
	}
	return out
}

// comparators are the FHIR search prefixes.
var comparators = []string{"eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap"}

func splitPrefix(v string) (string, string) {
	if len(v) > 2 {
		for _, c := range comparators {
			if strings.HasPrefix(v, c) && (v[2] == '-' || v[2] == '+' || v[2] == '.' || (v[2] >= '0' && v[2] <= '9')) {
				return c, v[2:]
			}
		}
	}
	return "eq", v
}

// bounds are a search value's range [lo, hi] and its point value.
type bounds struct {
	lo, hi, at any // time.Time or float64
}

// rangeCondition handles date, number and quantity: the prefix decides
// which stored bound is compared with which search bound. eq and ap need
// both bounds of one stored element, which only the post-filter checks
// exactly on resources with several values.
func rangeCondition(p *Param, field, name string, values []string) (bson.D, func(bson.Raw) bool, error) {
	conds := make([]bson.D, 0, len(values))
	var checks []rangeCheck
	exact := true
	for _, raw := range values {
		cmp, v := splitPrefix(raw)
		b, unit, err := parseBounds(p.Type, v)
		if err != nil {
			return nil, nil, errorf(name, "%v", err)
		}
		cond, check, twoSided := boundCondition(field, cmp, b, unit)
		conds = append(conds, cond)
		checks = append(checks, check)
		exact = exact && !twoSided
	}
	if exact {
		return anyOf(conds), nil, nil
	}
	code := strings.TrimPrefix(field, "idx.")
	return anyOf(conds), func(idx bson.Raw) bool { return anyElement(idx, code, checks) }, nil
}

// anyElement reports whether some stored element of code (a range, or a
// list of them) passes some check.
func anyElement(idx bson.Raw, code string, checks []rangeCheck) bool {
	v := idx.Lookup(code)
	if one, ok := v.DocumentOK(); ok {
		return slices.ContainsFunc(checks, func(check rangeCheck) bool { return check(one) })
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return false
	}
	vals, err := arr.Values()
	if err != nil {
		return false
	}
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

// unitMatch is the quantity unit a search names: "system|code" or "|code".
type unitMatch struct{ system, code string }

func parseBounds(typ, v string) (bounds, *unitMatch, error) {
	switch typ {
	case "date":
		r, err := ParseDateRange(v)
		if err != nil {
			return bounds{}, nil, err
		}
		return bounds{lo: r.Lo, hi: r.Hi, at: r.Lo}, nil, nil
	case "quantity":
		num, rest, hasUnit := strings.Cut(v, "|")
		b, err := numberBounds(num)
		if err != nil || !hasUnit {
			return b, nil, err
		}
		system, code, _ := strings.Cut(rest, "|")
		if code == "" { // "5.4|mg" is not FHIR; treat the single part as a code
			system, code = "", system
		}
		return b, &unitMatch{system: system, code: code}, nil
	}
	b, err := numberBounds(v)
	return b, nil, err
}

// numberBounds is the range a decimal stands for at its precision (see
// ParseNumberRange, which the stored values use too): 100 covers
// [99.5, 100.5), 1.50 covers [1.495, 1.505).
func numberBounds(v string) (bounds, error) {
	lo, hi, err := ParseNumberRange(v)
	if err != nil {
		return bounds{}, err
	}
	f, _ := strconv.ParseFloat(v, 64)
	return bounds{lo: lo, hi: hi, at: f}, nil
}

// boundCondition compares a stored element [lo, hi] with search bounds.
// Dates compare as ranges (R4: ge is "the range above the search value
// intersects the target, or the search range contains it"); numbers and
// quantities compare their exact value with the search value for the
// one-sided prefixes ("lt100: less than exactly 100"), the value being the
// middle of the stored precision range.
func boundCondition(field, cmp string, b bounds, unit *unitMatch) (bson.D, rangeCheck, bool) {
	var cond bson.D
	var check rangeCheck
	twoSided := false
	if _, isDate := b.lo.(time.Time); !isDate && cmp != "eq" && cmp != "ne" && cmp != "ap" {
		cond, check = pointCondition(field, cmp, b.at.(float64))
		twoSided = true
	} else {
		cond, check, twoSided = rangeBounds(field, cmp, b)
	}
	if unit != nil {
		cond = append(cond, unitCondition(field, unit))
		inner := check
		check, twoSided = func(el bson.Raw) bool { return inner(el) && unitMatches(el, unit) }, true
	}
	return cond, check, twoSided
}

// rangeBounds relates a stored range to a search range.
func rangeBounds(field, cmp string, b bounds) (bson.D, rangeCheck, bool) {
	lo, hi := field+".lo", field+".hi"
	within := func(el bson.Raw) bool { return ge(el, "lo", b.lo) && le(el, "hi", b.hi) }
	withinCond := bson.D{{Key: lo, Value: bson.D{{Key: "$gte", Value: b.lo}}}, {Key: hi, Value: bson.D{{Key: "$lte", Value: b.hi}}}}
	switch cmp {
	case "eq":
		return withinCond, within, true
	case "ne":
		return bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: lo, Value: bson.D{{Key: "$lt", Value: b.lo}}}}, bson.D{{Key: hi, Value: bson.D{{Key: "$gt", Value: b.hi}}}}}}},
			func(el bson.Raw) bool { return !within(el) }, false
	case "gt":
		c, k := one(hi, "$gt", b.hi, func(el bson.Raw) bool { return gt(el, "hi", b.hi) })
		return c, k, false
	case "lt":
		c, k := one(lo, "$lt", b.lo, func(el bson.Raw) bool { return lt(el, "lo", b.lo) })
		return c, k, false
	case "ge":
		return bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: hi, Value: bson.D{{Key: "$gt", Value: b.hi}}}}, withinCond}}},
			func(el bson.Raw) bool { return gt(el, "hi", b.hi) || within(el) }, true
	case "le":
		return bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: lo, Value: bson.D{{Key: "$lt", Value: b.lo}}}}, withinCond}}},
			func(el bson.Raw) bool { return lt(el, "lo", b.lo) || within(el) }, true
	case "sa":
		c, k := one(lo, "$gt", b.hi, func(el bson.Raw) bool { return gt(el, "lo", b.hi) })
		return c, k, false
	case "eb":
		c, k := one(hi, "$lt", b.lo, func(el bson.Raw) bool { return lt(el, "hi", b.lo) })
		return c, k, false
	}
	a, z := approximate(b) // ap
	return bson.D{{Key: lo, Value: bson.D{{Key: "$lte", Value: z}}}, {Key: hi, Value: bson.D{{Key: "$gte", Value: a}}}},
		func(el bson.Raw) bool { return le(el, "lo", z) && ge(el, "hi", a) }, true
}

// pointCondition compares a stored number's exact value with v. The
// database narrows with the bound that must hold for it (lo < v for lt);
// the check decides on the middle of the stored range.
func pointCondition(field, cmp string, v float64) (bson.D, rangeCheck) {
	lo, hi := field+".lo", field+".hi"
	var cond bson.D
	var keep func(mid float64) bool
	switch cmp {
	case "lt", "eb":
		cond, keep = bson.D{{Key: lo, Value: bson.D{{Key: "$lt", Value: v}}}}, func(m float64) bool { return m < v && !near(m, v) }
	case "le":
		cond, keep = bson.D{{Key: lo, Value: bson.D{{Key: "$lte", Value: v}}}}, func(m float64) bool { return m < v || near(m, v) }
	case "gt", "sa":
		cond, keep = bson.D{{Key: hi, Value: bson.D{{Key: "$gt", Value: v}}}}, func(m float64) bool { return m > v && !near(m, v) }
	default: // ge
		cond, keep = bson.D{{Key: hi, Value: bson.D{{Key: "$gte", Value: v}}}}, func(m float64) bool { return m > v || near(m, v) }
	}
	return cond, func(el bson.Raw) bool {
		l, ok1 := el.Lookup("lo").DoubleOK()
		h, ok2 := el.Lookup("hi").DoubleOK()
		return ok1 && ok2 && keep(l/2+h/2)
	}
}

// near tells equal values apart from float rounding of range bounds.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func one(field, op string, v any, check rangeCheck) (bson.D, rangeCheck) {
	return bson.D{{Key: field, Value: bson.D{{Key: op, Value: v}}}}, check
}

// approximate widens bounds by 10% of the value (numbers) or of its
// distance from now (dates), as FHIR's ap suggests.
func approximate(b bounds) (any, any) {
	switch lo := b.lo.(type) {
	case time.Time:
		hi := b.hi.(time.Time)
		d := time.Since(lo)
		if d < 0 {
			d = -d
		}
		w := d / 10
		return lo.Add(-w), hi.Add(w)
	case float64:
		w := math.Abs(b.at.(float64)) * 0.1
		return lo - w, b.hi.(float64) + w
	}
	return b.lo, b.hi
}

// ucum is the unit system nearly every clinical quantity uses.
const ucum = "http://unitsofmeasure.org"

// unitCondition narrows by unit with equality only: for a code without a
// system, the code without a system, the UCUM code, or the unit text; the
// post-filter then accepts any system with that code.
func unitCondition(field string, u *unitMatch) bson.E {
	if u.system != "" {
		return bson.E{Key: field + ".s", Value: u.system + "|" + u.code}
	}
	return bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: field + ".s", Value: bson.D{{Key: "$in", Value: bson.A{"|" + u.code, ucum + "|" + u.code}}}}},
		bson.D{{Key: field + ".u", Value: u.code}},
	}}
}

func unitMatches(el bson.Raw, u *unitMatch) bool {
	s, _ := el.Lookup("s").StringValueOK()
	if u.system != "" {
		return s == u.system+"|"+u.code
	}
	unit, _ := el.Lookup("u").StringValueOK()
	return strings.HasSuffix(s, "|"+u.code) || unit == u.code
}

// compare orders a stored bound with a search bound: -1, 0, 1, or 2 when
// they cannot be compared.
func compare(el bson.Raw, key string, v any) int {
	rv := el.Lookup(key)
	switch x := v.(type) {
	case time.Time:
		t, ok := rv.TimeOK()
		if !ok {
			return 2
		}
		return t.Compare(x)
	case float64:
		f, ok := rv.DoubleOK()
		if !ok {
			return 2
		}
		switch {
		case f < x:
			return -1
		case f > x:
			return 1
		}
		return 0
	}
	return 2
}

func ge(el bson.Raw, key string, v any) bool { c := compare(el, key, v); return c == 0 || c == 1 }
func le(el bson.Raw, key string, v any) bool { c := compare(el, key, v); return c == 0 || c == -1 }
func gt(el bson.Raw, key string, v any) bool { return compare(el, key, v) == 1 }
func lt(el bson.Raw, key string, v any) bool { return compare(el, key, v) == -1 }
