package search_test

import (
	"net/url"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/search"
)

// TestPatientCompartmentParametersAreReferences checks the embedded
// definition against the registry: every linking parameter of every type
// is a reference parameter the registry indexes.
func TestPatientCompartmentParametersAreReferences(t *testing.T) {
	r := newRegistry(t)
	comp := search.PatientCompartment()
	if len(comp) < 60 || len(comp["Observation"]) != 2 || comp["EpisodeOfCare"][0] != "patient" {
		t.Fatalf("unexpected compartment: %d types, Observation %v", len(comp), comp["Observation"])
	}
	for typ, params := range comp {
		if !fhirschema.IsResourceType(typ) {
			t.Errorf("%s is not a resource type", typ)
		}
		for _, code := range params {
			if code == search.CompartmentSelf {
				continue
			}
			if p, ok := r.Lookup(typ, code); !ok || p.Type != "reference" {
				t.Errorf("%s.%s is not a registered reference parameter", typ, code)
			}
		}
	}
	if _, ok := search.PatientCompartmentParams("Organization"); ok {
		t.Error("Organization is not in the Patient compartment")
	}
}

func TestCompartmentQueriesOnePerLinkingParameter(t *testing.T) {
	r := newRegistry(t)
	qs, err := r.CompartmentQueries("Observation", "p1", url.Values{"status": {"final"}}, search.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || len(qs[0].Conditions) != 2 || len(qs[1].Conditions) != 2 {
		t.Fatalf("want two queries of two conditions: %+v", qs)
	}
	for _, bad := range []struct{ typ, id string }{{"Organization", "p1"}, {"Observation", "a,b"}, {"Observation", ""}} {
		if _, err := r.CompartmentQueries(bad.typ, bad.id, nil, search.ParseOptions{}); err == nil {
			t.Errorf("%s for %q: no error", bad.typ, bad.id)
		}
	}
	if v, err := search.PatientCompartmentValues("Patient", search.CompartmentSelf, "p1"); err != nil || v.Get("_id") != "p1" {
		t.Errorf("{def}: %v %v", v, err)
	}
}

// TestEveryCompartmentTypeWithACareDateNamesADateParameter: the care-date
// table names real date parameters, and the types without one are those
// whose resources record no care.
func TestEveryCompartmentTypeWithACareDateNamesADateParameter(t *testing.T) {
	r := newRegistry(t)
	undated := map[string]bool{}
	for _, typ := range search.PatientCompartmentTypes() {
		code := r.CareDateParam(typ)
		if code == "" {
			undated[typ] = true
			continue
		}
		if p, ok := r.Lookup(typ, code); !ok || p.Type != "date" {
			t.Errorf("%s: care date %q is not a date parameter", typ, code)
		}
	}
	for _, typ := range []string{"Patient", "RelatedPerson", "Person", "Coverage", "Group"} {
		if !undated[typ] {
			t.Errorf("%s has a care date %q", typ, r.CareDateParam(typ))
		}
	}
	for _, typ := range []string{"Observation", "Encounter", "Condition", "MedicationRequest", "Procedure"} {
		if undated[typ] {
			t.Errorf("%s has no care date", typ)
		}
	}
}
