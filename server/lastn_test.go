package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// synLastN computes $lastn from the loaded data: the patient's
// Observations that keep passes, grouped by their codings (Synthea's have
// one each, so no translation joins groups), newest
// effective[x] first (then the newest write, then the greatest id), the
// first max of each group.
func synLastN(t *testing.T, d *synData, max int, keep func(synRes) bool) []string {
	t.Helper()
	groups := map[string][]synRes{}
	for _, r := range d.res["Observation"] {
		if synStr(r["subject"], "reference") != "Patient/"+d.patientID || !keep(r) {
			continue
		}
		var codes []string
		for _, c := range synAt(r, "code", "coding") {
			m := c.(map[string]any)
			codes = append(codes, synStr(m, "system")+"|"+synStr(m, "code"))
		}
		sort.Strings(codes)
		key := strings.Join(codes, " ")
		groups[key] = append(groups[key], r)
	}
	effective := func(r synRes) time.Time {
		s := synStr(r, "effectiveDateTime")
		if s == "" {
			s = synStr(r["effectivePeriod"], "start")
		}
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatalf("effective of %v: %v", r["id"], err)
		}
		return ts
	}
	var out []string
	for _, g := range groups {
		sort.Slice(g, func(i, j int) bool {
			a, b := g[i], g[j]
			if c := effective(a).Compare(effective(b)); c != 0 {
				return c > 0
			}
			ua, ub := d.updated["Observation/"+a["id"].(string)], d.updated["Observation/"+b["id"].(string)]
			if ua != ub {
				return ua > ub
			}
			return a["id"].(string) > b["id"].(string)
		})
		for i := 0; i < len(g) && i < max; i++ {
			out = append(out, g[i]["id"].(string))
		}
	}
	sort.Strings(out)
	return out
}

func TestSyntheaLastN(t *testing.T) {
	d := synLoad(t)
	all := func(synRes) bool { return true }
	category := func(code string) func(synRes) bool {
		return func(r synRes) bool {
			return synHasCoding(r, "category", "http://terminology.hl7.org/CodeSystem/observation-category|"+code)
		}
	}
	patient := "Patient/" + d.patientID
	tests := []struct {
		name   string
		params url.Values
		max    int
		keep   func(synRes) bool
	}{
		{"the latest of each code", url.Values{"patient": {patient}}, 1, all},
		{"the latest two of each code", url.Values{"patient": {patient}, "max": {"2"}}, 2, all},
		{"the latest five of each code, by subject", url.Values{"subject": {patient}, "max": {"5"}}, 5, all},
		{"vital signs only", url.Values{"patient": {patient}, "category": {"vital-signs"}, "max": {"3"}}, 3, category("vital-signs")},
		{"one code", url.Values{"patient": {patient}, "code": {"http://loinc.org|8302-2"}, "max": {"2"}}, 2,
			func(r synRes) bool { return synHasCoding(r, "code", "http://loinc.org|8302-2") }},
		{"within a date range", url.Values{"patient": {patient}, "date": {"lt2020"}, "max": {"1"}}, 1,
			func(r synRes) bool { return synStr(r, "effectiveDateTime") < "2020" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := synLastN(t, d, tt.max, tt.keep)
			if len(want) == 0 {
				t.Fatal("the data has no match; the row tests nothing")
			}
			r := d.e.get("/Observation/$lastn?" + tt.params.Encode())
			got := matchIDs(t, r)
			sort.Strings(got)
			if !slices.Equal(got, want) {
				t.Fatalf("$lastn?%s: got %d %v, want %d %v", tt.params.Encode(), len(got), got, len(want), want)
			}
			if total := r.JSON(t)["total"]; total == nil {
				t.Errorf("no total")
			}
		})
	}
	post := d.e.do(request{Method: http.MethodPost, Path: "/Observation/$lastn", Body: url.Values{"patient": {patient}}.Encode(),
		Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	if got, want := len(matchIDs(t, post)), len(synLastN(t, d, 1, all)); got != want {
		t.Errorf("POST $lastn: %d matches, want %d", got, want)
	}
	for _, bad := range []string{"max=0", "max=x", "max=100000"} {
		wantOutcome(t, d.e.get("/Observation/$lastn?patient="+d.patientID+"&"+bad), http.StatusBadRequest, "max")
	}
	wantOutcome(t, d.e.get("/Observation/$lastn?patient="+d.patientID+"&date=x"), http.StatusBadRequest, "date")
	if r := d.e.get("/Patient/$lastn"); r.Status != http.StatusNotFound {
		t.Errorf("Patient/$lastn: %d", r.Status)
	}
}

func TestLastNGroupsCodesAsTheOperationDefines(t *testing.T) {
	e := newEnv(t)
	obs := func(id, patient, date, code string) {
		var coding []string
		for _, c := range strings.Split(code, "+") {
			if strings.HasPrefix(c, "'") {
				continue
			}
			coding = append(coding, `{"system":"http://example.org/codes","code":"`+c+`"}`)
		}
		codeJSON := `{"coding":[` + strings.Join(coding, ",") + `]}`
		if strings.HasPrefix(code, "'") {
			codeJSON = `{"text":` + strconv.Quote(strings.Trim(code, "'")) + `}`
		}
		body := `{"resourceType":"Observation","id":"` + id + `","status":"final","subject":{"reference":"Patient/` + patient +
			`"},"effectiveDateTime":"` + date + `","code":` + codeJSON + `}`
		if r := e.put("/Observation/"+id, body); r.Status != http.StatusCreated {
			t.Fatalf("store %s: %d %s", id, r.Status, r.Body)
		}
	}
	// the operation's examples: a, b, a+c are two groups; a, b, a+b one;
	// texts group by the exact text
	obs("p-a", "p", "2024-01-01", "a")
	obs("p-b", "p", "2024-01-02", "b")
	obs("p-ac", "p", "2024-01-03", "a+c")
	obs("q-a", "q", "2024-01-01", "a")
	obs("q-b", "q", "2024-01-03", "b")
	obs("q-ab", "q", "2024-01-02", "a+b")
	obs("r-1", "r", "2024-01-01", "'textM'")
	obs("r-2", "r", "2024-01-02", "'Text'")
	obs("r-3", "r", "2024-01-03", "'t e x t'")
	obs("r-4", "r", "2024-01-04", "'Text'")
	tests := []struct {
		name, query string
		want        []string
	}{
		{"a translation joins the groups of its codes", "patient=p", []string{"p-ac", "p-b"}},
		{"max takes more of each group", "patient=p&max=2", []string{"p-ac", "p-a", "p-b"}},
		{"equality is transitive", "patient=q", []string{"q-b"}},
		{"the newest two of the one group", "patient=q&max=2", []string{"q-b", "q-ab"}},
		{"text-only codes group by their exact text", "patient=r", []string{"r-1", "r-4", "r-3"}},
		{"each patient has its own groups", "patient=p,q", []string{"p-ac", "p-b", "q-b"}},
		{"subject works as patient", "subject=Patient/q&max=3", []string{"q-b", "q-ab", "q-a"}},
		{"other parameters narrow first", "patient=p&date=lt2024-01-03", []string{"p-a", "p-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchIDs(t, e.get("/Observation/$lastn?"+tt.query))
			want := slices.Clone(tt.want)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("$lastn?%s: got %v, want %v", tt.query, got, want)
			}
		})
	}
	got := matchIDs(t, e.get("/Observation/$lastn?patient=p&max=2"))
	if want := []string{"p-ac", "p-a", "p-b"}; !slices.Equal(got, want) {
		t.Errorf("order: %v, want each group newest first %v", got, want)
	}
	wantOutcome(t, e.get("/Observation/$lastn?code=a"), http.StatusBadRequest, "patient")
	e.put("/Patient/p", `{"resourceType":"Patient","id":"p"}`)
	b := e.get("/Observation/$lastn?patient=p&_include=Observation:subject").JSON(t)
	var modes []string
	for _, en := range b["entry"].([]any) {
		m := en.(map[string]any)
		modes = append(modes, m["search"].(map[string]any)["mode"].(string)+":"+m["resource"].(map[string]any)["id"].(string))
	}
	if want := []string{"match:p-ac", "match:p-b", "include:p"}; !slices.Equal(modes, want) {
		t.Errorf("$lastn with _include: %v, want %v", modes, want)
	}
}
