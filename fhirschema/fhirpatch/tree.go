package fhirpatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
)

// tree is decoded JSON (objects map[string]any, arrays []any, numbers
// json.Number, as the FHIRPath engine reads it) that remembers the key
// order of each object, so that a patched resource keeps its layout.
type tree struct {
	order map[uintptr][]string
}

func newTree() *tree { return &tree{order: map[uintptr][]string{}} }

// id is the identity of an object: the same map wherever it is reached.
func id(m map[string]any) uintptr { return reflect.ValueOf(m).Pointer() }

// decode reads one JSON value, recording the key order of its objects.
func (t *tree) decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := t.value(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func (t *tree) value(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch d := tok.(type) {
	case json.Delim:
		if d == '[' {
			return t.array(dec)
		}
		return t.object(dec)
	default:
		return tok, nil
	}
}

func (t *tree) array(dec *json.Decoder) (any, error) {
	out := []any{}
	for dec.More() {
		v, err := t.value(dec)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	_, err := dec.Token() // ]
	return out, err
}

func (t *tree) object(dec *json.Decoder) (any, error) {
	m := map[string]any{}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		v, err := t.value(dec)
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; !dup {
			keys = append(keys, k)
		}
		m[k] = v
	}
	t.order[id(m)] = keys
	_, err := dec.Token() // }
	return m, err
}

// set sets key of m, a new key after the others.
func (t *tree) set(m map[string]any, key string, v any) {
	if _, ok := m[key]; !ok {
		t.order[id(m)] = append(t.order[id(m)], key)
	}
	m[key] = v
}

// keys are the keys of m in order: as read or set, then any others sorted.
func (t *tree) keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	seen := make(map[string]bool, len(m))
	for _, k := range t.order[id(m)] {
		if _, ok := m[k]; ok && !seen[k] {
			out = append(out, k)
			seen[k] = true
		}
	}
	var rest []string
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// encode writes v as JSON, each object's keys in order.
func (t *tree) encode(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		buf.WriteByte('{')
		for i, k := range t.keys(x) {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := t.encode(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := t.encode(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := t.encode(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("encode %T: %w", x, err)
		}
		buf.Write(b)
	}
	return nil
}

// prune returns v without the empty objects and arrays that a deletion
// leaves behind, which FHIR does not allow; keep is false when v itself
// is empty. The nulls of a primitive array paired with its _name twin stay.
func prune(v any) (_ any, keep bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if pruned, keep := prune(e); keep {
				x[k] = pruned
			} else {
				delete(x, k)
			}
		}
		return x, len(x) > 0
	case []any:
		out := x[:0]
		for _, e := range x {
			if pruned, keep := prune(e); keep {
				out = append(out, pruned)
			}
		}
		return out, len(out) > 0
	}
	return v, true
}
