package profile_test

import (
	"context"
	"sync"
	"testing"

	"fhirstore/fhirschema/profile"
)

// TestCoreHoldsTheR4Definitions: the built-in core answers for resources,
// data types, extensions, value sets and code systems, by URL and by
// URL|version, and knows nothing else.
func TestCoreHoldsTheR4Definitions(t *testing.T) {
	core := profile.Core()
	for _, c := range []struct{ typ, url string }{
		{"StructureDefinition", "http://hl7.org/fhir/StructureDefinition/Patient"},
		{"StructureDefinition", "http://hl7.org/fhir/StructureDefinition/HumanName"},
		{"StructureDefinition", "http://hl7.org/fhir/StructureDefinition/SimpleQuantity"},
		{"StructureDefinition", "http://hl7.org/fhir/StructureDefinition/patient-birthPlace"},
		{"StructureDefinition", "http://hl7.org/fhir/StructureDefinition/Patient|4.0.1"},
		{"ValueSet", "http://hl7.org/fhir/ValueSet/administrative-gender"},
		{"CodeSystem", "http://hl7.org/fhir/administrative-gender"},
		{"CodeSystem", "http://terminology.hl7.org/CodeSystem/v3-ActCode"},
		{"CodeSystem", "http://terminology.hl7.org/CodeSystem/v2-0203"},
	} {
		r, err := core.Resource(context.Background(), c.typ, c.url)
		if err != nil || r == nil || r["resourceType"] != c.typ {
			t.Errorf("%s %s: got %v, %v", c.typ, c.url, r != nil, err)
		}
	}
	if r, _ := core.Resource(context.Background(), "StructureDefinition", "http://example.org/none"); r != nil {
		t.Errorf("an unknown URL found something")
	}
	if !profile.CoreInvariant("pat-1") || !profile.CoreInvariant("ele-1") || profile.CoreInvariant("us-core-6") {
		t.Errorf("core invariants: pat-1 %v, ele-1 %v, us-core-6 %v", profile.CoreInvariant("pat-1"), profile.CoreInvariant("ele-1"), profile.CoreInvariant("us-core-6"))
	}
}

// TestTenantDefinitionsTakePrecedence: Merge answers from the tenant first.
func TestTenantDefinitionsTakePrecedence(t *testing.T) {
	own := map[string]any{"resourceType": "ValueSet", "url": "http://hl7.org/fhir/ValueSet/administrative-gender", "name": "Mine"}
	defs := profile.Merge(profile.NewMemory(own), profile.Core())
	r, _ := defs.Resource(context.Background(), "ValueSet", "http://hl7.org/fhir/ValueSet/administrative-gender")
	if r["name"] != "Mine" {
		t.Errorf("got %v", r["name"])
	}
	r, _ = defs.Resource(context.Background(), "ValueSet", "http://hl7.org/fhir/ValueSet/marital-status")
	if r == nil {
		t.Errorf("the core is not consulted")
	}
}

// TestANewGenerationRecompiles: a profile changed in the definitions takes
// effect at the next validation.
func TestANewGenerationRecompiles(t *testing.T) {
	mem := profile.NewMemory(sd(t, ex+"gen", "Patient", corePatient, `{"id":"Patient","path":"Patient"}`, `{"id":"Patient.name","path":"Patient.name","min":1}`))
	defs := profile.Merge(mem, profile.Core())
	v := profile.NewValidator()
	patient := map[string]any{"resourceType": "Patient"}
	issues, err := v.Validate(context.Background(), defs, patient, ex+"gen")
	if err != nil || len(errorsOf(issues)) != 1 {
		t.Fatalf("before: %v %v", errorsOf(issues), err)
	}
	mem.Add(sd(t, ex+"gen", "Patient", corePatient, `{"id":"Patient","path":"Patient"}`, `{"id":"Patient.gender","path":"Patient.gender","min":1}`))
	issues, _ = v.Validate(context.Background(), profile.Merge(mem, profile.Core()), patient, ex+"gen")
	if errs := errorsOf(issues); len(errs) != 1 || errs[0][:len("Patient.gender")] != "Patient.gender" {
		t.Errorf("after: %v", errs)
	}
}

// TestConcurrentValidations share one Validator.
func TestConcurrentValidations(t *testing.T) {
	pkg := usCore(t, "6.1.0")
	defs := profile.Merge(pkg.defs, profile.Core())
	v := profile.NewValidator()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, name := range []string{"Patient-example.json", "Observation-blood-pressure.json", "Observation-cbc-hemoglobin.json"} {
				ex := pkg.examples[name]
				if _, err := v.Validate(context.Background(), defs, ex, claimed(ex)[0]); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}
