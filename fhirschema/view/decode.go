package view

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Decode reads a resource's JSON as Eval takes it: objects as
// map[string]any, arrays as []any, numbers as json.Number. It does the
// work of a json.Decoder with UseNumber in a fraction of the time, which
// a view over many resources spends mostly decoding them. The strings it
// returns share one copy of data.
func Decode(data []byte) (map[string]any, error) {
	return decode(data, nil, nil)
}

// Decode is the package's Decode keeping only the top-level elements the
// view can read: a view of a few columns skips most of each resource.
func (v *View) Decode(data []byte) (map[string]any, error) {
	return v.decode(data, nil)
}

// decode is Decode with the values of values, when not nil.
func (v *View) decode(data []byte, values *valueTable) (map[string]any, error) {
	if v.reached == nil {
		return decode(data, nil, values)
	}
	return decode(data, func(key string) bool { return keepKey(v.reached, key) }, values)
}

// decode reads a resource, its top-level elements filtered by keep (nil
// keeps all), taking the values of the elements sharedValueKeys names
// from values (nil: none).
func decode(data []byte, keep func(string) bool, values *valueTable) (map[string]any, error) {
	d := &decoder{data: data, keep: keep, values: values}
	d.space()
	if d.i >= len(d.data) || d.data[d.i] != '{' {
		return nil, errors.New("decode resource: not a JSON object")
	}
	if keep == nil {
		d.src = string(data)
	}
	v, err := d.value(0, false)
	if err != nil {
		return nil, fmt.Errorf("decode resource: %w", err)
	}
	d.space()
	if d.i != len(d.data) {
		return nil, fmt.Errorf("decode resource: data after the object at offset %d", d.i)
	}
	return v.(map[string]any), nil
}

// maxNesting bounds the depth of the JSON a decoder reads.
const maxNesting = 512

// decoder reads one JSON document.
type decoder struct {
	data []byte
	// src is data as a string when the whole document is read: the
	// strings read without escapes are slices of it, not copies each.
	// A document read in part has its strings copied one by one.
	src    string
	i      int
	buf    []byte
	keep   func(string) bool
	values *valueTable
}

// sharedValueKeys are the elements whose values recur from one resource
// to the next (codes, systems, units, references to the same patient): a
// Stream's worker keeps them, each boxed in an interface once.
var sharedValueKeys = map[string]bool{
	"resourceType": true, "system": true, "code": true, "display": true, "unit": true, "status": true,
	"use": true, "type": true, "reference": true, "text": true, "url": true, "gender": true,
	"language": true, "intent": true, "versionId": true, "profile": true, "currency": true,
}

// valueTable holds values already read, boxed, by their text.
type valueTable struct{ m map[string]any }

// Bounds of a valueTable: a longer string is not kept, and a full table
// starts afresh.
const (
	maxSharedValue  = 128
	maxSharedValues = 8192
)

func newValueTable() *valueTable { return &valueTable{m: make(map[string]any, 256)} }

// value is s boxed, from the table when it holds it.
func (t *valueTable) value(s string) any {
	if v, ok := t.m[s]; ok {
		return v
	}
	if len(s) > maxSharedValue {
		return s
	}
	if len(t.m) >= maxSharedValues {
		clear(t.m)
	}
	s = strings.Clone(s) // not the resource's JSON, which the table would keep
	v := any(s)
	t.m[s] = v
	return v
}

// keyNames are the element names of FHIR resources: a key that is one is
// not allocated again for every object that has it.
var keyNames = map[string]string{}

func init() {
	for _, k := range strings.Fields(`resourceType id meta versionId lastUpdated profile source tag security text status div
		extension modifierExtension url value system code display coding reference type use identifier name family given
		prefix suffix period start end subject patient encounter effectiveDateTime issued valueQuantity valueString
		valueCodeableConcept valueBoolean valueDateTime valueInteger unit category component performer note
		telecom address line city state postalCode country gender birthDate text status intent authoredOn
		onsetDateTime recordedDate clinicalStatus verificationStatus class participant individual serviceProvider
		location reasonCode reasonReference item sequence provider insurance total amount currency diagnosis
		billablePeriod created contained entry resource request method fullUrl`) {
		keyNames[k] = k
	}
}

// text is the string of data[start:end].
func (d *decoder) text(start, end int) string {
	if d.src != "" {
		return d.src[start:end]
	}
	return string(d.data[start:end])
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", d.i, fmt.Sprintf(format, args...))
}

func (d *decoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int, shared bool) (any, error) {
	if depth > maxNesting {
		return nil, d.errorf("nested deeper than %d", maxNesting)
	}
	d.space()
	if d.i >= len(d.data) {
		return nil, d.errorf("unexpected end")
	}
	switch c := d.data[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth, shared)
	case c == '"':
		s, err := d.str()
		if shared && err == nil {
			return d.values.value(s), nil
		}
		return s, err
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	default:
		return nil, d.errorf("unexpected %q", c)
	}
}

func (d *decoder) literal(word string) error {
	if len(d.data)-d.i < len(word) || string(d.data[d.i:d.i+len(word)]) != word {
		return d.errorf("invalid literal")
	}
	d.i += len(word)
	return nil
}

func (d *decoder) object(depth int) (map[string]any, error) {
	d.i++
	m := make(map[string]any, 8)
	d.space()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return m, nil
	}
	for {
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, d.errorf("expected a key")
		}
		k, err := d.key()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return nil, d.errorf("expected ':'")
		}
		d.i++
		if depth == 0 && d.keep != nil && !d.keep(k) {
			if err := d.skip(); err != nil {
				return nil, err
			}
		} else {
			v, err := d.value(depth+1, d.values != nil && sharedValueKeys[k])
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		d.space()
		if d.i >= len(d.data) {
			return nil, d.errorf("unexpected end of object")
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return m, nil
		default:
			return nil, d.errorf("expected ',' or '}'")
		}
	}
}

func (d *decoder) array(depth int, shared bool) ([]any, error) {
	d.i++
	arr := make([]any, 0, 4)
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		return arr, nil
	}
	for {
		v, err := d.value(depth+1, shared)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		d.space()
		if d.i >= len(d.data) {
			return nil, d.errorf("unexpected end of array")
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return arr, nil
		default:
			return nil, d.errorf("expected ',' or ']'")
		}
	}
}

func (d *decoder) number() (json.Number, error) {
	start := d.i
	for d.i < len(d.data) {
		c := d.data[d.i]
		if ('0' <= c && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			d.i++
			continue
		}
		break
	}
	s := d.text(start, d.i)
	if plainNumber(s) {
		return json.Number(s), nil
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil && !isRangeError(err) {
		return "", d.errorf("invalid number %q", s)
	}
	return json.Number(s), nil
}

// plainNumber tells whether s is a number as JSON writes it, without
// exponent: -?(0|[1-9][0-9]*)(.[0-9]+)?, which ParseFloat reads.
func plainNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		digits := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		if i == digits {
			return false
		}
	}
	return i == len(s)
}

func isRangeError(err error) bool {
	var ne *strconv.NumError
	return errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange)
}

// key reads an object's key: a known element name without allocating.
func (d *decoder) key() (string, error) {
	end := d.i + 1
	for end < len(d.data) && d.data[end] != '"' && d.data[end] != '\\' {
		end++
	}
	if end < len(d.data) && d.data[end] == '"' {
		if k, ok := keyNames[string(d.data[d.i+1:end])]; ok {
			d.i = end + 1
			return k, nil
		}
	}
	return d.str()
}

// str reads a string; one without escapes is copied once.
func (d *decoder) str() (string, error) {
	d.i++
	start := d.i
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			s := d.text(start, d.i)
			d.i++
			return s, nil
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", d.errorf("control character in a string")
		}
		d.i++
	}
	return "", d.errorf("unterminated string")
}

// escaped reads the rest of a string that has escapes, from start.
func (d *decoder) escaped(start int) (string, error) {
	b := append(d.buf[:0], d.data[start:d.i]...)
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			d.buf = b
			return string(b), nil
		case c < 0x20:
			return "", d.errorf("control character in a string")
		case c != '\\':
			b = append(b, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.data) {
			break
		}
		e := d.data[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, err := d.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if d.i+1 < len(d.data) && d.data[d.i] == '\\' && d.data[d.i+1] == 'u' {
					d.i += 2
					if r2, err = d.hex4(); err != nil {
						return "", err
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", d.errorf("invalid escape \\%c", e)
		}
	}
	return "", d.errorf("unterminated string")
}

func (d *decoder) hex4() (rune, error) {
	if d.i+4 > len(d.data) {
		return 0, d.errorf("short \\u escape")
	}
	n, err := strconv.ParseUint(string(d.data[d.i:d.i+4]), 16, 32)
	if err != nil {
		return 0, d.errorf("invalid \\u escape")
	}
	d.i += 4
	return rune(n), nil
}

// skip passes over one value without building it (its strings are still
// checked for their end, its brackets for their balance).
func (d *decoder) skip() error {
	d.space()
	depth := 0
	for d.i < len(d.data) {
		switch c := d.data[d.i]; c {
		case '"':
			if err := d.skipString(); err != nil {
				return err
			}
		case '{', '[':
			depth++
			d.i++
		case '}', ']':
			if depth == 0 {
				return nil // the end of the enclosing object
			}
			depth--
			d.i++
		case ',':
			if depth == 0 {
				return nil
			}
			d.i++
		default:
			d.i++
		}
		if depth == 0 && d.i < len(d.data) {
			d.space()
			if d.i < len(d.data) && (d.data[d.i] == ',' || d.data[d.i] == '}') {
				return nil
			}
		}
	}
	return d.errorf("unexpected end")
}

// skipString passes over a string: to the first quote after an even
// number of backslashes.
func (d *decoder) skipString() error {
	for i := d.i + 1; ; i++ {
		j := bytes.IndexByte(d.data[i:], '"')
		if j < 0 {
			d.i = len(d.data)
			return d.errorf("unterminated string")
		}
		i += j
		k := i - 1
		for k > d.i && d.data[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			d.i = i + 1
			return nil
		}
	}
}
