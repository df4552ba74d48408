package server_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"fhirstore/server/auth"
	"fhirstore/store"
)

// tokenCall is one request to /oauth2/token.
type tokenCall struct {
	host        string            // default: the env's tenant
	form        url.Values        // the body
	basic       [2]string         // client_secret_basic id and secret, when set
	contentType string            // default: form encoding
	header      map[string]string // extra headers
}

// token posts to the env's token endpoint.
func (e *env) tokenRequest(tc tokenCall) *response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/oauth2/token", strings.NewReader(tc.form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = tc.host
	if req.Host == "" {
		req.Host = e.tenant + ".localhost"
	}
	ct := tc.contentType
	if ct == "" {
		ct = "application/x-www-form-urlencoded"
	}
	req.Header.Set("Content-Type", ct)
	if tc.basic[0] != "" {
		req.SetBasicAuth(url.QueryEscape(tc.basic[0]), url.QueryEscape(tc.basic[1]))
	}
	for k, v := range tc.header {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// secretClient registers a client_secret client of tenant and returns its id and secret.
func secretClient(t testing.TB, st *store.Store, tenant string, scopes ...string) (string, string) {
	t.Helper()
	secret := auth.NewClientSecret()
	hash, err := auth.HashSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	id := "c-" + strings.ToLower(auth.NewClientSecret())
	if err := st.CreateClient(context.Background(), store.Client{ID: id, Tenant: tenant, Name: "test", Scopes: scopes, SecretHash: hash}); err != nil {
		t.Fatal(err)
	}
	return id, secret
}

// keyClient registers a private_key_jwt client of tenant with keys inline
// (jwksURL empty) or at jwksURL.
func keyClient(t testing.TB, st *store.Store, tenant, jwksURL string, keys map[string]crypto.PublicKey, scopes ...string) string {
	t.Helper()
	id := "k-" + strings.ToLower(auth.NewClientSecret())
	c := store.Client{ID: id, Tenant: tenant, Scopes: scopes, JWKSURL: jwksURL}
	if jwksURL == "" {
		var set auth.JWKS
		for kid, k := range keys {
			jwk, err := auth.PublicJWK(kid, k)
			if err != nil {
				t.Fatal(err)
			}
			set.Keys = append(set.Keys, jwk)
		}
		b, _ := json.Marshal(set)
		c.JWKS = string(b)
	}
	if err := st.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return id
}

// assertion signs a SMART Backend Services client assertion.
func assertion(t testing.TB, method jwt.SigningMethod, key any, kid, clientID, aud string, mutate func(jwt.MapClaims)) string {
	t.Helper()
	c := jwt.MapClaims{"iss": clientID, "sub": clientID, "aud": aud, "exp": time.Now().Add(4 * time.Minute).Unix(), "jti": rand.Text()}
	if mutate != nil {
		mutate(c)
	}
	tok := jwt.NewWithClaims(method, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func form(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// wantToken checks a successful token response and returns the token.
func wantToken(t testing.TB, r *response, scope string) string {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("token request: %d %s", r.Status, r.Body)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q, want no-store", cc)
	}
	var body struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
		Scope       string `json:"scope"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.AccessToken == "" || body.TokenType != "Bearer" || body.ExpiresIn != 60 || body.Scope != scope {
		t.Fatalf("token response %s, want a Bearer token for 60s with scope %q", r.Body, scope)
	}
	return body.AccessToken
}

// wantOAuthError checks an RFC 6749 §5.2 error response.
func wantOAuthError(t testing.TB, r *response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("error body is not JSON: %s", r.Body)
	}
	if body["error"] != code {
		t.Fatalf("error %v, want %s: %s", body["error"], code, r.Body)
	}
	if _, leaked := body["access_token"]; leaked {
		t.Fatalf("an error carries a token: %s", r.Body)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q, want no-store", cc)
	}
}

// TestTokenEndpointIssuesWorkingTokens: Postman's "Get New Access Token"
// with grant type Client Credentials, credentials sent either as a Basic
// Auth header or in the body, gets a token the FHIR API accepts.
func TestTokenEndpointIssuesWorkingTokens(t *testing.T) {
	e := newAuthEnv(t, nil)
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Secret"}]}`)
	clientID, secret := secretClient(t, e.store, e.tenant, "system/*.read", "system/Patient.write")
	for _, tc := range []struct {
		name string
		call tokenCall
	}{
		{"Postman: send as Basic Auth header", tokenCall{basic: [2]string{clientID, secret}, form: form("grant_type", "client_credentials", "scope", "system/*.read")}},
		{"Postman: send client credentials in body", tokenCall{form: form("grant_type", "client_credentials", "scope", "system/*.read", "client_id", clientID, "client_secret", secret)}},
		{"Basic with a form charset and client_id repeated in the body", tokenCall{basic: [2]string{clientID, secret}, contentType: "application/x-www-form-urlencoded; charset=UTF-8", form: form("grant_type", "client_credentials", "scope", "system/*.read", "client_id", clientID)}},
		{"scopes beyond the client's are left out", tokenCall{basic: [2]string{clientID, secret}, form: form("grant_type", "client_credentials", "scope", "system/*.read system/*.write user/*.*")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := wantToken(t, e.tokenRequest(tc.call), "system/*.read")
			r := e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Token: e2eStr(tok)})
			e2eWantStatus(t, r, http.StatusOK)
			if !strings.Contains(string(r.Body), "Secret") {
				t.Fatalf("read with the issued token: %s", r.Body)
			}
			w := e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient"}`, Token: e2eStr(tok)})
			wantOutcome(t, w, http.StatusForbidden, "")
		})
	}
	t.Run("without scope the client gets all its scopes", func(t *testing.T) {
		tok := wantToken(t, e.tokenRequest(tokenCall{basic: [2]string{clientID, secret}, form: form("grant_type", "client_credentials")}), "system/*.read system/Patient.write")
		e2eWantStatus(t, e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient"}`, Token: e2eStr(tok)}), http.StatusCreated)
	})
	t.Run("the token is for the host's tenant only", func(t *testing.T) {
		tok := wantToken(t, e.tokenRequest(tokenCall{basic: [2]string{clientID, secret}, form: form("grant_type", "client_credentials", "scope", "system/*.read")}), "system/*.read")
		other := db.Tenant(t, e.store)
		r := e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Token: e2eStr(tok), Host: other + ".localhost"})
		wantOutcome(t, r, http.StatusUnauthorized, "") // its aud is the first tenant's base URL
	})
	t.Run("the JWKS publishes the public key the tokens verify with", func(t *testing.T) {
		tok := wantToken(t, e.tokenRequest(tokenCall{basic: [2]string{clientID, secret}, form: form("grant_type", "client_credentials", "scope", "system/*.read")}), "system/*.read")
		resp, err := e.srv.Client().Get(e.srv.URL + "/oauth2/jwks")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw map[string][]map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		for _, k := range raw["keys"] {
			if _, private := k["d"]; private {
				t.Fatalf("the JWKS publishes a private key: %v", k)
			}
		}
		b, _ := json.Marshal(raw)
		keys, err := auth.ParseJWKS(b)
		if err != nil {
			t.Fatal(err)
		}
		var c auth.Claims
		parsed, err := jwt.ParseWithClaims(tok, &c, func(t *jwt.Token) (any, error) { return keys.Key(context.Background(), t.Header["kid"].(string)) }, jwt.WithValidMethods([]string{"ES256"}))
		if err != nil || !parsed.Valid {
			t.Fatalf("the token does not verify with the published key: %v", err)
		}
		wantAud := "http://" + e.tenant + ".localhost/fhir/r4"
		if c.Tenant != e.tenant || c.ClientID != clientID || c.Issuer != "http://"+e.tenant+".localhost" || len(c.Audience) != 1 || c.Audience[0] != wantAud {
			t.Fatalf("claims %+v", c)
		}
		if life := c.ExpiresAt.Sub(c.IssuedAt.Time); life != time.Minute {
			t.Fatalf("token lives %s, want the configured minute", life)
		}
	})
}

// TestTokenEndpointRefusals: bad client credentials, bad requests and
// scopes not granted are refused with RFC 6749 errors and no token.
func TestTokenEndpointRefusals(t *testing.T) {
	e := newAuthEnv(t, nil)
	other := db.Tenant(t, e.store)
	clientID, secret := secretClient(t, e.store, e.tenant, "system/*.read")
	otherID, otherSecret := secretClient(t, e.store, other, "system/*.read")
	grant := func(kv ...string) url.Values {
		return form(append([]string{"grant_type", "client_credentials"}, kv...)...)
	}
	cases := []struct {
		name   string
		call   tokenCall
		status int
		code   string
		basic  bool // a Basic challenge is due
	}{
		{"a wrong secret in the Basic header is invalid_client", tokenCall{basic: [2]string{clientID, secret + "x"}, form: grant()}, 401, "invalid_client", true},
		{"a wrong secret in the body is invalid_client", tokenCall{form: grant("client_id", clientID, "client_secret", "nope")}, 401, "invalid_client", false},
		{"an empty secret is invalid_client", tokenCall{form: grant("client_id", clientID, "client_secret", "")}, 401, "invalid_client", false},
		{"an unknown client is invalid_client", tokenCall{basic: [2]string{"no-such-client", secret}, form: grant()}, 401, "invalid_client", true},
		{"a client of another tenant is invalid_client", tokenCall{basic: [2]string{otherID, otherSecret}, form: grant()}, 401, "invalid_client", true},
		{"no client authentication is invalid_client", tokenCall{form: grant("client_id", clientID)}, 401, "invalid_client", true},
		{"Basic credentials that are not base64 are invalid_client", tokenCall{header: map[string]string{"Authorization": "Basic !!!"}, form: grant()}, 401, "invalid_client", true},
		{"two authentication methods are invalid_request", tokenCall{basic: [2]string{clientID, secret}, form: grant("client_secret", secret)}, 400, "invalid_request", false},
		{"a missing grant_type is invalid_request", tokenCall{basic: [2]string{clientID, secret}, form: form("scope", "system/*.read")}, 400, "invalid_request", false},
		{"a repeated parameter is invalid_request", tokenCall{basic: [2]string{clientID, secret}, form: url.Values{"grant_type": {"client_credentials"}, "scope": {"a", "b"}}}, 400, "invalid_request", false},
		{"a JSON body is invalid_request", tokenCall{basic: [2]string{clientID, secret}, contentType: "application/json", form: grant()}, 400, "invalid_request", false},
		{"the password grant is unsupported_grant_type", tokenCall{basic: [2]string{clientID, secret}, form: form("grant_type", "password", "username", "u", "password", "p")}, 400, "unsupported_grant_type", false},
		{"the authorization_code grant is unsupported_grant_type", tokenCall{basic: [2]string{clientID, secret}, form: form("grant_type", "authorization_code", "code", "x")}, 400, "unsupported_grant_type", false},
		{"a scope not granted to the client is invalid_scope", tokenCall{basic: [2]string{clientID, secret}, form: grant("scope", "system/*.write")}, 400, "invalid_scope", false},
		{"a wider wildcard scope is invalid_scope", tokenCall{basic: [2]string{clientID, secret}, form: grant("scope", "system/*.*")}, 400, "invalid_scope", false},
		{"a wrong assertion type is invalid_request", tokenCall{form: grant("client_assertion_type", "urn:example:saml", "client_assertion", "x")}, 400, "invalid_request", false},
		{"a garbage assertion is invalid_client", tokenCall{form: grant("client_assertion_type", auth.ClientAssertionType, "client_assertion", "a.b.c")}, 401, "invalid_client", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.tokenRequest(tc.call)
			wantOAuthError(t, r, tc.status, tc.code)
			if ch := r.Header.Get("WWW-Authenticate"); tc.basic != strings.HasPrefix(ch, "Basic ") {
				t.Fatalf("WWW-Authenticate %q (Basic challenge due: %v)", ch, tc.basic)
			}
		})
	}
	t.Run("a client of a deleted tenant is invalid_client", func(t *testing.T) {
		gone := db.Tenant(t, e.store)
		goneID, goneSecret := secretClient(t, e.store, gone, "system/*.read")
		if err := e.store.DeleteTenant(context.Background(), gone); err != nil {
			t.Fatal(err)
		}
		wantOAuthError(t, e.tokenRequest(tokenCall{host: gone + ".localhost", basic: [2]string{goneID, goneSecret}, form: grant()}), http.StatusUnauthorized, "invalid_client")
	})
	t.Run("a host of no tenant has no token endpoint", func(t *testing.T) {
		r := e.tokenRequest(tokenCall{host: "Bad_Host.localhost", basic: [2]string{clientID, secret}, form: grant()})
		wantOAuthError(t, r, http.StatusNotFound, "invalid_request")
	})
	t.Run("a GET is not a token request", func(t *testing.T) {
		resp, err := e.srv.Client().Get(e.srv.URL + "/oauth2/token?grant_type=client_credentials&client_id=" + clientID + "&client_secret=" + secret)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET /oauth2/token: %d, want 404", resp.StatusCode)
		}
	})
}

// TestTokenEndpointClientAssertions: SMART Backend Services clients
// authenticate with a JWT signed by a key of their JWKS; each assertion
// serves once.
func TestTokenEndpointClientAssertions(t *testing.T) {
	e := newAuthEnv(t, nil)
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	inline := keyClient(t, e.store, e.tenant, "", map[string]crypto.PublicKey{"r1": &rk.PublicKey, "e1": &ek.PublicKey}, "system/*.read")
	jwksSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		jwk, _ := auth.PublicJWK("e256", &e256.PublicKey)
		_ = json.NewEncoder(w).Encode(auth.JWKS{Keys: []auth.JWK{jwk}})
	}))
	t.Cleanup(jwksSrv.Close)
	remote := keyClient(t, e.store, e.tenant, jwksSrv.URL, nil, "system/*.read")
	secretID, secret := secretClient(t, e.store, e.tenant, "system/*.read")
	aud := "http://" + e.tenant + ".localhost/oauth2/token"
	post := func(a string) *response {
		return e.tokenRequest(tokenCall{form: form("grant_type", "client_credentials", "scope", "system/*.read",
			"client_assertion_type", auth.ClientAssertionType, "client_assertion", a)})
	}
	for _, tc := range []struct {
		name      string
		assertion string
	}{
		{"RS384 with an inline JWKS", assertion(t, jwt.SigningMethodRS384, rk, "r1", inline, aud, nil)},
		{"RS256 with an inline JWKS", assertion(t, jwt.SigningMethodRS256, rk, "r1", inline, aud, nil)},
		{"ES384 with an inline JWKS", assertion(t, jwt.SigningMethodES384, ek, "e1", inline, aud, nil)},
		{"ES256 with a JWKS URL", assertion(t, jwt.SigningMethodES256, e256, "e256", remote, aud, nil)},
	} {
		t.Run(tc.name+" gets a token", func(t *testing.T) {
			tok := wantToken(t, post(tc.assertion), "system/*.read")
			e2eWantStatus(t, e.do(request{Method: http.MethodGet, Path: "/Patient?_count=1", Token: e2eStr(tok)}), http.StatusOK)
		})
	}
	replayed := assertion(t, jwt.SigningMethodRS384, rk, "r1", inline, aud, nil)
	wantToken(t, post(replayed), "system/*.read")
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name      string
		assertion string
	}{
		{"a replayed assertion", replayed},
		{"an assertion for another audience", assertion(t, jwt.SigningMethodRS384, rk, "r1", inline, "https://elsewhere.example.test/token", nil)},
		{"an assertion for the FHIR base instead of the token endpoint", assertion(t, jwt.SigningMethodRS384, rk, "r1", inline, "http://"+e.tenant+".localhost/fhir/r4", nil)},
		{"an assertion living longer than five minutes", assertion(t, jwt.SigningMethodRS384, rk, "r1", inline, aud, func(c jwt.MapClaims) { c["exp"] = now.Add(time.Hour).Unix() })},
		{"an expired assertion", assertion(t, jwt.SigningMethodRS384, rk, "r1", inline, aud, func(c jwt.MapClaims) { c["exp"] = now.Add(-10 * time.Minute).Unix() })},
		{"an assertion without exp", assertion(t, jwt.SigningMethodRS384, rk, "r1", inline, aud, func(c jwt.MapClaims) { delete(c, "exp") })},
		{"an assertion without jti", assertion(t, jwt.SigningMethodRS384, rk, "r1", inline, aud, func(c jwt.MapClaims) { delete(c, "jti") })},
		{"an assertion whose sub is another client", assertion(t, jwt.SigningMethodRS384, rk, "r1", inline, aud, func(c jwt.MapClaims) { c["sub"] = remote })},
		{"an assertion signed by a key the client did not register", assertion(t, jwt.SigningMethodRS384, other, "r1", inline, aud, nil)},
		{"an assertion of an unknown kid", assertion(t, jwt.SigningMethodRS384, rk, "r9", inline, aud, nil)},
		{"an HS256 assertion keyed with the RSA modulus", assertion(t, jwt.SigningMethodHS256, rk.N.Bytes(), "r1", inline, aud, nil)},
		{"an assertion of a secret client", assertion(t, jwt.SigningMethodHS256, []byte(secret), "", secretID, aud, nil)},
		{"an assertion of an unknown client", assertion(t, jwt.SigningMethodRS384, rk, "r1", "no-such-client", aud, nil)},
	} {
		t.Run(tc.name+" is invalid_client", func(t *testing.T) {
			wantOAuthError(t, post(tc.assertion), http.StatusUnauthorized, "invalid_client")
		})
	}
	t.Run("an unsigned assertion is invalid_client", func(t *testing.T) {
		enc := base64.RawURLEncoding.EncodeToString
		claims, _ := json.Marshal(map[string]any{"iss": inline, "sub": inline, "aud": aud, "exp": now.Add(time.Minute).Unix(), "jti": rand.Text()})
		wantOAuthError(t, post(enc([]byte(`{"alg":"none"}`))+"."+enc(claims)+"."), http.StatusUnauthorized, "invalid_client")
	})
	t.Run("a key client cannot use a secret", func(t *testing.T) {
		wantOAuthError(t, e.tokenRequest(tokenCall{basic: [2]string{inline, ""}, form: form("grant_type", "client_credentials")}), http.StatusUnauthorized, "invalid_client")
	})
}
