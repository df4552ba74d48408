package graphql

import (
	"bytes"
	"encoding/json"

	"github.com/vektah/gqlparser/v2/ast"
)

// object is an answer's JSON object, its keys in the order the query
// selected them.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

// set sets key, keeping its first place.
func (o *object) set(key string, v any) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// MarshalJSON writes the object with its keys in order.
func (o *object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := enc.Encode(k); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		buf.WriteByte(':')
		if err := enc.Encode(o.vals[k]); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// target is where a selection's fields go: an object, or, under @flatten,
// the object of the nearest field that is not flattened, where each field
// gathers the values of every flattened item in a list (one value with
// @singleton), its name suffixed by @slice.
type target struct {
	obj    *object
	flat   bool
	suffix string
}

// put adds a field's values to the target. single tells a field with one
// value at most (not repeating, or @first) outside @flatten; a field named
// twice gathers both answers in a list.
func (t target) put(f *ast.Field, path []string, key string, values []any, single, singleton bool) error {
	key += t.suffix
	if t.flat {
		if singleton {
			_, taken := t.obj.vals[key]
			if len(values) > 1 || (taken && len(values) > 0) {
				return errorAt(f.Position, path, "@singleton field %q has more than one value", key)
			}
			if len(values) == 1 {
				t.obj.set(key, values[0])
			}
			return nil
		}
		if len(values) == 0 {
			return nil
		}
		list, _ := t.obj.vals[key].([]any)
		t.obj.set(key, append(list, values...))
		return nil
	}
	if len(values) == 0 {
		return nil
	}
	var v any = values
	if single {
		v = values[0]
	}
	old, taken := t.obj.vals[key]
	if !taken {
		t.obj.set(key, v)
		return nil
	}
	list, ok := old.([]any)
	if !ok {
		list = []any{old}
	}
	if single {
		t.obj.set(key, append(list, v))
	} else {
		t.obj.set(key, append(list, values...))
	}
	return nil
}
