package graphql

import (
	"bytes"
	"encoding/json"

	"github.com/vektah/gqlparser/v2/ast"
)

// object is an answer's JSON object, its keys in the order the query
// selected them. Objects are small: a slice searched in order beats a map.
type object struct {
	keys []string
	vals []any
}

func newObject() *object { return &object{} }

// get returns key's value.
func (o *object) get(key string) (any, bool) {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i], true
		}
	}
	return nil, false
}

// set sets key, keeping its first place.
func (o *object) set(key string, v any) {
	for i, k := range o.keys {
		if k == key {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, v)
}

// MarshalJSON writes the object, and everything in it, in one pass.
func (o *object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := writeValue(&buf, o); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeValue writes v as JSON: objects and lists here, anything else
// (strings, numbers, Booleans, the resources' own maps) as encoding/json
// writes it.
func writeValue(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case *object:
		buf.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeLeaf(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeValue(buf, v.vals[i]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case []any:
		buf.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeValue(buf, item); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	}
	return writeLeaf(buf, v)
}

// writeLeaf writes a value that holds no answer object.
func writeLeaf(buf *bytes.Buffer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
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
			_, taken := t.obj.get(key)
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
		old, _ := t.obj.get(key)
		list, _ := old.([]any)
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
	old, taken := t.obj.get(key)
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
