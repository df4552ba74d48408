package store_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/event"

	"fhirstore/search"
	"fhirstore/store"
)

// TestSearchTotalsFollowWrites: a search's total is counted once and
// reused, by its next pages and by the same search asked again, until a
// write of the type (create, update, delete, transaction) makes it count
// again, and the total is right after each.
func TestSearchTotalsFollowWrites(t *testing.T) {
	ctx := context.Background()
	var counts atomic.Int64
	opts := db.Options()
	opts.Exclusive = true
	opts.Monitor = &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		if ev.CommandName == "count" {
			counts.Add(1)
		}
	}}
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	obs := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]}}`
	var ids []string
	for range 3 {
		res, err := st.Create(ctx, tenant, "Observation", []byte(obs), store.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	q, err := db.Registry().Parse("Observation", url.Values{"code": {"http://loinc.org|8867-4"}, "_count": {"1"}}, search.ParseOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	total := func(want int64, counted bool) {
		t.Helper()
		before := counts.Load()
		page, err := st.Search(ctx, tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != want {
			t.Fatalf("total %d, want %d", page.Total, want)
		}
		if got := counts.Load() > before; got != counted {
			t.Fatalf("counted in the database: %v, want %v", got, counted)
		}
	}
	total(3, true)
	total(3, false)
	if _, err := st.Create(ctx, tenant, "Observation", []byte(obs), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	total(4, true)
	if _, err := st.Create(ctx, tenant, "Patient", []byte(`{"resourceType":"Patient"}`), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	total(4, false) // another type's write leaves the count as it is
	if _, err := st.Delete(ctx, tenant, "Observation", ids[0], store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	total(3, true)
	other := `{"resourceType":"Observation","id":"` + ids[1] + `","status":"final","code":{"text":"something else"}}`
	if _, _, err := st.Update(ctx, tenant, "Observation", ids[1], []byte(other), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	total(2, true)
	if _, err := st.Transaction(ctx, tenant, []store.Op{{Method: "POST", Type: "Observation", Body: []byte(obs)}}); err != nil {
		t.Fatal(err)
	}
	total(3, true)
	total(3, false)
}
