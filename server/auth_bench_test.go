package server_test

// Benchmarks of bearer token verification: the Verifier alone per
// algorithm, and a read by id through the whole stack with each kind of
// token, to set the first against the second. Figures: docs/performance.md.

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"fhirstore/server/auth"
)

// BenchmarkAuthenticate times Verifier.Authenticate for each kind of token
// the server accepts (keys cached: no JWKS fetch is timed).
func BenchmarkAuthenticate(b *testing.B) {
	p := newIDP(b)
	const tenant = "bench"
	base := "http://" + tenant + ".localhost"
	key, err := auth.GenerateLocalKey()
	if err != nil {
		b.Fatal(err)
	}
	local, err := auth.NewLocalIssuer(key, "", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	v := &auth.Verifier{
		Issuers: []auth.TrustedIssuer{{URL: p.iss, Keys: p.keys(time.Hour), Tenants: []string{tenant}}},
		Local:   local,
		Dev:     &auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute},
	}
	ctx := auth.WithEndpoint(context.Background(), auth.Endpoint{Origin: base})
	localTok, _, err := local.Issue(auth.Endpoint{Origin: base}, auth.Grant{Tenant: tenant, ClientID: "c", Scope: "system/*.read"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, token string }{
		{"RS256-JWKS", p.sign(tenant, nil)},
		{"ES256-JWKS", p.sign(tenant, func(_ *jwt.MapClaims, h map[string]any) { h["alg"], h["kid"] = "ES256", "ec-1" })},
		{"ES256-token-endpoint", localTok},
		{"HS256-dev", signToken(b, tenant, time.Hour)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if _, err := v.Authenticate(ctx, tc.token); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Authenticate(ctx, tc.token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadByIDWithToken times GET /Patient/{id} (one Patient in the
// tenant) through the real handler with a dev HS256, an IdP RS256 and a
// token-endpoint ES256 token.
func BenchmarkReadByIDWithToken(b *testing.B) {
	p := newIDP(b)
	e := newAuthEnv(b, func(tenant string) []auth.TrustedIssuer {
		return []auth.TrustedIssuer{{URL: p.iss, Keys: p.keys(time.Hour), Tenants: []string{tenant}}}
	})
	id := seedPatients(b, e, 1)
	clientID, secret := secretClient(b, e.store, e.tenant, "system/*.read")
	r := e.tokenRequest(tokenCall{basic: [2]string{clientID, secret}, form: url.Values{"grant_type": {"client_credentials"}}})
	localTok := wantToken(b, r, "system/*.read")
	for _, tc := range []struct{ name, token string }{
		{"HS256-dev", e.token},
		{"RS256-JWKS", p.sign(e.tenant, nil)},
		{"ES256-token-endpoint", localTok},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := request{Method: http.MethodGet, Path: "/Patient/" + id, Token: &tc.token}
			if r := e.do(req); r.Status != http.StatusOK {
				b.Fatalf("read: %d %s", r.Status, r.Body)
			}
			b.ReportAllocs()
			for b.Loop() {
				if r := e.do(req); r.Status != http.StatusOK {
					b.Fatalf("read: %d %s", r.Status, r.Body)
				}
			}
		})
	}
}
