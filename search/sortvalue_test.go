package search

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"fhirstore/fhirschema"
)

// TestOneSortValueParameters checks the parameters said to have one sort
// value against the definitions they follow.
func TestOneSortValueParameters(t *testing.T) {
	checkFlag(t, "one sort value", func(p *Param) bool { return p.oneSortValue }, []flagRow{
		{"Observation", "status", true},           // code 0..1
		{"Observation", "subject", true},          // Reference 0..1
		{"Observation", "patient", true},          // subject.where(resolve() is Patient)
		{"Observation", "encounter", true},        // Reference 0..1
		{"Encounter", "class", true},              // Coding 0..1
		{"Patient", "gender", true},               // code 0..1
		{"Patient", "active", true},               // boolean 0..1
		{"MedicationRequest", "medication", true}, // (medication as Reference)
		{"ExplanationOfBenefit", "payee", true},   // payee 0..1, party 0..1
		{"Condition", "onset-info", true},         // onset as string
		{"Observation", "code", false},            // CodeableConcept: one value a coding
		{"Observation", "category", false},        // repeats
		{"Observation", "combo-code", false},      // code | component.code
		{"Observation", "performer", false},       // repeats
		{"Observation", "value-quantity", false},  // a quantity sorts by its range
		{"Observation", "date", false},            // a date sorts by its range
		{"Patient", "family", false},              // name repeats
		{"Patient", "name", false},                // HumanName: several parts
		{"Patient", "identifier", false},          // repeats
		{"Patient", "_profile", false},            // meta.profile repeats
		{"Provenance", "target", false},           // repeats
	})
}

// TestOneRangeParameters checks the date, number and quantity parameters
// said to have at most one range against the definitions they follow.
func TestOneRangeParameters(t *testing.T) {
	checkFlag(t, "one range", func(p *Param) bool { return p.oneRange }, []flagRow{
		{"Observation", "date", true},                      // effective[x] 0..1 (a Timing: its outer limits)
		{"Observation", "value-quantity", true},            // value[x] 0..1
		{"Observation", "value-date", true},                // value[x] 0..1
		{"Patient", "birthdate", true},                     // birthDate 0..1
		{"Encounter", "date", true},                        // period 0..1
		{"Claim", "created", true},                         // created 0..1
		{"Observation", "combo-value-quantity", false},     // the components' values too
		{"Observation", "component-value-quantity", false}, // component repeats
		{"Immunization", "reaction-date", false},           // reaction repeats
		{"RiskAssessment", "probability", false},           // prediction repeats
		{"Observation", "code", false},                     // a token
	})
}

// flagRow is a parameter and the value a flag of it should have.
type flagRow struct {
	typ, code string
	want      bool
}

// checkFlag compares flag of each parameter of rows with its want.
func checkFlag(t *testing.T, name string, flag func(*Param) bool, rows []flagRow) {
	t.Helper()
	r, err := NewRegistry(fhirschema.ResourceTypes())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rows {
		p, ok := r.Lookup(c.typ, c.code)
		if !ok {
			t.Fatalf("%s.%s: no such parameter", c.typ, c.code)
		}
		if flag(p) != c.want {
			t.Errorf("%s.%s (%s): %s %v, want %v", c.typ, c.code, p.Expression, name, flag(p), c.want)
		}
	}
}

// TestOneSortValueOnEveryExample evaluates every parameter said to have
// one sort value or one range on every official example and every
// resource of the Synthea sample: none selects two elements or gives two
// sort values or two ranges.
func TestOneSortValueOnEveryExample(t *testing.T) {
	r, err := NewRegistry(fhirschema.ResourceTypes())
	if err != nil {
		t.Fatal(err)
	}
	var resources []map[string]any
	examples, _ := filepath.Glob(filepath.Join("..", "testdata", "fhir", "examples", "*.json"))
	bundles, _ := filepath.Glob(filepath.Join("..", "testdata", "synthea", "*.json"))
	if len(examples) == 0 || len(bundles) == 0 {
		t.Fatal("no examples or Synthea bundles")
	}
	for _, f := range append(examples, bundles...) {
		res := readJSON(t, f)
		if res["resourceType"] != "Bundle" {
			resources = append(resources, res)
			continue
		}
		entries, _ := res["entry"].([]any)
		for _, e := range entries {
			if in, ok := e.(map[string]any)["resource"].(map[string]any); ok {
				resources = append(resources, in)
			}
		}
	}
	checked, ranges := 0, 0
	x := extractor{isType: func(t string) bool { return r.types[t] }}
	for _, res := range resources {
		typ, _ := res["resourceType"].(string)
		for _, p := range r.Params(typ) {
			if !p.oneRange && !p.oneSortValue {
				continue
			}
			nodes := p.expr.Evaluate(res)
			x.reset()
			for _, n := range nodes {
				x.node(p, n)
			}
			if n := len(x.dates) + len(x.nums); p.oneRange && (len(nodes) > 1 || n > 1) {
				t.Errorf("%s/%v %s: %d elements, %d ranges", typ, res["id"], p.Code, len(nodes), n)
			}
			if p.oneSortValue && (len(nodes) > 1 || len(x.sortKeys.list) > 1) {
				t.Errorf("%s/%v %s: %d elements, sort values %q", typ, res["id"], p.Code, len(nodes), x.sortKeys.list)
			}
			if p.oneRange {
				ranges += len(x.dates) + len(x.nums)
			} else {
				checked += len(nodes)
			}
		}
	}
	if checked < 10000 {
		t.Fatalf("%d values checked over %d resources: too few", checked, len(resources))
	}
	if ranges < 3000 {
		t.Fatalf("%d ranges of one-range parameters: too few", ranges)
	}
	t.Logf("%d values of one-value parameters, %d ranges of one-range parameters, over %d resources", checked, ranges, len(resources))
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}
