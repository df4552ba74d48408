package fhirpath

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// evalSeeds are official examples covering what the expressions reach:
// choice elements, components, contained resources, extensions, references
// of every form, periods, identifiers and a Bundle with entries.
var evalSeeds = []string{
	"Patient-example", "Observation-example", "Observation-blood-pressure",
	"MedicationRequest-medrx0302", "Encounter-example", "Condition-example",
	"Practitioner-example", "AllergyIntolerance-example", "Procedure-example",
	"Immunization-example", "CarePlan-example", "Coverage-9876B1",
	"Bundle-bundle-request-medsallergies",
}

// FuzzEvaluate evaluates every compiled search parameter expression (the
// official ones and the server's custom ones, as the registry compiles
// them) on fuzzed JSON resources, decoded as the server decodes them
// (UseNumber). Evaluate must not panic, and every value it selects must be
// one of the types Node documents.
//
// Run: go test ./search/fhirpath -run '^$' -fuzz '^FuzzEvaluate$' -fuzztime 1m
func FuzzEvaluate(f *testing.F) {
	exprs := searchExpressions(f)
	for _, name := range evalSeeds {
		data, err := os.ReadFile(filepath.Join(examplesDir, name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{}`,
		`{"resourceType":"Patient","name":null,"link":[null,{"other":{"reference":"#"}}]}`,
		`{"resourceType":"Observation","subject":{"reference":"http://x/Patient/1/_history/2"},"valueQuantity":[],"component":[{"valueString":{}}]}`,
		`{"resourceType":"Observation","effectivePeriod":"x","contained":[{"id":"p","resourceType":7}],"performer":[{"reference":"#p"}]}`,
		`{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"Composition"}},{"resource":[]}]}`,
		`{"resourceType":"Patient","extension":[{"url":1},{"url":"x","valueBoolean":"true"}],"deceasedBoolean":1e999}`,
		`{"resourceType":"ValueSet","url":"http://x/ValueSet/y|1.0","useContext":[{"code":{"code":"c"},"valueQuantity":{"value":-0}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := json.NewDecoder(strings.NewReader(string(data)))
		d.UseNumber()
		var resource map[string]any
		if d.Decode(&resource) != nil {
			return
		}
		for _, e := range exprs {
			for _, n := range e.Evaluate(resource) {
				switch n.Value.(type) {
				case map[string]any, string, json.Number, bool:
				default:
					t.Fatalf("%s: value of type %T", e, n.Value)
				}
			}
		}
	})
}

// searchExpressions compiles the expressions of the official and the
// custom search parameters, skipping those the registry skips too.
func searchExpressions(tb testing.TB) []*Expr {
	tb.Helper()
	params := officialParams(tb)
	data, err := os.ReadFile(filepath.Join("..", "custom-parameters.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var custom struct {
		Entry []struct {
			Resource searchParam `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(data, &custom); err != nil {
		tb.Fatal(err)
	}
	for _, e := range custom.Entry {
		params = append(params, e.Resource)
	}
	var exprs []*Expr
	seen := map[string]bool{}
	for _, p := range params {
		// The registry compiles each base's own union branches, which may
		// compile where the whole expression does not.
		for _, src := range append([]string{p.Expression}, strings.Split(p.Expression, " | ")...) {
			if src == "" || seen[src] {
				continue
			}
			seen[src] = true
			if e, err := Compile(src); err == nil {
				exprs = append(exprs, e)
			}
		}
	}
	if len(exprs) < 1000 {
		tb.Fatalf("only %d search expressions compile", len(exprs))
	}
	return exprs
}
