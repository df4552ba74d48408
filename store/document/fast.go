package document

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// errSlowPath tells that the fast parser met something it leaves to the
// token parser, which reports it: any error at all.
var errSlowPath = errors.New("parse with the token parser")

// fastParser parses a JSON object that json.Valid accepted into the same
// document, number texts included, as the token parser, without its cost
// per token. It gives up (errSlowPath) on anything the token parser would
// refuse: the token parser then runs and says what is wrong.
type fastParser struct {
	data     []byte
	pos      int
	maxDepth int
	numText  []NumText
	path     []pathStep // where the value being parsed is
}

// pathStep is one step of a path: a key, or an index when key is "".
type pathStep struct {
	key   string
	index int
}

// parseFast is FromJSON's result for data, or errSlowPath.
func parseFast(data []byte, maxDepth int) (*Decoded, error) {
	if !json.Valid(data) {
		return nil, errSlowPath
	}
	p := &fastParser{data: data, maxDepth: maxDepth}
	p.space()
	if p.pos >= len(data) || data[p.pos] != '{' {
		return nil, errSlowPath
	}
	doc, err := p.object(1)
	if err != nil {
		return nil, err
	}
	return &Decoded{Doc: doc, NumText: p.numText}, nil
}

func (p *fastParser) space() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// object parses the object at p.pos (its '{') at depth.
func (p *fastParser) object(depth int) (bson.D, error) {
	if depth > p.maxDepth {
		return nil, errSlowPath
	}
	p.pos++ // '{'
	doc := bson.D{}
	for {
		p.space()
		if p.data[p.pos] == '}' {
			p.pos++
			return doc, nil
		}
		if p.data[p.pos] == ',' {
			p.pos++
			p.space()
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if checkKey(key) != nil || hasKey(doc, key) {
			return nil, errSlowPath
		}
		p.space()
		p.pos++ // ':'
		p.space()
		p.path = append(p.path, pathStep{key: key})
		v, err := p.value(depth)
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return nil, err
		}
		doc = append(doc, bson.E{Key: key, Value: v})
	}
}

// hasKey tells whether doc has key (a FHIR object has few keys: a scan
// costs less than a map).
func hasKey(doc bson.D, key string) bool {
	for _, e := range doc {
		if e.Key == key {
			return true
		}
	}
	return false
}

// array parses the array at p.pos (its '[') at depth.
func (p *fastParser) array(depth int) (bson.A, error) {
	if depth > p.maxDepth {
		return nil, errSlowPath
	}
	p.pos++ // '['
	arr := bson.A{}
	for i := 0; ; i++ {
		p.space()
		if p.data[p.pos] == ']' {
			p.pos++
			return arr, nil
		}
		if p.data[p.pos] == ',' {
			p.pos++
			p.space()
		}
		if p.data[p.pos] == '[' {
			return nil, errSlowPath // arrays directly inside arrays
		}
		p.path = append(p.path, pathStep{index: i})
		v, err := p.value(depth)
		p.path = p.path[:len(p.path)-1]
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
	}
}

// value parses the value at p.pos, inside a container at depth.
func (p *fastParser) value(depth int) (any, error) {
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.str()
	case c == 't':
		p.pos += len("true")
		return true, nil
	case c == 'f':
		p.pos += len("false")
		return false, nil
	case c == 'n':
		p.pos += len("null")
		return nil, nil
	}
	return p.number()
}

// str parses the string at p.pos (its opening quote).
func (p *fastParser) str() (string, error) {
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
	if !escaped {
		return string(p.data[start+1 : p.pos-1]), nil
	}
	var s string
	if err := json.Unmarshal(p.data[start:p.pos], &s); err != nil {
		return "", errSlowPath
	}
	return s, nil
}

// number parses the number at p.pos, recording its text when its
// canonical rendering differs.
func (p *fastParser) number() (any, error) {
	start := p.pos
	for p.pos < len(p.data) && numberByte(p.data[p.pos]) {
		p.pos++
	}
	text := string(p.data[start:p.pos])
	v, canonical := parseNumber(text)
	if f, ok := v.(float64); ok && math.IsInf(f, 0) {
		return nil, errSlowPath
	}
	if canonical != text {
		p.numText = append(p.numText, NumText{Path: p.pathString(), Text: text})
	}
	return v, nil
}

func numberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// pathString renders p.path as the token parser names paths: a.b[0].c.
func (p *fastParser) pathString() string {
	var b []byte
	for _, s := range p.path {
		if s.key == "" {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(s.index), 10)
			b = append(b, ']')
			continue
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, s.key...)
	}
	return string(b)
}
