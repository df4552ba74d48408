package store_test

import (
	"context"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/event"

	"fhirstore/store"
)

// TestMonitoredWritesCommitTogether: with a command monitor (the server
// counts commands for its metrics), the embedded engine still commits a
// write's rows in one transaction: a create, an update and a transaction
// Bundle write no entry in the transaction journal, which the journaled
// path writes and clears for each of them.
func TestMonitoredWritesCommitTogether(t *testing.T) {
	if _, ok := db.SQLite(); !ok {
		t.Skip("MongoDB commits through the journal")
	}
	ctx := context.Background()
	var mu sync.Mutex
	touched := map[string]int{}
	opts := db.Options()
	opts.Monitor = &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		if coll, ok := ev.Command.Lookup(ev.CommandName).StringValueOK(); ok {
			mu.Lock()
			touched[coll]++
			mu.Unlock()
		}
	}}
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	patient := []byte(`{"resourceType":"Patient","name":[{"family":"Atomic"}]}`)
	res, err := st.Create(ctx, tenant, "Patient", patient, store.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Update(ctx, tenant, "Patient", res.ID, []byte(`{"resourceType":"Patient","id":"`+res.ID+`","active":true}`), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Transaction(ctx, tenant, []store.Op{{Method: "POST", Type: "Patient", Body: patient}, {Method: "POST", Type: "Observation",
		Body: []byte(`{"resourceType":"Observation","status":"final","code":{"text":"x"}}`)}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if touched["Patient"] == 0 || touched["history"] == 0 {
		t.Fatalf("the monitor saw no writes: %v", touched)
	}
	if n := touched["txnJournal"] + touched["txnDecisions"]; n > 0 {
		t.Errorf("%d commands on the transaction journal (%v): the writes were journaled, not atomic", n, touched)
	}
}
