package store_test

import (
	"context"
	"errors"
	"testing"

	"fhirstore/store"
)

const cityParameter = `{"resourceType":"SearchParameter","url":"http://example.org/sp/city","name":"city","status":"active",
	"description":"city","code":"home-city","base":["Patient"],"type":"string","expression":"Patient.address.city"}`

func TestATenantWithoutSearchParametersIsSearchedWithTheBuiltInRegistry(t *testing.T) {
	ctx := context.Background()
	opts := db.Options()
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	if _, err := st.Create(ctx, tenant, "Patient", []byte(`{"resourceType":"Patient","gender":"male"}`), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	reg, err := st.Registry(ctx, tenant)
	if err != nil || reg != opts.Registry {
		t.Fatalf("a tenant without parameters of its own has registry %p (%v), not the built-in %p", reg, err, opts.Registry)
	}
}

func TestTheRegistryFollowsSearchParameterWrites(t *testing.T) {
	for _, exclusive := range []bool{true, false} {
		ctx := context.Background()
		opts := db.Options()
		opts.Exclusive = exclusive
		writer, reader := db.Open(t, opts), db.Open(t, opts)
		tenant := db.Tenant(t, writer)
		has := func(st *store.Store) bool {
			reg, err := st.Registry(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			_, ok := reg.Lookup("Patient", "home-city")
			return ok
		}
		if has(writer) || has(reader) {
			t.Fatal("known before it is written")
		}
		sp, err := writer.Create(ctx, tenant, "SearchParameter", []byte(cityParameter), store.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !has(writer) || !exclusive && !has(reader) {
			t.Errorf("exclusive %v: not known after it is written", exclusive)
		}
		if _, err := writer.Delete(ctx, tenant, "SearchParameter", sp.ID, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if has(writer) || !exclusive && has(reader) {
			t.Errorf("exclusive %v: still known after it is deleted", exclusive)
		}
	}
}

func TestASearchParameterThatCannotBeSearchedIsNotStored(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	_, err := st.Create(ctx, tenant, "SearchParameter", []byte(`{"resourceType":"SearchParameter","url":"http://example.org/sp/x","name":"x",
		"status":"active","description":"x","code":"x","base":["Patient"],"type":"string","expression":"Patient.name.where("}`), store.WriteOptions{})
	var inv *store.InvalidError
	if !errors.As(err, &inv) || !inv.Syntax || inv.Issues[0].Expression != "SearchParameter.expression" {
		t.Fatalf("%v, want a 400 at SearchParameter.expression", err)
	}
	page, err := st.History(ctx, tenant, store.HistoryQuery{Type: "SearchParameter", Count: 10})
	if err != nil || page.Total != 0 {
		t.Errorf("stored: %v versions (%v)", page, err)
	}
}
