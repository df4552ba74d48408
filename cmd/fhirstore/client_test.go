package main

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"fhirstore/server/auth"
)

var createdClient = regexp.MustCompile(`(?m)^client_id:\s+(\S+)\n(?:client_secret:\s+(\S+)\n)?`)

// createClient runs `client create` and returns the id and secret it prints.
func createClient(t *testing.T, args ...string) (id, secret string) {
	t.Helper()
	out := mustRun(t, append([]string{"client", "create"}, args...)...)
	m := createdClient.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("client create printed %q", out)
	}
	return m[1], m[2]
}

// requestToken asks the server's token endpoint for tenant's host with HTTP Basic credentials.
func requestToken(t *testing.T, s *testServer, tenant, id, secret, scope string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url("/oauth2/token"), strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = tenant + ".localhost:" + s.port
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, body.AccessToken
}

// TestClientCommandsWhileServing: clients created, listed and deleted
// while a server runs on the same embedded data dir (or reached by its
// MongoDB URI) take effect at once on its token endpoint.
func TestClientCommandsWhileServing(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	id, secret := createClient(t, "--tenant", "demo", "--scope", "system/*.read system/Patient.write", "--name", "postman", "--data-dir", dir)
	if secret == "" {
		t.Fatal("a secret client was created without printing its secret")
	}
	status, tok := requestToken(t, s, "demo", id, secret, "system/*.read")
	if status != http.StatusOK || tok == "" {
		t.Fatalf("token request of a new client: %d", status)
	}
	if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient?_count=1"), "demo.localhost:"+s.port, tok, ""); r.status != http.StatusOK {
		t.Fatalf("search with the issued token: %d %s", r.status, r.body)
	}
	if status, _ := requestToken(t, s, "demo", id, secret+"x", "system/*.read"); status != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d, want 401", status)
	}
	if list := mustRun(t, "client", "list", "--tenant", "demo", "--data-dir", dir); !strings.Contains(list, id+"\tdemo\tpostman\tsystem/*.read system/Patient.write\tsecret") {
		t.Fatalf("client list: %q", list)
	}
	if strings.Contains(mustRun(t, "client", "list", "--data-dir", dir), secret) {
		t.Fatal("client list shows the secret")
	}

	// The same for a server on MongoDB (FerretDB here), the commands given
	// its URI as with FHIRSTORE_MONGODB_URI.
	uri := startFerretDB(t, t.TempDir())
	ms := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--mongodb-uri", uri)
	mustRun(t, "tenant", "create", "acme", "--mongodb-uri", uri)
	id2, secret2 := createClient(t, "--tenant", "acme", "--scope", "system/*.*", "--mongodb-uri", uri)
	if status, _ := requestToken(t, ms, "acme", id2, secret2, "system/*.*"); status != http.StatusOK {
		t.Fatalf("token request of a client created by MongoDB URI: %d", status)
	}
	if status, _ := requestToken(t, ms, "demo", id2, secret2, "system/*.*"); status != http.StatusUnauthorized {
		t.Fatalf("an acme client on the demo host: %d, want 401", status)
	}
	if status, _ := requestToken(t, s, "acme", id2, secret2, "system/*.*"); status != http.StatusUnauthorized {
		t.Fatalf("a client of the MongoDB database on the embedded one's server: %d, want 401", status)
	}

	if got := mustRun(t, "client", "delete", id, "--data-dir", dir); got != "deleted client "+id+"\n" {
		t.Fatalf("delete: %q", got)
	}
	if status, _ := requestToken(t, s, "demo", id, secret, "system/*.read"); status != http.StatusUnauthorized {
		t.Fatalf("token request of a deleted client: %d, want 401", status)
	}
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"not found", []string{"client", "delete", id, "--data-dir", dir}},
		{"tenant not found", []string{"client", "create", "--tenant", "nope", "--data-dir", dir}},
		{"not both", []string{"client", "create", "--jwks-file", "a.json", "--jwks-url", "https://x.example/jwks", "--data-dir", dir}},
		{"not an http(s) URL", []string{"client", "create", "--jwks-url", "file:///etc/passwd", "--data-dir", dir}},
		{"--scope", []string{"client", "create", "--scope", " ", "--data-dir", dir}},
		{"want create", []string{"client", "--data-dir", dir}},
		{"want create", []string{"client", "rotate", "--data-dir", dir}},
	} {
		wantFail(t, tc.want, tc.args...)
	}
}

// TestClientWithKeysGetsTokens: a client registered with a JWKS file
// authenticates with a signed assertion; the file's private parts are not kept.
func TestClientWithKeysGetsTokens(t *testing.T) {
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := auth.PublicJWK("k1", &key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"keys": []any{map[string]any{"kty": jwk.Kty, "kid": jwk.Kid, "n": jwk.N, "e": jwk.E, "d": "c2VjcmV0"}}})
	file := filepath.Join(dir, "client.jwks")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "tenant", "create", "demo", "--data-dir", dir) // offline, before the server first made it
	id, secret := createClient(t, "--tenant", "demo", "--scope", "system/*.read", "--jwks-file", file, "--data-dir", dir)
	if secret != "" {
		t.Fatalf("a key client got a secret %q", secret)
	}
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	aud := "http://demo.localhost:" + s.port + "/oauth2/token"
	a := jwt.NewWithClaims(jwt.SigningMethodRS384, jwt.MapClaims{"iss": id, "sub": id, "aud": aud, "exp": time.Now().Add(time.Minute).Unix(), "jti": rand.Text()})
	a.Header["kid"] = "k1"
	signed, err := a.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {auth.ClientAssertionType}, "client_assertion": {signed}}
	for i, want := range []int{http.StatusOK, http.StatusUnauthorized} { // the second time is a replay
		req, _ := http.NewRequest(http.MethodPost, s.url("/oauth2/token"), strings.NewReader(form.Encode()))
		req.Host = "demo.localhost:" + s.port
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("assertion #%d: %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
	}
	if list := mustRun(t, "client", "list", "--data-dir", dir); !strings.Contains(list, id+"\tdemo\t\tsystem/*.read\tjwks") {
		t.Fatalf("client list: %q", list)
	}
}

// TestServeWithExternalIssuer: with --issuer the server accepts that
// issuer's tokens, and dev tokens only when --dev says so.
func TestServeWithExternalIssuer(t *testing.T) {
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := auth.PublicJWK("idp-1", &key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(auth.JWKS{Keys: []auth.JWK{jwk}})
	jwks := filepath.Join(t.TempDir(), "idp.jwks")
	if err := os.WriteFile(jwks, b, 0o600); err != nil {
		t.Fatal(err)
	}
	const iss = "https://login.example.test/agency"
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--issuer", iss, "--issuer-jwks-file", jwks, "--issuer-tenants", "demo", "--audience", "api://fhirstore")
	if out := s.stdout.String(); strings.Contains(out, "Bearer token") || !strings.Contains(out, "/oauth2/token") {
		t.Fatalf("the banner of a server without dev mode: %q", out)
	}
	idpToken := func(aud string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": iss, "sub": "nurse", "aud": aud, "exp": time.Now().Add(time.Minute).Unix(), "scope": "system/*.read"})
		tok.Header["kid"] = "idp-1"
		signed, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	host := "demo.localhost:" + s.port
	for _, tc := range []struct {
		name   string
		token  string
		status int
	}{
		{"a token of the issuer for the FHIR base URL", idpToken("http://" + host + "/fhir/r4"), http.StatusOK},
		{"a token of the issuer for the configured audience", idpToken("api://fhirstore"), http.StatusOK},
		{"a token of the issuer for another audience", idpToken("https://elsewhere.example.test"), http.StatusUnauthorized},
		{"a dev token without --dev", tokenFor(t, dir, "demo"), http.StatusUnauthorized},
	} {
		if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient?_count=1"), host, tc.token, ""); r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--issuer", iss, "--issuer-jwks-file", jwks, "--issuer-tenants", "demo", "--dev")
	if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient?_count=1"), "demo.localhost:"+s.port, tokenFor(t, dir, "demo"), ""); r.status != http.StatusOK {
		t.Fatalf("a dev token with --dev: %d %s", r.status, r.body)
	}
}

// TestAuthFlagsAreChecked: bad auth settings stop the server at once.
func TestAuthFlagsAreChecked(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "issuers.json")
	if err := os.WriteFile(cfgFile, []byte(`{"issuers":[{"issuer":"https://a.example.test","jwks_url":"https://a.example.test/jwks","tenants":["Bad_Name"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"needs --issuer", []string{"--issuer-jwks-url", "https://a.example.test/jwks"}},
		{"name the tenants", []string{"--issuer", "https://a.example.test", "--issuer-jwks-url", "https://a.example.test/jwks"}},
		{"JWKS URL or JWKS file", []string{"--issuer", "https://a.example.test", "--issuer-tenants", "demo"}},
		{"not both", []string{"--issuer", "https://a.example.test", "--issuer-tenants", "demo", "--issuer-jwks-url", "https://a.example.test/jwks", "--issuer-jwks-file", cfgFile}},
		{"Bad_Name", []string{"--issuer-config", cfgFile}},
		{"no such file", []string{"--issuer-config", filepath.Join(dir, "missing.json")}},
		{"--dev", []string{"--dev=maybe"}},
		{"--clock-skew", []string{"--clock-skew", "soon"}},
		{"--token-ttl", []string{"--token-ttl", "0"}},
	} {
		wantFail(t, tc.want, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir}, tc.args...)...)
	}
}
