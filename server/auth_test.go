package server_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/server"
	"fhirstore/server/auth"
)

// e2eJWT signs claims for tenant with method and key; mutate adjusts the
// claims first.
func e2eJWT(t testing.TB, method jwt.SigningMethod, key any, tenant string, mutate func(*auth.Claims)) string {
	t.Helper()
	now := time.Now()
	c := auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    auth.DevIssuer,
			Subject:   "e2e",
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		},
		Tenant: tenant,
		Scope:  "system/*.*",
	}
	if mutate != nil {
		mutate(&c)
	}
	s, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// e2eForgeHS256 builds a token with any header, signed by HMAC-SHA256 with key.
func e2eForgeHS256(header, payload string, key []byte) string {
	enc := base64.RawURLEncoding
	input := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(input))
	return input + "." + enc.EncodeToString(mac.Sum(nil))
}

// TestBearerAuthentication: every FHIR interaction needs a bearer token
// that is valid and was issued for the host's tenant.
func TestBearerAuthentication(t *testing.T) {
	e := newEnv(t)
	other := db.Tenant(t, e.store)
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Secret"}]}`)
	signed := func(ttl time.Duration) string {
		tok, err := auth.SignHS256(testKey, auth.TokenRequest{Tenant: e.tenant, Scope: "system/*.*", TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	exp := time.Now().Add(time.Hour).Unix()
	payload := `{"iss":"` + auth.DevIssuer + `","sub":"e2e","exp":` + strconv.FormatInt(exp, 10) + `,"tenant":"` + e.tenant + `"}`
	cases := []struct {
		name          string
		authorization string // the whole Authorization header; "" sends none
		status        int
		// challenge is the error code WWW-Authenticate must name ("" for none).
		challenge string
	}{
		{"a request without Authorization is 401", "", 401, ""},
		{"a Basic Authorization is 401", "Basic ZGVtbzpkZW1v", 401, ""},
		{"Bearer without a token is 401", "Bearer", 401, ""},
		{"a garbage token is 401", "Bearer not-a-token", 401, "invalid_token"},
		{"a token of three garbage parts is 401", "Bearer a.b.c", 401, "invalid_token"},
		{"a token signed with another key is 401", "Bearer " + e2eJWT(t, jwt.SigningMethodHS256, []byte("another key, another key, 32 by"), e.tenant, nil), 401, "invalid_token"},
		{"an expired token is 401", "Bearer " + signed(-2*time.Hour), 401, "invalid_token"},
		{"a token from another issuer is 401", "Bearer " + e2eJWT(t, jwt.SigningMethodHS256, testKey, e.tenant, func(c *auth.Claims) { c.Issuer = "https://issuer.example.org" }), 401, "invalid_token"},
		{"a token without issuer is 401", "Bearer " + e2eJWT(t, jwt.SigningMethodHS256, testKey, e.tenant, func(c *auth.Claims) { c.Issuer = "" }), 401, "invalid_token"},
		{"a token with alg none is 401", "Bearer " + e2eJWT(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, e.tenant, nil), 401, "invalid_token"},
		{"a token with alg none and a signature is 401", "Bearer " + e2eForgeHS256(`{"alg":"none","typ":"JWT"}`, payload, testKey), 401, "invalid_token"},
		{"a token claiming RS256 signed with the shared key is 401", "Bearer " + e2eForgeHS256(`{"alg":"RS256","typ":"JWT"}`, payload, testKey), 401, "invalid_token"},
		{"a token signed HS384 with the shared key is 401", "Bearer " + e2eJWT(t, jwt.SigningMethodHS384, testKey, e.tenant, nil), 401, "invalid_token"},
		{"a token without exp is 401", "Bearer " + e2eJWT(t, jwt.SigningMethodHS256, testKey, e.tenant, func(c *auth.Claims) { c.ExpiresAt = nil }), 401, "invalid_token"},
		{"a token that is not valid yet is 401", "Bearer " + e2eJWT(t, jwt.SigningMethodHS256, testKey, e.tenant, func(c *auth.Claims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour)) }), 401, "invalid_token"},
		{"a token without tenant claim is 401", "Bearer " + e2eJWT(t, jwt.SigningMethodHS256, testKey, "", nil), 401, "invalid_token"},
		{"a token with a tampered payload is 401", "Bearer " + e2eTamper(signToken(t, other, time.Hour), e.tenant), 401, "invalid_token"},
		{"two tokens are 401", "Bearer " + e.token + " " + e.token, 401, "invalid_token"},
		{"a valid token for another existing tenant is 403", "Bearer " + signToken(t, other, time.Hour), 403, ""},
		{"a valid token for a tenant that does not exist is 403", "Bearer " + signToken(t, "no-such-tenant", time.Hour), 403, ""},
		{"a valid token is accepted", "Bearer " + e.token, 200, ""},
		{"the scheme is case-insensitive", "bearer " + e.token, 200, ""},
		{"spaces around the token are ignored", "Bearer   " + e.token + "  ", 200, ""},
		{"a token expired a few seconds ago is 401: the leeway does not extend exp", "Bearer " + signed(-3*time.Second), 401, "invalid_token"},
	}
	created := 1
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.authorization != "" {
				hdr["Authorization"] = tc.authorization
			}
			for _, req := range []request{
				{Method: http.MethodGet, Path: "/Patient/" + id},
				{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","name":[{"family":"Intruder"}]}`},
				{Method: http.MethodGet, Path: "/_history"},
			} {
				req.Token, req.Header = e2eStr(""), hdr
				r := e.do(req)
				if tc.status == http.StatusOK {
					if r.Status >= 300 {
						t.Fatalf("%s %s: %d %s", req.Method, req.Path, r.Status, r.Body)
					}
					if req.Method == http.MethodPost {
						created++
					}
					continue
				}
				wantOutcome(t, r, tc.status, "")
				if strings.Contains(string(r.Body), "Secret") || strings.Contains(string(r.Body), id) {
					t.Fatalf("%s %s: the answer leaks data: %s", req.Method, req.Path, r.Body)
				}
				ch := r.Header.Get("WWW-Authenticate")
				if tc.status == http.StatusUnauthorized {
					if !strings.HasPrefix(ch, "Bearer") {
						t.Fatalf("WWW-Authenticate %q, want a Bearer challenge", ch)
					}
					if tc.challenge == "" && strings.Contains(ch, "error=") {
						t.Fatalf("WWW-Authenticate %q names an error for a request without a token", ch)
					}
					if tc.challenge != "" && !strings.Contains(ch, `error="`+tc.challenge+`"`) {
						t.Fatalf("WWW-Authenticate %q, want error=%q", ch, tc.challenge)
					}
				}
			}
			if n := e2eHistoryTotal(t, e, "/_history"); n != created {
				t.Fatalf("history has %d versions, want %d", n, created)
			}
		})
	}
}

// e2eTamper replaces the payload of a signed token with one for tenant,
// keeping the original signature.
func e2eTamper(token, tenant string) string {
	parts := strings.Split(token, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	s := string(raw)
	i := strings.Index(s, `"tenant":"`)
	j := strings.Index(s[i+10:], `"`)
	s = s[:i+10] + tenant + s[i+10+j:]
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(s))
	return strings.Join(parts, ".")
}

// TestPublicEndpoints: health checks and the CapabilityStatement need no token.
func TestPublicEndpoints(t *testing.T) {
	e := newEnv(t)
	none := e2eStr("")
	t.Run("healthz answers 200 without a token", func(t *testing.T) {
		r := e.do(request{Method: http.MethodGet, Path: "/healthz", Token: none})
		e2eWantStatus(t, r, http.StatusOK)
		if r.JSON(t)["status"] != "ok" {
			t.Fatalf("healthz body %s", r.Body)
		}
	})
	t.Run("readyz answers 200 without a token while the database answers", func(t *testing.T) {
		r := e.do(request{Method: http.MethodGet, Path: "/readyz", Token: none})
		e2eWantStatus(t, r, http.StatusOK)
		if r.JSON(t)["status"] != "ready" {
			t.Fatalf("readyz body %s", r.Body)
		}
	})
	for _, tc := range []struct {
		name, host, token string
	}{
		{"metadata is a CapabilityStatement without a token", "", ""},
		{"metadata ignores a bad token", "", "Bearer garbage"},
		{"metadata answers on the default tenant's host", "127.0.0.1", ""},
		{"metadata answers on a host of no tenant", "no-such-tenant.localhost", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request{Method: http.MethodGet, Path: "/metadata", Token: none, Host: tc.host}
			if tc.token != "" {
				req.Header = map[string]string{"Authorization": tc.token}
			}
			r := e.do(req)
			e2eWantStatus(t, r, http.StatusOK)
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/fhir+json") {
				t.Fatalf("Content-Type %q", ct)
			}
			m := r.JSON(t)
			if m["resourceType"] != "CapabilityStatement" || m["fhirVersion"] != "4.0.1" || m["kind"] != "instance" {
				t.Fatalf("not an R4 CapabilityStatement of an instance: %.300s", r.Body)
			}
			rest, _ := m["rest"].([]any)
			if len(rest) != 1 {
				t.Fatalf("rest %v", m["rest"])
			}
			resources, _ := rest[0].(map[string]any)["resource"].([]any)
			if len(resources) != len(fhirschema.StoredTypes()) {
				t.Fatalf("%d resources listed, want %d (the R4 types and ViewDefinition)", len(resources), len(fhirschema.StoredTypes()))
			}
			listed := map[string]map[string]any{}
			for _, res := range resources {
				rm := res.(map[string]any)
				listed[rm["type"].(string)] = rm
			}
			for _, typ := range []string{"Patient", "Observation", "EpisodeOfCare", "ImmunizationRecommendation"} {
				rm, ok := listed[typ]
				if !ok {
					t.Fatalf("%s is not listed", typ)
				}
				var codes []string
				for _, in := range rm["interaction"].([]any) {
					codes = append(codes, in.(map[string]any)["code"].(string))
				}
				for _, want := range []string{"read", "vread", "update", "delete", "create", "history-instance"} {
					if !strings.Contains(" "+strings.Join(codes, " ")+" ", " "+want+" ") {
						t.Fatalf("%s lacks interaction %s: %v", typ, want, codes)
					}
				}
			}
		})
	}
	t.Run("metadata still honours _format", func(t *testing.T) {
		wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/metadata?_format=ttl", Token: none}), http.StatusNotAcceptable, "")
	})
	t.Run("any other FHIR path needs a token", func(t *testing.T) {
		r := e.do(request{Method: http.MethodGet, Path: "/_history", Token: none})
		wantOutcome(t, r, http.StatusUnauthorized, "")
	})
}

// idp is an external authorization server as the tests need it: a real
// HTTP server publishing a JWKS that the test may rotate or take down,
// counting how often it is fetched.
type idp struct {
	t    testing.TB
	srv  *httptest.Server
	iss  string
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
	mu   sync.Mutex
	jwks []byte
	down bool
	hits atomic.Int64
}

func newIDP(t testing.TB) *idp {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{t: t, iss: "https://idp.example.test/realms/agency", rsa: rk, ec: ek}
	p.publish(map[string]crypto.PublicKey{"rsa-1": &rk.PublicKey, "ec-1": &ek.PublicKey})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		p.mu.Lock()
		body, down := p.jwks, p.down
		p.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// publish replaces the published key set.
func (p *idp) publish(keys map[string]crypto.PublicKey) {
	var set auth.JWKS
	for kid, k := range keys {
		jwk, err := auth.PublicJWK(kid, k)
		if err != nil {
			p.t.Fatal(err)
		}
		set.Keys = append(set.Keys, jwk)
	}
	b, err := json.Marshal(set)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.jwks = b
	p.mu.Unlock()
}

func (p *idp) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// keys is a key set of the IdP's JWKS URL with the given refresh interval.
func (p *idp) keys(minRefresh time.Duration) *auth.RemoteKeys {
	return &auth.RemoteKeys{URL: p.srv.URL, MinRefresh: minRefresh, Client: &http.Client{Timeout: 2 * time.Second}}
}

// sign issues a token of the IdP for the FHIR base of tenant: RS256 with
// kid rsa-1 unless mutate changes method or kid; mutate may change claims.
func (p *idp) sign(tenant string, mutate func(c *jwt.MapClaims, h map[string]any)) string {
	p.t.Helper()
	now := time.Now()
	c := jwt.MapClaims{
		"iss": p.iss, "sub": "nurse-7", "aud": "http://" + tenant + ".localhost/fhir/r4",
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(10 * time.Minute).Unix(),
		"tenant": tenant, "scope": "system/*.*",
	}
	h := map[string]any{"alg": "RS256", "kid": "rsa-1"}
	if mutate != nil {
		mutate(&c, h)
	}
	method := jwt.GetSigningMethod(h["alg"].(string))
	tok := jwt.NewWithClaims(method, c)
	for k, v := range h {
		tok.Header[k] = v
	}
	var key any = p.rsa
	switch h["alg"] {
	case "ES256":
		key = p.ec
	case "none":
		key = jwt.UnsafeAllowNoneSignatureType
	}
	if k, ok := h["key"]; ok {
		key = k
		delete(tok.Header, "key")
	}
	s, err := tok.SignedString(key)
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// newAuthEnv is newEnv with the Authenticator of a deployment: the given
// trusted issuers, the server's own token endpoint and, as in dev mode,
// HS256 tokens of testKey.
func newAuthEnv(t testing.TB, issuers func(tenant string) []auth.TrustedIssuer, mutate ...func(*server.Config)) *env {
	t.Helper()
	opts := db.Options()
	opts.Exclusive = true
	cfg := server.Config{BaseDomain: "localhost", MaxBodyBytes: server.DefaultMaxBodyBytes, Registry: db.Registry()}
	for _, m := range mutate {
		m(&cfg)
	}
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	var trusted []auth.TrustedIssuer
	if issuers != nil {
		trusted = issuers(tenant)
	}
	cfg.DefaultTenant = tenant
	key, err := st.SigningKey(context.Background(), auth.GenerateLocalKey)
	if err != nil {
		t.Fatal(err)
	}
	local, err := auth.NewLocalIssuer(key, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	v := &auth.Verifier{Issuers: trusted, Local: local, Dev: &auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, Leeway: time.Minute}
	h := server.New(cfg, st, v, zap.NewNop())
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, store: st, tenant: tenant, token: signToken(t, tenant, time.Hour), cfg: cfg, h: h}
}

// wantRefused checks that a token gets status on a read, a create and a
// history read, that no answer shows the tenant's data, and that nothing
// was written.
func wantRefused(t *testing.T, e *env, token string, status int, secretID string) {
	t.Helper()
	before := e2eHistoryTotal(t, e, "/_history")
	for _, req := range []request{
		{Method: http.MethodGet, Path: "/Patient/" + secretID},
		{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","name":[{"family":"Intruder"}]}`},
		{Method: http.MethodGet, Path: "/_history"},
	} {
		req.Token = e2eStr(token)
		r := e.do(req)
		wantOutcome(t, r, status, "")
		if strings.Contains(string(r.Body), "Secret") || strings.Contains(string(r.Body), secretID) {
			t.Fatalf("%s %s: the answer leaks data: %s", req.Method, req.Path, r.Body)
		}
		if ch := r.Header.Get("WWW-Authenticate"); status == http.StatusUnauthorized && !strings.Contains(ch, `error="invalid_token"`) {
			t.Fatalf("WWW-Authenticate %q, want an invalid_token challenge", ch)
		}
	}
	if after := e2eHistoryTotal(t, e, "/_history"); after != before {
		t.Fatalf("history went from %d to %d versions: a refused token wrote", before, after)
	}
}

// TestExternalIssuerTokens: tokens of a trusted authorization server are
// checked for signature (RS256/ES256 from its JWKS), issuer, audience,
// lifetime and tenant; every refused token gets no data and writes nothing.
func TestExternalIssuerTokens(t *testing.T) {
	p := newIDP(t)
	const allIss = "https://idp.example.test/realms/all"
	e := newAuthEnv(t, func(tenant string) []auth.TrustedIssuer {
		return []auth.TrustedIssuer{
			{URL: p.iss, Keys: p.keys(time.Hour), Tenants: []string{tenant}, Audiences: []string{"api://fhirstore"}},
			{URL: allIss, Keys: p.keys(time.Hour), Tenants: []string{auth.AnyTenant}},
		}
	})
	other := db.Tenant(t, e.store)
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Secret"}]}`)
	pub, err := x509.MarshalPKIXPublicKey(&p.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	now := time.Now()
	set := func(k string, v any) func(*jwt.MapClaims, map[string]any) {
		return func(c *jwt.MapClaims, _ map[string]any) { (*c)[k] = v }
	}
	drop := func(k string) func(*jwt.MapClaims, map[string]any) {
		return func(c *jwt.MapClaims, _ map[string]any) { delete(*c, k) }
	}
	header := func(kv ...any) func(*jwt.MapClaims, map[string]any) {
		return func(_ *jwt.MapClaims, h map[string]any) {
			for i := 0; i < len(kv); i += 2 {
				h[kv[i].(string)] = kv[i+1]
			}
		}
	}
	tampered := func() string {
		parts := strings.Split(p.sign(e.tenant, set("scope", "system/Patient.read")), ".")
		raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
		parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "system/Patient.read", "system/*.*", 1)))
		return strings.Join(parts, ".")
	}
	cases := []struct {
		name   string
		token  string
		status int
	}{
		{"an RS256 token of the trusted issuer is accepted", p.sign(e.tenant, nil), 200},
		{"an ES256 token of the trusted issuer is accepted", p.sign(e.tenant, header("alg", "ES256", "kid", "ec-1")), 200},
		{"a token for a configured audience is accepted", p.sign(e.tenant, set("aud", "api://fhirstore")), 200},
		{"an issuer of one tenant may leave out the tenant claim", p.sign(e.tenant, drop("tenant")), 200},
		{"a token expired within the clock skew is 401: exp is exact", p.sign(e.tenant, set("exp", now.Add(-30*time.Second).Unix())), 401},
		{"a token valid from within the clock skew in the future is accepted", p.sign(e.tenant, set("nbf", now.Add(30*time.Second).Unix())), 200},
		{"an issuer of every tenant is accepted with a tenant claim", p.sign(e.tenant, set("iss", allIss)), 200},
		{"dev tokens still work in dev mode", e.token, 200},
		{"an expired token is 401", p.sign(e.tenant, set("exp", now.Add(-2*time.Hour).Unix())), 401},
		{"a token without exp is 401", p.sign(e.tenant, drop("exp")), 401},
		{"a token not valid yet is 401", p.sign(e.tenant, set("nbf", now.Add(time.Hour).Unix())), 401},
		{"a token issued in the future is 401", p.sign(e.tenant, set("iat", now.Add(time.Hour).Unix())), 401},
		{"a token of an untrusted issuer is 401", p.sign(e.tenant, set("iss", "https://evil.example.test")), 401},
		{"a token without issuer is 401", p.sign(e.tenant, drop("iss")), 401},
		{"a token for another audience is 401", p.sign(e.tenant, set("aud", "https://other.example.test/fhir/r4")), 401},
		{"a token for another tenant's base URL is 401", p.sign(e.tenant, set("aud", "http://"+other+".localhost/fhir/r4")), 401},
		{"a token without audience is 401", p.sign(e.tenant, drop("aud")), 401},
		{"a token with alg none is 401", p.sign(e.tenant, header("alg", "none")), 401},
		{"an HS256 token keyed with the issuer's RSA public key is 401", p.sign(e.tenant, header("alg", "HS256", "key", pubPEM)), 401},
		{"an HS256 token keyed with the issuer's RSA modulus is 401", p.sign(e.tenant, header("alg", "HS256", "key", p.rsa.N.Bytes())), 401},
		{"a token of an unknown kid is 401", p.sign(e.tenant, header("kid", "rsa-unknown")), 401},
		{"a token whose kid names a key of the other type is 401", p.sign(e.tenant, header("kid", "ec-1")), 401},
		{"a token with a tampered payload is 401", tampered(), 401},
		{"a token of a one-tenant issuer for another tenant is 401", p.sign(other, set("aud", "api://fhirstore")), 401},
		{"an issuer of every tenant must name the tenant", p.sign(e.tenant, func(c *jwt.MapClaims, _ map[string]any) { (*c)["iss"] = allIss; delete(*c, "tenant") }), 401},
		{"a valid token for another tenant is 403", p.sign(other, func(c *jwt.MapClaims, _ map[string]any) {
			(*c)["iss"] = allIss
			(*c)["aud"] = "http://" + e.tenant + ".localhost/fhir/r4"
		}), 403},
		{"a dev-issuer token signed by the IdP is 401", p.sign(e.tenant, set("iss", auth.DevIssuer)), 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.status != http.StatusOK {
				wantRefused(t, e, tc.token, tc.status, id)
				return
			}
			r := e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Token: e2eStr(tc.token)})
			e2eWantStatus(t, r, http.StatusOK)
			if !strings.Contains(string(r.Body), "Secret") {
				t.Fatalf("read returned %s", r.Body)
			}
		})
	}
}

// TestJWKSEndpointDown: when the issuer's JWKS cannot be fetched its
// tokens are refused at once, not after a long wait, and the endpoint is
// not asked again for every request.
func TestJWKSEndpointDown(t *testing.T) {
	p := newIDP(t)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(hang.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, tc := range []struct {
		name string
		keys *auth.RemoteKeys
	}{
		{"a JWKS URL that refuses connections", &auth.RemoteKeys{URL: closedURL, MinRefresh: time.Hour}},
		{"a JWKS URL that answers 503", &auth.RemoteKeys{URL: p.srv.URL, MinRefresh: time.Hour}},
		{"a JWKS URL that never answers", &auth.RemoteKeys{URL: hang.URL, MinRefresh: time.Hour, Client: &http.Client{Timeout: 300 * time.Millisecond}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.setDown(true)
			defer p.setDown(false)
			e := newAuthEnv(t, func(tenant string) []auth.TrustedIssuer {
				return []auth.TrustedIssuer{{URL: p.iss, Keys: tc.keys, Tenants: []string{tenant}}}
			})
			id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Secret"}]}`)
			start := time.Now()
			wantRefused(t, e, p.sign(e.tenant, nil), http.StatusUnauthorized, id)
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("refusing took %s", d)
			}
		})
	}
}

// TestJWKSKeyRotation: a token signed with a key the cached set lacks
// refetches the set; keys stay usable while the endpoint is down.
func TestJWKSKeyRotation(t *testing.T) {
	p := newIDP(t)
	keys := &auth.RemoteKeys{URL: p.srv.URL, MinRefresh: 200 * time.Millisecond, MaxAge: 300 * time.Millisecond}
	e := newAuthEnv(t, func(tenant string) []auth.TrustedIssuer {
		return []auth.TrustedIssuer{{URL: p.iss, Keys: keys, Tenants: []string{tenant}}}
	})
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Secret"}]}`)
	read := func(token string) int {
		return e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Token: e2eStr(token)}).Status
	}
	if s := read(p.sign(e.tenant, nil)); s != http.StatusOK {
		t.Fatalf("token of the first key: %d", s)
	}
	rotated, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p.publish(map[string]crypto.PublicKey{"rsa-2": &rotated.PublicKey})
	time.Sleep(250 * time.Millisecond) // past MinRefresh
	newTok := p.sign(e.tenant, func(_ *jwt.MapClaims, h map[string]any) { h["kid"], h["key"] = "rsa-2", rotated })
	if s := read(newTok); s != http.StatusOK {
		t.Fatalf("token of the rotated key: %d, want 200", s)
	}
	if s := read(p.sign(e.tenant, nil)); s != http.StatusUnauthorized {
		t.Fatalf("token of the retired key: %d, want 401", s)
	}
	p.setDown(true)
	time.Sleep(400 * time.Millisecond) // past MaxAge: the set is stale and its refresh fails
	if s := read(newTok); s != http.StatusOK {
		t.Fatalf("token of the cached key while the JWKS endpoint is down: %d, want 200", s)
	}
}

// TestUnknownKidFloodIsRateLimited: tokens with invented kids do not make
// the server fetch the issuer's JWKS for each of them.
func TestUnknownKidFloodIsRateLimited(t *testing.T) {
	p := newIDP(t)
	e := newAuthEnv(t, func(tenant string) []auth.TrustedIssuer {
		return []auth.TrustedIssuer{{URL: p.iss, Keys: p.keys(time.Minute), Tenants: []string{tenant}}}
	})
	if r := e.do(request{Method: http.MethodGet, Path: "/Patient?_count=1", Token: e2eStr(p.sign(e.tenant, nil))}); r.Status != http.StatusOK {
		t.Fatalf("valid token: %d %s", r.Status, r.Body)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := p.sign(e.tenant, func(_ *jwt.MapClaims, h map[string]any) { h["kid"] = "invented-" + strconv.Itoa(i) })
			if r := e.do(request{Method: http.MethodGet, Path: "/Patient?_count=1", Token: e2eStr(tok)}); r.Status != http.StatusUnauthorized {
				t.Errorf("token of invented kid: %d", r.Status)
			}
		}()
	}
	wg.Wait()
	if n := p.hits.Load(); n > 2 {
		t.Fatalf("the JWKS was fetched %d times for one valid and 50 invented kids, want at most 2", n)
	}
}
