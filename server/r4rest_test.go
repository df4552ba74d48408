package server_test

import (
	"net/http"
	"testing"
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
