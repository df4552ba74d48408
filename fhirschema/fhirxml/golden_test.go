package fhirxml

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden XML files in testdata/xml")

// goldenDir holds official examples rendered as indented XML, checked by
// hand against the published R4 XML of the same examples.
const goldenDir = "../../testdata/xml"

// goldens are the examples with golden XML, and what each one shows.
var goldens = []struct{ example, shows string }{
	{"Patient-example.json", "element order, value attributes, narrative div, primitive extensions (_birthDate, _family), arrays of primitives"},
	{"Observation-decimal.json", "decimals with their exact text (value attributes), valueQuantity"},
	{"Bundle-bundle-example.json", "a searchset Bundle: entry.resource wrapped in its type element, search.mode"},
	{"CarePlan-f001.json", "contained resources wrapped in <contained>"},
	{"Bundle-bundle-response.json", "a transaction-response: response.outcome wrapped, lastModified and etag"},
	{"Patient-dicom.json", "a code with both a value and an extension (gender)"},
	{"ActivityDefinition-heart-valve-replacement.json", "a repeating primitive with an extension and no value (_event without event)"},
}

func TestGoldenXMLFilesMatchTheOfficialExamples(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.example, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(examplesDir, g.example))
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromJSON(in, WriteOptions{Indent: true})
			if err != nil {
				t.Fatalf("JSON → XML: %v", err)
			}
			path := filepath.Join(goldenDir, g.example[:len(g.example)-len(".json")]+".xml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("XML differs from %s:\n got %s\nwant %s", path, diffAt(got, want), diffAt(want, got))
			}
			back, err := ToJSON(want)
			if err != nil {
				t.Fatalf("golden XML → JSON: %v", err)
			}
			if c := canonical(t, in); !bytes.Equal(back, c) {
				t.Fatalf("golden XML reads back differently:\n got %s\nwant %s", diffAt(back, c), diffAt(c, back))
			}
		})
	}
}
