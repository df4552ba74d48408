package server_test

import (
	"slices"
	"strings"
	"testing"
)

// TestSortByOneRange sorts by parameters that hold at most one range
// (Observation date and value-quantity), which sort by the bounds of that
// range: ascending by its start, descending by its end, resources without
// a value last either way, page by page forwards and backwards. A Timing
// counts by its outer limits, as FHIR search says.
func TestSortByOneRange(t *testing.T) {
	e := newEnv(t)
	obs := func(effective, value string) string {
		body := `{"resourceType":"Observation","status":"final","code":{"text":"x"}`
		if effective != "" {
			body += "," + effective
		}
		if value != "" {
			body += `,"valueQuantity":{"value":` + value + `}`
		}
		return e.create("Observation", body+"}")
	}
	day := obs(`"effectiveDateTime":"2020-05-05"`, "7")                                                 // 05-05 .. 05-05
	long := obs(`"effectivePeriod":{"start":"2020-01-01","end":"2020-12-31"}`, "3.5")                   // 01-01 .. 12-31
	timing := obs(`"effectiveTiming":{"event":["2020-03-01","2020-09-09T08:00:00Z","2020-06-01"]}`, "") // 03-01 .. 09-09
	open := obs(`"effectivePeriod":{"start":"2020-02-02"}`, "12")                                       // 02-02 .. no end
	none := obs("", "")
	for _, tc := range []struct {
		sort string
		want []string
	}{
		{"date", []string{long, open, timing, day, none}},
		{"-date", []string{open, long, timing, day, none}},
		{"value-quantity", []string{long, day, open, timing, none}},
		{"-value-quantity", []string{open, day, long, timing, none}},
		{"date,-value-quantity", []string{long, open, timing, day, none}},
	} {
		got, pages := followPages(t, e, "/Observation?_sort="+tc.sort+"&_count=2")
		if ids := trimType(got); !slices.Equal(ids, tc.want) || pages != 3 {
			t.Errorf("_sort=%s: %v over %d pages, want %v", tc.sort, ids, pages, tc.want)
		}
		// backwards from the last page
		path, last := "/Observation?_sort="+tc.sort+"&_count=2", ""
		for path != "" {
			last, path = path, bundleLink(t, e.get(path), "next")
		}
		var back []string
		for path = last; path != ""; {
			r := e.get(path)
			back = append(trimType(bundleRefs(t, r)), back...)
			path = bundleLink(t, r, "previous")
		}
		if !slices.Equal(back, tc.want) {
			t.Errorf("_sort=%s backwards: %v, want %v", tc.sort, back, tc.want)
		}
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"date=eb2020-08-01", []string{day}}, // the Timing ends with its last event
		{"date=sa2020-02-15", []string{day, timing}},
		{"date=2020", []string{day, long, timing}},
		{"date=gt2020-10-01", []string{long, open}},
	} {
		got := matchIDs(t, e.get("/Observation?"+tc.query))
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", tc.query, got, want)
		}
	}
}

func trimType(refs []string) []string {
	ids := make([]string, len(refs))
	for i, ref := range refs {
		ids[i] = ref[strings.IndexByte(ref, '/')+1:]
	}
	return ids
}
