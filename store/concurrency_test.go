package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"fhirstore/search"
	"fhirstore/store"
)

// patientBody is a Patient whose name text marks the writer.
func patientBody(id, marker string) []byte {
	if id == "" {
		return fmt.Appendf(nil, `{"resourceType":"Patient","active":true,"name":[{"text":%q}]}`, marker)
	}
	return fmt.Appendf(nil, `{"resourceType":"Patient","id":%q,"active":true,"name":[{"text":%q}]}`, id, marker)
}

// marker returns the name text and meta.versionId of a stored Patient.
func marker(t *testing.T, body []byte) (name, versionID string) {
	t.Helper()
	var p struct {
		Name []struct {
			Text string `json:"text"`
		} `json:"name"`
		Meta struct {
			VersionID string `json:"versionId"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("stored body %s: %v", body, err)
	}
	if len(p.Name) != 1 {
		t.Fatalf("stored body without a name: %s", body)
	}
	return p.Name[0].Text, p.Meta.VersionID
}

type outcome struct {
	marker  string
	res     *store.Resource
	created bool
	err     error
}

// raceUpdates runs n Updates of Patient/id at once, released together, and
// returns their outcomes.
func raceUpdates(st *store.Store, tenant, id string, n int, round int, ifMatch *int) []outcome {
	ctx := context.Background()
	out := make([]outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		out[i].marker = fmt.Sprintf("round %d writer %d", round, i)
		wg.Go(func() {
			<-start
			out[i].res, out[i].created, out[i].err = st.Update(ctx, tenant, "Patient", id, patientBody(id, out[i].marker), store.WriteOptions{IfMatch: ifMatch})
		})
	}
	close(start)
	wg.Wait()
	return out
}

// checkHistory verifies that Patient/id has versions 1..len(want) without
// gaps, each holding the body its writer sent, ordered in time, and that
// Read returns the last one.
func checkHistory(t *testing.T, st *store.Store, tenant, id string, want map[int]string) {
	t.Helper()
	ctx := context.Background()
	n := len(want)
	page, err := st.History(ctx, tenant, store.HistoryQuery{Type: "Patient", ID: id, Count: n + 10})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != int64(n) || len(page.Entries) != n || page.HasNext {
		t.Fatalf("history: total %d, %d entries, hasNext %v; want %d versions", page.Total, len(page.Entries), page.HasNext, n)
	}
	for i, e := range page.Entries { // newest first
		vid := n - i
		if e.VersionID != vid {
			t.Fatalf("history entry %d has vid %d, want %d (vids %v)", i, e.VersionID, vid, vids(page.Entries))
		}
		name, metaVID := marker(t, e.JSON)
		if name != want[vid] || metaVID != fmt.Sprint(vid) {
			t.Errorf("history vid %d holds %q (meta.versionId %s), want %q", vid, name, metaVID, want[vid])
		}
		if i > 0 && !page.Entries[i-1].LastUpdated.After(e.LastUpdated) {
			t.Errorf("vid %d lastUpdated %s not after vid %d's %s", vid+1, page.Entries[i-1].LastUpdated, vid, e.LastUpdated)
		}
		v, err := st.VRead(ctx, tenant, "Patient", id, fmt.Sprint(vid))
		if err != nil {
			t.Fatalf("vread %d: %v", vid, err)
		}
		if string(v.JSON) != string(e.JSON) {
			t.Errorf("vread %d differs from history:\n%s\n%s", vid, v.JSON, e.JSON)
		}
	}
	cur, err := st.Read(ctx, tenant, "Patient", id)
	if err != nil {
		t.Fatal(err)
	}
	if cur.VersionID != n {
		t.Fatalf("read returns vid %d, want the highest %d", cur.VersionID, n)
	}
	if name, _ := marker(t, cur.JSON); name != want[n] {
		t.Fatalf("read returns %q, want %q", name, want[n])
	}
}

func vids(rs []*store.Resource) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.VersionID)
	}
	return out
}

func TestConcurrentUpdatesOfOneResource(t *testing.T) {
	for _, n := range []int{2, 8, 100} {
		rounds := 5
		if n > 10 {
			rounds = 2 // 100 writers each round already
		}
		for _, withIfMatch := range []bool{false, true} {
			t.Run(fmt.Sprintf("writers=%d/ifMatch=%v", n, withIfMatch), func(t *testing.T) {
				ctx := context.Background()
				st := db.Open(t, db.Options())
				tenant := db.Tenant(t, st)
				const id = "race"
				first, created, err := st.Update(ctx, tenant, "Patient", id, patientBody(id, "initial"), store.WriteOptions{})
				if err != nil || !created || first.VersionID != 1 {
					t.Fatalf("initial update: %v created=%v", err, created)
				}
				want := map[int]string{1: "initial"}
				for round := range rounds {
					base := len(want)
					var ifMatch *int
					if withIfMatch {
						ifMatch = &base
					}
					var wins []outcome
					for _, o := range raceUpdates(st, tenant, id, n, round, ifMatch) {
						switch {
						case o.err == nil:
							wins = append(wins, o)
						case withIfMatch && errors.Is(o.err, store.ErrPreconditionFailed):
						case !withIfMatch && errors.Is(o.err, store.ErrConflict):
						default:
							t.Errorf("%s: unexpected error %v", o.marker, o.err)
						}
					}
					if len(wins) == 0 {
						t.Fatalf("round %d: no writer succeeded", round)
					}
					if withIfMatch && len(wins) != 1 {
						t.Fatalf("round %d: %d writers succeeded with If-Match %d, want exactly 1", round, len(wins), base)
					}
					for _, w := range wins {
						vid := w.res.VersionID
						if w.created {
							t.Errorf("%s: created=true for an existing resource", w.marker)
						}
						if vid <= base {
							t.Errorf("%s: vid %d not above the starting version %d", w.marker, vid, base)
						}
						if other, dup := want[vid]; dup {
							t.Fatalf("vid %d given to both %q and %q", vid, other, w.marker)
						}
						want[vid] = w.marker
						if name, metaVID := marker(t, w.res.JSON); name != w.marker || metaVID != fmt.Sprint(vid) {
							t.Errorf("%s: returned body %s", w.marker, w.res.JSON)
						}
					}
					t.Logf("round %d: %d of %d writers succeeded", round, len(wins), n)
				}
				checkHistory(t, st, tenant, id, want)
			})
		}
	}
}

// TestConcurrentCreateByUpdate races Updates of an id that does not exist
// yet: exactly one of those that saw no resource creates it.
func TestConcurrentCreateByUpdate(t *testing.T) {
	for _, n := range []int{2, 8} {
		t.Run(fmt.Sprintf("writers=%d", n), func(t *testing.T) {
			st := db.Open(t, db.Options())
			tenant := db.Tenant(t, st)
			const id = "new"
			want := map[int]string{}
			creates := 0
			for _, o := range raceUpdates(st, tenant, id, n, 0, nil) {
				switch {
				case o.err == nil:
					if o.created {
						creates++
						if o.res.VersionID != 1 {
							t.Errorf("%s: created with vid %d", o.marker, o.res.VersionID)
						}
					}
					if other, dup := want[o.res.VersionID]; dup {
						t.Fatalf("vid %d given to both %q and %q", o.res.VersionID, other, o.marker)
					}
					want[o.res.VersionID] = o.marker
				case errors.Is(o.err, store.ErrConflict):
				default:
					t.Errorf("%s: unexpected error %v", o.marker, o.err)
				}
			}
			if creates != 1 {
				t.Fatalf("%d writers report created, want 1", creates)
			}
			checkHistory(t, st, tenant, id, want)
		})
	}
}

// TestConcurrentDeletes: of n simultaneous deletes exactly one records the
// deletion; the others see a conflict or the resource already gone.
func TestConcurrentDeletes(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	const id, n = "del", 8
	if _, _, err := st.Update(ctx, tenant, "Patient", id, patientBody(id, "x"), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = st.Delete(ctx, tenant, "Patient", id, store.WriteOptions{})
		})
	}
	close(start)
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrGone):
		default:
			t.Errorf("deleter %d: %v", i, err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d deletes succeeded, want 1", wins)
	}
	res, err := st.Read(ctx, tenant, "Patient", id)
	if !errors.Is(err, store.ErrGone) || res == nil || res.VersionID != 2 || !res.Deleted {
		t.Fatalf("read after delete: %+v %v", res, err)
	}
	page, err := st.History(ctx, tenant, store.HistoryQuery{Type: "Patient", ID: id, Count: 10})
	if err != nil || page.Total != 2 {
		t.Fatalf("history after delete: %v total %d", err, page.Total)
	}
}

func TestTenantIsolation(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	a, b := db.Tenant(t, st), db.Tenant(t, st)
	const id = "same"

	for _, tenant := range []string{a, b} {
		res, created, err := st.Update(ctx, tenant, "Patient", id, patientBody(id, "in "+tenant), store.WriteOptions{})
		if err != nil || !created || res.VersionID != 1 {
			t.Fatalf("tenant %s: first update %+v created=%v %v", tenant, res, created, err)
		}
	}
	if res, _, err := st.Update(ctx, a, "Patient", id, patientBody(id, "in "+a+" again"), store.WriteOptions{}); err != nil || res.VersionID != 2 {
		t.Fatalf("second update in %s: %+v %v", a, res, err)
	}
	one := 1
	if res, _, err := st.Update(ctx, b, "Patient", id, patientBody(id, "in "+b+" again"), store.WriteOptions{IfMatch: &one}); err != nil || res.VersionID != 2 {
		t.Fatalf("If-Match 1 in %s must see its own version 1: %+v %v", b, res, err)
	}
	if res, _, err := st.Update(ctx, b, "Patient", id, patientBody(id, "third"), store.WriteOptions{}); err != nil || res.VersionID != 3 {
		t.Fatalf("third update in %s: %+v %v", b, res, err)
	}
	if _, err := st.Delete(ctx, a, "Patient", id, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	if _, err := st.Read(ctx, a, "Patient", id); !errors.Is(err, store.ErrGone) {
		t.Fatalf("read in %s after delete: %v", a, err)
	}
	got, err := st.Read(ctx, b, "Patient", id)
	if err != nil || got.VersionID != 3 {
		t.Fatalf("read in %s after delete in %s: %+v %v", b, a, got, err)
	}
	if name, _ := marker(t, got.JSON); name != "third" {
		t.Fatalf("read in %s: %q", b, name)
	}
	v, err := st.VRead(ctx, a, "Patient", id, "2")
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := marker(t, v.JSON); name != "in "+a+" again" {
		t.Fatalf("vread 2 in %s: %q", a, name)
	}
	wantHistory := map[string][]string{ // name markers, newest first; "" for the deletion
		a: {"", "in " + a + " again", "in " + a},
		b: {"third", "in " + b + " again", "in " + b},
	}
	for tenant, want := range wantHistory {
		for _, q := range []store.HistoryQuery{{Type: "Patient", ID: id}, {Type: "Patient"}, {}} {
			page, err := st.History(ctx, tenant, q)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range page.Entries {
				name := ""
				if e.JSON != nil {
					name, _ = marker(t, e.JSON)
				}
				names = append(names, name)
			}
			if page.Total != int64(len(want)) || !slices.Equal(names, want) {
				t.Errorf("history %+v in %s: total %d, %q; want %q", q, tenant, page.Total, names, want)
			}
		}
	}

	created, err := st.Create(ctx, a, "Patient", patientBody("", "created in "+a), store.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Read(ctx, b, "Patient", created.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("resource created in %s visible in %s: %v", a, b, err)
	}
	if _, err := st.VRead(ctx, b, "Patient", created.ID, "1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("version created in %s visible in %s: %v", a, b, err)
	}
	if _, err := st.Delete(ctx, b, "Patient", created.ID, store.WriteOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete in %s of a resource of %s: %v", b, a, err)
	}
}

func TestValidateTenantName(t *testing.T) {
	valid := []string{"demo", "a", "0", "acme-1", "a--b", "9lives", strings.Repeat("a", 32), "a" + strings.Repeat("-", 30) + "z"}
	invalid := []string{"", "-a", "a-", "-", "A", "Demo", "a_b", "a.b", "a b", " a", "a\n", "é", strings.Repeat("a", 33),
		"system", "admin", "local", "config", "x\x00", "a/b", "a$b"}
	for _, name := range valid {
		if err := store.ValidateTenantName(name); err != nil {
			t.Errorf("ValidateTenantName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range invalid {
		err := store.ValidateTenantName(name)
		if !errors.Is(err, store.ErrInvalidTenant) {
			t.Errorf("ValidateTenantName(%q) = %v, want ErrInvalidTenant", name, err)
		}
	}
}

func TestTenantLifecycle(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	const name = "lifecycle-1"
	t.Cleanup(func() { _ = st.DeleteTenant(context.Background(), name) })

	listed := func() bool {
		t.Helper()
		ts, err := st.ListTenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(ts, func(x, y store.Tenant) int { return strings.Compare(x.Name, y.Name) }) {
			t.Errorf("tenants not sorted: %v", ts)
		}
		return slices.ContainsFunc(ts, func(x store.Tenant) bool { return x.Name == name })
	}
	exists := func() bool {
		t.Helper()
		ok, err := st.TenantExists(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	if listed() || exists() {
		t.Fatalf("tenant %s exists before it was created", name)
	}
	if err := st.CreateTenant(ctx, name); err != nil {
		t.Fatal(err)
	}
	if !listed() || !exists() {
		t.Fatalf("tenant %s missing after create", name)
	}
	if err := st.CreateTenant(ctx, name); !errors.Is(err, store.ErrTenantExists) {
		t.Fatalf("second create: %v", err)
	}
	if err := st.EnsureTenant(ctx, name); err != nil {
		t.Fatalf("ensure existing tenant: %v", err)
	}

	res, err := st.Create(ctx, name, "Patient", patientBody("", "doomed"), store.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Update(ctx, name, "Patient", "fixed", patientBody("fixed", "doomed too"), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := st.DeleteTenant(ctx, name); err != nil {
		t.Fatal(err)
	}
	if listed() || exists() {
		t.Fatalf("tenant %s still there after delete", name)
	}
	if err := st.DeleteTenant(ctx, name); !errors.Is(err, store.ErrTenantNotFound) {
		t.Fatalf("second delete: %v", err)
	}

	if err := st.CreateTenant(ctx, name); err != nil {
		t.Fatalf("re-create: %v", err)
	}
	for _, id := range []string{res.ID, "fixed"} {
		if _, err := st.Read(ctx, name, "Patient", id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("read %s in re-created tenant: %v, want ErrNotFound", id, err)
		}
		if _, err := st.VRead(ctx, name, "Patient", id, "1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("vread %s/1 in re-created tenant: %v, want ErrNotFound", id, err)
		}
	}
	page, err := st.History(ctx, name, store.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 0 || len(page.Entries) != 0 {
		t.Fatalf("history of re-created tenant: %d versions", page.Total)
	}
	// The re-created tenant works: ids start over.
	if upd, created, err := st.Update(ctx, name, "Patient", "fixed", patientBody("fixed", "reborn"), store.WriteOptions{}); err != nil || !created || upd.VersionID != 1 {
		t.Fatalf("update in re-created tenant: %+v created=%v %v", upd, created, err)
	}

	for _, bad := range []string{"", "Bad", "admin", "system", "x\x00"} {
		if err := st.CreateTenant(ctx, bad); !errors.Is(err, store.ErrInvalidTenant) {
			t.Errorf("CreateTenant(%q) = %v, want ErrInvalidTenant", bad, err)
		}
		if err := st.DeleteTenant(ctx, bad); !errors.Is(err, store.ErrInvalidTenant) {
			t.Errorf("DeleteTenant(%q) = %v, want ErrInvalidTenant", bad, err)
		}
		if ok, err := st.TenantExists(ctx, bad); ok || err != nil {
			t.Errorf("TenantExists(%q) = %v, %v", bad, ok, err)
		}
	}
}

// The repair path (a writer that stopped between the history insert and the
// current-row write) cannot be produced through the exported API alone: the
// two writes happen inside one unexported call with no hook in between. It
// is reached only indirectly, by the losers of the races above.

// TestLargeTransactionsTakeTurns: large transactions committed together
// are each stored whole, entries referring to one another rewritten; one
// that fails validation or whose caller gives up fails alone and leaves
// the others and the next ones their turn.
func TestLargeTransactionsTakeTurns(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	const entries = 100
	ops := func(name string, bad int) []store.Op {
		var out []store.Op
		for i := range entries {
			body := patientBody("", fmt.Sprintf("%s-%d", name, i))
			if i == bad {
				body = []byte(`{"resourceType":"Patient","active":"not a boolean"}`)
			}
			out = append(out, store.Op{Method: "POST", Type: "Patient", Body: body, FullURL: fmt.Sprintf("urn:uuid:%s-%d", name, i)})
		}
		out = append(out, store.Op{Method: "POST", Type: "Observation", FullURL: "urn:uuid:obs-" + name,
			Body: fmt.Appendf(nil, `{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:%s-0"}}`, name)})
		return out
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		bad  int
	}{{"a", ctx, -1}, {"b", ctx, 80}, {"c", cancelled, -1}, {"d", ctx, -1}, {"e", ctx, -1}}
	errs := make([]error, len(cases))
	results := make([][]store.Result, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() { results[i], errs[i] = st.Transaction(c.ctx, tenant, ops(c.name, c.bad)) })
	}
	wg.Wait()
	var opErr *store.OpError
	if !errors.As(errs[1], &opErr) || opErr.Index != 80 {
		t.Errorf("the transaction with an invalid entry 80: %v", errs[1])
	}
	if !errors.Is(errs[2], context.Canceled) {
		t.Errorf("the transaction whose caller gave up: %v", errs[2])
	}
	for _, i := range []int{0, 3, 4} {
		if errs[i] != nil {
			t.Fatalf("transaction %s: %v", cases[i].name, errs[i])
		}
		first, obs := results[i][0].Resource, results[i][entries].Resource
		if want := `"reference":"Patient/` + first.ID + `"`; !strings.Contains(string(obs.JSON), want) {
			t.Errorf("transaction %s: Observation %s, want its subject rewritten to %s", cases[i].name, obs.JSON, want)
		}
	}
	if _, err := st.Transaction(ctx, tenant, ops("after", -1)); err != nil {
		t.Fatalf("a large transaction after them: %v", err)
	}
	for _, name := range []string{"a", "b", "c", "d", "e", "after"} {
		want := int64(entries)
		if name == "b" || name == "c" {
			want = 0
		}
		q, err := db.Registry().Parse("Patient", url.Values{"name": {name + "-"}}, search.ParseOptions{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		q.Total = "accurate"
		page, err := st.Search(ctx, tenant, q)
		if err != nil || page.Total != want {
			t.Errorf("Patients of transaction %s: %v (%v), want %d", name, page.Total, err, want)
		}
	}
}

// TestBatchEntriesKeepTheirPlaces: a batch's entries, applied several at
// a time, each answer at their own index, a failing one alone; entries
// that name one resource are applied in their order.
func TestBatchEntriesKeepTheirPlaces(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	var ops []store.Op
	for i := range 60 {
		body := patientBody("", fmt.Sprintf("entry-%d", i))
		if i%20 == 7 {
			body = []byte(`{"resourceType":"Patient","active":"not a boolean"}`)
		}
		ops = append(ops, store.Op{Method: "POST", Type: "Patient", Body: body})
	}
	results, errs := st.Batch(ctx, tenant, ops)
	for i := range ops {
		if i%20 == 7 {
			if errs[i] == nil {
				t.Errorf("entry %d (invalid) succeeded", i)
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("entry %d: %v", i, errs[i])
		}
		if name, _ := marker(t, results[i].Resource.JSON); name != fmt.Sprintf("entry-%d", i) {
			t.Errorf("entry %d answered with %s", i, name)
		}
	}

	var same []store.Op
	for i := range 12 {
		same = append(same, store.Op{Method: "PUT", Type: "Patient", ID: "one", Body: patientBody("one", fmt.Sprint("v", i+1))})
	}
	results, errs = st.Batch(ctx, tenant, same)
	want := map[int]string{}
	for i := range same {
		if errs[i] != nil || results[i].Resource.VersionID != i+1 {
			t.Fatalf("update %d of one resource: version %v (%v), want %d", i, results[i].Resource, errs[i], i+1)
		}
		want[i+1] = fmt.Sprint("v", i+1)
	}
	checkHistory(t, st, tenant, "one", want)
}
