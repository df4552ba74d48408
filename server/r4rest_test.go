package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"fhirstore/server"
)

// TestURIContainsMatchesSubstrings: :contains on a uri parameter matches
// stored URIs holding the value anywhere, case-sensitively (URIs are).
func TestURIContainsMatchesSubstrings(t *testing.T) {
	e := newEnv(t)
	vs := func(id, u string) {
		if r := e.put("/ValueSet/"+id, `{"resourceType":"ValueSet","id":"`+id+`","status":"draft","url":"`+u+`"}`); r.Status != http.StatusCreated {
			t.Fatalf("store ValueSet/%s: %d %s", id, r.Status, r.Body)
		}
	}
	vs("zan", "http://example.org/fhir/ValueSet/zanzibar-codes")
	vs("other", "http://other.example/ValueSet/blood-pressure")
	vs("urn", "urn:oid:2.16.840.1.113883.6.96")
	tests := []struct {
		name, query string
		want        []string
	}{
		{"a word in the path", "url:contains=zanzibar", []string{"ValueSet/zan"}},
		{"the host part", "url:contains=example.org", []string{"ValueSet/zan"}},
		{"a common part matches several", "url:contains=/ValueSet/", []string{"ValueSet/zan", "ValueSet/other"}},
		{"the start of the value", "url:contains=http://other", []string{"ValueSet/other"}},
		{"the end of the value", "url:contains=113883.6.96", []string{"ValueSet/urn"}},
		{"a dot is a dot, not any character", "url:contains=2x16", nil},
		{"case matters in URIs", "url:contains=ZANZIBAR", nil},
		{"comma-separated values are alternatives", "url:contains=zanzibar,blood", []string{"ValueSet/zan", "ValueSet/other"}},
		{"nothing contains it", "url:contains=nowhere-xyz", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantIDs(t, ids(t, e.get("/ValueSet?"+tc.query), "match"), tc.want...)
		})
	}
}

// TestDeleteOfWhatDoesNotExist: R4 answers a delete "if the resource does
// not exist at all" as a success; nothing is written, in a plain delete
// and in a transaction alike, and If-Match still needs a current version.
func TestDeleteOfWhatDoesNotExist(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		req    request
		status int
	}{
		{"a delete answers 204", request{Method: http.MethodDelete, Path: "/Patient/never-there"}, http.StatusNoContent},
		{"Prefer return=OperationOutcome answers 200 with it", request{Method: http.MethodDelete, Path: "/Patient/never-there",
			Header: map[string]string{"Prefer": "return=OperationOutcome"}}, http.StatusOK},
		{"a transaction entry answers 204", request{Method: http.MethodPost, Path: "/",
			Body: btBundle("transaction", btOp("DELETE", "Patient/never-there", ""))}, http.StatusOK},
		{"If-Match on nothing fails its precondition", request{Method: http.MethodDelete, Path: "/Patient/never-there",
			Header: map[string]string{"If-Match": `W/"1"`}}, http.StatusPreconditionFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.req)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.req.Method == http.MethodPost {
				b := btDecode(t, r, "transaction-response", 1)
				if got := b.Entry[0].status(t); got != http.StatusNoContent {
					t.Fatalf("entry status %d, want 204", got)
				}
			}
			if n := e2eHistoryTotal(t, e, "/_history"); n != 0 {
				t.Fatalf("%d versions written, want none", n)
			}
			wantOutcome(t, e.get("/Patient/never-there"), http.StatusNotFound, "")
		})
	}
}

// TestBinaryReadNegotiation: a Binary that does not exist is 404 whatever
// the client accepts; one that exists answers FHIR JSON when asked for it,
// its own content when Accept allows its content type, 406 otherwise.
func TestBinaryReadNegotiation(t *testing.T) {
	e := newEnv(t)
	if r := e.put("/Binary/pic", `{"resourceType":"Binary","id":"pic","contentType":"image/png","data":"iVBORw0K"}`); r.Status != http.StatusCreated {
		t.Fatalf("store Binary: %d %s", r.Status, r.Body)
	}
	tests := []struct {
		name, path, accept string
		status             int
		contentType, body  string
	}{
		{"a missing Binary as PNG is 404", "/Binary/none", "image/png", http.StatusNotFound, server.FHIRJSON, ""},
		{"a missing Binary as anything is 404", "/Binary/none", "text/html;q=0.9, application/pdf", http.StatusNotFound, server.FHIRJSON, ""},
		{"a missing Binary as FHIR JSON is 404", "/Binary/none", "application/fhir+json", http.StatusNotFound, server.FHIRJSON, ""},
		{"a Binary as FHIR JSON is the resource", "/Binary/pic", "application/fhir+json", http.StatusOK, server.FHIRJSON, ""},
		{"a Binary in its content type is the content", "/Binary/pic", "image/png", http.StatusOK, "image/png", "\x89PNG\r\n"},
		{"a wildcard of the content type's family is the content", "/Binary/pic", "image/*", http.StatusOK, "image/png", "\x89PNG\r\n"},
		{"a Binary in another content type is 406", "/Binary/pic", "application/pdf", http.StatusNotAcceptable, server.FHIRJSON, ""},
		{"another type's read still negotiates first", "/Patient/none", "image/png", http.StatusNotAcceptable, server.FHIRJSON, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(request{Method: http.MethodGet, Path: tc.path, Header: map[string]string{"Accept": tc.accept}})
			if r.Status != tc.status || !strings.HasPrefix(r.Header.Get("Content-Type"), tc.contentType) {
				t.Fatalf("%d %s, want %d %s: %s", r.Status, r.Header.Get("Content-Type"), tc.status, tc.contentType, r.Body)
			}
			if tc.body != "" && string(r.Body) != tc.body {
				t.Fatalf("body %q, want %q", r.Body, tc.body)
			}
			if tc.status >= 400 {
				wantOutcome(t, r, tc.status, "")
			}
		})
	}
}

// TestEverythingStartEndAndSince: Patient/$everything's start and end keep
// the resources whose care date overlaps the range (and those of types
// without a care date), _since those changed since then; both carry over
// to the next pages.
func TestEverythingStartEndAndSince(t *testing.T) {
	e := newEnv(t)
	put := func(typ, id, body string) {
		t.Helper()
		if r := e.put("/"+typ+"/"+id, body); r.Status != http.StatusCreated {
			t.Fatalf("store %s/%s: %d %s", typ, id, r.Status, r.Body)
		}
	}
	obs := func(id, when string) string {
		return `{"resourceType":"Observation","id":"` + id + `","status":"final","code":{"text":"x"},"subject":{"reference":"Patient/pe"}` + when + `}`
	}
	put("Patient", "pe", `{"resourceType":"Patient","id":"pe"}`)
	put("Observation", "o2019", obs("o2019", `,"effectiveDateTime":"2019-05-01"`))
	put("Observation", "o2021", obs("o2021", `,"effectiveDateTime":"2021-03-04T10:00:00Z"`))
	put("Observation", "o-span", obs("o-span", `,"effectivePeriod":{"start":"2020-12-20","end":"2021-01-10"}`))
	put("Observation", "o-undated", obs("o-undated", ""))
	put("Encounter", "enc2020", `{"resourceType":"Encounter","id":"enc2020","status":"finished","class":{"code":"HH"},"subject":{"reference":"Patient/pe"},"period":{"start":"2020-06-01T09:00:00Z","end":"2020-06-01T10:00:00Z"}}`)
	put("Coverage", "cov", `{"resourceType":"Coverage","id":"cov","status":"active","beneficiary":{"reference":"Patient/pe"},"payor":[{"reference":"Patient/pe"}]}`)
	time.Sleep(5 * time.Millisecond)
	since := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	time.Sleep(5 * time.Millisecond)
	put("Observation", "o-new", obs("o-new", `,"effectiveDateTime":"2018-01-01"`))

	all := []string{"Coverage/cov", "Encounter/enc2020", "Observation/o-new", "Observation/o-span", "Observation/o-undated",
		"Observation/o2019", "Observation/o2021", "Patient/pe"}
	tests := []struct {
		name, query string
		want        []string
	}{
		{"no range is everything", "", all},
		{"start keeps what ends at or after it", "start=2021-01-01",
			[]string{"Coverage/cov", "Observation/o-span", "Observation/o2021", "Patient/pe"}},
		{"end keeps what starts at or before it", "end=2019-12-31",
			[]string{"Coverage/cov", "Observation/o-new", "Observation/o2019", "Patient/pe"}},
		{"start and end keep what overlaps", "start=2020-01-01&end=2020-12-31",
			[]string{"Coverage/cov", "Encounter/enc2020", "Observation/o-span", "Patient/pe"}},
		{"_since keeps what changed since", "_since=" + url.QueryEscape(since), []string{"Observation/o-new"}},
		{"_since in the future keeps nothing, the patient neither", "_since=2999-01-01T00:00:00Z", nil},
		{"_since and end together", "_since=" + url.QueryEscape(since) + "&end=2017-12-31", nil},
		{"_type with start", "_type=Encounter,Observation&start=2020-01-01&end=2020-12-31",
			[]string{"Encounter/enc2020", "Observation/o-span"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := followPages(t, e, "/Patient/pe/$everything?_count=100&"+tc.query)
			wantIDs(t, got, tc.want...)
			paged, pages := followPages(t, e, "/Patient/pe/$everything?_count=1&"+tc.query)
			wantIDs(t, paged, tc.want...)
			if len(tc.want) > 1 && pages < len(tc.want) {
				t.Fatalf("%d pages of one for %d resources", pages, len(tc.want))
			}
		})
	}
	for _, bad := range []string{"start", "end", "_since"} {
		t.Run("a malformed "+bad+" is 400", func(t *testing.T) {
			wantOutcome(t, e.get("/Patient/pe/$everything?"+bad+"=yesterday"), http.StatusBadRequest, bad)
		})
	}
}
