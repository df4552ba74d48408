package fhirxml

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadXML: ToJSON never panics and fails only with an *Error; whatever
// it accepts renders back to XML (compact and indented) that reads to the
// same JSON byte for byte.
func FuzzReadXML(f *testing.F) {
	for _, in := range examples(f) {
		x, err := FromJSON(in, WriteOptions{})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(x)
	}
	goldens, _ := filepath.Glob(filepath.Join(goldenDir, "*.xml"))
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`<Patient` + ns + `><name><given value="A"/><given id="g"/><given value="C"/></name></Patient>`,
		`<Patient` + ns + `><text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml"><![CDATA[x<y]]>&#160;</div></text></Patient>`,
		`<!DOCTYPE p [<!ENTITY x "y">]><Patient` + ns + `/>`,
		`<Patient` + ns + `><active value="true"/><multipleBirthInteger value="-0"/></Patient>`,
		`<Observation` + ns + `><valueQuantity><value value="1.000e-5"/></valueQuantity></Observation>`,
		`<Patient` + ns + `><name><text value="&#xD;&#x9;&#xA; &quot;&apos;&amp;"/></name></Patient>`,
		`<Patient` + ns + `>` + strings.Repeat(`<extension url="u">`, 99) + strings.Repeat(`</extension>`, 99) + `</Patient>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ToJSON(data)
		if err != nil {
			var xe *Error
			if !errors.As(err, &xe) {
				t.Fatalf("rejection is not an *Error: %v", err)
			}
			return
		}
		for _, opts := range []WriteOptions{{}, {Indent: true}} {
			x, err := FromJSON(j, opts)
			if err != nil {
				t.Fatalf("accepted XML gives JSON that does not render (%+v): %v\n%s", opts, err, j)
			}
			again, err := ToJSON(x)
			if err != nil {
				t.Fatalf("rendered XML does not read back: %v\n%s", err, x)
			}
			if !bytes.Equal(again, j) {
				t.Fatalf("round trip changed the JSON:\n got %s\nwant %s", again, j)
			}
		}
	})
}
