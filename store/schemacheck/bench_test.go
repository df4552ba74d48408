package schemacheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/store"
	"fhirstore/store/schemacheck"
)

// BenchmarkCheckSyntheaSample checks every resource of the Synthea sample
// (testdata/synthea: four patients' records, their hospitals and
// clinicians, about 3,300 resources) as a write does: structure,
// invariants, the profiles they claim and the bindings they use. One
// iteration is the whole sample.
func BenchmarkCheckSyntheaSample(b *testing.B) {
	v, err := fhirschema.NewValidator()
	if err != nil {
		b.Fatal(err)
	}
	check := schemacheck.Validator(v)
	resources := syntheaResources(b)
	ctx := context.Background()
	run := func() {
		for _, r := range resources {
			if _, err := check(ctx, r); err != nil {
				b.Fatalf("%s: %v", r.Type, err)
			}
		}
	}
	run()
	b.ReportMetric(float64(len(resources)), "resources")
	b.ResetTimer()
	for b.Loop() {
		run()
	}
}

// syntheaResources reads the entries of the Synthea sample as writes.
func syntheaResources(b *testing.B) []store.Validation {
	files, _ := filepath.Glob("../../testdata/synthea/*.json")
	var out []store.Validation
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var bundle struct {
			Entry []struct {
				Resource json.RawMessage `json:"resource"`
			} `json:"entry"`
		}
		if json.Unmarshal(raw, &bundle) != nil {
			continue // the directory's README and the like
		}
		for _, e := range bundle.Entry {
			dec := json.NewDecoder(bytes.NewReader(e.Resource))
			dec.UseNumber()
			var r map[string]any
			if err := dec.Decode(&r); err != nil {
				b.Fatal(err)
			}
			typ, _ := r["resourceType"].(string)
			out = append(out, store.Validation{Tenant: "bench", Type: typ, Body: e.Resource, Resource: r})
		}
	}
	if len(out) < 3000 {
		b.Fatalf("%d resources in the Synthea sample", len(out))
	}
	return out
}
