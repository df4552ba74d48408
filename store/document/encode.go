package document

import (
	"bytes"
	"fmt"
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
		for _, n := range numText {
			e.nums[n.Path] = n.Text
		}
	}
	return e.document(raw, "")
}

type encoder struct {
	buf  *bytes.Buffer
	nums map[string]string
}

func (e *encoder) document(raw bson.Raw, path string) error {
	elems, err := raw.Elements()
	if err != nil {
		return fmt.Errorf("read stored document: %w", err)
	}
	e.buf.WriteByte('{')
	for i, el := range elems {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		key := el.Key()
		writeString(e.buf, key)
		e.buf.WriteByte(':')
		child := ""
		if e.nums != nil {
			child = joinPath(path, key)
		}
		if err := e.value(el.Value(), child); err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

func (e *encoder) array(raw bson.RawArray, path string) error {
	vals, err := raw.Values()
	if err != nil {
		return fmt.Errorf("read stored array: %w", err)
	}
	e.buf.WriteByte('[')
	for i, v := range vals {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		child := ""
		if e.nums != nil {
			child = path + "[" + strconv.Itoa(i) + "]"
		}
		if err := e.value(v, child); err != nil {
			return err
		}
	}
	e.buf.WriteByte(']')
	return nil
}

func (e *encoder) value(v bson.RawValue, path string) error {
	if text, ok := e.nums[path]; ok && e.nums != nil {
		if isNumber(v.Type) {
			e.buf.WriteString(text)
			return nil
		}
	}
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		return e.document(v.Document(), path)
	case bson.TypeArray:
		return e.array(v.Array(), path)
	case bson.TypeString:
		writeString(e.buf, v.StringValue())
	case bson.TypeInt32:
		e.buf.WriteString(strconv.FormatInt(int64(v.Int32()), 10))
	case bson.TypeInt64:
		e.buf.WriteString(strconv.FormatInt(v.Int64(), 10))
	case bson.TypeDouble:
		e.buf.WriteString(FormatFloat(v.Double()))
	case bson.TypeBoolean:
		e.buf.WriteString(strconv.FormatBool(v.Boolean()))
	case bson.TypeNull:
		e.buf.WriteString("null")
	case bson.TypeDateTime:
		writeString(e.buf, time.UnixMilli(v.DateTime()).UTC().Format(time.RFC3339Nano))
	default:
		return fmt.Errorf("stored value at %q has unsupported BSON type %s", path, v.Type)
	}
	return nil
}

func isNumber(t bson.Type) bool {
	return t == bson.TypeInt32 || t == bson.TypeInt64 || t == bson.TypeDouble
}

// writeString writes s as a JSON string without HTML escaping, so narrative
// XHTML reads as it was sent.
func writeString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf.WriteString(s[start:i])
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
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}
