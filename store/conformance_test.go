package store_test

import (
	"context"
	"testing"

	"fhirstore/store"
)

const profileURL = "http://example.org/fhir/StructureDefinition/my-patient"

func myPatientProfile(id, version, title string) string {
	return `{"resourceType":"StructureDefinition","id":"` + id + `","url":"` + profileURL + `","version":"` + version + `","name":"MyPatient","title":"` + title + `",` +
		`"status":"active","kind":"resource","abstract":false,"type":"Patient","baseDefinition":"http://hl7.org/fhir/StructureDefinition/Patient","derivation":"constraint",` +
		`"differential":{"element":[{"id":"Patient.identifier","path":"Patient.identifier","min":1}]}}`
}

func TestConformanceResourcesAreFoundByCanonicalURLOnEveryServerOfTheDatabase(t *testing.T) {
	ctx := context.Background()
	one := db.Open(t, db.Options())
	tenant := db.Tenant(t, one)
	other := db.Open(t, db.Options()) // a second server on the same database
	defsOne, defsOther := one.Definitions(tenant), other.Definitions(tenant)

	gen0 := generation(t, defsOther)
	if r, err := defsOther.Resource(ctx, "StructureDefinition", profileURL); err != nil || r != nil {
		t.Fatalf("before any write: %v %v", r, err)
	}
	if _, _, err := one.Update(ctx, tenant, "StructureDefinition", "my-patient", []byte(myPatientProfile("my-patient", "1.0.0", "First")), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	gen1 := generation(t, defsOther)
	if gen1 == gen0 {
		t.Fatal("the generation did not change with the write of a StructureDefinition")
	}
	for _, tc := range []struct{ url, title string }{
		{profileURL, "First"},
		{profileURL + "|1.0.0", "First"},
		{profileURL + "|2.0.0", ""},
	} {
		r, err := defsOther.Resource(ctx, "StructureDefinition", tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := r["title"].(string); got != tc.title {
			t.Errorf("%s: title %q, want %q", tc.url, got, tc.title)
		}
	}
	if _, _, err := one.Update(ctx, tenant, "StructureDefinition", "my-patient", []byte(myPatientProfile("my-patient", "2.0.0", "Second")), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r, _ := defsOther.Resource(ctx, "StructureDefinition", profileURL); r["title"] != "Second" {
		t.Fatalf("the other server still answers %v after the update", r["title"])
	}
	profiles, err := defsOne.Profiles(ctx)
	if err != nil || len(profiles["Patient"]) != 1 || profiles["Patient"][0] != profileURL {
		t.Fatalf("profiles %v %v", profiles, err)
	}
	if _, err := one.Delete(ctx, tenant, "StructureDefinition", "my-patient", store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r, _ := defsOther.Resource(ctx, "StructureDefinition", profileURL); r != nil {
		t.Fatal("a deleted profile is still found")
	}
	if p, _ := defsOther.Profiles(ctx); len(p["Patient"]) != 0 {
		t.Fatalf("a deleted profile is still listed: %v", p)
	}
}

func TestOnlyConformanceWritesChangeTheGeneration(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	defs := st.Definitions(tenant)
	before := generation(t, defs)
	if _, err := st.Create(ctx, tenant, "Patient", []byte(`{"resourceType":"Patient"}`), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := generation(t, defs); after != before {
		t.Fatal("a Patient changed the conformance generation")
	}
	ops := []store.Op{{Method: "PUT", Type: "ValueSet", ID: "colors", Body: []byte(`{"resourceType":"ValueSet","id":"colors","url":"http://example.org/vs/colors","status":"active"}`)}}
	if _, err := st.Transaction(ctx, tenant, ops); err != nil {
		t.Fatal(err)
	}
	if after := generation(t, defs); after == before {
		t.Fatal("a ValueSet written by a transaction left the generation as it was")
	}
	if r, err := defs.Resource(ctx, "ValueSet", "http://example.org/vs/colors"); err != nil || r == nil {
		t.Fatalf("the ValueSet is not found: %v", err)
	}
}

func generation(t *testing.T, d store.Definitions) uint64 {
	t.Helper()
	g, err := d.Generation(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return g
}
