package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"fhirstore/store"
)

// Bodies the fuzzer mutates: @ID@ becomes the op's id, @REF@ the subject
// the op's shape picks.
const (
	fuzzPatient     = `{"resourceType":"Patient","id":"@ID@","active":true,"name":[{"family":"Chalmers","given":["Peter"]}],"birthDate":"1974-12-25"}`
	fuzzObservation = `{"resourceType":"Observation","id":"@ID@","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},"subject":{"reference":"@REF@"},"valueQuantity":{"value":67.50,"unit":"kg"}}`
	fuzzPatch       = `[{"op":"add","path":"/language","value":"en"}]`
)

// fuzzIDs are the resources the transactions fight over; "" leaves the id
// to the server (POST) or to Condition, and fails the other methods.
var fuzzIDs = []string{"a", "b", "c", ""}

var fuzzTypes = []string{"Patient", "Observation"}

var fuzzMethods = []string{"POST", "PUT", "DELETE", "PATCH"}

// fuzzFullURL names op i of a transaction in its Bundle.
func fuzzFullURL(i int) string { return fmt.Sprintf("urn:uuid:00000000-0000-4000-8000-%012d", i) }

// fuzzOps derives one to four ops from shape: byte 0 is the count, then
// two bytes per op (missing bytes are zero).
//
//	a: bits 0-1 method, 2 type, 3-4 id, 5 use the other type's body,
//	   6 set a fullUrl, 7 lenient
//	b: bits 0-1 Observation subject (Patient/a, Patient/b, op 0's fullUrl,
//	   a missing Patient), 2-3 If-Match version (0: none), 4 select by
//	   _id criteria instead of the id, 5 If-Match: *
func fuzzOps(shape, patient, observation, patch []byte) []store.Op {
	at := func(i int) byte {
		if i < len(shape) {
			return shape[i]
		}
		return 0
	}
	refs := []string{"Patient/a", "Patient/b", fuzzFullURL(0), "Patient/missing"}
	n := 1 + int(at(0))%4
	ops := make([]store.Op, n)
	for i := range ops {
		a, b := at(1+2*i), at(2+2*i)
		op := store.Op{
			Method: fuzzMethods[a&3],
			Type:   fuzzTypes[a>>2&1],
			ID:     fuzzIDs[a>>3&3],
		}
		bodyID := op.ID
		if bodyID == "" {
			bodyID = "new"
		}
		body := patient
		if (op.Type == "Observation") != (a>>5&1 == 1) {
			body = observation
		}
		body = bytes.ReplaceAll(body, []byte("@ID@"), []byte(bodyID))
		body = bytes.ReplaceAll(body, []byte("@REF@"), []byte(refs[b&3]))
		if op.Method == "PATCH" {
			body = patch
		}
		if op.Method != "DELETE" {
			op.Body = body
		}
		if a>>6&1 == 1 {
			op.FullURL = fuzzFullURL(i)
		}
		op.Options.Lenient = a>>7&1 == 1
		if v := int(b >> 2 & 3); v > 0 {
			op.Options.IfMatch = &v
		}
		if b>>4&1 == 1 && op.ID != "" {
			op.Condition, op.ID = "_id="+op.ID, ""
		}
		op.Options.IfExists = b>>5&1 == 1
		ops[i] = op
	}
	return ops
}

// fuzzKinds are the failures a transaction may report; anything else
// would be answered 500.
var fuzzKinds = []error{store.ErrNotFound, store.ErrGone, store.ErrConflict, store.ErrPreconditionFailed,
	store.ErrPatchFailed, store.ErrInvalidID, store.ErrUnknownType}

// FuzzTransaction runs small transactions of creates, updates, deletes and
// patches on a handful of resources, with mutated and invalid bodies, and
// checks that each is all or nothing:
//
//   - on success every written result is the current version when read
//     back (a deletion reads as gone), a conditional create's match too,
//     and the history grew by exactly the versions written;
//   - on failure the error is an *OpError of a kind the HTTP layer maps to
//     a client status, and the store is unchanged: the same history total
//     and newest entry, the same current version (or absence) of each
//     resource of the tiny id set.
//
// One tenant serves every input; the fingerprint makes earlier inputs
// irrelevant.
//
// Run: go test ./store -run '^$' -fuzz '^FuzzTransaction$' -fuzztime 1m
func FuzzTransaction(f *testing.F) {
	st := db.Open(f, db.Options())
	tenant := db.Tenant(f, st)
	p, o, x := []byte(fuzzPatient), []byte(fuzzObservation), []byte(fuzzPatch)
	for _, shape := range [][]byte{
		{0, 0x00},                   // POST Patient
		{1, 0x01, 0x00, 0x05, 0x00}, // PUT Patient/a, PUT Observation/a → Patient/a
		{1, 0x40, 0x00, 0x04, 0x02}, // POST Patient (fullUrl), POST Observation → its fullUrl
		{0, 0x03},                   // PATCH Patient/a
		{0, 0x02},                   // DELETE Patient/a
		{1, 0x01, 0x00, 0x01, 0x00}, // PUT Patient/a twice: rejected
		{3, 0x09, 0x00, 0x0d, 0x01, 0x06, 0x00, 0x01, 0x00}, // PUT b, PUT Observation/b → Patient/b, DELETE Observation/a, PUT a
		{1, 0x00, 0x10, 0x09, 0x10},                         // conditional create _id=a, conditional update _id=b
		{0, 0x21},                                           // PUT Patient/a with the Observation body: rejected
		{2, 0x01, 0x00, 0x02, 0x00, 0x03},                   // PUT, DELETE and PATCH of Patient/a: rejected
		{0, 0x1b, 0x20},                                     // PATCH Patient/"" : no id
	} {
		f.Add(shape, p, o, x)
	}
	f.Add([]byte{1, 0x01, 0x00, 0x0d, 0x00}, p, []byte(`{"resourceType":"Observation"`), x)
	f.Add([]byte{0, 0x01}, []byte(`{"resourceType":"Patient","id":"@ID@","birthDate":"1974-13-45"}`), o, x)
	f.Add([]byte{0, 0x03}, p, o, []byte(`[{"op":"test","path":"/active","value":false}]`))
	f.Add([]byte{0, 0x03}, p, o, []byte(`[{"op":"remove","path":"/id"}]`))
	f.Add([]byte{0, 0x01}, []byte(`{"resourceType":"Patient","id":"@ID@","a":1.50,"$x":1}`), o, x)
	// This process is the tenant's only writer and runs inputs one at a
	// time, so one input's final state is the next one's initial state.
	var last *state
	f.Fuzz(func(t *testing.T, shape, patient, observation, patch []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ops := fuzzOps(shape, patient, observation, patch)
		if last == nil {
			s := fingerprint(ctx, t, st, tenant)
			last = &s
		}
		before := *last
		last = nil // unknown until this input finishes
		results, err := st.Transaction(ctx, tenant, ops)
		after := fingerprint(ctx, t, st, tenant)
		last = &after
		t.Logf("%d ops, error %v", len(ops), err)
		if err != nil {
			checkFailure(t, err)
			if before != after {
				t.Fatalf("failed transaction %+v (%v) changed the store:\nbefore %s\nafter  %s", ops, err, before, after)
			}
			return
		}
		if len(results) != len(ops) {
			t.Fatalf("%d results for %d ops", len(results), len(ops))
		}
		written := 0
		for i, r := range results {
			if err := checkStored(ctx, st, tenant, ops[i], r); err != nil {
				t.Fatalf("op %d %+v: %v", i, ops[i], err)
			}
			if r.Outcome == store.Created || r.Outcome == store.Updated || r.Outcome == store.Deleted {
				written++
			}
		}
		if after.total != before.total+int64(written) {
			t.Fatalf("history total %d → %d after writing %d versions", before.total, after.total, written)
		}
	})
}

// checkFailure accepts the failures the server answers with a 4xx.
func checkFailure(t *testing.T, err error) {
	t.Helper()
	var opErr *store.OpError
	if !errors.As(err, &opErr) {
		t.Fatalf("failure %T %v names no entry", err, err)
	}
	var inv *store.InvalidError
	if errors.As(err, &inv) {
		return
	}
	for _, kind := range fuzzKinds {
		if errors.Is(err, kind) {
			return
		}
	}
	t.Fatalf("failure of no known kind (a 500): %v", err)
}

// checkStored reads back what one op's result says it did.
func checkStored(ctx context.Context, st *store.Store, tenant string, op store.Op, r store.Result) error {
	if r.Outcome == store.NoChange {
		return nil
	}
	if r.Resource == nil {
		return fmt.Errorf("outcome %d without a resource", r.Outcome)
	}
	got, err := st.Read(ctx, tenant, op.Type, r.Resource.ID)
	switch {
	case r.Outcome == store.Deleted:
		if !errors.Is(err, store.ErrGone) || got == nil || got.VersionID != r.Resource.VersionID {
			return fmt.Errorf("deleted as version %d, read back %+v, %v", r.Resource.VersionID, got, err)
		}
	case err != nil:
		return fmt.Errorf("outcome %d, read back: %v", r.Outcome, err)
	case got.VersionID != r.Resource.VersionID || !bytes.Equal(got.JSON, r.Resource.JSON):
		return fmt.Errorf("outcome %d wrote version %d %s, read back version %d %s",
			r.Outcome, r.Resource.VersionID, r.Resource.JSON, got.VersionID, got.JSON)
	}
	return nil
}

// state is what a failed transaction must leave as it was.
type state struct {
	total   int64
	newest  string
	current string
}

func (s state) String() string {
	return "history " + strconv.FormatInt(s.total, 10) + " newest " + s.newest + "; " + s.current
}

func fingerprint(ctx context.Context, t *testing.T, st *store.Store, tenant string) state {
	t.Helper()
	page, err := st.History(ctx, tenant, store.HistoryQuery{Count: 1})
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	s := state{total: page.Total}
	if page.First != nil {
		s.newest = page.First.Key
	}
	for _, typ := range fuzzTypes {
		for _, id := range fuzzIDs[:3] {
			res, err := st.Read(ctx, tenant, typ, id)
			switch {
			case errors.Is(err, store.ErrNotFound):
				s.current += typ + "/" + id + " none; "
			case errors.Is(err, store.ErrGone):
				s.current += fmt.Sprintf("%s/%s deleted at %d; ", typ, id, res.VersionID)
			case err != nil:
				t.Fatalf("read %s/%s: %v", typ, id, err)
			default:
				s.current += fmt.Sprintf("%s/%s %d %s; ", typ, id, res.VersionID, res.JSON)
			}
		}
	}
	return s
}
