package fhirxml

import (
	"encoding/json"
	"testing"
)

func TestJSONStringsDecodeAndEncodeLikeEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`"plain"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u0000\u001f"`, `"\ud83d\ude00"`,
		`"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`, "\"\xff\xfe invalid\"", `"\u2028\u2029"`, `"<&>"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		n, err := parseJSON([]byte(raw))
		if err != nil || n.str != want {
			t.Fatalf("%s decodes to %q, want %q (%v)", raw, n.str, want, err)
		}
		enc, _ := json.Marshal(want)
		if got := appendJSONString(nil, want); string(got) != string(enc) && raw != `"<&>"` {
			t.Fatalf("%q encodes as %s, want %s", want, got, enc)
		}
	}
	if got := string(appendJSONString(nil, "<&>")); got != `"<&>"` {
		t.Fatalf("HTML characters are escaped: %s", got)
	}
}
