// Package document converts FHIR JSON to the stored BSON form and back,
// keeping key order and the exact text of every number.
package document

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// NumText records the original text of a number whose canonical rendering
// differs from what the client sent (trailing zeros, exponents, huge values).
type NumText struct {
	Path string `bson:"path"`
	Text string `bson:"text"`
}

// ReadNumText decodes a stored list of NumText (a BSON array of
// documents), as bson.Unmarshal would, without reflection.
func ReadNumText(arr []byte) ([]NumText, error) {
	elems, err := body(arr)
	if err != nil {
		return nil, fmt.Errorf("number texts: %w", err)
	}
	var out []NumText
	for len(elems) > 0 {
		t, _, val, rest, err := next(elems)
		if err != nil || t != bson.TypeEmbeddedDocument {
			return nil, fmt.Errorf("number texts: %w", errCorrupt)
		}
		elems = rest
		fields, err := body(val)
		if err != nil {
			return nil, fmt.Errorf("number texts: %w", err)
		}
		var n NumText
		for len(fields) > 0 {
			t, key, val, rest, err := next(fields)
			if err != nil {
				return nil, fmt.Errorf("number texts: %w", err)
			}
			fields = rest
			if t != bson.TypeString {
				continue
			}
			switch s := string(val[4 : len(val)-1]); string(key) {
			case "path":
				n.Path = s
			case "text":
				n.Text = s
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// SyntaxError reports JSON that cannot be stored; Path is a FHIRPath-like
// location when known and Offset the byte position in the input.
type SyntaxError struct {
	Path   string
	Offset int64
	Msg    string
}

func (e *SyntaxError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s (at %s, byte %d)", e.Msg, e.Path, e.Offset)
	}
	return fmt.Sprintf("%s (byte %d)", e.Msg, e.Offset)
}

// DefaultMaxDepth is the nesting limit used when a caller passes 0.
const DefaultMaxDepth = 100

// Decoded is a JSON object in stored form.
type Decoded struct {
	Doc     bson.D
	NumText []NumText
}

// FromJSON parses one JSON object into an ordered BSON document. It rejects
// invalid UTF-8, duplicate keys, keys MongoDB cannot store ('$' prefix, '.'),
// nesting deeper than maxDepth and trailing data. A valid object is parsed
// in one pass over its bytes; anything else goes through json.Decoder's
// tokens, whose errors (with their offsets) FromJSON reports.
func FromJSON(data []byte, maxDepth int) (*Decoded, error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if !utf8.Valid(data) {
		return nil, &SyntaxError{Offset: int64(firstInvalidUTF8(data)), Msg: "body is not valid UTF-8"}
	}
	if d, err := parseFast(data, maxDepth); err == nil {
		return d, nil
	}
	return parseTokens(data, maxDepth)
}

// parseTokens is FromJSON through json.Decoder's tokens.
func parseTokens(data []byte, maxDepth int) (*Decoded, error) {
	p := &parser{dec: json.NewDecoder(bytes.NewReader(data)), maxDepth: maxDepth}
	p.dec.UseNumber()
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, &SyntaxError{Offset: p.dec.InputOffset(), Msg: "expected a JSON object"}
	}
	doc, err := p.object("", 1)
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &SyntaxError{Offset: p.dec.InputOffset(), Msg: "unexpected data after the JSON object"}
	}
	return &Decoded{Doc: doc, NumText: p.numText}, nil
}

type parser struct {
	dec      *json.Decoder
	maxDepth int
	numText  []NumText
}

func (p *parser) token() (json.Token, error) {
	tok, err := p.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, &SyntaxError{Offset: p.dec.InputOffset(), Msg: "malformed JSON: " + err.Error()}
	}
	return tok, nil
}

func (p *parser) object(path string, depth int) (bson.D, error) {
	if depth > p.maxDepth {
		return nil, &SyntaxError{Path: path, Offset: p.dec.InputOffset(), Msg: fmt.Sprintf("JSON nested deeper than %d levels", p.maxDepth)}
	}
	doc := bson.D{}
	seen := map[string]bool{}
	for p.dec.More() {
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		key := tok.(string)
		child := joinPath(path, key)
		if err := checkKey(key); err != nil {
			return nil, &SyntaxError{Path: child, Offset: p.dec.InputOffset(), Msg: err.Error()}
		}
		if seen[key] {
			return nil, &SyntaxError{Path: child, Offset: p.dec.InputOffset(), Msg: "duplicate property " + strconv.Quote(key)}
		}
		seen[key] = true
		v, err := p.value(child, depth)
		if err != nil {
			return nil, err
		}
		doc = append(doc, bson.E{Key: key, Value: v})
	}
	if _, err := p.token(); err != nil { // closing '}'
		return nil, err
	}
	return doc, nil
}

func (p *parser) array(path string, depth int) (bson.A, error) {
	if depth > p.maxDepth {
		return nil, &SyntaxError{Path: path, Offset: p.dec.InputOffset(), Msg: fmt.Sprintf("JSON nested deeper than %d levels", p.maxDepth)}
	}
	arr := bson.A{}
	for i := 0; p.dec.More(); i++ {
		v, err := p.value(path+"["+strconv.Itoa(i)+"]", depth)
		if _, nested := v.(bson.A); nested && err == nil {
			// FHIR JSON never nests arrays, and MongoDB-compatible engines differ on them.
			return nil, &SyntaxError{Path: path + "[" + strconv.Itoa(i) + "]", Offset: p.dec.InputOffset(), Msg: "arrays directly inside arrays are not allowed"}
		}
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
	}
	if _, err := p.token(); err != nil { // closing ']'
		return nil, err
	}
	return arr, nil
}

func (p *parser) value(path string, depth int) (any, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return p.object(path, depth+1)
		}
		return p.array(path, depth+1)
	case json.Number:
		v, canonical := parseNumber(string(t))
		if f, ok := v.(float64); ok && math.IsInf(f, 0) {
			return nil, &SyntaxError{Path: path, Offset: p.dec.InputOffset(), Msg: "number " + string(t) + " is out of range"}
		}
		if canonical != string(t) {
			p.numText = append(p.numText, NumText{Path: path, Text: string(t)})
		}
		return v, nil
	default: // string, bool, nil
		return t, nil
	}
}

// parseNumber returns the stored value of a JSON number and its canonical
// rendering, which FormatNumber reproduces on the way out.
func parseNumber(text string) (any, string) {
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		if i >= math.MinInt32 && i <= math.MaxInt32 {
			return int32(i), strconv.FormatInt(i, 10)
		}
		return i, strconv.FormatInt(i, 10)
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil { // out of range: keep the magnitude, the text restores the value
		return f, ""
	}
	return f, FormatFloat(f)
}

// FormatFloat is the canonical JSON rendering of a stored double.
func FormatFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "0"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty property name")
	case strings.HasPrefix(key, "$"):
		return fmt.Errorf("property name %q must not start with '$'", key)
	case strings.Contains(key, "."):
		return fmt.Errorf("property name %q must not contain '.'", key)
	case strings.ContainsAny(key, "\x00[]"):
		// brackets would make number-text paths ambiguous (a[0] vs a: [..])
		return fmt.Errorf("property name %q must not contain NUL, '[' or ']'", key)
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
