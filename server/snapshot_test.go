package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"fhirstore/server"
	"fhirstore/store"
)

// pageOf reads a searchset page: its entries' ids and given names, its
// total and its next link.
func pageOf(t *testing.T, r *response) (ids, given []string, total int, next string) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	entries, _ := r.JSON(t)["entry"].([]any)
	for _, en := range entries {
		res := en.(map[string]any)["resource"].(map[string]any)
		ids = append(ids, res["id"].(string))
		name := res["name"].([]any)[0].(map[string]any)
		given = append(given, name["given"].([]any)[0].(string))
	}
	return ids, given, bundleTotal(t, r), bundleLink(t, r, "next")
}

func snapshotPatients(t *testing.T, e *env, family string, given ...string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, g := range given {
		ids[g] = e.create("Patient", fmt.Sprintf(`{"resourceType":"Patient","name":[{"family":%q,"given":[%q]}]}`, family, g))
	}
	return ids
}

func TestSearchPagesAreASnapshot(t *testing.T) {
	e := newEnv(t)
	ids := snapshotPatients(t, e, "Snap", "A", "B", "C", "D", "E", "F")
	put := func(id, family, given string) {
		t.Helper()
		if r := e.put("/Patient/"+id, fmt.Sprintf(`{"resourceType":"Patient","id":%q,"name":[{"family":%q,"given":[%q]}]}`, id, family, given)); r.Status != http.StatusOK {
			t.Fatalf("update: %d %s", r.Status, r.Body)
		}
	}
	for _, tc := range []struct {
		name  string
		query string
	}{
		{"sorted by a parameter", "/Patient?family=Snap&_sort=given&_count=2"},
		{"in the default order (last updated)", "/Patient?family=Snap&_count=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := e.get(tc.query)
			got, givens, total, next := pageOf(t, first)
			if total != 6 || len(got) != 2 || next == "" {
				t.Fatalf("first page: %v, total %d, next %q", givens, total, next)
			}
			want := []string{"A", "B", "C", "D", "E", "F"}
			seen := slices.Clone(givens)
			// Between the pages: a new match that sorts first and last, a
			// match that stops matching, one deleted, one renamed.
			snapshotPatients(t, e, "Snap", "0", "Z")
			put(ids["C"], "Other", "C")
			put(ids["E"], "Snap", "EE")
			if r := e.do(request{Method: http.MethodDelete, Path: "/Patient/" + ids["D"]}); r.Status >= 300 {
				t.Fatalf("delete: %d %s", r.Status, r.Body)
			}
			for next != "" {
				_, givens, total, next = pageOf(t, e.get(next))
				if total != 6 {
					t.Fatalf("a later page's total is %d, want the first page's 6", total)
				}
				seen = append(seen, givens...)
			}
			slices.Sort(seen)
			if !slices.Equal(seen, want) {
				t.Fatalf("the pages held %v, want the snapshot's %v (as they were then)", seen, want)
			}
			// Put things back for the next order.
			put(ids["C"], "Snap", "C")
			put(ids["E"], "Snap", "E")
			ids["D"] = snapshotPatients(t, e, "Snap", "D")["D"]
			r := e.get("/Patient?family=Snap&_count=100&_elements=id")
			for _, en := range r.JSON(t)["entry"].([]any) {
				id := en.(map[string]any)["resource"].(map[string]any)["id"].(string)
				if !slices.Contains([]string{ids["A"], ids["B"], ids["C"], ids["D"], ids["E"], ids["F"]}, id) {
					if d := e.do(request{Method: http.MethodDelete, Path: "/Patient/" + id}); d.Status >= 300 {
						t.Fatalf("clean up: %d", d.Status)
					}
				}
			}
		})
	}
}

func TestASearchLinkPastItsSnapshotsLifetimeIsGone(t *testing.T) {
	e := newEnv(t, func(_ *server.Config, o *store.Options) { o.SnapshotLifetime = 200 * time.Millisecond })
	snapshotPatients(t, e, "Brief", "A", "B", "C")
	_, _, _, next := pageOf(t, e.get("/Patient?family=Brief&_count=2"))
	if r := e.get(next); r.Status != http.StatusOK {
		t.Fatalf("the next page within the lifetime: %d %s", r.Status, r.Body)
	}
	time.Sleep(300 * time.Millisecond)
	r := e.get(next)
	if r.Status != http.StatusGone || !strings.Contains(string(r.Body), "OperationOutcome") || !strings.Contains(string(r.Body), "run the search again") {
		t.Fatalf("a link past its lifetime: %d %s; want 410 and an OperationOutcome saying to run the search again", r.Status, r.Body)
	}
	if r := e.get("/Patient?family=Brief&_count=2"); r.Status != http.StatusOK {
		t.Fatalf("the search run again: %d %s", r.Status, r.Body)
	}
}

// TestSystemSearchPagesAreASnapshot: a search across types keeps its
// total and its pages when resources are created, changed and deleted
// between them; a changed resource shows its version of then.
func TestSystemSearchPagesAreASnapshot(t *testing.T) {
	e := newEnv(t)
	want := map[string]string{} // Type/id → versionId on the pages
	for i := range 3 {
		want["Patient/"+e.create("Patient", fmt.Sprintf(`{"resourceType":"Patient","name":[{"family":"Sys%d"}]}`, i))] = "1"
		want["Observation/"+e.create("Observation", fmt.Sprintf(`{"resourceType":"Observation","status":"final","code":{"text":"sys %d"}}`, i))] = "1"
	}
	first := e.get("/?_count=2")
	total, next := bundleTotal(t, first), bundleLink(t, first, "next")
	if total != 6 || next == "" {
		t.Fatalf("first page: total %d, next %q; want 6 and a next link", total, next)
	}
	seen := map[string]string{}
	record := func(r *response) {
		t.Helper()
		for _, en := range r.JSON(t)["entry"].([]any) {
			res := en.(map[string]any)["resource"].(map[string]any)
			seen[res["resourceType"].(string)+"/"+res["id"].(string)] = res["meta"].(map[string]any)["versionId"].(string)
		}
	}
	record(first)
	var later []string // resources the first page does not hold
	for key := range want {
		if _, ok := seen[key]; !ok {
			later = append(later, key)
		}
	}
	slices.Sort(later)
	// Between the pages: a new resource, a change and a deletion of
	// resources still to come.
	e.create("Patient", `{"resourceType":"Patient","name":[{"family":"SysNew"}]}`)
	changed, deleted := later[0], later[1]
	typ, id, _ := strings.Cut(changed, "/")
	body := `{"resourceType":"Patient","id":"` + id + `","name":[{"family":"SysChanged"}]}`
	if typ == "Observation" {
		body = `{"resourceType":"Observation","id":"` + id + `","status":"amended","code":{"text":"changed"}}`
	}
	if r := e.put("/"+changed, body); r.Status != http.StatusOK {
		t.Fatalf("update %s: %d %s", changed, r.Status, r.Body)
	}
	if r := e.do(request{Method: http.MethodDelete, Path: "/" + deleted}); r.Status >= 300 {
		t.Fatalf("delete %s: %d %s", deleted, r.Status, r.Body)
	}
	for next != "" {
		r := e.get(next)
		if r.Status != http.StatusOK {
			t.Fatalf("next page: %d %s", r.Status, r.Body)
		}
		if got := bundleTotal(t, r); got != 6 {
			t.Fatalf("a later page's total is %d, want the first page's 6", got)
		}
		record(r)
		next = bundleLink(t, r, "next")
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("the pages held %v, want the snapshot's %v (each at its version of then)", seen, want)
	}
}
