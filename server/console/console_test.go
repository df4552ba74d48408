package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"fhirstore/server/console"
)

func TestConsoleFilesAreServedWithStrictHeaders(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, path, contentType string
		status                  int
	}{
		{"the console page", "/console/", "text/html", http.StatusOK},
		{"the script", "/console/js/app.js", "text/javascript", http.StatusOK},
		{"a view module", "/console/js/views/search.js", "text/javascript", http.StatusOK},
		{"the stylesheet", "/console/style.css", "text/css", http.StatusOK},
		{"the icon", "/console/favicon.svg", "image/svg+xml", http.StatusOK},
		{"a file that does not exist", "/console/nope.js", "text/plain", http.StatusNotFound},
		{"the API without a token", "/console/api/overview", "application/fhir+json", http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := e.call(http.MethodGet, tc.path, "", map[string]string{"Authorization": ""})
			if status != tc.status {
				t.Fatalf("status %d, want %d: %.200s", status, tc.status, body)
			}
			if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Errorf("Content-Type %q, want %s", ct, tc.contentType)
			}
			if len(h.Values("Set-Cookie")) > 0 {
				t.Errorf("the console sets a cookie: %v", h.Values("Set-Cookie"))
			}
			if tc.status == http.StatusOK {
				wantStrictHeaders(t, h)
			}
		})
	}
}

func wantStrictHeaders(t *testing.T, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	if csp != console.CSP {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
		if strings.Contains(csp, bad) {
			t.Errorf("the policy allows %s: %q", bad, csp)
		}
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("the policy lacks %s", want)
		}
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("missing hardening headers: %v", h)
	}
}

func TestConsoleFilesRevalidateByETag(t *testing.T) {
	e := newEnv(t)
	_, h, _ := e.call(http.MethodGet, "/console/js/app.js", "", nil)
	etag := h.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if status, _, _ := e.call(http.MethodGet, "/console/js/app.js", "", map[string]string{"If-None-Match": etag}); status != http.StatusNotModified {
		t.Errorf("revalidation status %d, want 304", status)
	}
}

// The console works offline: nothing it ships loads from another origin,
// and its script never writes HTML.
func TestConsoleFilesLoadNothingFromElsewhere(t *testing.T) {
	remote := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import|import\s*\(?\s*["']https?:`)
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*['"]on`)
	err := filepath.WalkDir("static", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if m := remote.Find(b); m != nil {
			t.Errorf("%s loads from another origin: %s", p, m)
		}
		if strings.HasSuffix(p, ".js") {
			if m := sinks.Find(b); m != nil {
				t.Errorf("%s uses an HTML sink: %s", p, m)
			}
		}
		if strings.HasSuffix(p, ".html") && regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|style\s*=`).Match(b) {
			t.Errorf("%s has inline script, handlers or styles", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRootSendsBrowsersToTheConsole(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, path, accept string
		status             int
		location           string
	}{
		{"a browser", "/", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", http.StatusFound, "/console/"},
		{"a FHIR client", "/", "application/fhir+json", http.StatusNotFound, ""},
		{"a client with no Accept", "/", "", http.StatusNotFound, ""},
		{"the console without its slash", "/console", "text/html", http.StatusMovedPermanently, "/console/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := e.call(http.MethodGet, tc.path, "", map[string]string{"Accept": tc.accept})
			if status != tc.status || h.Get("Location") != tc.location {
				t.Fatalf("status %d Location %q, want %d %q: %.200s", status, h.Get("Location"), tc.status, tc.location, body)
			}
			if status == http.StatusNotFound && !strings.Contains(string(body), "OperationOutcome") {
				t.Errorf("an API client gets no OperationOutcome: %s", body)
			}
		})
	}
}

type overview struct {
	Tenant string   `json:"tenant"`
	Scopes []string `json:"scopes"`
	Types  []struct {
		Type   string `json:"type"`
		Count  *int64 `json:"count"`
		Access string `json:"access"`
	} `json:"types"`
	Server struct {
		Version, Engine string
	} `json:"server"`
}

func TestConsoleOverviewFollowsTheTokensScopes(t *testing.T) {
	e := newEnv(t)
	e.create("Patient", `{"resourceType":"Patient"}`)
	e.create("Patient", `{"resourceType":"Patient"}`)
	e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`)
	other := *e
	other.tenant = "someone-else"
	tests := []struct {
		name, token string
		status      int
		counts      map[string]int64 // nil value: no count shown
		access      map[string]string
	}{
		{"full access", e.token, http.StatusOK, map[string]int64{"Patient": 2, "Observation": 1, "Encounter": 0}, map[string]string{"Patient": "cruds"}},
		{"read-only", e.tokenFor("system/*.rs"), http.StatusOK, map[string]int64{"Patient": 2}, map[string]string{"Patient": "rs", "Observation": "rs"}},
		{"one type", e.tokenFor("system/Patient.read"), http.StatusOK, map[string]int64{"Patient": 2, "Observation": -1}, map[string]string{"Patient": "rs", "Observation": ""}},
		{"another tenant's token", other.tokenFor("system/*.*"), http.StatusForbidden, nil, nil},
		{"a bad token", "nonsense", http.StatusUnauthorized, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := e.call(http.MethodGet, "/console/api/overview", "", map[string]string{"Authorization": "Bearer " + tc.token})
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if status != http.StatusOK {
				return
			}
			var ov overview
			if err := json.Unmarshal(body, &ov); err != nil {
				t.Fatal(err)
			}
			if ov.Tenant != e.tenant || ov.Server.Engine != e.store.Engine() || ov.Server.Version != "test-version" {
				t.Errorf("tenant %q engine %q version %q", ov.Tenant, ov.Server.Engine, ov.Server.Version)
			}
			for _, ti := range ov.Types {
				if want, ok := tc.counts[ti.Type]; ok {
					switch {
					case want < 0 && ti.Count != nil:
						t.Errorf("%s count shown (%d) to a token that cannot search it", ti.Type, *ti.Count)
					case want >= 0 && (ti.Count == nil || *ti.Count != want):
						t.Errorf("%s count = %v, want %d", ti.Type, ti.Count, want)
					}
				}
				if want, ok := tc.access[ti.Type]; ok && ti.Access != want {
					t.Errorf("%s access = %q, want %q", ti.Type, ti.Access, want)
				}
			}
		})
	}
}

func TestConsoleListsTheReferencesThatCanPointAtAType(t *testing.T) {
	e := newEnv(t)
	status, _, body := e.call(http.MethodGet, "/console/api/references/Patient", "", nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var r struct{ Revinclude []string }
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Observation:subject", "Encounter:patient", "Condition:subject"} {
		if !slices.Contains(r.Revinclude, want) {
			t.Errorf("%s is missing from %d references", want, len(r.Revinclude))
		}
	}
	if status, _, _ := e.call(http.MethodGet, "/console/api/references/Nope", "", nil); status != http.StatusNotFound {
		t.Errorf("unknown type: status %d", status)
	}
	if status, _, _ := e.call(http.MethodGet, "/console/api/nothing", "", nil); status != http.StatusNotFound {
		t.Errorf("unknown endpoint: status %d", status)
	}
}

func TestConsoleCountsWhatPointsAtAResource(t *testing.T) {
	e := newEnv(t)
	pid := e.create("Patient", `{"resourceType":"Patient"}`)
	for range 2 {
		e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/`+pid+`"}}`)
	}
	e.create("Encounter", `{"resourceType":"Encounter","status":"finished","class":{"code":"HH"},"subject":{"reference":"Patient/`+pid+`"}}`)
	e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"someone else"}}`)
	tests := []struct {
		name, scope string
		want        []string
	}{
		{"every type", "system/*.*", []string{"Encounter:patient=1", "Encounter:subject=1", "Observation:patient=2", "Observation:subject=2"}},
		{"only what the token may search", "system/Observation.rs system/Patient.rs", []string{"Observation:patient=2", "Observation:subject=2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := e.call(http.MethodGet, "/console/api/referrers/Patient/"+pid, "", map[string]string{"Authorization": "Bearer " + e.tokenFor(tc.scope)})
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var r struct {
				Referrers []struct {
					Type, Param string
					Count       int
				}
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range r.Referrers {
				got = append(got, fmt.Sprintf("%s:%s=%d", x.Type, x.Param, x.Count))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("referrers = %v, want %v", got, tc.want)
			}
		})
	}
	if status, _, _ := e.call(http.MethodGet, "/console/api/referrers/Patient", "", nil); status != http.StatusNotFound {
		t.Errorf("a reference without id: status %d", status)
	}
}

func TestConsoleLatestChangesLeaveOutTheAuditTrail(t *testing.T) {
	const audit = `{"resourceType":"AuditEvent","type":{"code":"rest"},"recorded":"2024-01-01T00:00:00Z","agent":[{"requestor":true}],"source":{"observer":{"display":"x"}}}`
	tests := []struct {
		name   string
		audits int // AuditEvents written after the changes
	}{
		{"a few audit records (one page of system history)", 1},
		{"more audit records than a page (the type histories)", 120},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"First"}]}`)
			oid := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`)
			e.fhir(http.MethodPut, "/Patient/"+pid, `{"resourceType":"Patient","id":"`+pid+`","name":[{"family":"Second"}]}`, http.StatusOK)
			entries := make([]string, tc.audits)
			for i := range entries {
				entries[i] = `{"resource":` + audit + `,"request":{"method":"POST","url":"AuditEvent"}}`
			}
			e.fhir(http.MethodPost, "", `{"resourceType":"Bundle","type":"batch","entry":[`+strings.Join(entries, ",")+`]}`, http.StatusOK)
			status, _, body := e.call(http.MethodGet, "/console/api/changes", "", nil)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var r struct {
				Changes []struct {
					Type, ID, Method string
					Version          int
				}
				Hidden []string
			}
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range r.Changes {
				got = append(got, fmt.Sprintf("%s/%s v%d %s", c.Type, c.ID, c.Version, c.Method))
			}
			want := []string{"Patient/" + pid + " v2 PUT", "Observation/" + oid + " v1 POST", "Patient/" + pid + " v1 POST"}
			if !slices.Equal(got, want) {
				t.Errorf("changes = %q, want %q", got, want)
			}
			if !slices.Equal(r.Hidden, []string{"AuditEvent"}) {
				t.Errorf("hidden = %v", r.Hidden)
			}
		})
	}
}
