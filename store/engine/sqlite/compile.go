package sqlite

import (
	"fmt"
	"reflect"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// expr is a compiled filter: andExpr, orExpr, notExpr, constExpr,
// *fieldExpr or *idExpr.
type expr any

type (
	andExpr   []expr
	orExpr    []expr
	notExpr   struct{ x expr }
	constExpr bool
)

// op is what a fieldExpr or idExpr asks of a value.
type op uint8

const (
	opEq     op = iota // equal to vals[0]
	opIn               // equal to one of vals
	opGt               // greater than vals[0]
	opGte              // at least vals[0]
	opLt               // less than vals[0]
	opLte              // at most vals[0]
	opPrefix           // a string starting with vals[0]
	opSubstr           // a string containing vals[0]
	opExists           // any entry at the path or below it
	opNull             // a null at the path
	opScalar           // any scalar (not a marker) at the path
)

// fieldExpr holds when some index entry at path satisfies op: values of
// kind (all of one kind), encoded as entries are.
type fieldExpr struct {
	path string
	op   op
	kind kind
	vals []any
}

// idExpr holds when the document's _id (a string) satisfies op.
type idExpr struct {
	op   op
	vals []any
}

// compileFilter translates a filter of package engine's grammar.
func compileFilter(filter bson.D) (expr, error) {
	x, err := compileDoc(filter)
	if err != nil {
		return nil, fmt.Errorf("filter %v: %w", filter, err)
	}
	return x, nil
}

func compileDoc(d bson.D) (expr, error) {
	all := make(andExpr, 0, len(d))
	for _, e := range d {
		x, err := compileClause(e.Key, e.Value)
		if err != nil {
			return nil, err
		}
		all = append(all, x)
	}
	return simplify(all), nil
}

func compileClause(key string, value any) (expr, error) {
	switch key {
	case "$and", "$or":
		items, ok := asList(value)
		if !ok || len(items) == 0 {
			return nil, fmt.Errorf("%s takes a non-empty array of filters: %w", key, engine.ErrUnsupported)
		}
		kids := make([]expr, len(items))
		for i, it := range items {
			d, ok := asDoc(it)
			if !ok {
				return nil, fmt.Errorf("%s element %v is not a filter: %w", key, it, engine.ErrUnsupported)
			}
			x, err := compileDoc(d)
			if err != nil {
				return nil, err
			}
			kids[i] = x
		}
		if key == "$and" {
			return simplify(andExpr(kids)), nil
		}
		return simplify(orExpr(kids)), nil
	}
	if err := checkPath(key); err != nil {
		return nil, err
	}
	if re, ok := value.(bson.Regex); ok {
		return compileRegex(key, re)
	}
	if d, ok := asDoc(value); ok {
		if len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") {
			return nil, fmt.Errorf("%s: equality with a document: %w", key, engine.ErrUnsupported)
		}
		return compileOps(key, d)
	}
	return compileOp(key, "$eq", value)
}

// checkPath accepts the dotted paths of the grammar that have entries.
func checkPath(path string) error {
	parts := strings.Split(path, ".")
	for _, p := range parts {
		if p == "" || strings.HasPrefix(p, "$") || isDigits(p) {
			return fmt.Errorf("path %q: %w", path, engine.ErrUnsupported)
		}
	}
	if parts[0] != path && parts[0] == "_id" || parts[0] != "_id" && unindexed[parts[0]] {
		return fmt.Errorf("path %q is not indexed: %w", path, engine.ErrUnsupported)
	}
	return nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func compileOps(path string, ops bson.D) (expr, error) {
	all := make(andExpr, 0, len(ops))
	for _, o := range ops {
		x, err := compileOp(path, o.Key, o.Value)
		if err != nil {
			return nil, err
		}
		all = append(all, x)
	}
	return simplify(all), nil
}

// compileOp translates one operator on path. Each operator is its own
// condition: on an array, different elements may satisfy different ones.
func compileOp(path, name string, value any) (expr, error) {
	switch name {
	case "$eq":
		return equal(path, value)
	case "$ne":
		x, err := equal(path, value)
		return negate(x), err
	case "$gt", "$gte", "$lt", "$lte":
		return compare(path, name, value)
	case "$in":
		return in(path, value)
	case "$nin":
		x, err := in(path, value)
		return negate(x), err
	case "$not":
		re, ok := value.(bson.Regex)
		if !ok {
			return nil, fmt.Errorf("%s: $not takes a regular expression: %w", path, engine.ErrUnsupported)
		}
		x, err := compileRegex(path, re)
		return negate(x), err
	case "$exists":
		b, ok := truth(value)
		if !ok {
			return nil, fmt.Errorf("%s: $exists takes a boolean: %w", path, engine.ErrUnsupported)
		}
		if path == "_id" {
			return constExpr(b), nil
		}
		x := expr(&fieldExpr{path: path, op: opExists})
		if !b {
			x = negate(x)
		}
		return x, nil
	}
	return nil, fmt.Errorf("%s: operator %s: %w", path, name, engine.ErrUnsupported)
}

// equal is path = value; null matches a missing path too.
func equal(path string, value any) (expr, error) {
	if _, ok := value.(bson.Regex); ok {
		return nil, fmt.Errorf("%s: regular expression as a value: %w", path, engine.ErrUnsupported)
	}
	if _, ok := asList(value); ok {
		return nil, fmt.Errorf("%s: equality with an array: %w", path, engine.ErrUnsupported)
	}
	v, k, err := filterValue(value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if path == "_id" {
		if k != kindString {
			return constExpr(false), nil
		}
		return &idExpr{op: opEq, vals: []any{v}}, nil
	}
	if k == kindNull {
		return orExpr{notExpr{&fieldExpr{path: path, op: opExists}}, &fieldExpr{path: path, op: opNull}}, nil
	}
	return &fieldExpr{path: path, op: opEq, kind: k, vals: []any{v}}, nil
}

func compare(path, name string, value any) (expr, error) {
	v, k, err := filterValue(value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	o := map[string]op{"$gt": opGt, "$gte": opGte, "$lt": opLt, "$lte": opLte}[name]
	switch {
	case k == kindNull && (o == opGte || o == opLte):
		return equal(path, nil)
	case k == kindNull:
		return constExpr(false), nil
	case path == "_id" && k != kindString:
		return constExpr(false), nil
	case path == "_id":
		return &idExpr{op: o, vals: []any{v}}, nil
	}
	return &fieldExpr{path: path, op: o, kind: k, vals: []any{v}}, nil
}

// in is path equal to one of the values: one condition per kind.
func in(path string, value any) (expr, error) {
	items, ok := asList(value)
	if !ok {
		return nil, fmt.Errorf("%s: $in and $nin take an array: %w", path, engine.ErrUnsupported)
	}
	byKind := map[kind][]any{}
	var kinds []kind
	for _, it := range items {
		if _, isRe := it.(bson.Regex); isRe {
			return nil, fmt.Errorf("%s: regular expression in $in: %w", path, engine.ErrUnsupported)
		}
		if _, isList := asList(it); isList {
			return nil, fmt.Errorf("%s: array in $in: %w", path, engine.ErrUnsupported)
		}
		v, k, err := filterValue(it)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if _, seen := byKind[k]; !seen {
			kinds = append(kinds, k)
		}
		if !containsValue(byKind[k], v) {
			byKind[k] = append(byKind[k], v)
		}
	}
	var alts orExpr
	for _, k := range kinds {
		vals := byKind[k]
		switch {
		case k == kindNull:
			x, _ := equal(path, nil)
			alts = append(alts, x)
		case path == "_id" && k != kindString:
		case path == "_id" && len(vals) == 1:
			alts = append(alts, &idExpr{op: opEq, vals: vals})
		case path == "_id":
			alts = append(alts, &idExpr{op: opIn, vals: vals})
		case len(vals) == 1:
			alts = append(alts, &fieldExpr{path: path, op: opEq, kind: k, vals: vals})
		default:
			alts = append(alts, &fieldExpr{path: path, op: opIn, kind: k, vals: vals})
		}
	}
	return simplify(alts), nil
}

func containsValue(vals []any, v any) bool {
	for _, x := range vals {
		if x == v {
			return true
		}
	}
	return false
}

// compileRegex accepts the two regular expressions of the grammar: "^"
// followed by a literal (a prefix), or a literal (a substring), with no
// options; a literal is regexp.QuoteMeta's output, NUL written \x00.
func compileRegex(path string, re bson.Regex) (expr, error) {
	if re.Options != "" {
		return nil, fmt.Errorf("%s: regular expression options %q: %w", path, re.Options, engine.ErrUnsupported)
	}
	pattern, anchored := strings.CutPrefix(re.Pattern, "^")
	lit, ok := literal(pattern)
	if !ok {
		return nil, fmt.Errorf("%s: regular expression %q is not a literal: %w", path, re.Pattern, engine.ErrUnsupported)
	}
	o := opSubstr
	if anchored {
		o = opPrefix
	}
	if path == "_id" {
		return &idExpr{op: o, vals: []any{lit}}, nil
	}
	return &fieldExpr{path: path, op: o, kind: kindString, vals: []any{lit}}, nil
}

// regexMeta are the characters regexp.QuoteMeta escapes.
const regexMeta = `\.+*?()|[]{}^$`

// literal unquotes a quoted literal pattern, reporting whether it is one.
func literal(pattern string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern) && strings.IndexByte(regexMeta, pattern[i+1]) >= 0:
			i++
			b.WriteByte(pattern[i])
		case c == '\\' && strings.HasPrefix(pattern[i:], `\x00`):
			i += 3
			b.WriteByte(0)
		case strings.IndexByte(regexMeta, c) >= 0:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// truth reads $exists' operand (a boolean, or a number as MongoDB allows).
func truth(v any) (bool, bool) {
	if b, ok := v.(bool); ok {
		return b, true
	}
	if f, k, err := filterValue(v); err == nil && k == kindNumber {
		return f.(float64) != 0, true
	}
	return false, false
}

// asDoc reads a filter document: bson.D, or a map (whose order does not
// matter in a conjunction).
func asDoc(v any) (bson.D, bool) {
	switch x := v.(type) {
	case bson.D:
		return x, true
	case bson.M:
		return mapDoc(x), true
	case map[string]any:
		return mapDoc(x), true
	}
	return nil, false
}

func mapDoc(m map[string]any) bson.D {
	d := make(bson.D, 0, len(m))
	for k, v := range m {
		d = append(d, bson.E{Key: k, Value: v})
	}
	return d
}

// asList reads an array operand: bson.A or any slice but []byte.
func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case bson.A:
		return x, true
	case []any:
		return x, true
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	case []byte, nil:
		return nil, false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

// negate is NOT x, folding constants and double negations.
func negate(x expr) expr {
	switch y := x.(type) {
	case constExpr:
		return !y
	case notExpr:
		return y.x
	}
	return notExpr{x}
}

// simplify flattens nested conjunctions and disjunctions and folds constants.
func simplify(x expr) expr {
	switch y := x.(type) {
	case andExpr:
		out := andExpr{}
		for _, k := range y {
			switch z := simplify(k).(type) {
			case constExpr:
				if !z {
					return constExpr(false)
				}
			case andExpr:
				out = append(out, z...)
			default:
				out = append(out, z)
			}
		}
		switch len(out) {
		case 0:
			return constExpr(true)
		case 1:
			return out[0]
		}
		return out
	case orExpr:
		out := orExpr{}
		for _, k := range y {
			switch z := simplify(k).(type) {
			case constExpr:
				if z {
					return constExpr(true)
				}
			case orExpr:
				out = append(out, z...)
			default:
				out = append(out, z)
			}
		}
		switch len(out) {
		case 0:
			return constExpr(false)
		case 1:
			return out[0]
		}
		return out
	case notExpr:
		return negate(simplify(y.x))
	}
	return x
}

// conjuncts lists the conditions of a conjunction (one for anything else).
func conjuncts(x expr) []expr {
	switch y := x.(type) {
	case andExpr:
		return y
	case constExpr:
		if y {
			return nil
		}
	}
	return []expr{x}
}
