package fhirxml

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonKind is the type of a JSON value.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonNode is a JSON value that keeps object key order and number text.
type jsonNode struct {
	kind  jsonKind
	str   string // string value or number text
	b     bool
	keys  []string    // object keys in order
	vals  []*jsonNode // object values, parallel to keys
	items []*jsonNode // array items
}

// get returns the value of an object key, nil when absent or not an object.
func (n *jsonNode) get(key string) *jsonNode {
	if n == nil || n.kind != jsonObject {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// set appends a key to an object.
func (n *jsonNode) set(key string, v *jsonNode) {
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, v)
}

var errJSON = errors.New("invalid JSON")

// parseJSON parses one JSON value (checked with json.Valid first, so the
// scanner below can trust the grammar).
func parseJSON(data []byte) (*jsonNode, error) {
	if !json.Valid(data) {
		return nil, errJSON
	}
	p := &jsonParser{data: data}
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	return n, nil
}

// jsonParser walks valid JSON.
type jsonParser struct {
	data []byte
	pos  int
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (*jsonNode, error) {
	p.skipSpace()
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		return &jsonNode{kind: jsonString, str: s}, err
	case c == 't':
		p.pos += 4
		return &jsonNode{kind: jsonBool, b: true}, nil
	case c == 'f':
		p.pos += 5
		return &jsonNode{kind: jsonBool}, nil
	case c == 'n':
		p.pos += 4
		return &jsonNode{kind: jsonNull}, nil
	default:
		start := p.pos
		for p.pos < len(p.data) && bytes.IndexByte([]byte("+-.0123456789eE"), p.data[p.pos]) >= 0 {
			p.pos++
		}
		return &jsonNode{kind: jsonNumber, str: string(p.data[start:p.pos])}, nil
	}
}

func (p *jsonParser) object() (*jsonNode, error) {
	n := &jsonNode{kind: jsonObject}
	p.pos++ // {
	for {
		p.skipSpace()
		if p.data[p.pos] == '}' {
			p.pos++
			return n, nil
		}
		if p.data[p.pos] == ',' {
			p.pos++
			p.skipSpace()
		}
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		p.pos++ // :
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		n.set(key, v)
	}
}

func (p *jsonParser) array() (*jsonNode, error) {
	n := &jsonNode{kind: jsonArray, items: []*jsonNode{}}
	p.pos++ // [
	for {
		p.skipSpace()
		if p.data[p.pos] == ']' {
			p.pos++
			return n, nil
		}
		if p.data[p.pos] == ',' {
			p.pos++
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, v)
	}
}

// string reads a quoted string; escapes and invalid UTF-8 are decoded the
// way encoding/json decodes them.
func (p *jsonParser) string() (string, error) {
	start := p.pos
	p.pos++
	escaped := false
	for p.data[p.pos] != '"' {
		if p.data[p.pos] == '\\' {
			escaped = true
			p.pos++
		}
		p.pos++
	}
	p.pos++
	raw := p.data[start+1 : p.pos-1]
	if !escaped && utf8.Valid(raw) {
		return string(raw), nil
	}
	return unescape(raw), nil
}

// unescape decodes the body of a valid JSON string: lone surrogates and
// invalid UTF-8 become U+FFFD, as in encoding/json.
func unescape(raw []byte) string {
	b := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			r, n := unescapeOne(raw[i:])
			b = utf8.AppendRune(b, r)
			i += n
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
	return string(b)
}

// unescapeOne decodes the escape at the start of s and its length.
func unescapeOne(s []byte) (rune, int) {
	switch s[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(s[2:6])
		if utf16.IsSurrogate(r) {
			if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
				if r2 := utf16.DecodeRune(r, hex4(s[8:12])); r2 != utf8.RuneError {
					return r2, 12
				}
			}
			return utf8.RuneError, 6
		}
		return r, 6
	}
	return rune(s[1]), 2 // \" \\ \/
}

// hex4 reads four hex digits (the JSON was validated).
func hex4(s []byte) rune {
	var r rune
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendJSON writes n as compact JSON, escaping strings like encoding/json
// with HTML escaping off.
func appendJSON(b []byte, n *jsonNode) []byte {
	switch n.kind {
	case jsonNull:
		return append(b, "null"...)
	case jsonBool:
		if n.b {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case jsonNumber:
		return append(b, n.str...)
	case jsonString:
		return appendJSONString(b, n.str)
	case jsonArray:
		b = append(b, '[')
		for i, it := range n.items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, it)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i, k := range n.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSON(b, n.vals[i])
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s the way encoding/json does without HTML escaping.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
