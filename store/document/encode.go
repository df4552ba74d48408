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
	e := encoder{buf: buf}
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
	return e.document(raw, "", e.nums != nil)
}

// encoder renders BSON as JSON. Paths (the keys of nums) are only built
// inside the documents and arrays that lead to a number of nums (inner):
// elsewhere there is nothing to look up.
type encoder struct {
	buf   *bytes.Buffer
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

// document renders a document at path; track tells that path leads to
// numbers of nums, so the children's paths are needed.
func (e *encoder) document(raw []byte, path string, track bool) error {
	elems, err := body(raw)
	if err != nil {
		return err
	}
	e.buf.WriteByte('{')
	for first := true; len(elems) > 0; first = false {
		t, key, val, rest, err := next(elems)
		if err != nil {
			return err
		}
		elems = rest
		if !first {
			e.buf.WriteByte(',')
		}
		writeString(e.buf, key)
		e.buf.WriteByte(':')
		child := ""
		if track {
			child = joinPath(path, string(key))
		}
		if err := e.value(t, val, child, track); err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

func (e *encoder) array(raw []byte, path string, track bool) error {
	elems, err := body(raw)
	if err != nil {
		return err
	}
	e.buf.WriteByte('[')
	for i := 0; len(elems) > 0; i++ {
		t, _, val, rest, err := next(elems)
		if err != nil {
			return err
		}
		elems = rest
		if i > 0 {
			e.buf.WriteByte(',')
		}
		child := ""
		if track {
			child = path + "[" + strconv.Itoa(i) + "]"
		}
		if err := e.value(t, val, child, track); err != nil {
			return err
		}
	}
	e.buf.WriteByte(']')
	return nil
}

func (e *encoder) value(t bson.Type, val []byte, path string, track bool) error {
	if text, ok := e.nums[path]; ok && track && isNumber(t) {
		e.buf.WriteString(text)
		return nil
	}
	switch t {
	case bson.TypeEmbeddedDocument:
		return e.document(val, path, track && e.inner[path])
	case bson.TypeArray:
		return e.array(val, path, track && e.inner[path])
	case bson.TypeString:
		if val[len(val)-1] != 0 {
			return errCorrupt
		}
		writeString(e.buf, val[4:len(val)-1])
	case bson.TypeInt32:
		e.buf.Write(strconv.AppendInt(e.buf.AvailableBuffer(), int64(int32(binary.LittleEndian.Uint32(val))), 10))
	case bson.TypeInt64:
		e.buf.Write(strconv.AppendInt(e.buf.AvailableBuffer(), int64(binary.LittleEndian.Uint64(val)), 10))
	case bson.TypeDouble:
		e.buf.WriteString(FormatFloat(math.Float64frombits(binary.LittleEndian.Uint64(val))))
	case bson.TypeBoolean:
		e.buf.WriteString(strconv.FormatBool(val[0] != 0))
	case bson.TypeNull:
		e.buf.WriteString("null")
	case bson.TypeDateTime:
		ms := int64(binary.LittleEndian.Uint64(val))
		writeString(e.buf, []byte(time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)))
	default:
		return fmt.Errorf("stored value at %q has unsupported BSON type %s", path, t)
	}
	return nil
}

func isNumber(t bson.Type) bool {
	return t == bson.TypeInt32 || t == bson.TypeInt64 || t == bson.TypeDouble
}

// writeString writes s as a JSON string without HTML escaping, so narrative
// XHTML reads as it was sent.
func writeString(buf *bytes.Buffer, s []byte) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf.Write(s[start:i])
		switch c {
		case '"', '\\':
			buf.WriteByte('\\')
			buf.WriteByte(c)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[c>>4])
			buf.WriteByte(hex[c&0xf])
		}
		start = i + 1
	}
	buf.Write(s[start:])
	buf.WriteByte('"')
}
