package profile

import (
	"encoding/json"
	"math/big"
	"strings"
	"unicode/utf8"
)

// checkValue applies fixed[x], pattern[x], maxLength and
// minValue[x]/maxValue[x] to the value.
func (w *walker) checkValue(p *compiled, el *element, n node) {
	if el.fixed != nil && !fixedMatches(el.fixed, n.value) {
		w.errorf(p, "value", n.loc(), "%s: the value must be %s (%s)", elementID(el), compactJSON(el.fixed), el.fixedKey)
	}
	if el.pattern != nil && !patternMatches(el.pattern, n.value) {
		w.errorf(p, "value", n.loc(), "%s: the value must match %s (%s)", elementID(el), compactJSON(el.pattern), el.patternKey)
	}
	if s, ok := n.value.(string); ok && el.maxLength > 0 && utf8.RuneCountInString(s) > el.maxLength {
		w.errorf(p, "value", n.loc(), "%s: the value is %d characters long, more than maxLength %d", elementID(el), utf8.RuneCountInString(s), el.maxLength)
	}
	if s, ok := n.value.(string); ok && el.minLength > 0 && utf8.RuneCountInString(s) < el.minLength {
		w.errorf(p, "value", n.loc(), "%s: the value is %d characters long, less than its minLength %d", elementID(el), utf8.RuneCountInString(s), el.minLength)
	}
	if len(el.narrative) > 0 && n.typ == "Narrative" {
		w.checkNarrativeLanguages(p, el, n)
	}
	if el.minValue != nil && compareBound(n.value, el.minValue) < 0 {
		w.errorf(p, "value", n.loc(), "%s: the value is less than %s (%s)", elementID(el), compactJSON(el.minValue), el.minKey)
	}
	if el.maxValue != nil && compareBound(n.value, el.maxValue) > 0 {
		w.errorf(p, "value", n.loc(), "%s: the value is more than %s (%s)", elementID(el), compactJSON(el.maxValue), el.maxKey)
	}
}

// fixedMatches reports whether data is exactly the fixed value: the same
// properties with the same values, arrays item by item, numbers by value.
func fixedMatches(fixed, data any) bool {
	switch f := fixed.(type) {
	case map[string]any:
		d, ok := data.(map[string]any)
		if !ok || len(d) != len(f) {
			return false
		}
		for k, fv := range f {
			if !fixedMatches(fv, d[k]) {
				return false
			}
		}
		return true
	case []any:
		d, ok := data.([]any)
		if !ok || len(d) != len(f) {
			return false
		}
		for i := range f {
			if !fixedMatches(f[i], d[i]) {
				return false
			}
		}
		return true
	}
	return primitiveEqual(fixed, data)
}

// patternMatches reports whether data holds everything pattern holds: each
// property of a pattern object in data's, each item of a pattern array in
// some item of data's, primitives equal.
func patternMatches(pattern, data any) bool {
	switch p := pattern.(type) {
	case map[string]any:
		d, ok := data.(map[string]any)
		if !ok {
			return false
		}
		for k, pv := range p {
			if !patternMatches(pv, d[k]) {
				return false
			}
		}
		return true
	case []any:
		d, ok := data.([]any)
		if !ok {
			return len(p) == 1 && patternMatches(p[0], data)
		}
		for _, pv := range p {
			if !anyMatches(pv, d) {
				return false
			}
		}
		return true
	}
	return primitiveEqual(pattern, data)
}

func anyMatches(p any, list []any) bool {
	for _, d := range list {
		if patternMatches(p, d) {
			return true
		}
	}
	return false
}

// primitiveEqual compares two JSON primitives; numbers by value.
func primitiveEqual(a, b any) bool {
	if na, ok := a.(json.Number); ok {
		nb, ok := b.(json.Number)
		return ok && numberCmp(na, nb) == 0
	}
	return a == b
}

// numberCmp compares two JSON numbers; 0 also when either is malformed.
func numberCmp(a, b json.Number) int {
	x, ok1 := new(big.Rat).SetString(string(a))
	y, ok2 := new(big.Rat).SetString(string(b))
	if !ok1 || !ok2 {
		return 0
	}
	return x.Cmp(y)
}

// compareBound compares a value with a minValue or maxValue: numbers by
// value, dates and times as strings over their common precision,
// Quantities by value when their units agree. 0 when not comparable.
func compareBound(v, bound any) int {
	switch b := bound.(type) {
	case json.Number:
		if n, ok := v.(json.Number); ok {
			return numberCmp(n, b)
		}
	case string:
		if s, ok := v.(string); ok {
			k := min(len(s), len(b))
			return strings.Compare(s[:k], b[:k])
		}
	case map[string]any:
		q, ok := v.(map[string]any)
		if !ok || q["code"] != b["code"] || q["system"] != b["system"] {
			return 0
		}
		qv, ok1 := q["value"].(json.Number)
		bv, ok2 := b["value"].(json.Number)
		if ok1 && ok2 {
			return numberCmp(qv, bv)
		}
	}
	return 0
}

// compactJSON renders v for a message.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
