package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/storetest"
)

// auditEvent is an AuditEvent of the shape the server's trail records.
func auditEvent(i int) []byte {
	return []byte(fmt.Sprintf(`{"resourceType":"AuditEvent",`+
		`"type":{"system":"http://terminology.hl7.org/CodeSystem/audit-event-type","code":"rest","display":"RESTful Operation"},`+
		`"subtype":[{"system":"http://hl7.org/fhir/restful-interaction","code":"read"}],"action":"R","recorded":"2024-01-01T00:00:%02d.000Z",`+
		`"outcome":"0","outcomeDesc":"200 OK","agent":[{"who":{"identifier":{"system":"urn:fhirstore:subject","value":"dev"},"display":"dev"},`+
		`"requestor":true,"name":"dev","network":{"address":"127.0.0.1","type":"2"}}],`+
		`"source":{"site":"demo","observer":{"display":"fhirstore"},"type":[{"system":"http://terminology.hl7.org/CodeSystem/security-source-type","code":"4","display":"Application Server"}]},`+
		`"entity":[{"type":{"system":"http://terminology.hl7.org/CodeSystem/audit-entity-type","code":"2","display":"System Object"},`+
		`"description":"GET /fhir/r4/Patient/p%d (request r%d)","what":{"reference":"Patient/p%d"}}]}`, i%60, i, i, i))
}

// TestAppendStoresResourcesLikeCreates: what the server appends is read by
// id, found by its search parameters and has a history of one version.
func TestAppendStoresResourcesLikeCreates(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	out, err := st.Append(ctx, tenant, "AuditEvent", [][]byte{auditEvent(1), auditEvent(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].ID == out[1].ID || out[0].VersionID != 1 {
		t.Fatalf("appended %+v", out)
	}
	got, err := st.Read(ctx, tenant, "AuditEvent", out[1].ID)
	if err != nil || string(got.JSON) != string(out[1].JSON) {
		t.Fatalf("read: %v\n%s\nwant\n%s", err, got.JSON, out[1].JSON)
	}
	q, err := db.Registry().Parse("AuditEvent", url.Values{"entity": {"Patient/p2"}, "outcome": {"0"}}, search.ParseOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	page, err := st.Search(ctx, tenant, q)
	if err != nil || len(page.Entries) != 1 || page.Entries[0].ID != out[1].ID {
		t.Fatalf("search by entity: %v %+v", err, page)
	}
	hist, err := st.History(ctx, tenant, store.HistoryQuery{Type: "AuditEvent", ID: out[0].ID, Count: 10})
	if err != nil || len(hist.Entries) != 1 || hist.Entries[0].VersionID != 1 || hist.Entries[0].Method != "POST" {
		t.Fatalf("history: %v %+v", err, hist)
	}
}

// TestAppendRefusesWhatNeedsTheChecks: a resource of another type than
// asked, or a conformance resource, is not appended, and nothing of the
// call is stored.
func TestAppendRefusesWhatNeedsTheChecks(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	var opErr *store.OpError
	if _, err := st.Append(ctx, tenant, "AuditEvent", [][]byte{auditEvent(1), []byte(`{"resourceType":"Patient"}`)}); !errors.As(err, &opErr) || opErr.Index != 1 {
		t.Fatalf("a Patient appended as an AuditEvent: %v", err)
	}
	if _, err := st.Append(ctx, tenant, "SearchParameter", [][]byte{[]byte(`{"resourceType":"SearchParameter"}`)}); err == nil {
		t.Fatal("a SearchParameter was appended without its checks")
	}
	q, _ := db.Registry().Parse("AuditEvent", url.Values{}, search.ParseOptions{Strict: true})
	if page, err := st.Search(ctx, tenant, q); err != nil || len(page.Entries) != 0 {
		t.Fatalf("after refused appends: %v %d stored", err, len(page.Entries))
	}
}

// BenchmarkAppendAuditEvents appends AuditEvents 200 at a time, as the
// trail does (compare BenchmarkTransactionOfAuditEvents): the figures are
// per event, its CPU time (the process's, background work included)
// steadier than its wall time on a shared machine.
func BenchmarkAppendAuditEvents(b *testing.B) {
	benchAuditEvents(b, func(ctx context.Context, st *store.Store, tenant string, bodies [][]byte) error {
		_, err := st.Append(ctx, tenant, "AuditEvent", bodies)
		return err
	})
}

// BenchmarkTransactionOfAuditEvents creates AuditEvents 200 at a time in
// transactions, the client's path.
func BenchmarkTransactionOfAuditEvents(b *testing.B) {
	benchAuditEvents(b, func(ctx context.Context, st *store.Store, tenant string, bodies [][]byte) error {
		ops := make([]store.Op, len(bodies))
		for i, body := range bodies {
			ops[i] = store.Op{Method: "POST", Type: "AuditEvent", Body: body}
		}
		_, err := st.Transaction(ctx, tenant, ops)
		return err
	})
}

func benchAuditEvents(b *testing.B, write func(context.Context, *store.Store, string, [][]byte) error) {
	ctx := context.Background()
	st := db.Open(b, db.Options())
	tenant := db.Tenant(b, st)
	const batch = 200
	bodies := make([][]byte, 0, batch)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := storetest.ProcessCPU(b)
	for i := 0; i < b.N; i++ {
		bodies = append(bodies, auditEvent(i))
		if len(bodies) == batch || i == b.N-1 {
			if err := write(ctx, st, tenant, bodies); err != nil {
				b.Fatal(err)
			}
			bodies = bodies[:0]
		}
	}
	b.ReportMetric(float64((storetest.ProcessCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/event")
}
