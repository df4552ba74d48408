package document_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/document"
)

// FuzzRoundTrip checks, for every input FromJSON accepts:
//
//  1. the input is valid JSON (FromJSON never accepts what encoding/json
//     rejects), and every rejection is a *SyntaxError;
//  2. bson.Marshal and ToJSON succeed;
//  3. the output is the same JSON as the input: the same tokens in the same
//     order, strings equal after decoding and number text equal exactly
//     (compared with a json.Decoder in UseNumber mode);
//  4. the output is compact and valid;
//  5. when every escape sequence in the input is one our encoder writes
//     itself (see canonicalEscapes), the output equals json.Compact(input)
//     byte for byte; otherwise only the string escapes may differ (3);
//  6. storing the output again gives the output again (fixed point).
//
// So the round trip is identical — values, number text (1.50, 1e2) and key
// order — up to whitespace and string escapes. The seeds are every official
// example (testdata/fhir/examples) and the files in testdata/seeds.
//
// Run: go test ./store/document -run '^$' -fuzz '^FuzzRoundTrip$' -fuzztime 2m
func FuzzRoundTrip(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "seeds", "*.json"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed files in testdata/seeds: %v", err)
	}
	examples, err := filepath.Glob(filepath.Join("..", "..", "testdata", "fhir", "examples", "*.json"))
	if err != nil || len(examples) < 700 {
		f.Fatalf("official examples: %d files, %v", len(examples), err)
	}
	seeds = append(seeds, examples...)
	for _, name := range seeds {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{}`,
		`{"b":1,"a":[1.50,-0,-0.0,1e2,1E+2,1e400,5e-324,1e-7,1e21,12345678901234567890,2147483648,-2147483649]}`,
		`{"s":"é😀 \u2028<&>\"\\\n\t\u0001","t":true,"f":false,"n":null}`,
		`{"a":{"b":{"c":[[{"d":[]}]]}}}`,
		`{"a":"\u00e9\/\b","\u0062":1}`,
		`{"a":1,"a":2}`,
		`{"$a":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		dec, err := document.FromJSON(in, 0)
		if err != nil {
			var se *document.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("rejection is %T %v, want *SyntaxError", err, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		raw, err := bson.Marshal(dec.Doc)
		if err != nil {
			t.Fatalf("bson.Marshal of accepted %q: %v", in, err)
		}
		out, err := document.ToJSON(raw, dec.NumText)
		if err != nil {
			t.Fatalf("ToJSON of accepted %q: %v", in, err)
		}
		if err := sameTokens(in, out); err != nil {
			t.Fatalf("round trip changed the JSON: %v\n in  %q\n out %q", err, in, out)
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		if c := compact(t, out); !bytes.Equal(c, out) {
			t.Fatalf("output is not compact:\n out %q\n compact %q", out, c)
		}
		if c := compact(t, in); canonicalEscapes(c) && !bytes.Equal(c, out) {
			t.Fatalf("output differs from json.Compact(input):\n want %q\n got  %q", c, out)
		}
		again, _, err := roundTrip(out, 0)
		if err != nil {
			t.Fatalf("output %q rejected: %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point:\n first  %q\n second %q", out, again)
		}
	})
}

// TestFuzzOracle checks that the helpers FuzzRoundTrip relies on can tell
// the differences they are meant to catch.
func TestFuzzOracle(t *testing.T) {
	differ := [][2]string{
		{`{"a":1.50}`, `{"a":1.5}`},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{`{"a":[1]}`, `{"a":[1,2]}`},
		{`{"a":"x"}`, `{"a":"y"}`},
		{`{"a":null}`, `{"a":false}`},
		{`{"a":{}}`, `{"a":[]}`},
		{`{"a":1}`, `{"a":1}{}`},
	}
	for _, d := range differ {
		if sameTokens([]byte(d[0]), []byte(d[1])) == nil {
			t.Errorf("sameTokens(%s, %s) found no difference", d[0], d[1])
		}
	}
	if err := sameTokens([]byte(`{ "a" : "\u00e9\/" }`), []byte(`{"a":"é/"}`)); err != nil {
		t.Errorf("escapes of the same string: %v", err)
	}
	for in, want := range map[string]bool{
		`{"a":"\"\\\n\r\t\u0000\u001f\u0008"}`: true,
		`{"a":"\\u00e9"}`:                      true, // an escaped backslash, then plain text
		`{"a":"\u00e9"}`:                       false,
		`{"a":"\/"}`:                           false,
		`{"a":"\b"}`:                           false,
		`{"a":"\u000a"}`:                       false,
		`{"a":"\u001F"}`:                       false,
		`{"a":"\u0020"}`:                       false,
	} {
		if got := canonicalEscapes([]byte(in)); got != want {
			t.Errorf("canonicalEscapes(%s) = %v, want %v", in, got, want)
		}
	}
}
