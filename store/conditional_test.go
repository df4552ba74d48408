package store_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store"
	"fhirstore/store/engine/mongodb"
)

// TestMatchedConditionalCreatesTakeNoLock: while another writer holds the
// criteria lock of a conditional create, a create whose criteria already
// match a resource answers with that match at once (it writes nothing, so
// it needs no lock), and one whose criteria match nothing still waits for
// the lock and gives up with a conflict; nothing is written either way.
func TestMatchedConditionalCreatesTakeNoLock(t *testing.T) {
	ctx := context.Background()
	opts := db.Options()
	opts.LockTimeout = 300 * time.Millisecond
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	existing, err := st.Create(ctx, tenant, "Patient", []byte(`{"resourceType":"Patient","identifier":[{"system":"urn:x","value":"held"}]}`), store.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := db.Engine(ctx, mongodb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	locks := eng.Database(opts.DatabasePrefix + tenant).Collection("locks")
	for _, value := range []string{"held", "absent"} {
		key := "Patient?" + url.Values{"identifier": {"urn:x|" + value}}.Encode()
		if err := locks.InsertOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "owner", Value: "another writer"}, {Key: "at", Value: time.Now().UTC()}}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(value string) ([]store.Result, []error) {
		body := []byte(`{"resourceType":"Patient","identifier":[{"system":"urn:x","value":"` + value + `"}]}`)
		return st.Batch(ctx, tenant, []store.Op{{Method: "POST", Type: "Patient", Condition: "identifier=urn:x|" + value, Body: body}})
	}

	results, errs := create("held")
	if errs[0] != nil {
		t.Fatalf("a create matching %s: %v", existing.ID, errs[0])
	}
	if got := results[0]; got.Outcome != store.Existing || got.Resource.ID != existing.ID {
		t.Fatalf("a create matching %s: outcome %v, resource %+v", existing.ID, got.Outcome, got.Resource)
	}
	if _, errs := create("absent"); !errors.Is(errs[0], store.ErrConflict) {
		t.Fatalf("a create matching nothing while its lock is held: %v, want a conflict", errs[0])
	}
	n, err := eng.Database(opts.DatabasePrefix+tenant).Collection("Patient").Count(ctx, bson.D{})
	if err != nil || n != 1 {
		t.Fatalf("%d Patients (%v), want the one created first", n, err)
	}
}
