package server_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// systemFixtures are resources of several types for the system search
// tests; "before" marks those written before the instant the tests call t0.
var systemFixtures = []struct{ typ, id, body string }{
	{"Patient", "sp1", `{"resourceType":"Patient","id":"sp1","meta":{"tag":[{"system":"urn:tags","code":"vip"}],
		"profile":["http://example.org/StructureDefinition/pat"],"source":"urn:src:ehr"}}`},
	{"Patient", "sp2", `{"resourceType":"Patient","id":"sp2","meta":{"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-Confidentiality","code":"R"}]}}`},
	{"Organization", "sorg", `{"resourceType":"Organization","id":"sorg","name":"Clinic","meta":{"tag":[{"system":"urn:tags","code":"vip"}]}}`},
	{"Observation", "so1", `{"resourceType":"Observation","id":"so1","status":"final","code":{"text":"pulse"},
		"subject":{"reference":"Patient/sp1"},"meta":{"source":"urn:src:ehr"}}`},
	{"Observation", "so2", `{"resourceType":"Observation","id":"so2","status":"final","code":{"text":"weight"},"subject":{"reference":"Patient/sp2"}}`},
	{"List", "slist", `{"resourceType":"List","id":"slist","status":"current","mode":"changes",
		"entry":[{"item":{"reference":"Patient/sp1"}},{"item":{"reference":"Observation/so2"}},{"deleted":true,"item":{"reference":"Organization/sorg"}}]}`},
}

// systemEnv stores the fixtures; the last two are written after t0.
func systemEnv(t *testing.T) (*env, string) {
	t.Helper()
	e := newEnv(t)
	var t0 string
	for i, f := range systemFixtures {
		if i == len(systemFixtures)-2 {
			time.Sleep(5 * time.Millisecond)
			t0 = time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
			time.Sleep(5 * time.Millisecond)
		}
		if r := e.put("/"+f.typ+"/"+f.id, f.body); r.Status != http.StatusCreated {
			t.Fatalf("store %s/%s: %d %s", f.typ, f.id, r.Status, r.Body)
		}
		time.Sleep(2 * time.Millisecond) // each its own lastUpdated (milliseconds), so their order is the order written
	}
	return e, t0
}

func TestSystemSearchAcrossTypes(t *testing.T) {
	e, t0 := systemEnv(t)
	all := []string{"List/slist", "Observation/so1", "Observation/so2", "Organization/sorg", "Patient/sp1", "Patient/sp2"}
	tests := []struct {
		name, query string
		want        []string
	}{
		{"no parameter is every resource", "", all},
		{"_id finds the resource whatever its type", "_id=sp1", []string{"Patient/sp1"}},
		{"_id with several values", "_id=sp2,so1,nothing", []string{"Patient/sp2", "Observation/so1"}},
		{"_type restricts the types", "_type=Patient,Organization", []string{"Organization/sorg", "Patient/sp1", "Patient/sp2"}},
		{"_type and _id together", "_type=Observation&_id=sp1,so1", []string{"Observation/so1"}},
		{"_tag across types", "_tag=urn:tags|vip", []string{"Organization/sorg", "Patient/sp1"}},
		{"_profile", "_profile=http://example.org/StructureDefinition/pat", []string{"Patient/sp1"}},
		{"_security", "_security=http://terminology.hl7.org/CodeSystem/v3-Confidentiality|R", []string{"Patient/sp2"}},
		{"_source", "_source=urn:src:ehr", []string{"Observation/so1", "Patient/sp1"}},
		{"_lastUpdated after an instant", "_lastUpdated=gt" + url.QueryEscape(t0), []string{"Observation/so2", "List/slist"}},
		{"_lastUpdated before an instant", "_lastUpdated=lt" + url.QueryEscape(t0), []string{"Organization/sorg", "Observation/so1", "Patient/sp1", "Patient/sp2"}},
		{"_list is the List's items, not those marked deleted", "_list=slist", []string{"Observation/so2", "Patient/sp1"}},
		{"_list of an unknown List is nothing", "_list=nolist", nil},
		{"_list with _type", "_list=slist&_type=Patient", []string{"Patient/sp1"}},
		{"_has finds what others refer to", "_has:Observation:subject:code:text=weight", []string{"Patient/sp2"}},
		{"unknown parameters are ignored by default", "name=x&_id=sp1", []string{"Patient/sp1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantIDs(t, ids(t, e.get("?"+tc.query), "match"), tc.want...)
			r := e.do(request{Method: http.MethodPost, Path: "/_search", Body: tc.query,
				Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
			wantIDs(t, ids(t, r, "match"), tc.want...)
			if n := searchTotal(t, e, "?"+tc.query+"&_summary=count"); n != len(tc.want) {
				t.Fatalf("_summary=count: total %d, want %d", n, len(tc.want))
			}
		})
	}
}

// TestTypeSearchList: _list on a type search keeps the List's items of
// that type.
func TestTypeSearchList(t *testing.T) {
	e, _ := systemEnv(t)
	tests := []struct {
		name, path string
		want       []string
	}{
		{"the List's items of the type", "/Patient?_list=slist", []string{"Patient/sp1"}},
		{"with another condition", "/Observation?_list=slist&_id=so1,so2", []string{"Observation/so2"}},
		{"an item marked deleted is not listed", "/Organization?_list=slist", nil},
		{"an unknown List lists nothing", "/Patient?_list=nolist", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantIDs(t, ids(t, e.get(tc.path), "match"), tc.want...)
			if n := searchTotal(t, e, tc.path); n != len(tc.want) {
				t.Fatalf("total %d, want %d", n, len(tc.want))
			}
		})
	}
}

func TestSystemSearchSortsAndPages(t *testing.T) {
	e, _ := systemEnv(t)
	byUpdate := []string{"Patient/sp1", "Patient/sp2", "Organization/sorg", "Observation/so1", "Observation/so2", "List/slist"}
	byID := []string{"List/slist", "Observation/so1", "Observation/so2", "Organization/sorg", "Patient/sp1", "Patient/sp2"}
	reversed := func(s []string) []string { out := slices.Clone(s); slices.Reverse(out); return out }
	tests := []struct {
		name, query string
		want        []string
	}{
		{"by _lastUpdated by default", "", byUpdate},
		{"_sort=_lastUpdated", "_sort=_lastUpdated", byUpdate},
		{"_sort=-_lastUpdated", "_sort=-_lastUpdated", reversed(byUpdate)},
		{"_sort=_id", "_sort=_id", byID},
		{"_sort=-_id", "_sort=-_id", reversed(byID)},
	}
	for _, tc := range tests {
		for _, count := range []int{1, 2, 4, 100} {
			t.Run(tc.name+" in pages of "+strconv.Itoa(count), func(t *testing.T) {
				q := tc.query + "&_count=" + strconv.Itoa(count)
				got, pages := followPages(t, e, "?"+q)
				if !slices.Equal(got, tc.want) {
					t.Fatalf("pages of %d gave %v, want %v", count, got, tc.want)
				}
				if want := (len(tc.want) + count - 1) / count; pages != want {
					t.Fatalf("%d pages of %d, want %d", pages, count, want)
				}
				first := e.get("?" + q)
				if n := first.JSON(t)["total"]; n == nil || n.(interface{ String() string }).String() != strconv.Itoa(len(tc.want)) {
					t.Fatalf("total %v, want %d", n, len(tc.want))
				}
			})
		}
	}
}

// TestSystemSearchPagingWhileWritesHappen: a resource written between two
// pages of a system search neither repeats nor hides the others.
func TestSystemSearchPagingWhileWritesHappen(t *testing.T) {
	e, _ := systemEnv(t)
	first := e.get("?_count=3")
	got := ids(t, first, "match")
	e.create("Practitioner", `{"resourceType":"Practitioner"}`)
	e.put("/Patient/sp1", `{"resourceType":"Patient","id":"sp1","active":true}`) // moves to the end
	rest, _ := followPages(t, e, bundleLink(t, first, "next"))
	got = append(got, rest...)
	seen := map[string]int{}
	for _, ref := range got {
		seen[ref]++
	}
	for _, f := range systemFixtures {
		if n := seen[f.typ+"/"+f.id]; n < 1 || (n > 1 && f.id != "sp1") {
			t.Fatalf("%s/%s seen %d times in %v", f.typ, f.id, n, got)
		}
	}
}

func TestSystemSearchIncludes(t *testing.T) {
	e, _ := systemEnv(t)
	tests := []struct {
		name, query       string
		matches, included []string
	}{
		{"_include of the searched type", "_type=Observation&_include=Observation:subject",
			[]string{"Observation/so1", "Observation/so2"}, []string{"Patient/sp1", "Patient/sp2"}},
		{"_include applies to its own type only", "_id=so1,sorg&_include=Observation:subject",
			[]string{"Observation/so1", "Organization/sorg"}, []string{"Patient/sp1"}},
		{"an included match is not repeated", "_id=so1,sp1&_include=Observation:subject",
			[]string{"Observation/so1", "Patient/sp1"}, nil},
		{"_revinclude", "_id=sp2&_revinclude=Observation:subject",
			[]string{"Patient/sp2"}, []string{"Observation/so2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.get("?" + tc.query)
			wantIDs(t, ids(t, r, "match"), tc.matches...)
			wantIDs(t, ids(t, r, "include"), tc.included...)
		})
	}
}

func TestSystemSearchErrors(t *testing.T) {
	e, _ := systemEnv(t)
	strict := map[string]string{"Prefer": "handling=strict"}
	// a well-formed cursor whose sort value is missing: no row of a system search lacks one
	noValue, err := bson.Marshal(bson.D{{Key: "v", Value: bson.A{nil}}, {Key: "i", Value: "sp1"}, {Key: "t", Value: "Patient"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		req    request
		status int
		expr   string
	}{
		{"a type's own parameter under strict handling", request{Path: "?name=x", Header: strict}, http.StatusBadRequest, "name"},
		{"a sort other than _lastUpdated or _id", request{Path: "?_sort=name"}, http.StatusBadRequest, "_sort"},
		{"an unknown _type", request{Path: "?_type=Foo"}, http.StatusBadRequest, "_type"},
		{"a malformed _lastUpdated", request{Path: "?_lastUpdated=yesterday"}, http.StatusBadRequest, "_lastUpdated"},
		{"a forged cursor", request{Path: "?_cursor=abc"}, http.StatusBadRequest, "_cursor"},
		{"a cursor without a sort value", request{Path: "?_cursor=" + base64.RawURLEncoding.EncodeToString(noValue)}, http.StatusBadRequest, "_cursor"},
		{"a bad _count", request{Path: "?_count=0"}, http.StatusBadRequest, "_count"},
		{"a functional list", request{Path: "?_list=$current-problems"}, http.StatusBadRequest, "_list"},
		{"a functional list on a type", request{Path: "/Condition?_list=$current-problems"}, http.StatusBadRequest, "_list"},
		{"a _search body that is not a form", request{Method: http.MethodPost, Path: "/_search", Body: `{}`}, http.StatusUnsupportedMediaType, ""},
		{"PUT on the base", request{Method: http.MethodPut, Path: "", Body: `{}`}, http.StatusMethodNotAllowed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.Method == "" {
				tc.req.Method = http.MethodGet
			}
			wantOutcome(t, e.do(tc.req), tc.status, tc.expr)
		})
	}
}

// TestSystemSearchHonoursScopes: a system search covers the types the
// token may search, and a patient scope's patient compartment only.
func TestSystemSearchHonoursScopes(t *testing.T) {
	e, _ := systemEnv(t)
	tests := []struct {
		name, scope, patient, query string
		status                      int
		want                        []string
	}{
		{"a type scope searches that type", "user/Observation.read", "", "", http.StatusOK, []string{"Observation/so1", "Observation/so2"}},
		{"two type scopes", "user/Observation.rs user/Organization.rs", "", "_tag=urn:tags|vip", http.StatusOK, []string{"Organization/sorg"}},
		{"a patient scope sees its compartment and shared types", "patient/*.read", "sp1", "",
			http.StatusOK, []string{"Patient/sp1", "Observation/so1", "Organization/sorg"}},
		{"_type naming a type not granted is 403", "user/Observation.read", "", "_type=Patient", http.StatusForbidden, nil},
		{"_has under a patient scope is 403", "patient/*.read", "sp1", "_has:Observation:subject:code:text=weight", http.StatusForbidden, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.as(scopedToken(t, e.tenant, tc.scope, tc.patient), request{Method: http.MethodGet, Path: "?" + tc.query})
			if tc.status != http.StatusOK {
				wantOutcome(t, r, tc.status, "")
				return
			}
			wantIDs(t, ids(t, r, "match"), tc.want...)
		})
	}
}
