package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"fhirstore/store"
)

// TestSnapshotSizeRanksTypes: the estimate a bulk export orders its types
// by grows with a type's rows and their size, is 0 for a type without
// rows, and refuses an unknown type.
func TestSnapshotSizeRanksTypes(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	create := func(typ, body string, n int) {
		for range n {
			if _, err := st.Create(ctx, tenant, typ, []byte(body), store.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	create("Patient", `{"resourceType":"Patient","active":true}`, 3)
	note := strings.Repeat("a long note ", 200)
	create("Observation", fmt.Sprintf(`{"resourceType":"Observation","status":"final","code":{"text":%q}}`, note), 2)
	size := func(typ string) int64 {
		n, err := st.SnapshotSize(ctx, tenant, typ)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	patients, observations := size("Patient"), size("Observation")
	if patients <= 0 || observations <= patients || observations < 2*int64(len(note)) {
		t.Fatalf("Patient %d bytes, Observation %d bytes", patients, observations)
	}
	if n := size("Encounter"); n != 0 {
		t.Fatalf("a type without rows: %d bytes", n)
	}
	if _, err := st.SnapshotSize(ctx, tenant, "NoSuchType"); err == nil {
		t.Fatal("an unknown type was sized")
	}
}
