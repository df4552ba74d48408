package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"fhirstore/store"
	"fhirstore/store/storetest"
)

var db *storetest.DB

func TestMain(m *testing.M) {
	if os.Getenv(crashDirEnv) != "" { // the child of the crash test brings its own database
		os.Exit(m.Run())
	}
	storetest.Run(m, &db)
}

func TestVersionsAreKeptInOrder(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	res, err := st.Create(ctx, tenant, "Observation", []byte(`{"resourceType":"Observation","status":"final","code":{"text":"weight"},"valueQuantity":{"value":1.50,"unit":"kg"}}`), store.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.VersionID != 1 {
		t.Fatalf("vid %d", res.VersionID)
	}
	got, err := st.Read(ctx, tenant, "Observation", res.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", got.JSON)
	body := fmt.Sprintf(`{"resourceType":"Observation","id":%q,"status":"amended","code":{"text":"weight"},"valueQuantity":{"value":1e2}}`, res.ID)
	upd, created, err := st.Update(ctx, tenant, "Observation", res.ID, []byte(body), store.WriteOptions{})
	if err != nil || created || upd.VersionID != 2 {
		t.Fatalf("update: %v created=%v vid=%d", err, created, upd.VersionID)
	}
	one := 1
	if _, _, err := st.Update(ctx, tenant, "Observation", res.ID, []byte(body), store.WriteOptions{IfMatch: &one}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("stale If-Match: %v", err)
	}
	if _, err := st.Delete(ctx, tenant, "Observation", res.ID, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Read(ctx, tenant, "Observation", res.ID); !errors.Is(err, store.ErrGone) {
		t.Fatalf("read deleted: %v", err)
	}
	page, err := st.History(ctx, tenant, store.HistoryQuery{Type: "Observation", ID: res.ID, Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 2 || page.Total != 3 || !page.HasNext || page.Entries[0].VersionID != 3 {
		t.Fatalf("page %+v", page)
	}
	page2, err := st.History(ctx, tenant, store.HistoryQuery{Type: "Observation", ID: res.ID, Count: 2, After: page.Last})
	if err != nil {
		t.Fatal(err)
	}
	if len(page2.Entries) != 1 || page2.HasNext || page2.Entries[0].VersionID != 1 || string(page2.Entries[0].JSON) != string(got.JSON) {
		t.Fatalf("page2 %+v", page2)
	}
}
