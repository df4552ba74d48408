package store_test

import (
	"context"
	"testing"
	"time"

	"fhirstore/store"
)

// BenchmarkSpoolOne spools one audit record per write, as a request alone
// does.
func BenchmarkSpoolOne(b *testing.B) {
	st := db.Open(b, db.Options())
	tenant := db.Tenant(b, st)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		r := store.AuditRecord{At: time.Now().UnixNano(), Method: "GET", Path: "/fhir/r4/Patient/p1", Status: 200, Type: "Patient", ID: "p1"}
		sr, err := r.SpoolRecord()
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Spool(ctx, tenant, []store.SpoolRecord{sr}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDrainSpool converts spooled audit records into audit rows,
// 500 at a time; b.N counts records.
func BenchmarkDrainSpool(b *testing.B) {
	st := db.Open(b, db.Options())
	tenant := db.Tenant(b, st)
	ctx := context.Background()
	recs := make([]store.SpoolRecord, b.N)
	for i := range recs {
		r := store.AuditRecord{At: time.Now().UnixNano(), Method: "GET", Path: "/fhir/r4/Patient/p1", Status: 200, Type: "Patient", ID: "p1",
			Patient: "p1", Interaction: "read", Action: "R", Subject: "dev"}
		sr, err := r.SpoolRecord()
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = sr
	}
	if err := st.Spool(ctx, tenant, recs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for {
		n, _, err := st.DrainSpool(ctx, tenant, 500, func(r store.SpoolRecord) (store.AuditRecord, error) {
			return store.DecodeAuditRecord(r.Key, r.Data)
		})
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
}
