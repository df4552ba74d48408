package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
	"fhirstore/store/engine/sqlite"
)

// TestDatabaseOutageAnswers503AndReadyzFails closes a private embedded
// database under a running server.
func TestDatabaseOutageAnswers503AndReadyzFails(t *testing.T) {
	ctx := context.Background()
	edb, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, edb, store.Options{ResourceTypes: fhirschema.IsResourceType})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	if err := st.CreateTenant(ctx, "outage"); err != nil {
		t.Fatal(err)
	}
	h := server.New(server.Config{DefaultTenant: "outage"}, st, auth.HS256{Key: testKey, Issuer: auth.DevIssuer}, zap.NewNop())
	srv := httptest.NewServer(h)
	defer srv.Close()
	e := &env{t: t, srv: srv, store: st, tenant: "outage", token: signToken(t, "outage", time.Hour)}

	if r := e.get("/readyz"); r.Status != http.StatusOK {
		t.Fatalf("readyz before the outage: %d %s", r.Status, r.Body)
	}
	id := e.create("Patient", `{"resourceType":"Patient"}`)

	if err := edb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if r := e.get("/readyz"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz during the outage: %d %s", r.Status, r.Body)
	}
	r := e.get("/Patient/" + id)
	wantOutcome(t, r, http.StatusServiceUnavailable, "")
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("outage answers took %v", took)
	}
	if r := e.get("/healthz"); r.Status != http.StatusOK {
		t.Fatalf("healthz during the outage: %d", r.Status)
	}
}
