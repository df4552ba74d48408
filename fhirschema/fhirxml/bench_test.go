package fhirxml

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// searchset builds a searchset Bundle of n official Patient and
// Observation examples, as the server renders it (compact JSON).
func searchset(b *testing.B, n int) []byte {
	b.Helper()
	ex := examples(b)
	var names []string
	for name := range ex {
		if strings.HasPrefix(name, "Patient-") || strings.HasPrefix(name, "Observation-") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var buf bytes.Buffer
	buf.WriteString(`{"resourceType":"Bundle","id":"s","type":"searchset","total":100,"link":[{"relation":"self","url":"http://localhost/fhir/r4/Observation"}],"entry":[`)
	for i := range n {
		if i > 0 {
			buf.WriteByte(',')
		}
		res := canonical(b, ex[names[i%len(names)]])
		buf.WriteString(`{"fullUrl":"http://localhost/fhir/r4/x/` + names[i%len(names)] + `","resource":`)
		buf.Write(res)
		buf.WriteString(`,"search":{"mode":"match"}}`)
	}
	buf.WriteString(`]}`)
	return buf.Bytes()
}

// BenchmarkSearchsetBundle compares rendering a 100-entry searchset Bundle:
// JSON as the server writes it (compact passes through, _pretty indents),
// XML compact and indented, and reading the XML back to JSON.
func BenchmarkSearchsetBundle(b *testing.B) {
	body := searchset(b, 100)
	x, err := FromJSON(body, WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("json-compact", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var buf bytes.Buffer
			if err := json.Compact(&buf, body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-pretty", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var buf bytes.Buffer
			if err := json.Indent(&buf, body, "", "  "); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, opts := range []WriteOptions{{}, {Indent: true}} {
		name := map[bool]string{false: "xml-compact", true: "xml-pretty"}[opts.Indent]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := FromJSON(body, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("xml-read", func(b *testing.B) {
		b.SetBytes(int64(len(x)))
		for b.Loop() {
			if _, err := ToJSON(x); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Logf("bundle: %d bytes JSON, %d bytes XML", len(body), len(x))
}
