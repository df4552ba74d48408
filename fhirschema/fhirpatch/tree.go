package fhirpatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// tree is decoded JSON (objects map[string]any, arrays []any, numbers
// json.Number, as the FHIRPath engine reads it) that remembers the key
// order of each object, so that a patched resource keeps its layout.
type tree struct {
	order map[uintptr]keyOrder
}

// keyOrder is the key order of one object; it holds the object, so that
// no other takes its address while the tree lives.
type keyOrder struct {
	obj  map[string]any
	keys []string
}

func newTree() *tree { return &tree{order: map[uintptr]keyOrder{}} }

// setOrder records the key order of m.
func (t *tree) setOrder(m map[string]any, keys []string) {
	t.order[id(m)] = keyOrder{obj: m, keys: keys}
}

// id is the identity of an object: the same map wherever it is reached.
func id(m map[string]any) uintptr { return reflect.ValueOf(m).Pointer() }

// decode reads one JSON value, recording the key order of its objects.
func (t *tree) decode(data []byte) (any, error) {
	d := &decoder{tree: t, data: data}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.skipSpace(); d.pos < len(d.data) {
		return nil, d.errorf("data after the JSON value")
	}
	return v, nil
}

// maxDepth bounds the nesting of a decoded value.
const maxDepth = 200

// decoder is a JSON reader over one document: a hand-written descent,
// since encoding/json's token stream, the only way to see key order there,
// costs several times more.
type decoder struct {
	tree *tree
	data []byte
	pos  int
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", d.pos, fmt.Sprintf(format, args...))
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, d.errorf("values nest deeper than %d levels", maxDepth)
	}
	d.skipSpace()
	if d.pos >= len(d.data) {
		return nil, d.errorf("unexpected end of JSON")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	for _, lit := range []struct {
		text string
		v    any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if bytes.HasPrefix(d.data[d.pos:], []byte(lit.text)) {
			d.pos += len(lit.text)
			return lit.v, nil
		}
	}
	return nil, d.errorf("invalid character %q", d.data[d.pos])
}

// expect skips space and one delimiter c, reporting whether it was there.
func (d *decoder) expect(c byte) bool {
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

func (d *decoder) object(depth int) (any, error) {
	d.pos++ // {
	m := map[string]any{}
	var keys []string
	if d.expect('}') {
		d.tree.setOrder(m, keys)
		return m, nil
	}
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.errorf("expected a property name")
		}
		k, err := d.string()
		if err != nil {
			return nil, err
		}
		if !d.expect(':') {
			return nil, d.errorf("expected ':' after a property name")
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; !dup {
			keys = append(keys, k)
		}
		m[k] = v
		if d.expect(',') {
			continue
		}
		if d.expect('}') {
			d.tree.setOrder(m, keys)
			return m, nil
		}
		return nil, d.errorf("expected ',' or '}' in an object")
	}
}

func (d *decoder) array(depth int) (any, error) {
	d.pos++ // [
	out := []any{}
	if d.expect(']') {
		return out, nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if d.expect(',') {
			continue
		}
		if d.expect(']') {
			return out, nil
		}
		return nil, d.errorf("expected ',' or ']' in an array")
	}
}

// string reads a string; one with escapes is left to encoding/json.
func (d *decoder) string() (string, error) {
	start := d.pos
	escaped := false
	for i := start + 1; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '\\':
			escaped = true
			i++
		case c == '"':
			d.pos = i + 1
			if !escaped && utf8.Valid(d.data[start+1:i]) {
				return string(d.data[start+1 : i]), nil
			}
			var s string
			if err := json.Unmarshal(d.data[start:i+1], &s); err != nil {
				return "", d.errorf("invalid string: %v", err)
			}
			return s, nil
		case c < 0x20:
			d.pos = i
			return "", d.errorf("control character in a string")
		}
	}
	return "", d.errorf("unterminated string")
}

// number reads a number as json.Number, keeping its text.
func (d *decoder) number() (any, error) {
	start := d.pos
	for d.pos < len(d.data) && strings.IndexByte("+-0123456789.eE", d.data[d.pos]) >= 0 {
		d.pos++
	}
	n := json.Number(d.data[start:d.pos])
	if !json.Valid([]byte(n)) {
		return nil, d.errorf("invalid number %s", n)
	}
	return n, nil
}

// set sets key of m, a new key after the others.
func (t *tree) set(m map[string]any, key string, v any) {
	if _, ok := m[key]; !ok {
		t.setOrder(m, append(t.order[id(m)].keys, key))
	}
	m[key] = v
}

// keys are the keys of m in order: as read or set, then any others sorted.
func (t *tree) keys(m map[string]any) []string {
	order := t.order[id(m)].keys
	out := make([]string, 0, len(m))
	for _, k := range order {
		if _, ok := m[k]; ok && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == len(m) {
		return out
	}
	var rest []string
	for k := range m {
		if !slices.Contains(out, k) {
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
	case string:
		writeString(buf, x)
	case json.Number:
		buf.WriteString(string(x))
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("encode %T: %w", x, err)
		}
		buf.Write(b)
	}
	return nil
}

// writeString writes s as a JSON string: as it is when nothing in it needs
// escaping, through encoding/json otherwise (its trailing newline cut).
func writeString(buf *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			// <, > and & as they are: narratives stay readable.
			enc := json.NewEncoder(buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			buf.Truncate(buf.Len() - 1)
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
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
