package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// compartmentFixtures are two patients and resources of their compartments
// (p1x links to p1); org1 is in no compartment.
var compartmentFixtures = []struct{ typ, id, body string }{
	{"Patient", "p1", `{"resourceType":"Patient","id":"p1","name":[{"family":"One"}]}`},
	{"Patient", "p2", `{"resourceType":"Patient","id":"p2","name":[{"family":"Two"}]}`},
	{"Patient", "p1x", `{"resourceType":"Patient","id":"p1x","link":[{"other":{"reference":"Patient/p1"},"type":"seealso"}]}`},
	{"Organization", "org1", `{"resourceType":"Organization","id":"org1","name":"Clinic"}`},
	{"EpisodeOfCare", "e1", `{"resourceType":"EpisodeOfCare","id":"e1","status":"active","patient":{"reference":"Patient/p1"}}`},
	{"EpisodeOfCare", "e2", `{"resourceType":"EpisodeOfCare","id":"e2","status":"finished","patient":{"reference":"Patient/p1"}}`},
	{"EpisodeOfCare", "e3", `{"resourceType":"EpisodeOfCare","id":"e3","status":"active","patient":{"reference":"Patient/p2"}}`},
	{"QuestionnaireResponse", "qr1", `{"resourceType":"QuestionnaireResponse","id":"qr1","status":"completed","subject":{"reference":"Patient/p1"}}`},
	{"QuestionnaireResponse", "qr2", `{"resourceType":"QuestionnaireResponse","id":"qr2","status":"completed","subject":{"reference":"Patient/p2"}}`},
	{"Observation", "o1", `{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"a"},"subject":{"reference":"Patient/p1"}}`},
	{"Observation", "o2", `{"resourceType":"Observation","id":"o2","status":"preliminary","code":{"text":"b"},"performer":[{"reference":"Patient/p1"}]}`},
	{"Observation", "o3", `{"resourceType":"Observation","id":"o3","status":"preliminary","code":{"text":"c"},"subject":{"reference":"Patient/p1"}}`},
	{"Observation", "o4", `{"resourceType":"Observation","id":"o4","status":"final","code":{"text":"d"},"subject":{"reference":"Patient/p2"}}`},
	{"Observation", "o5", `{"resourceType":"Observation","id":"o5","status":"final","code":{"text":"e"},
		"subject":{"reference":"Patient/p1"},"performer":[{"reference":"Patient/p1"}]}`},
	{"Encounter", "enc1", `{"resourceType":"Encounter","id":"enc1","status":"finished",
		"class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},"subject":{"reference":"Patient/p1"}}`},
	{"Encounter", "enc2", `{"resourceType":"Encounter","id":"enc2","status":"finished",
		"class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},"subject":{"reference":"Patient/p2"}}`},
}

// p1Everything is every resource of p1's compartment, the patient included.
var p1Everything = []string{"Encounter/enc1", "EpisodeOfCare/e1", "EpisodeOfCare/e2", "Observation/o1", "Observation/o2",
	"Observation/o3", "Observation/o5", "Patient/p1", "Patient/p1x", "QuestionnaireResponse/qr1"}

func compartmentEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	for _, f := range compartmentFixtures {
		if r := e.put("/"+f.typ+"/"+f.id, f.body); r.Status != http.StatusCreated {
			t.Fatalf("store %s/%s: %d %s", f.typ, f.id, r.Status, r.Body)
		}
	}
	return e
}

// sorted returns a sorted copy of ids.
func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// bundleRefs returns the Type/id of a searchset's entries, in order.
func bundleRefs(t *testing.T, r *response) []string {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	refs := []string{}
	entries, _ := r.JSON(t)["entry"].([]any)
	for _, en := range entries {
		res := en.(map[string]any)["resource"].(map[string]any)
		refs = append(refs, res["resourceType"].(string)+"/"+res["id"].(string))
	}
	return refs
}

// bundleLink returns a Bundle link's path under /fhir/r4, "" when absent.
func bundleLink(t *testing.T, r *response, rel string) string {
	t.Helper()
	for _, l := range r.JSON(t)["link"].([]any) {
		m := l.(map[string]any)
		if m["relation"] == rel {
			u, err := url.Parse(m["url"].(string))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimPrefix(u.RequestURI(), "/fhir/r4")
		}
	}
	return ""
}

// followPages reads path and its next pages, returning every entry's Type/id.
func followPages(t *testing.T, e *env, path string) (refs []string, pages int) {
	t.Helper()
	for path != "" {
		if pages++; pages > 50 {
			t.Fatalf("paging does not end")
		}
		r := e.get(path)
		refs = append(refs, bundleRefs(t, r)...)
		path = bundleLink(t, r, "next")
	}
	return refs, pages
}

func TestCompartmentSearchSelectsThePatientsResources(t *testing.T) {
	e := compartmentEnv(t)
	tests := []struct {
		path string
		want []string
	}{
		{"/Patient/p1/EpisodeOfCare", []string{"e1", "e2"}},
		{"/Patient/p2/EpisodeOfCare", []string{"e3"}},
		{"/Patient/p1/QuestionnaireResponse", []string{"qr1"}},
		{"/Patient/p1/Observation", []string{"o1", "o2", "o3", "o5"}},
		{"/Patient/p1/Observation?status=final", []string{"o1", "o5"}},
		{"/Patient/p1/Observation?status=final,preliminary&_id=o2,o4", []string{"o2"}},
		{"/Patient/p1/Observation?status=cancelled", nil},
		{"/Patient/p2/Observation", []string{"o4"}},
		{"/Patient/p1/Encounter", []string{"enc1"}},
		{"/Patient/p1/Patient", []string{"p1x"}},
		{"/Patient/p2/Patient", nil},
		{"/Patient/p1/EpisodeOfCare?status=finished", []string{"e2"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got := sorted(matchIDs(t, e.get(tt.path)))
			if want := sorted(tt.want); !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
	t.Run("total and self link name the compartment search", func(t *testing.T) {
		r := e.get("/Patient/p1/Observation?status=final&nonsense=1")
		b := r.JSON(t)
		if b["total"].(interface{ String() string }).String() != "2" {
			t.Fatalf("total: %s", r.Body)
		}
		if self := bundleLink(t, r, "self"); !strings.HasPrefix(self, "/Patient/p1/Observation?") || !strings.Contains(self, "status=final") || strings.Contains(self, "nonsense") {
			t.Fatalf("self link %s", self)
		}
	})
	t.Run("_sort applies to the union", func(t *testing.T) {
		if got := matchIDs(t, e.get("/Patient/p1/Observation?_sort=-_id")); !slices.Equal(got, []string{"o5", "o3", "o2", "o1"}) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("_include adds the referenced resources once", func(t *testing.T) {
		r := e.get("/Patient/p1/Observation?_include=Observation:subject&_include=Observation:performer")
		got := bundleRefs(t, r)
		if !slices.Equal(sorted(got), []string{"Observation/o1", "Observation/o2", "Observation/o3", "Observation/o5", "Patient/p1"}) {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("_summary=count counts the union", func(t *testing.T) {
		r := e.get("/Patient/p1/Observation?_summary=count")
		if b := r.JSON(t); b["total"].(interface{ String() string }).String() != "4" || b["entry"] != nil {
			t.Fatalf("%s", r.Body)
		}
	})
}

func TestCompartmentSearchPagesVisitEachMatchOnce(t *testing.T) {
	e := compartmentEnv(t)
	for _, tt := range []struct {
		path  string
		want  []string
		pages int
	}{
		{"/Patient/p1/Observation?_count=2", []string{"Observation/o1", "Observation/o2", "Observation/o3", "Observation/o5"}, 2},
		{"/Patient/p1/Observation?_count=1&_sort=_id", []string{"Observation/o1", "Observation/o2", "Observation/o3", "Observation/o5"}, 4},
		{"/Patient/p1/EpisodeOfCare?_count=1", []string{"EpisodeOfCare/e1", "EpisodeOfCare/e2"}, 2},
	} {
		t.Run(tt.path, func(t *testing.T) {
			got, pages := followPages(t, e, tt.path)
			if !slices.Equal(sorted(got), tt.want) {
				t.Fatalf("pages gave %v, want each of %v once", got, tt.want)
			}
			if pages != tt.pages {
				t.Fatalf("%d pages, want %d", pages, tt.pages)
			}
		})
	}
	t.Run("next and previous links stay in the compartment", func(t *testing.T) {
		first := e.get("/Patient/p1/Observation?_count=2&_sort=_id")
		next := bundleLink(t, first, "next")
		if !strings.HasPrefix(next, "/Patient/p1/Observation?") {
			t.Fatalf("next link %s", next)
		}
		second := e.get(next)
		if got := matchIDs(t, second); !slices.Equal(got, []string{"o3", "o5"}) {
			t.Fatalf("second page %v", got)
		}
		if got := matchIDs(t, e.get(bundleLink(t, second, "previous"))); !slices.Equal(got, []string{"o1", "o2"}) {
			t.Fatalf("previous page %v", got)
		}
	})
}

func TestPatientCompartmentEverything(t *testing.T) {
	e := compartmentEnv(t)
	t.Run("the patient and all its resources, nothing of others", func(t *testing.T) {
		r := e.get("/Patient/p1/$everything?_count=100")
		got := bundleRefs(t, r)
		if len(got) == 0 || got[0] != "Patient/p1" {
			t.Fatalf("the patient does not come first: %v", got)
		}
		if !slices.Equal(sorted(got), p1Everything) {
			t.Fatalf("got %v, want %v", sorted(got), p1Everything)
		}
		if bundleLink(t, r, "next") != "" || r.JSON(t)["type"] != "searchset" {
			t.Fatalf("%s", r.Body)
		}
	})
	for _, count := range []string{"1", "2", "3", "9", "10"} {
		t.Run("paging by "+count+" visits each resource once", func(t *testing.T) {
			got, pages := followPages(t, e, "/Patient/p1/$everything?_count="+count)
			if !slices.Equal(sorted(got), p1Everything) {
				t.Fatalf("pages gave %v", got)
			}
			if n := len(p1Everything); (count == "1" && pages != n) || (count == "2" && pages != n/2) || (count == "10" && pages != 1) {
				t.Fatalf("%d pages of %s for %d resources", pages, count, n)
			}
		})
	}
	t.Run("_type restricts the types", func(t *testing.T) {
		got := bundleRefs(t, e.get("/Patient/p1/$everything?_type=Observation,EpisodeOfCare&_count=100"))
		want := []string{"EpisodeOfCare/e1", "EpisodeOfCare/e2", "Observation/o1", "Observation/o2", "Observation/o3", "Observation/o5"}
		if !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("another patient", func(t *testing.T) {
		got := sorted(bundleRefs(t, e.get("/Patient/p2/$everything?_count=100")))
		want := []string{"Encounter/enc2", "EpisodeOfCare/e3", "Observation/o4", "Patient/p2", "QuestionnaireResponse/qr2"}
		if !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

func TestCompartmentErrors(t *testing.T) {
	e := compartmentEnv(t)
	if r := e.do(request{Method: http.MethodDelete, Path: "/Patient/p2"}); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d", r.Status)
	}
	for _, tt := range []struct {
		path   string
		status int
		expr   string
	}{
		{"/Patient/nobody/Observation", http.StatusNotFound, ""},
		{"/Patient/nobody/$everything", http.StatusNotFound, ""},
		{"/Patient/p2/Observation", http.StatusGone, ""},
		{"/Patient/p1/Organization", http.StatusBadRequest, ""},
		{"/Patient/p1/NotAType", http.StatusNotFound, ""},
		{"/Observation/x/Patient", http.StatusNotFound, ""},
		{"/Observation/o1/$everything", http.StatusNotFound, ""},
		{"/Patient/p1/Observation?status=final&_count=1000", http.StatusBadRequest, "_count"},
		{"/Patient/p1/Observation?_cursor=abc", http.StatusBadRequest, "_cursor"},
		{"/Patient/p1/EpisodeOfCare?_cursor=abc", http.StatusBadRequest, "_cursor"},
		{"/Patient/p1/$everything?_cursor=abc", http.StatusBadRequest, "_cursor"},
		{"/Patient/p1/$everything?_count=0", http.StatusBadRequest, "_count"},
		{"/Patient/p1/$everything?_type=Organization", http.StatusBadRequest, "_type"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			wantOutcome(t, e.get(tt.path), tt.status, tt.expr)
		})
	}
	t.Run("strict handling rejects unknown parameters", func(t *testing.T) {
		r := e.do(request{Method: http.MethodGet, Path: "/Patient/p1/Observation?nonsense=1", Header: map[string]string{"Prefer": "handling=strict"}})
		wantOutcome(t, r, http.StatusBadRequest, "nonsense")
	})
	t.Run("history and $validate paths still route", func(t *testing.T) {
		if r := e.get("/Patient/p1/_history"); r.Status != http.StatusOK {
			t.Fatalf("history: %d %s", r.Status, r.Body)
		}
		r := e.post("/Patient/p1/$validate", `{"resourceType":"Patient","id":"p1"}`)
		if r.Status == http.StatusNotFound || r.Status == http.StatusMethodNotAllowed {
			t.Fatalf("$validate: %d %s", r.Status, r.Body)
		}
	})
}
