package store_test

import (
	"context"
	"slices"
	"testing"

	"fhirstore/store"
)

func TestSearchIndexesExistBeforeTheFirstDocument(t *testing.T) {
	ctx := context.Background()
	opts := db.Options()
	opts.EagerIndexTypes = []string{"Patient"}
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	names := func(typ string) []string {
		t.Helper()
		specs, err := st.IndexNames(ctx, tenant, typ)
		if err != nil {
			t.Fatal(err)
		}
		return specs
	}
	patient := names("Patient")
	for _, want := range []string{"idx.birthdate.lo_1", "idx.birthdate.hi_1", "idx.family_1", "idx.identifier_1", "idx.gender_1", "idx.organization_1"} {
		if !slices.Contains(patient, want) {
			t.Errorf("Patient has no index %s after tenant creation: %v", want, patient)
		}
	}
	if obs := names("Observation"); slices.Contains(obs, "idx.code_1") {
		t.Fatalf("Observation indexed before use: %v", obs)
	}
	if _, err := st.Create(ctx, tenant, "Observation", []byte(`{"resourceType":"Observation","status":"final","code":{"text":"x"}}`), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if obs := names("Observation"); !slices.Contains(obs, "idx.code_1") || !slices.Contains(obs, "idx.value-quantity.lo_1") {
		t.Fatalf("Observation not indexed after its first write: %v", obs)
	}
}
