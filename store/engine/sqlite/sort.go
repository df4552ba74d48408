package sqlite

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// sortKey is one key of a Find's order.
type sortKey struct {
	path string
	desc bool
}

// dir is the key's SQL direction.
func (k sortKey) dir() string {
	if k.desc {
		return " DESC"
	}
	return ""
}

// parseSort reads a sort document: paths with 1 or -1.
func parseSort(sort bson.D) ([]sortKey, error) {
	keys := make([]sortKey, 0, len(sort))
	for _, e := range sort {
		if err := checkPath(e.Key); err != nil {
			return nil, fmt.Errorf("sort: %w", err)
		}
		v, k, err := filterValue(e.Value)
		if err != nil || k != kindNumber || (v != 1.0 && v != -1.0) {
			return nil, fmt.Errorf("sort %s: %v is not 1 or -1: %w", e.Key, e.Value, engine.ErrUnsupported)
		}
		keys = append(keys, sortKey{path: e.Key, desc: v == -1.0})
		if e.Key == "_id" {
			break // unique: later keys never decide
		}
	}
	return keys, nil
}

// bound is one end of a span (unset: unbounded).
type bound struct {
	v    any
	incl bool
	set  bool
}

// cmp is the SQL comparison keeping values within the bound, as an upper
// (hi) or lower bound.
func (b bound) cmp(hi bool) string {
	switch {
	case hi && b.incl:
		return "<="
	case hi:
		return "<"
	case b.incl:
		return ">="
	}
	return ">"
}

// span is the range of values (in SQLite's order) a path's value must be
// in for a filter to hold: walks of the path's index start and stop there.
type span struct{ lo, hi bound }

// spanAll is the span the conjunction cs implies for path.
func spanAll(cs []expr, path string) span {
	return spanOf(andExpr(cs), path)
}

func spanOf(x expr, path string) span {
	switch y := x.(type) {
	case *fieldExpr:
		if y.path == path {
			return leafSpan(y.op, y.vals)
		}
	case *idExpr:
		if path == "_id" {
			return leafSpan(y.op, y.vals)
		}
	case andExpr:
		var s span
		for _, k := range y {
			ks := spanOf(k, path)
			s.lo = tighter(s.lo, ks.lo, false)
			s.hi = tighter(s.hi, ks.hi, true)
		}
		return s
	case orExpr:
		s := spanOf(y[0], path)
		for _, k := range y[1:] {
			ks := spanOf(k, path)
			s.lo = looser(s.lo, ks.lo, false)
			s.hi = looser(s.hi, ks.hi, true)
		}
		return s
	}
	return span{}
}

func leafSpan(o op, vals []any) span {
	at := func(v any, incl bool) bound { return bound{v: v, incl: incl, set: true} }
	switch o {
	case opEq:
		return span{at(vals[0], true), at(vals[0], true)}
	case opIn:
		lo, hi := vals[0], vals[0]
		for _, v := range vals[1:] {
			if compareValues(v, lo) < 0 {
				lo = v
			}
			if compareValues(v, hi) > 0 {
				hi = v
			}
		}
		return span{at(lo, true), at(hi, true)}
	case opGt, opGte:
		return span{lo: at(vals[0], o == opGte)}
	case opLt, opLte:
		return span{hi: at(vals[0], o == opLte)}
	case opPrefix:
		s := span{lo: at(vals[0], true)}
		if hi := successor(vals[0].(string)); hi != "" {
			s.hi = at(hi, false)
		}
		return s
	}
	return span{}
}

// tighter is the narrower of two bounds of the same end.
func tighter(a, b bound, hi bool) bound {
	switch {
	case !a.set:
		return b
	case !b.set:
		return a
	}
	c := compareValues(a.v, b.v)
	if hi {
		c = -c
	}
	switch {
	case c > 0:
		return a
	case c < 0:
		return b
	}
	return bound{v: a.v, incl: a.incl && b.incl, set: true}
}

// looser is the wider of two bounds of the same end.
func looser(a, b bound, hi bool) bound {
	if !a.set || !b.set {
		return bound{}
	}
	c := compareValues(a.v, b.v)
	if hi {
		c = -c
	}
	switch {
	case c < 0:
		return a
	case c > 0:
		return b
	}
	return bound{v: a.v, incl: a.incl || b.incl, set: true}
}
