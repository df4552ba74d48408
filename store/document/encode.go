package document

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ToJSON renders a stored document as compact JSON in its stored key order,
// re-applying the original text of the numbers listed in numText.
func ToJSON(raw bson.Raw, numText []NumText) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(raw) + len(raw)/4)
	if err := AppendJSON(&buf, raw, numText); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// AppendJSON writes the JSON form of raw to buf (see ToJSON).
func AppendJSON(buf *bytes.Buffer, raw bson.Raw, numText []NumText) error {
	e := encoder{out: buf.AvailableBuffer()}
	if len(numText) > 0 {
		e.nums = make(map[string]string, len(numText))
		e.inner = map[string]bool{}
		for _, n := range numText {
			e.nums[n.Path] = n.Text
			for i := 0; i < len(n.Path); i++ {
				if n.Path[i] == '.' || n.Path[i] == '[' {
					e.inner[n.Path[:i]] = true
				}
			}
		}
	}
	if err := e.document(raw, e.nums != nil); err != nil {
		return err
	}
	buf.Write(e.out)
	return nil
}

// encoder renders BSON as JSON, appending to out (the spare capacity of
// the caller's buffer, copied into it at the end). The path of the value
// being rendered (path, as the keys of nums) is only kept inside the
// documents and arrays that lead to a number of nums (inner): elsewhere
// there is nothing to look up.
type encoder struct {
	out   []byte
	path  []byte
	nums  map[string]string
	inner map[string]bool
}

// errCorrupt reports stored bytes that are not a well-formed BSON document.
var errCorrupt = errors.New("read stored document: malformed BSON")

// The encoder walks the BSON bytes itself rather than through bson.Raw's
// element lists: reads render every stored resource, and the lists (one
// allocation per document and array, one string per value) cost more than
// the rendering.

// body checks the length prefix of a BSON document or array and returns
// its elements.
func body(raw []byte) ([]byte, error) {
	if len(raw) < 5 {
		return nil, errCorrupt
	}
	n := int(binary.LittleEndian.Uint32(raw))
	if n < 5 || n > len(raw) || raw[n-1] != 0 {
		return nil, errCorrupt
	}
	return raw[4 : n-1], nil
}

// next splits the first element off elems: its type, key and value bytes.
func next(elems []byte) (t bson.Type, key, val, rest []byte, err error) {
	t = bson.Type(elems[0])
	k := bytes.IndexByte(elems[1:], 0)
	if k < 0 {
		return 0, nil, nil, nil, errCorrupt
	}
	key, elems = elems[1:1+k], elems[2+k:]
	size, err := valueSize(t, elems)
	if err != nil {
		return 0, nil, nil, nil, err
	}
	return t, key, elems[:size], elems[size:], nil
}

// valueSize is the length of the value of type t at the start of b.
func valueSize(t bson.Type, b []byte) (int, error) {
	size := 0
	switch t {
	case bson.TypeDouble, bson.TypeInt64, bson.TypeDateTime:
		size = 8
	case bson.TypeInt32:
		size = 4
	case bson.TypeBoolean:
		size = 1
	case bson.TypeNull:
		size = 0
	case bson.TypeString:
		if len(b) < 4 {
			return 0, errCorrupt
		}
		size = 4 + int(int32(binary.LittleEndian.Uint32(b)))
		if size < 5 {
			return 0, errCorrupt
		}
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		if len(b) < 4 {
			return 0, errCorrupt
		}
		size = int(int32(binary.LittleEndian.Uint32(b)))
		if size < 5 {
			return 0, errCorrupt
		}
	default:
		return 0, fmt.Errorf("stored value has unsupported BSON type %s", t)
	}
	if size > len(b) {
		return 0, errCorrupt
	}
	return size, nil
}

// document renders a document; track tells that the path leads to
// numbers of nums, so the children's paths are needed.
func (e *encoder) document(raw []byte, track bool) error {
	elems, err := body(raw)
	if err != nil {
		return err
	}
	e.out = append(e.out, '{')
	parent := len(e.path)
	for first := true; len(elems) > 0; first = false {
		t, key, val, rest, err := next(elems)
		if err != nil {
			return err
		}
		elems = rest
		if !first {
			e.out = append(e.out, ',')
		}
		e.out = append(appendString(e.out, key), ':')
		if track {
			if parent > 0 {
				e.path = append(e.path, '.')
			}
			e.path = append(e.path, key...)
		}
		if err := e.value(t, val, track); err != nil {
			return err
		}
		e.path = e.path[:parent]
	}
	e.out = append(e.out, '}')
	return nil
}

func (e *encoder) array(raw []byte, track bool) error {
	elems, err := body(raw)
	if err != nil {
		return err
	}
	e.out = append(e.out, '[')
	parent := len(e.path)
	for i := 0; len(elems) > 0; i++ {
		t, _, val, rest, err := next(elems)
		if err != nil {
			return err
		}
		elems = rest
		if i > 0 {
			e.out = append(e.out, ',')
		}
		if track {
			e.path = append(strconv.AppendInt(append(e.path, '['), int64(i), 10), ']')
		}
		if err := e.value(t, val, track); err != nil {
			return err
		}
		e.path = e.path[:parent]
	}
	e.out = append(e.out, ']')
	return nil
}

// value renders one value at e.path.
func (e *encoder) value(t bson.Type, val []byte, track bool) error {
	if track && isNumber(t) {
		if text, ok := e.nums[string(e.path)]; ok {
			e.out = append(e.out, text...)
			return nil
		}
	}
	switch t {
	case bson.TypeEmbeddedDocument:
		return e.document(val, track && e.inner[string(e.path)])
	case bson.TypeArray:
		return e.array(val, track && e.inner[string(e.path)])
	case bson.TypeString:
		if val[len(val)-1] != 0 {
			return errCorrupt
		}
		e.out = appendString(e.out, val[4:len(val)-1])
	case bson.TypeInt32:
		e.out = strconv.AppendInt(e.out, int64(int32(binary.LittleEndian.Uint32(val))), 10)
	case bson.TypeInt64:
		e.out = strconv.AppendInt(e.out, int64(binary.LittleEndian.Uint64(val)), 10)
	case bson.TypeDouble:
		e.out = append(e.out, FormatFloat(math.Float64frombits(binary.LittleEndian.Uint64(val)))...)
	case bson.TypeBoolean:
		e.out = strconv.AppendBool(e.out, val[0] != 0)
	case bson.TypeNull:
		e.out = append(e.out, "null"...)
	case bson.TypeDateTime:
		ms := int64(binary.LittleEndian.Uint64(val))
		e.out = appendString(e.out, time.UnixMilli(ms).UTC().AppendFormat(nil, time.RFC3339Nano))
	default:
		return fmt.Errorf("stored value at %q has unsupported BSON type %s", e.path, t)
	}
	return nil
}

func isNumber(t bson.Type) bool {
	return t == bson.TypeInt32 || t == bson.TypeInt64 || t == bson.TypeDouble
}

// appendString appends s as a JSON string without HTML escaping, so
// narrative XHTML reads as it was sent.
func appendString(out, s []byte) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plain(binary.LittleEndian.Uint64(s[i:])) {
			i += 8
			continue
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, `\n`...)
		case '\r':
			out = append(out, `\r`...)
		case '\t':
			out = append(out, `\t`...)
		default:
			out = append(out, `\u00`...)
			out = append(out, hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// plain tells whether none of the eight bytes of w needs escaping in a
// JSON string: none is below 0x20, a quote or a backslash (each test
// finds whether some byte is below a bound: x - 1 borrows into the high
// bit of a byte only where that byte of x was zero).
func plain(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	control := (w - ones*0x20) &^ w
	return (control|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs == 0
}
