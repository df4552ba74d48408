package restadapter_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/restadapter"
	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store/storetest"
)

var db *storetest.DB

func TestMain(m *testing.M) { storetest.Run(m, &db) }

func TestRESTRequestsNeedATokenForTheHostsTenant(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	st := db.Open(t, db.Options())
	tenant, other := db.Tenant(t, st), db.Tenant(t, st)
	rest := restadapter.New(restadapter.Config{TenantOf: func(ctx context.Context) (string, bool) {
		c, ok := server.CallerFrom(ctx)
		if !ok {
			return "", false
		}
		return c.Tenant, true
	}, Store: st, Registry: db.Registry(), Allows: server.Allows})
	h := server.New(server.Config{DefaultTenant: tenant, REST: rest}, st, auth.HS256{Key: key, Issuer: auth.DevIssuer}, zap.NewNop())
	srv := httptest.NewServer(h)
	defer srv.Close()
	sign := func(tn string) string {
		tok, err := auth.SignHS256(key, auth.TokenRequest{Tenant: tn, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tests := []struct {
		name       string
		token      string
		wantStatus int
		wantCode   string
	}{
		{"no token is 401", "", http.StatusUnauthorized, "unauthorized"},
		{"a malformed token is 401", "not-a-jwt", http.StatusUnauthorized, "unauthorized"},
		{"a token for another tenant is 403", sign(other), http.StatusForbidden, "forbidden"},
		{"a valid token reaches the REST interface", sign(tenant), http.StatusNotFound, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/nothing-here", nil)
			req.Host = tenant + ".localhost"
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body restadapter.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("body is not the REST error JSON: %v", err)
			}
			if resp.StatusCode != tt.wantStatus || body.Error.Code != tt.wantCode || body.Error.Message == "" {
				t.Fatalf("got %d %+v, want %d %s", resp.StatusCode, body, tt.wantStatus, tt.wantCode)
			}
			if tt.wantStatus == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
}
