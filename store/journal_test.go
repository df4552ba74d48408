package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/storetest"
)

// crashOps is one transaction of the crash tests: it moves Patient/ledger
// to a version named tag, creates two Patients tagged with it and an
// Observation referring to the first through its urn:uuid.
func crashOps(tag string) []store.Op {
	ref := "urn:uuid:" + uuid.NewString()
	tagged := fmt.Sprintf(`{"resourceType":"Patient","identifier":[{"system":"urn:crash","value":%q}]}`, tag)
	return []store.Op{
		{Method: "PUT", Type: "Patient", ID: "ledger", Body: patientBody("ledger", tag)},
		{Method: "POST", Type: "Patient", FullURL: ref, Body: []byte(tagged)},
		{Method: "POST", Type: "Patient", Body: []byte(tagged)},
		{Method: "POST", Type: "Observation", Body: fmt.Appendf(nil, `{"resourceType":"Observation","status":"final","code":{"text":%q},"subject":{"reference":%q}}`, tag, ref)},
	}
}

// seedLedger writes version 1 of Patient/ledger.
func seedLedger(t *testing.T, st *store.Store, tenant string) {
	t.Helper()
	if _, _, err := st.Update(context.Background(), tenant, "Patient", "ledger", patientBody("ledger", "seed"), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// crashState is what the crash tests read back after recovery.
type crashState struct {
	ledger       []string       // name of each ledger version, vid 1 first
	patients     map[string]int // current tagged Patients per tag
	patientRows  map[string]int // history rows of tagged Patients per tag
	observations map[string]int // current Observations per tag
}

// readCrashState reads every ledger version, tagged Patient and Observation,
// checking on the way that versions are gap-free and each Observation's
// subject is a stored Patient with the same tag.
func readCrashState(t *testing.T, st *store.Store, tenant string) *crashState {
	t.Helper()
	ctx := context.Background()
	s := &crashState{patients: map[string]int{}, patientRows: map[string]int{}, observations: map[string]int{}}
	var hq store.HistoryQuery
	hq.Type, hq.Count = "Patient", 100
	byID := map[string]string{} // tagged Patient id → tag
	for {
		page, err := st.History(ctx, tenant, hq)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			if e.ID == "ledger" {
				name, _ := marker(t, e.JSON)
				s.ledger = append([]string{name}, s.ledger...)
				continue
			}
			tag := crashTag(t, e.JSON)
			s.patientRows[tag]++
			byID[e.ID] = tag
		}
		if !page.HasNext {
			break
		}
		hq.After = page.Last
	}
	cur, err := st.Read(ctx, tenant, "Patient", "ledger")
	if err != nil {
		t.Fatal(err)
	}
	for vid := 1; vid <= len(s.ledger); vid++ { // history is gap-free
		if _, err := st.VRead(ctx, tenant, "Patient", "ledger", fmt.Sprint(vid)); err != nil {
			t.Fatalf("ledger version %d of %d: %v", vid, len(s.ledger), err)
		}
	}
	if name, _ := marker(t, cur.JSON); cur.VersionID != len(s.ledger) || name != s.ledger[len(s.ledger)-1] {
		t.Fatalf("ledger is at version %d but history holds %d versions", cur.VersionID, len(s.ledger))
	}
	for id, tag := range byID {
		if _, err := st.Read(ctx, tenant, "Patient", id); err == nil {
			s.patients[tag]++
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	for _, obs := range searchAll(t, st, tenant, "Observation", url.Values{}) {
		var o struct {
			Code    struct{ Text string } `json:"code"`
			Subject struct{ Reference string }
		}
		if err := json.Unmarshal(obs.JSON, &o); err != nil {
			t.Fatal(err)
		}
		id := strings.TrimPrefix(o.Subject.Reference, "Patient/")
		if byID[id] != o.Code.Text {
			t.Fatalf("Observation %s of %q refers to %q, not to a Patient of that transaction", obs.ID, o.Code.Text, o.Subject.Reference)
		}
		s.observations[o.Code.Text]++
	}
	return s
}

// crashTag is the urn:crash identifier value of a tagged Patient.
func crashTag(t *testing.T, body []byte) string {
	t.Helper()
	var p struct {
		Identifier []struct{ System, Value string } `json:"identifier"`
	}
	if err := json.Unmarshal(body, &p); err != nil || len(p.Identifier) != 1 || p.Identifier[0].System != "urn:crash" {
		t.Fatalf("not a tagged Patient: %s", body)
	}
	return p.Identifier[0].Value
}

// searchAll pages through a search of typ.
func searchAll(t *testing.T, st *store.Store, tenant, typ string, params url.Values) []*store.Resource {
	t.Helper()
	params.Set("_count", "100")
	q, err := db.Registry().Parse(typ, params, search.ParseOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	return storetest.SearchAll(t, st, tenant, q)
}

// committedTags checks that every transaction is wholly there or wholly
// absent and returns the tags of those that are there.
func (s *crashState) committedTags(t *testing.T) map[string]bool {
	t.Helper()
	committed := map[string]bool{}
	for _, tag := range s.ledger[1:] {
		committed[tag] = true
	}
	for tag, n := range s.patients {
		if !committed[tag] || n != 2 || s.patientRows[tag] != 2 {
			t.Errorf("transaction %s: %d current Patients and %d history rows, ledger version present: %v", tag, n, s.patientRows[tag], committed[tag])
		}
	}
	for tag := range s.patientRows {
		if !committed[tag] {
			t.Errorf("transaction %s left history rows but no ledger version", tag)
		}
	}
	for tag := range committed {
		if s.patients[tag] != 2 || s.observations[tag] != 1 {
			t.Errorf("transaction %s committed the ledger but has %d Patients and %d Observations", tag, s.patients[tag], s.observations[tag])
		}
	}
	for tag := range s.observations {
		if !committed[tag] {
			t.Errorf("transaction %s left an Observation but no ledger version", tag)
		}
	}
	return committed
}

func TestTransactionFaultPoints(t *testing.T) {
	points := []struct {
		point     string
		committed bool
	}{
		{store.FaultJournal, false},
		{store.FaultHistory, false},
		{store.FaultDecide, false},
		{store.FaultCurrent, true},
		{store.FaultDone, true},
	}
	for _, p := range points {
		t.Run(p.point, func(t *testing.T) {
			ctx := context.Background()
			var armed atomic.Bool
			opts := db.Options()
			opts.Fault = func(point string) error {
				if point == p.point && armed.Load() {
					return errors.New("simulated crash")
				}
				return nil
			}
			st := db.Open(t, opts)
			tenant := db.Tenant(t, st)
			seedLedger(t, st, tenant)
			armed.Store(true)
			if _, err := st.Transaction(ctx, tenant, crashOps("T1")); err == nil {
				t.Fatal("the transaction succeeded through a crash")
			}
			armed.Store(false)
			if _, err := st.VRead(ctx, tenant, "Patient", "ledger", "2"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("before recovery, version 2 of an unfinished transaction is readable: %v", err)
			}
			r, err := st.RecoverTenant(ctx, tenant, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := store.RecoveryReport{RolledBack: 1}
			if p.committed {
				want = store.RecoveryReport{RolledForward: 1}
			}
			if p.point == store.FaultJournal {
				want = store.RecoveryReport{} // nothing was written
			}
			if r != want {
				t.Fatalf("recovery %+v, want %+v", r, want)
			}
			tags := readCrashState(t, st, tenant).committedTags(t)
			if tags["T1"] != p.committed {
				t.Fatalf("after recovery the transaction is applied: %v, want %v", tags["T1"], p.committed)
			}
			// The store goes on: the same resources take the next transaction.
			if _, err := st.Transaction(ctx, tenant, crashOps("T2")); err != nil {
				t.Fatalf("transaction after recovery: %v", err)
			}
			if tags := readCrashState(t, st, tenant).committedTags(t); !tags["T2"] {
				t.Fatal("the transaction after recovery is missing")
			}
		})
	}
}

// TestRollBackDuringReadHidesTheRows: a reader that read a transaction's
// history rows, then found its journal entry gone because a roll-back
// finished in between, must not show those rows: they were deleted. Here
// the transaction stops before its commit point, and recovery rolls it
// back just as a read of one of its versions checks the journal.
func TestRollBackDuringReadHidesTheRows(t *testing.T) {
	ctx := context.Background()
	var crash, race atomic.Bool
	var st *store.Store
	var tenant string
	opts := db.Options()
	opts.Fault = func(point string) error {
		switch {
		case point == store.FaultDecide && crash.Load():
			return errors.New("simulated crash")
		case point == store.FaultReadJournal && race.CompareAndSwap(true, false):
			if _, err := st.RecoverTenant(ctx, tenant, 0); err != nil {
				t.Errorf("recover during the read: %v", err)
			}
		}
		return nil
	}
	st = db.Open(t, opts)
	tenant = db.Tenant(t, st)
	seedLedger(t, st, tenant)
	crash.Store(true)
	if _, err := st.Transaction(ctx, tenant, crashOps("T1")); err == nil {
		t.Fatal("the transaction succeeded through a crash")
	}
	crash.Store(false)
	race.Store(true)
	if r, err := st.VRead(ctx, tenant, "Patient", "ledger", "2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a version rolled back during its read is shown: %s (%v)", r.JSON, err)
	}
	if race.Load() {
		t.Fatal("the read did not check the journal")
	}
	if r, err := st.Read(ctx, tenant, "Patient", "ledger"); err != nil || r.VersionID != 1 {
		t.Fatalf("after the roll-back the ledger is %v, %v; want version 1", r, err)
	}
}
