package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// bundleTotal is a Bundle's total, -1 when it has none.
func bundleTotal(t *testing.T, r *response) int {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	n, ok := r.JSON(t)["total"].(json.Number)
	if !ok {
		return -1
	}
	v, err := n.Int64()
	if err != nil {
		t.Fatalf("total %s: %v", n, err)
	}
	return int(v)
}

func TestEverythingSaysHowManyResourcesItHolds(t *testing.T) {
	e := compartmentEnv(t)
	for _, tt := range []struct {
		name, path string
		want       int
	}{
		{"every resource of the compartment, the patient included", "/Patient/p1/$everything?_count=100", len(p1Everything)},
		{"the same on a first page of one", "/Patient/p1/$everything?_count=1", len(p1Everything)},
		{"only the types of _type", "/Patient/p1/$everything?_type=Observation,EpisodeOfCare", 6},
		{"the patient alone when _type is Patient", "/Patient/p2/$everything?_type=Patient", 1},
		{"another patient", "/Patient/p2/$everything", 5},
		{"nothing changed since a future _since", "/Patient/p1/$everything?_since=2999-01-01", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get(tt.path)
			if got := bundleTotal(t, r); got != tt.want {
				t.Fatalf("total %d, want %d\n%s", got, tt.want, r.Body)
			}
		})
	}
	t.Run("every page repeats the first page's total, writes between pages aside", func(t *testing.T) {
		path := "/Patient/p1/$everything?_count=3"
		pages := 0
		for path != "" {
			r := e.get(path)
			if got := bundleTotal(t, r); got != len(p1Everything) {
				t.Fatalf("page %d: total %d, want %d", pages+1, got, len(p1Everything))
			}
			if pages == 0 {
				if w := e.put("/Observation/o9", `{"resourceType":"Observation","id":"o9","status":"final","code":{"text":"z"},"subject":{"reference":"Patient/p1"}}`); w.Status != http.StatusCreated {
					t.Fatalf("write between pages: %d %s", w.Status, w.Body)
				}
			}
			pages++
			path = bundleLink(t, r, "next")
		}
		if got := bundleTotal(t, e.get("/Patient/p1/$everything")); got != len(p1Everything)+1 {
			t.Fatalf("a new first page counts %d, want %d", got, len(p1Everything)+1)
		}
	})
}

func TestEverythingPagesLargerThanASearchPage(t *testing.T) {
	e := compartmentEnv(t)
	for i := range 130 {
		if r := e.put(fmt.Sprintf("/Observation/big%03d", i), fmt.Sprintf(`{"resourceType":"Observation","id":"big%03d","status":"final","code":{"text":"n"},"subject":{"reference":"Patient/p2"}}`, i)); r.Status != http.StatusCreated {
			t.Fatalf("store: %d %s", r.Status, r.Body)
		}
	}
	want := 5 + 130
	t.Run("the whole record in one page of 1000", func(t *testing.T) {
		r := e.get("/Patient/p2/$everything?_count=1000")
		if got := len(bundleRefs(t, r)); got != want || bundleTotal(t, r) != want || bundleLink(t, r, "next") != "" {
			t.Fatalf("%d entries, total %d, next %q; want %d, %d and none", got, bundleTotal(t, r), bundleLink(t, r, "next"), want, want)
		}
	})
	t.Run("pages of 120 visit each resource once", func(t *testing.T) {
		got, pages := followPages(t, e, "/Patient/p2/$everything?_count=120")
		if len(got) != want || len(sorted(slices.Compact(sorted(got)))) != want || pages != 2 {
			t.Fatalf("%d entries (%d distinct) in %d pages, want %d in 2", len(got), len(slices.Compact(sorted(got))), pages, want)
		}
	})
	t.Run("more than 1000 is refused", func(t *testing.T) {
		wantOutcome(t, e.get("/Patient/p2/$everything?_count=1001"), http.StatusBadRequest, "_count")
	})
}
