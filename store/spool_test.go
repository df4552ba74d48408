package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"testing"

	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/storetest"
)

// spoolRecords are n records keyed in order, each the index of an
// AuditEvent (see auditEvent).
func spoolRecords(from, n int) []store.SpoolRecord {
	out := make([]store.SpoolRecord, n)
	for i := range out {
		out[i] = store.SpoolRecord{Key: fmt.Sprintf("rec-%04d", from+i), Data: []byte(strconv.Itoa(from + i))}
	}
	return out
}

// buildAuditEvent is the resource of a spooled record.
func buildAuditEvent(r store.SpoolRecord) ([]byte, error) {
	i, err := strconv.Atoi(string(r.Data))
	if err != nil {
		return nil, err
	}
	return auditEvent(i), nil
}

// auditEventIDs lists the ids of the tenant's AuditEvents.
func auditEventIDs(t *testing.T, st *store.Store, tenant string) map[string]bool {
	t.Helper()
	q, err := db.Registry().Parse("AuditEvent", url.Values{"_count": {"100"}}, search.ParseOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	page, err := st.Search(context.Background(), tenant, q)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range page.Entries {
		out[e.ID] = true
	}
	return out
}

// TestUnspoolTurnsRecordsIntoResourcesOldestFirst: each record becomes
// one AuditEvent whose id is its key, oldest first, and leaves the spool.
func TestUnspoolTurnsRecordsIntoResourcesOldestFirst(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	recs := spoolRecords(0, 5)
	if err := st.Spool(ctx, tenant, []store.SpoolRecord{recs[3], recs[4], recs[0]}); err != nil {
		t.Fatal(err)
	}
	if err := st.Spool(ctx, tenant, recs[1:3]); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Spooled(ctx, tenant); err != nil || n != 5 {
		t.Fatalf("spooled: %d %v, want 5", n, err)
	}
	taken, refused, err := st.Unspool(ctx, tenant, "AuditEvent", 3, buildAuditEvent)
	if err != nil || taken != 3 || len(refused) != 0 {
		t.Fatalf("unspool: %d taken, %v refused, %v", taken, refused, err)
	}
	ids := auditEventIDs(t, st, tenant)
	if len(ids) != 3 || !ids["rec-0000"] || !ids["rec-0001"] || !ids["rec-0002"] {
		t.Fatalf("the first round stored %v, want the three oldest", ids)
	}
	got, err := st.Read(ctx, tenant, "AuditEvent", "rec-0001")
	if err != nil || got.VersionID != 1 {
		t.Fatalf("read rec-0001: %v %+v", err, got)
	}
	if taken, _, err := st.Unspool(ctx, tenant, "AuditEvent", 3, buildAuditEvent); err != nil || taken != 2 {
		t.Fatalf("second round: %d %v, want 2", taken, err)
	}
	if taken, _, err := st.Unspool(ctx, tenant, "AuditEvent", 3, buildAuditEvent); err != nil || taken != 0 {
		t.Fatalf("empty spool: %d %v, want 0", taken, err)
	}
	if n, err := st.Spooled(ctx, tenant); err != nil || n != 0 {
		t.Fatalf("spooled after: %d %v", n, err)
	}
	if ids := auditEventIDs(t, st, tenant); len(ids) != 5 {
		t.Fatalf("%d AuditEvents, want 5", len(ids))
	}
}

// TestUnspoolAfterACrashStoresNoRecordTwice: records whose resources were
// stored before the spool lost them (a crash in between) leave the spool
// without a second version.
func TestUnspoolAfterACrashStoresNoRecordTwice(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	recs := spoolRecords(0, 4)
	if err := st.Spool(ctx, tenant, recs[:2]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Unspool(ctx, tenant, "AuditEvent", 10, buildAuditEvent); err != nil {
		t.Fatal(err)
	}
	// The two again, as a crash before their removal leaves them, and two new.
	if err := st.Spool(ctx, tenant, recs); err != nil {
		t.Fatal(err)
	}
	taken, refused, err := st.Unspool(ctx, tenant, "AuditEvent", 10, buildAuditEvent)
	if err != nil || taken != 4 || len(refused) != 0 {
		t.Fatalf("unspool: %d taken, %v refused, %v", taken, refused, err)
	}
	for _, r := range recs {
		hist, err := st.History(ctx, tenant, store.HistoryQuery{Type: "AuditEvent", ID: r.Key, Count: 10})
		if err != nil || len(hist.Entries) != 1 {
			t.Fatalf("history of %s: %v, %d versions, want 1", r.Key, err, len(hist.Entries))
		}
	}
}

// TestUnspoolSetsAsideWhatIsRefused: a record the caller cannot build and
// one whose resource the store refuses leave the spool, reported; the
// others are stored.
func TestUnspoolSetsAsideWhatIsRefused(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	recs := spoolRecords(0, 4)
	recs[1].Data = []byte("not a number")
	recs[2].Data = []byte("-1")
	build := func(r store.SpoolRecord) ([]byte, error) {
		if string(r.Data) == "-1" {
			return []byte(`{"resourceType":"Patient"}`), nil
		}
		return buildAuditEvent(r)
	}
	if err := st.Spool(ctx, tenant, recs); err != nil {
		t.Fatal(err)
	}
	taken, refused, err := st.Unspool(ctx, tenant, "AuditEvent", 10, build)
	if err != nil || taken != 4 || len(refused) != 2 {
		t.Fatalf("unspool: %d taken, %v refused, %v", taken, refused, err)
	}
	if refused[0].Record.Key != "rec-0001" || refused[1].Record.Key != "rec-0002" || refused[0].Err == nil || refused[1].Err == nil {
		t.Fatalf("refused %+v", refused)
	}
	ids := auditEventIDs(t, st, tenant)
	if len(ids) != 2 || !ids["rec-0000"] || !ids["rec-0003"] {
		t.Fatalf("stored %v, want rec-0000 and rec-0003", ids)
	}
	if n, _ := st.Spooled(ctx, tenant); n != 0 {
		t.Fatalf("%d records left in the spool", n)
	}
}

// TestSpoolRefusesBadKeys: a key that cannot be a resource id is refused
// and nothing of the call is spooled.
func TestSpoolRefusesBadKeys(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	recs := spoolRecords(0, 2)
	recs[1].Key = "bad key/with slash"
	if err := st.Spool(ctx, tenant, recs); err == nil {
		t.Fatal("a bad key was spooled")
	}
	if n, err := st.Spooled(ctx, tenant); err != nil || n != 0 {
		t.Fatalf("spooled after a refusal: %d %v", n, err)
	}
	if err := st.Spool(ctx, "No Such Tenant", spoolRecords(0, 1)); err == nil {
		t.Fatal("records spooled for a tenant name that cannot exist")
	}
}

// TestUnspoolOfADeletedTenantDropsItsRecords: a tenant deleted with
// records spooled has them dropped, not stored.
func TestUnspoolOfADeletedTenantDropsItsRecords(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	if err := st.DeleteTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	if err := st.Spool(ctx, tenant, spoolRecords(0, 2)); err != nil { // a write that raced the deletion
		t.Fatal(err)
	}
	taken, _, err := st.Unspool(ctx, tenant, "AuditEvent", 10, buildAuditEvent)
	if !errors.Is(err, store.ErrTenantNotFound) || taken != 2 {
		t.Fatalf("unspool of a deleted tenant: %d %v", taken, err)
	}
	if n, err := st.Spooled(ctx, tenant); err != nil || n != 0 {
		t.Fatalf("spooled after: %d %v", n, err)
	}
}

// BenchmarkSpoolAuditRecords spools records of the audit trail's size 200
// at a time, as its writers do (compare BenchmarkAppendAuditEvents, what
// indexing each costs later): per record, with the process's CPU time.
func BenchmarkSpoolAuditRecords(b *testing.B) {
	ctx := context.Background()
	st := db.Open(b, db.Options())
	tenant := db.Tenant(b, st)
	const batch = 200
	data := []byte(`{"t":1767323045000000000,"r":"5f0c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f","m":"GET","p":"/fhir/r4/Patient/0b6c1f7e-9d2a-4f3b-8c4d-5e6f7a8b9c0d","q":"_format=json","s":200,"ty":"Patient","id":"0b6c1f7e-9d2a-4f3b-8c4d-5e6f7a8b9c0d","su":"dev","is":"urn:fhirstore:dev","a":"127.0.0.1"}`)
	recs := make([]store.SpoolRecord, 0, batch)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := storetest.ProcessCPU(b)
	for i := 0; i < b.N; i++ {
		recs = append(recs, store.SpoolRecord{Key: fmt.Sprintf("0190a000-0000-7000-8000-%012d", i), Data: data})
		if len(recs) == batch || i == b.N-1 {
			if err := st.Spool(ctx, tenant, recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	b.ReportMetric(float64((storetest.ProcessCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/record")
}
