package store_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fhirstore/search"
	"fhirstore/store"
)

// refusal is what the database answers in these tests when it refuses
// the current rows of a committed transaction.
const refusal = "index row size 3016 exceeds btree version 4 maximum 2704"

// clock is a test clock that moves only when told.
type clock struct{ now atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.now.Store(time.Now().UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.now.Load()) }
func (c *clock) Advance(d time.Duration) { c.now.Add(int64(d)) }

// refusingOptions are store options whose database refuses the current
// rows of a transaction (as they are put, and as recovery rolls them
// forward) while refuse is set: all of them, or with only set, those of
// that type; recovery quarantines after 3 attempts, waiting a minute
// after the first failure and two after the second.
func refusingOptions(refuse *atomic.Bool, only string, c *clock) store.Options {
	opts := db.Options()
	opts.Now = c.Now
	opts.RecoveryAttempts = 3
	opts.RecoveryBackoff = time.Minute
	opts.Fault = func(point string) error {
		if !refuse.Load() {
			return nil
		}
		for _, p := range []string{store.FaultPutCurrent, store.FaultRollForward} {
			if only == "" && point == p || only != "" && point == p+"/"+only {
				return errors.New(refusal)
			}
		}
		return nil
	}
	return opts
}

// wantHeld checks that the resources of an unapplied transaction answer
// want to a read, an update, a transaction and a search, never stale data.
func wantHeld(t *testing.T, st *store.Store, tenant, createdID string, want error) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Read(ctx, tenant, "Patient", "ledger"); !errors.Is(err, want) {
		t.Fatalf("read of the updated Patient: %v, want %v", err, want)
	}
	if _, err := st.Read(ctx, tenant, "Patient", createdID); !errors.Is(err, want) {
		t.Fatalf("read of the created Patient: %v, want %v", err, want)
	}
	if _, _, err := st.Update(ctx, tenant, "Patient", "ledger", patientBody("ledger", "over"), store.WriteOptions{}); !errors.Is(err, want) {
		t.Fatalf("update: %v, want %v", err, want)
	}
	if _, err := st.Delete(ctx, tenant, "Patient", "ledger", store.WriteOptions{}); !errors.Is(err, want) {
		t.Fatalf("delete: %v, want %v", err, want)
	}
	if _, err := st.Transaction(ctx, tenant, []store.Op{{Method: "PUT", Type: "Patient", ID: "ledger", Body: patientBody("ledger", "over")}}); !errors.Is(err, want) {
		t.Fatalf("transaction: %v, want %v", err, want)
	}
	q, err := db.Registry().Parse("Patient", url.Values{"_id": {"ledger"}}, search.ParseOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Search(ctx, tenant, q); !errors.Is(err, want) {
		t.Fatalf("search: %v, want %v", err, want)
	}
	q, err = db.Registry().Parse("Encounter", url.Values{"_include": {"Encounter:subject"}}, search.ParseOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Search(ctx, tenant, q); !errors.Is(err, want) {
		t.Fatalf("search including the held Patient: %v, want %v", err, want)
	}
}

// TestRefusedRollForwardIsQuarantined: a committed transaction whose
// current rows the database refuses is retried with a backoff, then
// quarantined; its resources answer ErrRecovering and then ErrQuarantined,
// across a restart of the store, until an operator retries or abandons it.
func TestRefusedRollForwardIsQuarantined(t *testing.T) {
	// With only Observation refused, the ledger and the two Patients are
	// current at the transaction's versions before it is quarantined:
	// abandoning must put them back.
	for _, tc := range []struct{ resolve, only string }{{"retry", ""}, {"abandon", ""}, {"retry", "Observation"}, {"abandon", "Observation"}} {
		resolve := tc.resolve
		t.Run(resolve+" refused "+map[string]string{"": "all"}[tc.only]+tc.only, func(t *testing.T) {
			ctx := context.Background()
			var refuse atomic.Bool
			c := newClock()
			opts := refusingOptions(&refuse, tc.only, c)
			st := db.Open(t, opts)
			tenant := db.Tenant(t, st)
			seedLedger(t, st, tenant)
			if _, err := st.Create(ctx, tenant, "Encounter", []byte(`{"resourceType":"Encounter","status":"finished","class":{"code":"HH"},"subject":{"reference":"Patient/ledger"}}`), store.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			refuse.Store(true)
			results, err := st.Transaction(ctx, tenant, crashOps("T1"))
			if err != nil {
				t.Fatalf("a committed transaction is a success: %v", err)
			}
			created := results[1].Resource.ID
			wantHeld(t, st, tenant, created, store.ErrRecovering)

			// Attempts: the commit's own, then two by recovery, each after
			// its backoff; the third failure quarantines.
			passes := []struct {
				wait        time.Duration
				failed      int
				quarantined int
			}{
				{0, 0, 0},                // the first retry is not due yet
				{61 * time.Second, 1, 0}, // attempt 2, the next one two minutes later
				{time.Minute, 0, 0},      // not due
				{61 * time.Second, 1, 1}, // attempt 3: quarantined
				{24 * time.Hour, 0, 0},   // recovery leaves it alone
			}
			for i, p := range passes {
				c.Advance(p.wait)
				r, err := st.RecoverTenant(ctx, tenant, 0)
				if err != nil {
					t.Fatalf("pass %d: a refused roll-forward fails recovery: %v", i, err)
				}
				if r.Failed != p.failed || r.Quarantined != p.quarantined || r.RolledForward != 0 {
					t.Fatalf("pass %d: %+v, want %d failed, %d quarantined", i, r, p.failed, p.quarantined)
				}
			}
			wantHeld(t, st, tenant, created, store.ErrQuarantined)

			// What the current rows hold (a store that has not recovered
			// yet does not hold them): the ledger was put before the
			// Observation was refused, or nothing was.
			if cur, err := db.Open(t, opts).Read(ctx, tenant, "Patient", "ledger"); err != nil || cur.VersionID != map[string]int{"": 1, "Observation": 2}[tc.only] {
				t.Fatalf("current ledger row before recovery: %v %+v", err, cur)
			}

			// A restarted store recovers without error and holds them too.
			st2 := db.Open(t, opts)
			if _, err := st2.Recover(ctx, 0); err != nil {
				t.Fatalf("recovery after a restart: %v", err)
			}
			wantHeld(t, st2, tenant, created, store.ErrQuarantined)
			if retrying, quarantined := st2.HeldTransactions(); retrying != 0 || quarantined != 1 {
				t.Fatalf("held: %d retrying, %d quarantined", retrying, quarantined)
			}
			list, err := st2.UnfinishedTransactions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var txn *store.UnfinishedTxn
			for i := range list {
				if list[i].Tenant == tenant {
					txn = &list[i]
				}
			}
			if txn == nil || txn.State != store.TxnQuarantined || txn.Attempts != 3 || len(txn.Resources) != 4 || !strings.Contains(txn.LastError, "2704") {
				t.Fatalf("unfinished transactions: %+v", list)
			}

			switch resolve {
			case "retry":
				if _, err := st2.RetryTransaction(ctx, txn.ID); err == nil || !strings.Contains(err.Error(), "2704") {
					t.Fatalf("retry while the database still refuses: %v", err)
				}
				wantHeld(t, st2, tenant, created, store.ErrQuarantined)
				refuse.Store(false)
				if _, err := st2.RetryTransaction(ctx, txn.ID); err != nil {
					t.Fatal(err)
				}
			case "abandon":
				if _, err := st2.AbandonTransaction(ctx, txn.ID); err != nil {
					t.Fatal(err)
				}
				refuse.Store(false)
			}
			tags := readCrashState(t, st2, tenant).committedTags(t)
			if tags["T1"] != (resolve == "retry") {
				t.Fatalf("after %s the transaction is applied: %v", resolve, tags["T1"])
			}
			ledger, err := st2.Read(ctx, tenant, "Patient", "ledger")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{"retry": 2, "abandon": 1}[resolve]; ledger.VersionID != want {
				t.Fatalf("ledger at version %d after %s, want %d", ledger.VersionID, resolve, want)
			}
			if _, err := st2.Read(ctx, tenant, "Patient", created); (err == nil) != (resolve == "retry") {
				t.Fatalf("created Patient after %s: %v", resolve, err)
			}
			if retrying, quarantined := st2.HeldTransactions(); retrying+quarantined != 0 {
				t.Fatalf("still held after %s: %d, %d", resolve, retrying, quarantined)
			}
			// The resources take the next transaction.
			if _, err := st2.Transaction(ctx, tenant, crashOps("T2")); err != nil {
				t.Fatalf("transaction after %s: %v", resolve, err)
			}
			if tags := readCrashState(t, st2, tenant).committedTags(t); !tags["T2"] {
				t.Fatal("the transaction after the resolution is missing")
			}
		})
	}
}
