package document

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzFastParserMatchesTokens parses inputs both ways: whatever the fast
// parser accepts, the token parser accepts as the same document with the
// same number texts, which Marshal encodes as bson.Marshal does. Its
// seeds (run by go test) are the seed files, the
// official examples and the Synthea bundles, which the fast parser must
// all accept.
func FuzzFastParserMatchesTokens(f *testing.F) {
	var files []string
	for _, pattern := range []string{
		filepath.Join("testdata", "seeds", "*.json"),
		filepath.Join("..", "..", "testdata", "fhir", "examples", "*.json"),
		filepath.Join("..", "..", "testdata", "synthea", "*.json"),
	} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	if len(files) < 700 {
		f.Fatalf("%d seed files: too few", len(files))
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := parseFast(b, DefaultMaxDepth); err != nil {
			f.Fatalf("%s: the fast parser gave up on it", name)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{}`, ` { "a" : [ 1 , 2.50 , -0 , 1e2 ] , "b" : { "c" : "d\"\\\/\u00e9" } } `,
		`{"a":[1.50,-0.0,1E+2,1e400,5e-324,1e-7,1e21,12345678901234567890,2147483648]}`,
		`{"a":{"b":[{"c":1.0},{"c":2}]},"d":[true,false,null]}`,
		`{"a":1,"a":2}`, `{"$a":1}`, `{"a.b":1}`, `{"":1}`, `{"a[0]":1}`, `{"a":[[1]]}`,
		`{"a":{"b":{"c":{}}}}`, `[1]`, `"a"`, `{} {}`, `{"a":tru}`, `{"a":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !utf8.Valid(in) {
			return // FromJSON refuses it before either parser
		}
		for _, depth := range []int{3, DefaultMaxDepth} {
			fast, err := parseFast(in, depth)
			if err != nil {
				continue
			}
			slow, err := parseTokens(in, depth)
			if err != nil {
				t.Fatalf("depth %d: the fast parser accepted %q, the token parser refused it: %v", depth, in, err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("depth %d: %q parsed as %v, the token parser %v", depth, in, fast, slow)
			}
			got, err := Marshal(fast.Doc)
			want, werr := bson.Marshal(fast.Doc)
			if err != nil || werr != nil || !bytes.Equal(got, want) {
				t.Fatalf("%q: Marshal gave %x (%v), bson.Marshal %x (%v)", in, got, err, want, werr)
			}
		}
	})
}
