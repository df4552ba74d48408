package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store"
	"fhirstore/store/engine/mongodb"
)

// TestCheckTenantFindsAStaleIndexAndAMissingVersion: a tenant written
// through the store checks clean; a current version whose index entries
// were changed behind the store, and one whose history row is gone, are
// each reported with their collection, resource and version.
func TestCheckTenantFindsAStaleIndexAndAMissingVersion(t *testing.T) {
	ctx := context.Background()
	opts := db.Options()
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	var ids []string
	for i := range 3 {
		res, err := st.Create(ctx, tenant, "Patient", []byte(fmt.Sprintf(`{"resourceType":"Patient","name":[{"family":"Check%d"}]}`, i)), store.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	if _, _, err := st.Update(ctx, tenant, "Patient", ids[0], []byte(`{"resourceType":"Patient","id":"`+ids[0]+`","name":[{"family":"Changed"}]}`), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, full := range []bool{false, true} {
		rep, err := st.CheckTenant(ctx, tenant, store.CheckOptions{Full: full})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) != 0 || rep.Documents != 7 { // 3 current, 4 versions
			t.Fatalf("full %v: a clean tenant: %d documents, problems %v", full, rep.Documents, rep.Problems)
		}
	}
	eng, err := db.Engine(ctx, mongodb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	tdb := eng.Database(opts.DatabasePrefix + tenant)
	raw, err := tdb.Collection("Patient").FindOne(ctx, bson.D{{Key: "_id", Value: ids[1]}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc bson.D
	if err := bson.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for i := range doc {
		if doc[i].Key == "idx" {
			doc[i].Value = bson.D{{Key: "family", Value: bson.A{"stale"}}}
		}
	}
	if _, err := tdb.Collection("Patient").ReplaceOne(ctx, bson.D{{Key: "_id", Value: ids[1]}}, doc, false); err != nil {
		t.Fatal(err)
	}
	if _, err := tdb.Collection("history").DeleteOne(ctx, bson.D{{Key: "_id", Value: "Patient/" + ids[2] + "/1"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := st.CheckTenant(ctx, tenant, store.CheckOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.String())
	}
	want := []string{
		"collection Patient: " + ids[1] + " version 1: search index entries differ",
		"collection Patient: " + ids[2] + " version 1: the current version has no history row",
	}
	if len(got) != len(want) {
		t.Fatalf("problems %q, want %d", got, len(want))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.HasPrefix(g, w)
		}
		if !found {
			t.Errorf("no problem %q among %q", w, got)
		}
	}
}
