package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// TestIDSearch searches by _id, which is answered from each row's own key
// rather than a search value: every form, modifier and _filter test, a
// deleted resource, the system search, and the modifiers that do not
// apply to an id.
func TestIDSearch(t *testing.T) {
	e := newEnv(t)
	p := func(family string) string {
		return e.create("Patient", `{"resourceType":"Patient","name":[{"family":"`+family+`"}]}`)
	}
	a, b, c, gone := p("Ada"), p("Bo"), p("Cy"), p("Gone")
	obs := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`)
	if r := e.do(request{Method: http.MethodDelete, Path: "/Patient/" + gone}); r.Status != http.StatusNoContent && r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	sorted := func(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"_id=" + a, []string{a}},
		{"_id=" + a + "," + b + ",no-such-id", sorted(a, b)},
		{"_id=" + gone, nil},
		{"_id=" + obs, nil},
		{"_id:not=" + a, sorted(b, c)},
		{"_id:missing=false", sorted(a, b, c)},
		{"_id:missing=true", nil},
		{"_id=" + a + "&family=Ada", []string{a}},
		{"_id=" + a + "&family=Bo", nil},
		{"_filter=" + url.QueryEscape("_id eq "+b), []string{b}},
		{"_filter=" + url.QueryEscape("_id eq "+a+" or _id eq "+c), sorted(a, c)},
		{"_filter=" + url.QueryEscape("not (_id eq "+a+")"), sorted(b, c)},
		{"_filter=" + url.QueryEscape("_id ne "+a+" and family sw C"), []string{c}},
		{"_filter=" + url.QueryEscape("_id pr true"), sorted(a, b, c)},
		{"_has:Observation:subject:status=final&_id=" + a, nil},
	} {
		got := sorted(matchIDs(t, e.get("/Patient?"+tc.query))...)
		if !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 {
			t.Errorf("Patient?%s: %v, want %v", tc.query, got, tc.want)
		}
	}
	if got := matchIDs(t, e.get("?_id="+a+","+obs)); !slices.Equal(sorted(got...), sorted(a, obs)) {
		t.Errorf("system search by _id: %v, want %v", got, sorted(a, obs))
	}
	for _, m := range []string{"text", "of-type"} {
		wantOutcome(t, e.get("/Patient?_id:"+m+"="+a), http.StatusBadRequest, "_id:"+m)
	}
}
