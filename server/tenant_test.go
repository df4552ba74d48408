package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// e2eRaw sends raw bytes as one HTTP request to e's server and reads the answer.
func e2eRaw(t testing.TB, e *env, raw string) *response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", e.srv.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// e2eEnvWithoutDefaultTenant is newEnv with Config.DefaultTenant empty,
// which newEnv cannot express (it fills an empty one with its tenant).
func e2eEnvWithoutDefaultTenant(t testing.TB) *env {
	t.Helper()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	cfg := server.Config{BaseDomain: "localhost", MaxBodyBytes: server.DefaultMaxBodyBytes}
	h := server.New(cfg, st, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, store: st, tenant: tenant, token: signToken(t, tenant, time.Hour), cfg: cfg}
}

// e2eFamily is name[0].family of a Patient answer, "" when there is none.
func e2eFamily(t testing.TB, r *response) string {
	t.Helper()
	if r.Status != http.StatusOK {
		return ""
	}
	names, _ := r.JSON(t)["name"].([]any)
	if len(names) == 0 {
		return ""
	}
	f, _ := names[0].(map[string]any)["family"].(string)
	return f
}

// TestTenantsAreChosenByHostAndIsolated: two tenants on one server, each
// reached by its host name, never see each other's data.
func TestTenantsAreChosenByHostAndIsolated(t *testing.T) {
	e := newEnv(t) // tenant A, also the default tenant
	a, tokA := e.tenant, e.token
	b := db.Tenant(t, e.store)
	tokB := signToken(t, b, time.Hour)
	hostA, hostB := a+".localhost", b+".localhost"

	// The same id in both tenants, and one resource only A has.
	e2eWantStatus(t, e.do(request{Method: http.MethodPut, Path: "/Patient/shared", Host: hostA, Body: `{"resourceType":"Patient","id":"shared","name":[{"family":"FromA"}]}`}), http.StatusCreated)
	e2eWantStatus(t, e.do(request{Method: http.MethodPut, Path: "/Patient/shared", Host: hostB, Token: &tokB, Body: `{"resourceType":"Patient","id":"shared","name":[{"family":"FromB"}]}`}), http.StatusCreated)
	onlyA := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"OnlyA"}]}`)
	port := e.srv.Listener.Addr().(*net.TCPAddr).Port
	portS := ":" + strconv.Itoa(port)

	cases := []struct {
		name   string
		host   string
		token  string
		path   string
		status int
		family string
	}{
		{"tenant A's host reads A's resource", hostA, tokA, "/Patient/shared", 200, "FromA"},
		{"tenant B's host reads B's resource of the same id", hostB, tokB, "/Patient/shared", 200, "FromB"},
		{"a resource of A is not found through B", hostB, tokB, "/Patient/" + onlyA, 404, ""},
		{"B's token on A's host is 403", hostA, tokB, "/Patient/shared", 403, ""},
		{"A's token on B's host is 403", hostB, tokA, "/Patient/shared", 403, ""},
		{"a tenant host with a port selects the tenant", hostB + portS, tokB, "/Patient/shared", 200, "FromB"},
		{"the tenant label is case-insensitive", strings.ToUpper(b) + ".LocalHost", tokB, "/Patient/shared", 200, "FromB"},
		{"a fully qualified host with a trailing dot selects the tenant", hostB + ".", tokB, "/Patient/shared", 200, "FromB"},
		{"127.0.0.1 with a port goes to the default tenant", "127.0.0.1" + portS, tokA, "/Patient/shared", 200, "FromA"},
		{"localhost goes to the default tenant", "localhost", tokA, "/Patient/shared", 200, "FromA"},
		{"localhost with a port goes to the default tenant", "localhost" + portS, tokA, "/Patient/shared", 200, "FromA"},
		{"an IPv6 host goes to the default tenant", "[::1]" + portS, tokA, "/Patient/shared", 200, "FromA"},
		{"a plain machine name goes to the default tenant", "fhirbox", tokA, "/Patient/shared", 200, "FromA"},
		{"B's token on the default tenant's host is 403", "127.0.0.1" + portS, tokB, "/Patient/shared", 403, ""},
		{"B's label under another domain goes to the default tenant, not to B", b + ".example.org", tokB, "/Patient/shared", 403, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.token
			r := e.do(request{Method: http.MethodGet, Path: tc.path, Host: tc.host, Token: &tok})
			if tc.status != http.StatusOK {
				wantOutcome(t, r, tc.status, "")
			}
			e2eWantStatus(t, r, tc.status)
			if got := e2eFamily(t, r); got != tc.family {
				t.Fatalf("family %q, want %q", got, tc.family)
			}
			for _, leak := range []string{"FromA", "FromB", "OnlyA"} {
				if leak != tc.family && strings.Contains(string(r.Body), leak) {
					t.Fatalf("the answer leaks %s: %s", leak, r.Body)
				}
			}
		})
	}

	t.Run("system history of B holds only B's versions", func(t *testing.T) {
		r := e.do(request{Method: http.MethodGet, Path: "/_history", Host: hostB, Token: &tokB})
		e2eWantStatus(t, r, http.StatusOK)
		if total := r.JSON(t)["total"]; fmt.Sprint(total) != "1" {
			t.Fatalf("total %v, want 1: %s", total, r.Body)
		}
		if strings.Contains(string(r.Body), "FromA") || strings.Contains(string(r.Body), onlyA) {
			t.Fatalf("B's history shows A's data: %s", r.Body)
		}
	})

	t.Run("a write through B leaves A's resource of the same id alone", func(t *testing.T) {
		e2eWantStatus(t, e.do(request{Method: http.MethodDelete, Path: "/Patient/shared", Host: hostB, Token: &tokB}), http.StatusNoContent)
		if got := e2eFamily(t, e.do(request{Method: http.MethodGet, Path: "/Patient/shared", Host: hostA})); got != "FromA" {
			t.Fatalf("A's resource after B's delete: family %q", got)
		}
		wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/Patient/shared", Host: hostB, Token: &tokB}), http.StatusGone, "")
	})
}

// TestUnknownTenant: a well-formed tenant name that was never created.
func TestUnknownTenant(t *testing.T) {
	e := newEnv(t)
	const ghost = "ghost-e2e"
	host := ghost + ".localhost"
	tokGhost := signToken(t, ghost, time.Hour)
	none := ""
	t.Run("with a token for it is 404", func(t *testing.T) {
		r := e.do(request{Method: http.MethodGet, Path: "/Patient/x", Host: host, Token: &tokGhost})
		wantOutcome(t, r, http.StatusNotFound, "")
		if !strings.Contains(string(r.Body), "tenant") {
			t.Fatalf("the 404 does not say the tenant is unknown: %s", r.Body)
		}
	})
	t.Run("a create with a token for it is 404 and creates nothing", func(t *testing.T) {
		r := e.do(request{Method: http.MethodPost, Path: "/Patient", Host: host, Token: &tokGhost, Body: `{"resourceType":"Patient"}`})
		wantOutcome(t, r, http.StatusNotFound, "")
		ok, err := e.store.TenantExists(context.Background(), ghost)
		if err != nil || ok {
			t.Fatalf("the tenant exists after the create: %v %v", ok, err)
		}
	})
	t.Run("with another tenant's token is 403", func(t *testing.T) {
		wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/Patient/x", Host: host}), http.StatusForbidden, "")
	})
	t.Run("without a token is 401, telling strangers nothing", func(t *testing.T) {
		wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/Patient/x", Host: host, Token: &none}), http.StatusUnauthorized, "")
	})
	t.Run("once created it is served at once", func(t *testing.T) {
		if err := e.store.CreateTenant(context.Background(), ghost); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.store.DeleteTenant(context.Background(), ghost) })
		r := e.do(request{Method: http.MethodPost, Path: "/Patient", Host: host, Token: &tokGhost, Body: `{"resourceType":"Patient"}`})
		e2eWantStatus(t, r, http.StatusCreated)
	})
}

// TestCraftedHostsReachNoTenant: host names that are not a tenant label
// under the base domain never reach a tenant's data.
func TestCraftedHostsReachNoTenant(t *testing.T) {
	e := newEnv(t)
	b := db.Tenant(t, e.store)
	tokB := signToken(t, b, time.Hour)
	e2eWantStatus(t, e.do(request{Method: http.MethodPut, Path: "/Patient/p", Body: `{"resourceType":"Patient","id":"p","name":[{"family":"FromA"}]}`}), http.StatusCreated)
	e2eWantStatus(t, e.do(request{Method: http.MethodPut, Path: "/Patient/p", Host: b + ".localhost", Token: &tokB, Body: `{"resourceType":"Patient","id":"p","name":[{"family":"FromB"}]}`}), http.StatusCreated)
	cases := []struct {
		name, host, tokenFor string
		status               int
	}{
		{"two labels under the base domain", b + "." + e.tenant + ".localhost", b, 404},
		{"two labels, the other order", e.tenant + "." + b + ".localhost", e.tenant, 404},
		{"an empty label between dots", "..localhost", e.tenant, 404},
		{"an empty label", ".localhost", e.tenant, 404},
		{"a percent-encoded NUL", b + "%00.localhost", b, 404},
		{"a leading hyphen", "-" + b + ".localhost", b, 404},
		{"a trailing hyphen", b + "-.localhost", b, 404},
		{"an underscore", b + "_x.localhost", b, 404},
		{"the reserved name system", "system.localhost", "system", 404},
		{"the reserved name admin", "admin.localhost", "admin", 404},
		{"the reserved name local", "local.localhost", "local", 404},
		{"a label of 33 characters", strings.Repeat("a", 33) + ".localhost", strings.Repeat("a", 33), 404},
		{"a label with a dollar", b + "$.localhost", b, 404},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is "+http.StatusText(tc.status), func(t *testing.T) {
			tok := signToken(t, tc.tokenFor, time.Hour)
			for _, req := range []request{
				{Method: http.MethodGet, Path: "/Patient/p", Host: tc.host, Token: &tok},
				{Method: http.MethodGet, Path: "/_history", Host: tc.host, Token: &tok},
				{Method: http.MethodPut, Path: "/Patient/p", Host: tc.host, Token: &tok, Body: `{"resourceType":"Patient","id":"p","name":[{"family":"Intruder"}]}`},
			} {
				r := e.do(req)
				wantOutcome(t, r, tc.status, "")
				if strings.Contains(string(r.Body), "FromA") || strings.Contains(string(r.Body), "FromB") {
					t.Fatalf("%s %s on %q leaks data: %s", req.Method, req.Path, tc.host, r.Body)
				}
			}
			if got := e2eFamily(t, e.get("/Patient/p")); got != "FromA" {
				t.Fatalf("A's patient changed: family %q", got)
			}
			if got := e2eFamily(t, e.do(request{Method: http.MethodGet, Path: "/Patient/p", Host: b + ".localhost", Token: &tokB})); got != "FromB" {
				t.Fatalf("B's patient changed: family %q", got)
			}
		})
	}

	// Requests the Go client will not send, written on the wire.
	raw := []struct {
		name, request string
		status        int
		family        string
	}{
		{"an absolute request URI naming B with A's token and A's Host is 403",
			"GET http://" + b + ".localhost/fhir/r4/Patient/p HTTP/1.1\r\nHost: " + e.tenant + ".localhost\r\nAuthorization: Bearer " + e.token + "\r\nConnection: close\r\n\r\n", 403, ""},
		{"an absolute request URI naming B with B's token is served from B",
			"GET http://" + b + ".localhost/fhir/r4/Patient/p HTTP/1.1\r\nHost: " + e.tenant + ".localhost\r\nAuthorization: Bearer " + tokB + "\r\nConnection: close\r\n\r\n", 200, "FromB"},
		{"two Host headers are 400",
			"GET /fhir/r4/Patient/p HTTP/1.1\r\nHost: " + e.tenant + ".localhost\r\nHost: " + b + ".localhost\r\nAuthorization: Bearer " + tokB + "\r\nConnection: close\r\n\r\n", 400, ""},
		{"a Host with a space is 400",
			"GET /fhir/r4/Patient/p HTTP/1.1\r\nHost: " + b + " .localhost\r\nAuthorization: Bearer " + tokB + "\r\nConnection: close\r\n\r\n", 400, ""},
		{"a Host with a NUL byte is 400",
			"GET /fhir/r4/Patient/p HTTP/1.1\r\nHost: " + b + "\x00.localhost\r\nAuthorization: Bearer " + tokB + "\r\nConnection: close\r\n\r\n", 400, ""},
		{"an HTTP/1.1 request without Host is 400",
			"GET /fhir/r4/Patient/p HTTP/1.1\r\nAuthorization: Bearer " + tokB + "\r\nConnection: close\r\n\r\n", 400, ""},
		{"an HTTP/1.0 request without Host with B's token is 403 (default tenant A)",
			"GET /fhir/r4/Patient/p HTTP/1.0\r\nAuthorization: Bearer " + tokB + "\r\n\r\n", 403, ""},
	}
	for _, tc := range raw {
		t.Run(tc.name, func(t *testing.T) {
			r := e2eRaw(t, e, tc.request)
			e2eWantStatus(t, r, tc.status)
			if tc.status == http.StatusForbidden {
				wantOutcome(t, r, tc.status, "")
			}
			if r.Status == http.StatusOK {
				if got := e2eFamily(t, r); got != tc.family {
					t.Fatalf("family %q, want %q", got, tc.family)
				}
			}
			for _, leak := range []string{"FromA", "FromB"} {
				if leak != tc.family && strings.Contains(string(r.Body), leak) {
					t.Fatalf("the answer leaks %s: %s", leak, r.Body)
				}
			}
		})
	}
}

// TestDefaultTenant: hosts without a tenant label and Config.DefaultTenant.
func TestDefaultTenant(t *testing.T) {
	t.Run("disabled: a bare host is 404 even with a valid token", func(t *testing.T) {
		e := e2eEnvWithoutDefaultTenant(t)
		id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Tenanted"}]}`)
		port := strconv.Itoa(e.srv.Listener.Addr().(*net.TCPAddr).Port)
		for _, host := range []string{"127.0.0.1:" + port, "localhost", "localhost:" + port, "fhirbox", "[::1]:" + port} {
			r := e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Host: host})
			wantOutcome(t, r, http.StatusNotFound, "")
			if strings.Contains(string(r.Body), "Tenanted") {
				t.Fatalf("host %q leaks data: %s", host, r.Body)
			}
		}
		if got := e2eFamily(t, e.get("/Patient/"+id)); got != "Tenanted" {
			t.Fatalf("the tenant's own host: family %q", got)
		}
		r := e.do(request{Method: http.MethodGet, Path: "/metadata", Host: "127.0.0.1:" + port, Token: e2eStr("")})
		e2eWantStatus(t, r, http.StatusOK)
	})
	t.Run("naming a tenant that does not exist: a bare host is 404 for its token, 403 for others", func(t *testing.T) {
		const ghost = "no-default-e2e"
		e := newEnv(t, func(c *server.Config, _ *store.Options) { c.DefaultTenant = ghost })
		id := e.create("Patient", `{"resourceType":"Patient"}`)
		tok := signToken(t, ghost, time.Hour)
		wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Host: "127.0.0.1", Token: &tok}), http.StatusNotFound, "")
		wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Host: "localhost"}), http.StatusForbidden, "")
		e2eWantStatus(t, e.get("/Patient/"+id), http.StatusOK)
	})
	t.Run("another base domain: the label under it selects the tenant", func(t *testing.T) {
		e := newEnv(t, func(c *server.Config, _ *store.Options) { c.BaseDomain = "fhir.example.org" })
		id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Domain"}]}`) // harness host: {tenant}.localhost → default tenant
		for _, host := range []string{e.tenant + ".fhir.example.org", strings.ToUpper(e.tenant) + ".FHIR.Example.org:443"} {
			if got := e2eFamily(t, e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Host: host})); got != "Domain" {
				t.Fatalf("host %q: family %q", host, got)
			}
		}
		wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Host: "a.b.fhir.example.org"}), http.StatusNotFound, "")
	})
}
