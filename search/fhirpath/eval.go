package fhirpath

import (
	"encoding/json"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// context holds what stays fixed during one evaluation.
type context struct {
	root     map[string]any // the resource
	rootItem item
}

// item is one element of a collection during evaluation.
type item struct {
	value    any    // map[string]any, string, json.Number or bool
	typ      string // FHIR type when known
	resolved bool   // produced by resolve(): target holds the referenced type
	target   string // resource type the reference names ("" if unknown)
}

// boolItems is the one-boolean collection {v}.
func boolItems(v bool) []item { return []item{{value: v, typ: "boolean"}} }

// children selects the child name of every item, flattening arrays. When
// the item has no such property and name is a choice element, it selects
// the name+Type properties (valueQuantity) and records their type.
func children(in []item, name string) []item {
	var out []item
	for _, it := range in {
		m, ok := it.value.(map[string]any)
		if !ok {
			continue
		}
		if v, ok := m[name]; ok && v != nil {
			out = appendValues(out, v, "")
		} else if choiceNames[name] {
			out = appendChoices(out, m, name)
		}
	}
	return out
}

// appendChoices appends the values of the choice properties name+Type of
// m, in key order.
func appendChoices(out []item, m map[string]any, name string) []item {
	var keys []string
	for k := range m {
		if len(k) > len(name) && strings.HasPrefix(k, name) {
			if _, ok := choiceType(k[len(name):]); ok {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		t, _ := choiceType(k[len(name):])
		out = appendValues(out, m[k], t)
	}
	return out
}

// appendValues appends v, or each element of v when it is an array.
func appendValues(out []item, v any, typ string) []item {
	list, ok := v.([]any)
	if !ok {
		return appendValue(out, v, typ)
	}
	for _, x := range list {
		out = appendValue(out, x, typ)
	}
	return out
}

// appendValue appends one JSON value; null, nested arrays and values of
// unexpected Go types are skipped, float64 becomes json.Number.
func appendValue(out []item, v any, typ string) []item {
	switch x := v.(type) {
	case map[string]any:
		if rt, ok := x["resourceType"].(string); ok && typ == "" {
			typ = rt
		}
	case string, json.Number, bool:
	case float64:
		v = json.Number(strconv.FormatFloat(x, 'g', -1, 64))
	default:
		return out
	}
	return append(out, item{value: v, typ: typ})
}

// union merges two collections, dropping duplicate values.
func union(a, b []item) []item {
	out := make([]item, 0, len(a)+len(b))
	seen := map[string]bool{}
	for _, list := range [][]item{a, b} {
		for _, it := range list {
			if !isDuplicate(out, seen, it) {
				out = append(out, it)
			}
		}
	}
	return out
}

// isDuplicate reports whether it equals a value already in out; scalars
// are tracked in seen, objects compared one by one.
func isDuplicate(out []item, seen map[string]bool, it item) bool {
	if key, ok := scalarKey(it.value); ok {
		if seen[key] {
			return true
		}
		seen[key] = true
		return false
	}
	for _, o := range out {
		if valuesEqual(o.value, it.value) {
			return true
		}
	}
	return false
}

// scalarKey returns a key equal for equal scalar values.
func scalarKey(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return "s" + x, true
	case bool:
		return "b" + strconv.FormatBool(x), true
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(x)); ok {
			return "n" + r.RatString(), true
		}
		return "n" + string(x), true
	}
	return "", false
}

// collectionsEqual implements =: ok is false when either side is empty.
func collectionsEqual(a, b []item) (equal, ok bool) {
	if len(a) == 0 || len(b) == 0 {
		return false, false
	}
	if len(a) != len(b) {
		return false, true
	}
	for i := range a {
		if !valuesEqual(a[i].value, b[i].value) {
			return false, true
		}
	}
	return true, true
}

// valuesEqual compares two JSON values; numbers compare by value, values
// of different kinds are unequal.
func valuesEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && numbersEqual(x, y)
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && mapsEqual(x, y)
	case []any:
		y, ok := b.([]any)
		return ok && slicesEqual(x, y)
	}
	return false
}

func numbersEqual(a, b json.Number) bool {
	x, okx := new(big.Rat).SetString(string(a))
	y, oky := new(big.Rat).SetString(string(b))
	if !okx || !oky {
		return a == b
	}
	return x.Cmp(y) == 0
}

func mapsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !valuesEqual(v, w) {
			return false
		}
	}
	return true
}

func slicesEqual(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !valuesEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// toBool applies singleton evaluation: {} is unknown, {true}/{false} is
// that value, one non-boolean item is true, several items are unknown.
func toBool(in []item) (value, ok bool) {
	if len(in) != 1 {
		return false, false
	}
	if b, isBool := in[0].value.(bool); isBool {
		return b, true
	}
	return true, true
}

// isTrue reports whether a criteria result counts as true.
func isTrue(in []item) bool {
	b, ok := toBool(in)
	return ok && b
}

// logic applies a three-valued boolean operator; ok false means empty.
func logic(op string, l, lok, r, rok bool) (value, ok bool) {
	switch op {
	case "and":
		if (lok && !l) || (rok && !r) {
			return false, true
		}
		return true, lok && rok
	case "or":
		if (lok && l) || (rok && r) {
			return true, true
		}
		return false, lok && rok
	case "xor":
		return l != r, lok && rok
	default: // implies
		if lok && !l || rok && r {
			return true, true
		}
		return false, lok && rok
	}
}
