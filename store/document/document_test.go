package document_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/document"
)

// roundTrip is the path every stored resource takes: JSON → FromJSON →
// bson.Marshal → ToJSON.
func roundTrip(in []byte, maxDepth int) ([]byte, *document.Decoded, error) {
	dec, err := document.FromJSON(in, maxDepth)
	if err != nil {
		return nil, nil, err
	}
	raw, err := bson.Marshal(dec.Doc)
	if err != nil {
		return nil, dec, fmt.Errorf("bson.Marshal: %w", err)
	}
	out, err := document.ToJSON(raw, dec.NumText)
	if err != nil {
		return nil, dec, fmt.Errorf("ToJSON: %w", err)
	}
	return out, dec, nil
}

func compact(t testing.TB, in []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, in); err != nil {
		t.Fatalf("json.Compact(%q): %v", in, err)
	}
	return buf.Bytes()
}

// sameTokens compares two JSON texts token by token: the same structure,
// the same keys in the same order, the same (decoded) strings and the exact
// same number text. Only whitespace and string escaping may differ.
func sameTokens(a, b []byte) error {
	da := json.NewDecoder(bytes.NewReader(a))
	db := json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	for i := 0; ; i++ {
		ta, erra := da.Token()
		tb, errb := db.Token()
		if erra == io.EOF && errb == io.EOF {
			return nil
		}
		if erra != nil || errb != nil {
			return fmt.Errorf("token %d: errors %v / %v", i, erra, errb)
		}
		if ta != tb { // Delim, string, json.Number, bool and nil are comparable
			return fmt.Errorf("token %d: %#v != %#v", i, ta, tb)
		}
	}
}

// canonicalEscapes reports whether every escape sequence in the compact JSON
// text b is the one our encoder writes: \" \\ \n \r \t and \u00xx (lowercase
// hex) for the other control characters. Input with any other escape (\/,
// \b, \u00e9, \u003c, ...) decodes to the same string but is rendered
// differently, so only such input can come back byte for byte.
func canonicalEscapes(b []byte) bool {
	const hex = "0123456789abcdef"
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 >= len(b) {
			return false
		}
		switch b[i+1] {
		case '"', '\\', 'n', 'r', 't':
			i++
			continue
		case 'u':
			if i+5 >= len(b) || b[i+2] != '0' || b[i+3] != '0' || (b[i+4] != '0' && b[i+4] != '1') || strings.IndexByte(hex, b[i+5]) < 0 {
				return false
			}
			if c := b[i+4]; c == '0' && (b[i+5] == '9' || b[i+5] == 'a' || b[i+5] == 'd') {
				return false // \t, \n and \r have short forms
			}
			i += 5
			continue
		}
		return false
	}
	return true
}

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string // empty: the compact form of in
	}{
		{"empty object", `{}`, ""},
		{"key order kept", `{"zeta":1,"alpha":2,"mu":3,"beta":{"z":true,"a":false}}`, ""},
		{"resourceType not first", `{"status":"final","resourceType":"Observation","id":"x"}`, ""},
		{"nested", `{"a":{"b":{"c":[1,{"d":[]},{}]}},"e":[]}`, ""},
		{"arrays of objects", `{"name":[{"given":["Peter","James"],"family":"Chalmers"},{"use":"usual","given":["Jim"]}]}`, ""},
		{"pretty input is compacted", "{\n  \"b\" : [ 1 , 2 ],\r\n\t\"a\" : { }\n}\n", ""},
		{"unicode", `{"e":"é","emoji":"😀🏥","nbsp":"a b","ls":"a b","ps":"a b","cjk":"日本語","key é":"v"}`, ""},
		{"escapes", `{"q":"say \"hi\"","bs":"C:\\dir\\","nl":"a\nb","tab":"a\tb","cr":"a\rb","ctl":"\u0001\u001f\u0000\u0008\u000c","mix":"\"\\\n"}`, ""},
		{"escape in key", `{"a\"b":1,"c\\d":2,"e\nf":3}`, ""},
		{"html not escaped", `{"div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>a &amp; b &lt; c</p></div>","x":"<>&"}`, ""},
		{"DEL kept raw", "{\"del\":\"a\x7fb\"}", ""},
		{"numbers", `{"zero":0,"neg":-1,"dec":1.50,"dec2":0.1000,"exp":1e2,"EXP":1E+2,"negzero":-0,"negzerof":-0.0,"pi":3.141592653589793238,"big":12345678901234567890,"int32over":2147483648,"int32under":-2147483649,"tiny":1e-400,"denorm":5e-324,"micro":0.000001,"sub":1e-7,"e21":1e21,"maxint64":9223372036854775807,"minint64":-9223372036854775808,"overint64":9223372036854775808,"one":1,"onef":1.0,"frac":0.5,"negexp":-2.5E-3}`, ""},
		{"numbers in arrays", `{"a":[1.50,{"w":[1e2,{"x":[0.1000]}]},{"v":-0.0}],"b":[1,2.0,3]}`, ""},
		{"literals", `{"t":true,"f":false,"n":null,"a":[true,false,null]}`, ""},
		{"NUL in string value", `{"a":"x\u0000y"}`, ""},
		// Escapes our encoder writes differently: same strings, other bytes.
		{"non-canonical escapes", `{"a":"\u00e9\/\b\f\u0041\u000a\u003c\u2028"}`, "{\"a\":\"é/\\u0008\\u000cA\\n<\u2028\"}"},
		{"surrogate pair escape", `{"a":"\ud83d\ude00"}`, `{"a":"😀"}`},
		{"lone surrogate becomes U+FFFD", `{"a":"\ud800"}`, "{\"a\":\"\uFFFD\"}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := []byte(tc.want)
			if tc.want == "" {
				want = compact(t, []byte(tc.in))
			}
			out, _, err := roundTrip([]byte(tc.in), 0)
			if err != nil {
				t.Fatalf("round trip of %s: %v", tc.in, err)
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("round trip:\n in  %s\n got %s\n want %s", tc.in, out, want)
			}
			if err := sameTokens([]byte(tc.in), out); err != nil {
				t.Fatalf("not the same JSON: %v", err)
			}
		})
	}
}

// TestStoredForm pins how numbers are stored: the BSON type chosen and
// whether the original text goes to NumText.
func TestStoredForm(t *testing.T) {
	cases := []struct {
		num      string
		want     any // stored value
		keepText bool
	}{
		{"0", int32(0), false},
		{"-1", int32(-1), false},
		{"2147483647", int32(math.MaxInt32), false},
		{"-2147483648", int32(math.MinInt32), false},
		{"2147483648", int64(2147483648), false},
		{"-2147483649", int64(-2147483649), false},
		{"9223372036854775807", int64(math.MaxInt64), false},
		{"12345678901234567890", 12345678901234567890.0, true},
		{"-0", int32(0), true},
		{"-0.0", math.Copysign(0, -1), true},
		{"1.5", 1.5, false},
		{"1.50", 1.5, true},
		{"0.1000", 0.1, true},
		{"1e2", 100.0, true},
		{"1E+2", 100.0, true},
		{"1.0", 1.0, true},
		{"3.141592653589793238", 3.141592653589793, true},
		{"3.141592653589793", 3.141592653589793, false},
		{"5e-324", 5e-324, false},
		{"0.000001", 0.000001, false},
		{"1e-7", 1e-7, true}, // canonical is 1e-07
		{"1e-07", 1e-7, false},
		{"1e21", 1e21, true}, // canonical is 1e+21
		{"1e+21", 1e21, false},
		{"1e-400", 0.0, true},
	}
	for _, tc := range cases {
		t.Run(tc.num, func(t *testing.T) {
			dec, err := document.FromJSON([]byte(`{"v":`+tc.num+`}`), 0)
			if err != nil {
				t.Fatal(err)
			}
			got := dec.Doc[0].Value
			same := fmt.Sprintf("%T", got) == fmt.Sprintf("%T", tc.want)
			if f, ok := got.(float64); ok && same {
				w := tc.want.(float64)
				same = f == w && math.Signbit(f) == math.Signbit(w)
			} else if same {
				same = got == tc.want
			}
			if !same {
				t.Errorf("stored %T(%v), want %T(%v)", got, got, tc.want, tc.want)
			}
			wantNum := []document.NumText(nil)
			if tc.keepText {
				wantNum = []document.NumText{{Path: "v", Text: tc.num}}
			}
			if fmt.Sprint(dec.NumText) != fmt.Sprint(wantNum) {
				t.Errorf("NumText %v, want %v", dec.NumText, wantNum)
			}
		})
	}
}

// TestNumTextPaths checks the paths recorded for numbers deep in the tree.
func TestNumTextPaths(t *testing.T) {
	dec, err := document.FromJSON([]byte(`{"a":[1.50,{"b":[0,1e2]}],"c":{"d":{"e":-0}}}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []document.NumText{{Path: "a[0]", Text: "1.50"}, {Path: "a[1].b[1]", Text: "1e2"}, {Path: "c.d.e", Text: "-0"}}
	if fmt.Sprint(dec.NumText) != fmt.Sprint(want) {
		t.Fatalf("NumText %v, want %v", dec.NumText, want)
	}
}

// TestToJSONWithoutNumText shows the canonical rendering used when no
// original text is known (e.g. numbers written by the server itself).
func TestToJSONWithoutNumText(t *testing.T) {
	dec, err := document.FromJSON([]byte(`{"a":1.50,"b":1e2,"c":-0.0,"d":1e21,"e":1e-7,"f":0.000001,"g":2147483648}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bson.Marshal(dec.Doc)
	if err != nil {
		t.Fatal(err)
	}
	out, err := document.ToJSON(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":1.5,"b":100,"c":-0,"d":1e+21,"e":1e-07,"f":0.000001,"g":2147483648}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
}

// TestNumTextOnlyAppliesToNumbers: a NumText entry whose path now holds a
// non-number (e.g. the server replaced the value) is ignored.
func TestNumTextOnlyAppliesToNumbers(t *testing.T) {
	raw, err := bson.Marshal(bson.D{{Key: "a", Value: "1.50"}, {Key: "b", Value: bson.D{{Key: "c", Value: 2.5}}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := document.ToJSON(raw, []document.NumText{{Path: "a", Text: "9"}, {Path: "b.c", Text: "2.50"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":"1.50","b":{"c":2.50}}`; string(out) != want {
		t.Fatalf("got %s, want %s", out, want)
	}
}

func TestFromJSONRejects(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		maxDepth int
		path     string // expected SyntaxError.Path
		msg      string // substring of SyntaxError.Msg
		offset   int64  // expected Offset, -1 for any
	}{
		{"empty body", ``, 0, "", "malformed JSON", 0},
		{"whitespace only", "  \n", 0, "", "malformed JSON", -1},
		{"unterminated object", `{"a":1`, 0, "", "malformed JSON", -1},
		{"missing value", `{"a":}`, 0, "", "malformed JSON", -1},
		{"bad literal", `{"a":tru}`, 0, "", "malformed JSON", 5},
		{"trailing comma in object", `{"a":1,}`, 0, "", "malformed JSON", -1},
		{"trailing comma in array", `{"a":{"b":[1,]}}`, 0, "", "malformed JSON", -1},
		{"missing colon", `{"a" 1}`, 0, "", "malformed JSON", -1},
		{"missing comma", `{"a":1 "b":2}`, 0, "", "malformed JSON", -1},
		{"single quotes", `{'a':1}`, 0, "", "malformed JSON", -1},
		{"unquoted key", `{a:1}`, 0, "", "malformed JSON", -1},
		{"leading zero", `{"a":01}`, 0, "", "malformed JSON", -1},
		{"NaN", `{"a":NaN}`, 0, "", "malformed JSON", -1},
		{"raw control char in string", "{\"a\":\"x\ny\"}", 0, "", "malformed JSON", -1},
		{"bad escape", `{"a":"\x"}`, 0, "", "malformed JSON", -1},
		{"BOM", "\ufeff{}", 0, "", "malformed JSON", -1},
		{"trailing object", `{} {}`, 0, "", "unexpected data after", 4},
		{"trailing garbage", `{"a":1}x`, 0, "", "unexpected data after", -1},
		{"trailing number", `{"a":1} 1`, 0, "", "unexpected data after", -1},
		{"top-level array", `[{"a":1}]`, 0, "", "expected a JSON object", -1},
		{"top-level string", `"a"`, 0, "", "expected a JSON object", -1},
		{"top-level number", `1`, 0, "", "expected a JSON object", -1},
		{"top-level null", `null`, 0, "", "expected a JSON object", -1},
		{"duplicate key", `{"a":1,"b":2,"a":3}`, 0, "a", `duplicate property "a"`, -1},
		{"duplicate nested key", `{"a":{"b":1,"b":2}}`, 0, "a.b", `duplicate property "b"`, -1},
		{"duplicate key in array element", `{"a":[{},{"x":1,"x":null}]}`, 0, "a[1].x", `duplicate property "x"`, -1},
		{"duplicate key after unescaping", `{"ab":1,"\u0061b":2}`, 0, "ab", `duplicate property "ab"`, -1},
		{"dollar key", `{"$where":"1"}`, 0, "$where", "must not start with '$'", -1},
		{"nested dollar key", `{"a":[{"$ref":"x"}]}`, 0, "a[0].$ref", "must not start with '$'", -1},
		{"escaped dollar key", `{"\u0024a":1}`, 0, "$a", "must not start with '$'", -1},
		{"dot key", `{"a.b":1}`, 0, "a.b", "must not contain '.'", -1},
		{"nested dot key", `{"x":{"a.":1}}`, 0, "x.a.", "must not contain '.'", -1},
		{"empty key", `{"":1}`, 0, "", "empty property name", -1},
		{"nested empty key", `{"a":{"":1}}`, 0, "a.", "empty property name", -1},
		{"NUL key", `{"a\u0000b":1}`, 0, "a\x00b", "must not contain NUL", -1},
		// A key "a[0]" would share the NumText path of element 0 of "a", so
		// one number's original text would be applied to the other.
		{"bracket key next to array", `{"a":[1],"a[0]":1.50}`, 0, "a[0]", "must not contain NUL, '[' or ']'", -1},
		{"bracket key before array", `{"a[0]":1.0,"a":[2]}`, 0, "a[0]", "must not contain NUL, '[' or ']'", -1},
		{"open bracket key", `{"x":{"a[":1}}`, 0, "x.a[", "must not contain NUL, '[' or ']'", -1},
		{"close bracket key", `{"]":1}`, 0, "]", "must not contain NUL, '[' or ']'", -1},
		{"invalid UTF-8 in value", "{\"a\":\"\xff\"}", 0, "", "not valid UTF-8", -1},
		{"invalid UTF-8 in key", "{\"\xc3\x28\":1}", 0, "", "not valid UTF-8", -1},
		{"overlong encoding", "{\"a\":\"\xc0\xaf\"}", 0, "", "not valid UTF-8", -1},
		{"UTF-16 surrogate bytes", "{\"a\":\"\xed\xa0\x80\"}", 0, "", "not valid UTF-8", -1},
		{"invalid UTF-8 after the object", "{}\xff", 0, "", "not valid UTF-8", -1},
		{"object too deep", `{"a":{"b":{"c":{}}}}`, 3, "a.b.c", "nested deeper than 3", -1},
		{"array too deep", `{"a":[{}],"b":[{"c":[]}]}`, 3, "b[0].c", "nested deeper than 3", -1},
		{"array directly in an array", `{"a":[1,[2]]}`, 0, "a[1]", "arrays directly inside arrays", -1},
		{"number beyond float range", `{"a":{"b":1e400}}`, 0, "a.b", "out of range", -1},
		{"negative number beyond float range", `{"a":[-1e400]}`, 0, "a[0]", "out of range", -1},
		{"mixed too deep", `{"a":[{"b":[1]}]}`, 3, "a[0].b", "nested deeper than 3", -1},
		{"depth 1", `{"a":{}}`, 1, "a", "nested deeper than 1", -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dec, err := document.FromJSON([]byte(tc.in), tc.maxDepth)
			if err == nil {
				t.Fatalf("accepted %q as %v", tc.in, dec.Doc)
			}
			var se *document.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v, want *SyntaxError", err, err)
			}
			if se.Path != tc.path {
				t.Errorf("Path %q, want %q (%v)", se.Path, tc.path, err)
			}
			if !strings.Contains(se.Msg, tc.msg) {
				t.Errorf("Msg %q, want it to contain %q", se.Msg, tc.msg)
			}
			if tc.offset >= 0 && se.Offset != tc.offset {
				t.Errorf("Offset %d, want %d", se.Offset, tc.offset)
			}
			if se.Offset < 0 || se.Offset > int64(len(tc.in)) {
				t.Errorf("Offset %d outside the input of %d bytes", se.Offset, len(tc.in))
			}
			if se.Path != "" && !strings.Contains(err.Error(), se.Path) {
				t.Errorf("Error() %q does not name the path %q", err.Error(), se.Path)
			}
		})
	}
}

// deepObject returns an object nesting depth objects in total (the top one
// counts as level 1), e.g. deepObject(3) = {"x":{"x":{}}}.
func deepObject(depth int) string {
	return strings.Repeat(`{"x":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
}

// deepArray returns an object nesting arrays and objects in turn, depth
// levels in total, e.g. deepArray(4) = {"x":[{"x":[]}]}.
func deepArray(depth int) string {
	switch depth {
	case 1:
		return `{}`
	case 2:
		return `{"x":[]}`
	}
	return `{"x":[` + deepArray(depth-2) + `]}`
}

func TestDepthLimit(t *testing.T) {
	for _, limit := range []int{1, 2, 5, document.DefaultMaxDepth} {
		for name, build := range map[string]func(int) string{"objects": deepObject, "arrays": deepArray} {
			t.Run(fmt.Sprintf("%s/%d", name, limit), func(t *testing.T) {
				arg := limit
				if limit == document.DefaultMaxDepth {
					arg = 0 // 0 means the default
				}
				at := build(limit)
				out, _, err := roundTrip([]byte(at), arg)
				if err != nil {
					t.Fatalf("exactly at the limit %d: %v", limit, err)
				}
				if string(out) != at {
					t.Fatalf("round trip %s gave %s", at, out)
				}
				_, err = document.FromJSON([]byte(build(limit+1)), arg)
				var se *document.SyntaxError
				if !errors.As(err, &se) || !strings.Contains(se.Msg, fmt.Sprintf("deeper than %d", limit)) {
					t.Fatalf("one beyond the limit %d: %v", limit, err)
				}
			})
		}
	}
}

func TestToJSONOtherStoredTypes(t *testing.T) {
	ts := time.Date(2024, 2, 29, 13, 4, 5, 123e6, time.UTC)
	raw, err := bson.Marshal(bson.D{{Key: "when", Value: bson.NewDateTimeFromTime(ts)}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := document.ToJSON(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"when":"2024-02-29T13:04:05.123Z"}`; string(out) != want {
		t.Errorf("date: got %s, want %s", out, want)
	}

	raw, err = bson.Marshal(bson.D{{Key: "a", Value: bson.A{bson.NewObjectID()}}})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := document.ToJSON(raw, nil); err == nil {
		t.Errorf("ObjectID rendered as %s, want an error", out)
	}

	if out, err := document.ToJSON(bson.Raw{0x05, 0, 0}, nil); err == nil {
		t.Errorf("corrupt document rendered as %q, want an error", out)
	}
}

func TestFormatFloat(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0"}, {1, "1"}, {-1.5, "-1.5"}, {1e20, "100000000000000000000"}, {1e21, "1e+21"},
		{1e-6, "0.000001"}, {9.99e-7, "9.99e-07"}, {math.Inf(1), "0"}, {math.Inf(-1), "0"}, {math.NaN(), "0"},
		{math.Copysign(0, -1), "-0"}, {math.Nextafter(0.3, 1), "0.30000000000000004"},
	} {
		in, want := tc.in, tc.want
		if got := document.FormatFloat(in); got != want {
			t.Errorf("FormatFloat(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestStringEscapes renders strings holding each ASCII byte at each
// position of an eight-byte word (the encoder checks eight bytes at a
// time), and multi-byte characters at every alignment, and compares them
// with encoding/json's escaping, less its HTML escapes.
func TestStringEscapes(t *testing.T) {
	var cases []string
	for b := range 128 {
		for pos := range 17 {
			s := []byte(strings.Repeat("a", 17))
			s[pos] = byte(b)
			cases = append(cases, string(s))
		}
	}
	for shift := range 8 {
		cases = append(cases, strings.Repeat("x", shift)+"é€\u00e9😀\"\n<>&\x7f\u2028é")
	}
	for _, s := range cases {
		raw, err := bson.Marshal(bson.D{{Key: "s", Value: s}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := document.ToJSON(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(map[string]string{"s": s}); err != nil {
			t.Fatal(err)
		}
		w := strings.TrimSpace(want.String())
		w = strings.ReplaceAll(strings.ReplaceAll(w, `\u2028`, "\u2028"), `\b`, `\u0008`)
		w = strings.ReplaceAll(w, `\f`, `\u000c`)
		if string(got) != w {
			t.Fatalf("%q: got %s, want %s", s, got, w)
		}
	}
}

// TestReadNumText decodes stored number texts as bson.Unmarshal does.
func TestReadNumText(t *testing.T) {
	dec, err := document.FromJSON([]byte(`{"a":1.50,"b":[1e2,{"c":-0.0}],"d":{"e":1E21,"f":0.10}}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bson.Marshal(bson.D{{Key: "numText", Value: dec.NumText}})
	if err != nil {
		t.Fatal(err)
	}
	arr := bson.Raw(raw).Lookup("numText").Array()
	got, err := document.ReadNumText(arr)
	if err != nil {
		t.Fatal(err)
	}
	var want struct{ NumText []document.NumText }
	if err := bson.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || fmt.Sprint(got) != fmt.Sprint(want.NumText) {
		t.Fatalf("got %v, want %v", got, want.NumText)
	}
	if _, err := document.ReadNumText(arr[:len(arr)-3]); err == nil {
		t.Fatal("a truncated list decoded without an error")
	}
}
