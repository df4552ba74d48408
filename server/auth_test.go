package server_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"fhirstore/fhirschema"
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
		{"a token expired within the leeway is accepted", "Bearer " + signed(-30*time.Second), 200, ""},
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
			if len(resources) != len(fhirschema.ResourceTypes()) {
				t.Fatalf("%d resources listed, want %d", len(resources), len(fhirschema.ResourceTypes()))
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
		wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/metadata?_format=xml", Token: none}), http.StatusNotAcceptable, "")
	})
	t.Run("any other FHIR path needs a token", func(t *testing.T) {
		r := e.do(request{Method: http.MethodGet, Path: "/_history", Token: none})
		wantOutcome(t, r, http.StatusUnauthorized, "")
	})
}
