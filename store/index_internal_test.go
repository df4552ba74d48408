package store

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/store/document"
)

// TestIndexParsedIsIndexOfTheJSON indexes every official example and
// every resource of the Synthea sample from its parsed document and from
// its stored JSON: the idx and sort documents are the same, numbers
// written with a text of their own (1.50, 1e2) included. The parsed
// document, as the validator reads it, is what encoding/json decodes.
func TestIndexParsedIsIndexOfTheJSON(t *testing.T) {
	reg, err := search.NewRegistry(fhirschema.ResourceTypes())
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{opts: Options{Registry: reg}}
	var bodies [][]byte
	examples, _ := filepath.Glob(filepath.Join("..", "testdata", "fhir", "examples", "*.json"))
	bundles, _ := filepath.Glob(filepath.Join("..", "testdata", "synthea", "*.json"))
	if len(examples) == 0 || len(bundles) == 0 {
		t.Fatal("no examples or Synthea bundles")
	}
	for _, f := range append(examples, bundles...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var bundle struct {
			ResourceType string                               `json:"resourceType"`
			Entry        []struct{ Resource json.RawMessage } `json:"entry"`
		}
		if err := json.Unmarshal(b, &bundle); err != nil || bundle.ResourceType != "Bundle" {
			bodies = append(bodies, b)
			continue
		}
		for _, e := range bundle.Entry {
			if len(e.Resource) > 0 {
				bodies = append(bodies, e.Resource)
			}
		}
	}
	parsed, withTexts := 0, 0
	for _, body := range bodies {
		dec, err := document.FromJSON(body, 0)
		if err != nil {
			continue // not a storable document: not this test's concern
		}
		var decoded map[string]any
		jd := json.NewDecoder(bytes.NewReader(body))
		jd.UseNumber()
		if err := jd.Decode(&decoded); err != nil {
			t.Fatal(err)
		}
		if got := newJSONConverter(dec.NumText).value(dec.Doc); !reflect.DeepEqual(got, decoded) {
			t.Errorf("the resource the validator reads is not the JSON decoded: %v, want %v", got, decoded)
		}
		typ, _ := lookup(dec.Doc, "resourceType").(string)
		p := &prepared{typ: typ, doc: dec.Doc, numText: dec.NumText}
		doc, _, out, err := p.finish("x1", 2, time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		wantIdx, wantSort, err := s.index(typ, out)
		if err != nil {
			t.Fatal(err)
		}
		gotIdx, gotSort, err := s.indexParsed(s.opts.Registry, typ, doc, p.numText, out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotIdx, wantIdx) || !bytes.Equal(gotSort, wantSort) {
			t.Errorf("%s: from the document %v %v, from the JSON %v %v", typ, gotIdx, gotSort, wantIdx, wantSort)
		}
		parsed++
		if len(p.numText) > 0 {
			withTexts++
		}
	}
	if parsed < 3000 || withTexts < 20 {
		t.Fatalf("%d of %d resources indexed, %d with numbers' texts: too few", parsed, len(bodies), withTexts)
	}
	t.Logf("%d resources, %d indexed, %d with numbers' texts", len(bodies), parsed, withTexts)
}
