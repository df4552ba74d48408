package server_test

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// searchFixtures are stored with PUT before the search tests run.
var searchFixtures = []struct{ typ, id, body string }{
	{"Patient", "p1", `{"resourceType":"Patient","id":"p1","active":true,
		"identifier":[{"system":"urn:oid:1.2.36","value":"12345"}],
		"name":[{"family":"Chalmers","given":["Peter","James"]}],"gender":"male","birthDate":"1974-12-25",
		"telecom":[{"system":"phone","value":"555-1234"}],"address":[{"city":"Paris","postalCode":"75001"}],
		"managingOrganization":{"reference":"Organization/org1"}}`},
	{"Patient", "p2", `{"resourceType":"Patient","id":"p2","active":false,
		"identifier":[{"system":"urn:oid:1.2.36","value":"999"}],
		"name":[{"family":"Müller","given":["Anna"]}],"gender":"female","birthDate":"1960-06-15",
		"address":[{"city":"Berlin"}]}`},
	{"Patient", "p3", `{"resourceType":"Patient","id":"p3",
		"name":[{"family":"Smith","given":["Peter"]}],"gender":"female","birthDate":"1960"}`},
	{"Patient", "gone", `{"resourceType":"Patient","id":"gone","name":[{"family":"Chalk"}],"gender":"male"}`},
	{"Observation", "o1", `{"resourceType":"Observation","id":"o1","status":"final",
		"code":{"coding":[{"system":"http://loinc.org","code":"2339-0","display":"Glucose"}]},
		"subject":{"reference":"Patient/p1"},"effectiveDateTime":"2024-03-01T10:00:00Z",
		"valueQuantity":{"value":5.4,"unit":"mg/dL","system":"http://unitsofmeasure.org","code":"mg/dL"}}`},
	{"Observation", "o2", `{"resourceType":"Observation","id":"o2","status":"final",
		"code":{"coding":[{"system":"http://loinc.org","code":"29463-7","display":"Body weight"}]},
		"subject":{"reference":"Patient/p2"},"effectiveDateTime":"2024-03-02",
		"valueQuantity":{"value":100,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}}`},
	{"Observation", "o3", `{"resourceType":"Observation","id":"o3","status":"preliminary",
		"code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}],"text":"weight"},
		"subject":{"reference":"Patient/p3"},
		"valueQuantity":{"value":1.50,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}}`},
}

func searchEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	for _, f := range searchFixtures {
		if r := e.put("/"+f.typ+"/"+f.id, f.body); r.Status != http.StatusCreated {
			t.Fatalf("store %s/%s: %d %s", f.typ, f.id, r.Status, r.Body)
		}
	}
	if r := e.do(request{Method: http.MethodDelete, Path: "/Patient/gone"}); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d", r.Status)
	}
	return e
}

// matchIDs returns the ids of a searchset's match entries, in order.
func matchIDs(t *testing.T, r *response) []string {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	b := r.JSON(t)
	if b["resourceType"] != "Bundle" || b["type"] != "searchset" {
		t.Fatalf("not a searchset: %s", r.Body)
	}
	ids := []string{}
	entries, _ := b["entry"].([]any)
	for _, e := range entries {
		m := e.(map[string]any)
		if mode, _ := m["search"].(map[string]any)["mode"].(string); mode == "include" {
			continue
		}
		ids = append(ids, m["resource"].(map[string]any)["id"].(string))
	}
	return ids
}

func TestSearchMatchesAsTheFHIRSpecDefines(t *testing.T) {
	e := searchEnv(t)
	tests := []struct {
		name, query string
		want        []string
	}{
		{"string is a case-insensitive prefix", "Patient?family=chal", []string{"p1"}},
		{"string ignores accents", "Patient?family=muller", []string{"p2"}},
		{"string :exact is exact", "Patient?family:exact=Chalmers", []string{"p1"}},
		{"string :exact is case-sensitive", "Patient?family:exact=chalmers", nil},
		{"string :contains", "Patient?family:contains=MIT", []string{"p3"}},
		{"name covers given names", "Patient?name=peter", []string{"p1", "p3"}},
		{"address covers the city", "Patient?address=berl", []string{"p2"}},
		{"comma means or", "Patient?family=chal,smi", []string{"p1", "p3"}},
		{"repeated parameters mean and", "Patient?given=peter&family=smith", []string{"p3"}},
		{"token code", "Patient?gender=female", []string{"p2", "p3"}},
		{"token system|code of a bound code", "Patient?gender=http://hl7.org/fhir/administrative-gender|male", []string{"p1"}},
		{"token system| of a bound code", "Observation?status=http://hl7.org/fhir/observation-status|", []string{"o1", "o2", "o3"}},
		{"token :not", "Patient?gender:not=male", []string{"p2", "p3"}},
		{"identifier by value", "Patient?identifier=12345", []string{"p1"}},
		{"identifier by system|value", "Patient?identifier=urn:oid:1.2.36|999", []string{"p2"}},
		{"identifier by system|", "Patient?identifier=urn:oid:1.2.36|", []string{"p1", "p2"}},
		{"boolean token", "Patient?active=true", []string{"p1"}},
		{"phone", "Patient?phone=555-1234", []string{"p1"}},
		{"date of a day", "Patient?birthdate=1974-12-25", []string{"p1"}},
		{"a year contains days and the year itself", "Patient?birthdate=1960", []string{"p2", "p3"}},
		{"a month does not contain a year", "Patient?birthdate=1960-06", []string{"p2"}},
		{"date ge", "Patient?birthdate=ge1970-01-01", []string{"p1"}},
		{"date lt", "Patient?birthdate=lt1961", []string{"p2", "p3"}},
		{"date sa", "Patient?birthdate=sa1960-12-31", []string{"p1"}},
		{"date eb", "Patient?birthdate=eb1960-07", []string{"p2"}},
		{"date ne", "Patient?birthdate=ne1974-12-25", []string{"p2", "p3"}},
		{":missing=true", "Patient?identifier:missing=true", []string{"p3"}},
		{":missing=false", "Patient?identifier:missing=false", []string{"p1", "p2"}},
		{"_id", "Patient?_id=p1,p3", []string{"p1", "p3"}},
		{"_lastUpdated", "Patient?_lastUpdated=gt2000-01-01", []string{"p1", "p2", "p3"}},
		{"deleted resources are not found", "Patient?family=chalk", nil},
		{"reference Type/id", "Observation?subject=Patient/p1", []string{"o1"}},
		{"reference id", "Observation?subject=p2", []string{"o2"}},
		{"reference :Type", "Observation?subject:Patient=p3", []string{"o3"}},
		{"reference absolute URL", "Observation?subject=http://example.org/fhir/Patient/p1", []string{"o1"}},
		{"patient parameter", "Observation?patient=p1", []string{"o1"}},
		{"token of a CodeableConcept", "Observation?code=http://loinc.org|29463-7", []string{"o2", "o3"}},
		{"token :text", "Observation?code:text=body", []string{"o2"}},
		{"quantity value", "Observation?value-quantity=5.4", []string{"o1"}},
		{"quantity with system and code", "Observation?value-quantity=100|http://unitsofmeasure.org|kg", []string{"o2"}},
		{"quantity with code only", "Observation?value-quantity=1.5||kg", []string{"o3"}},
		{"quantity gt", "Observation?value-quantity=gt50", []string{"o2"}},
		{"quantity le", "Observation?value-quantity=le5.4", []string{"o1", "o3"}},
		{"quantity of another unit does not match", "Observation?value-quantity=100|http://unitsofmeasure.org|g", nil},
		{"dateTime by day", "Observation?date=2024-03-01", []string{"o1"}},
		{"status token", "Observation?status=final", []string{"o1", "o2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchIDs(t, e.get("/"+tt.query+"&_count=100"))
			slices.Sort(got)
			want := append([]string{}, tt.want...)
			slices.Sort(want)
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("%s: got %v, want %v", tt.query, got, want)
			}
		})
	}
}

func TestSearchSortsByTheGivenKeysThenById(t *testing.T) {
	e := searchEnv(t)
	tests := []struct {
		sort string
		want []string
	}{
		{"birthdate", []string{"p3", "p2", "p1"}},
		{"-birthdate", []string{"p1", "p3", "p2"}},
		{"family", []string{"p1", "p2", "p3"}},
		{"-family", []string{"p3", "p2", "p1"}},
		{"gender,-birthdate", []string{"p3", "p2", "p1"}},
		{"_id", []string{"p1", "p2", "p3"}},
		{"-_id", []string{"p3", "p2", "p1"}},
	}
	for _, tt := range tests {
		t.Run(tt.sort, func(t *testing.T) {
			if got := matchIDs(t, e.get("/Patient?_sort="+tt.sort)); !slices.Equal(got, tt.want) {
				t.Fatalf("_sort=%s: got %v, want %v", tt.sort, got, tt.want)
			}
		})
	}
}

func TestSearchPagesFollowNextAndPreviousLinks(t *testing.T) {
	e := searchEnv(t)
	link := func(t *testing.T, r *response, rel string) string {
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
	r := e.get("/Patient?_sort=family&_count=1")
	var seen []string
	var pages []string
	for i := 0; i < 5; i++ {
		seen = append(seen, matchIDs(t, r)...)
		if i == 0 { // a write between pages must not shift them
			e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Aaron"}]}`)
		}
		next := link(t, r, "next")
		if next == "" {
			break
		}
		pages = append(pages, next)
		r = e.get(next)
	}
	if !slices.Equal(seen, []string{"p1", "p2", "p3"}) {
		t.Fatalf("pages gave %v", seen)
	}
	if total := r.JSON(t)["total"]; total == nil {
		t.Fatal("no total")
	}
	prev := link(t, e.get(pages[1]), "previous")
	if got := matchIDs(t, e.get(prev)); !slices.Equal(got, []string{"p2"}) {
		t.Fatalf("previous of the third page: %v", got)
	}
}

// TestSearchSortsByIdAndLastUpdatedOverPages: _id and _lastUpdated, which
// sort by the row's own fields, order pages alone and beside other keys,
// forwards through next links and back through previous links.
func TestSearchSortsByIdAndLastUpdatedOverPages(t *testing.T) {
	e := newEnv(t)
	type obs struct{ id, status, updated string }
	var all []obs
	for i, st := range []string{"final", "amended", "final", "preliminary", "amended", "final", "final"} {
		id := fmt.Sprintf("o%d", (i*5)%7) // ids not in write order
		r := e.put("/Observation/"+id, `{"resourceType":"Observation","id":"`+id+`","status":"`+st+`","code":{"text":"x"}}`)
		if r.Status != http.StatusCreated {
			t.Fatalf("put %s: %d %s", id, r.Status, r.Body)
		}
		all = append(all, obs{id, st, r.JSON(t)["meta"].(map[string]any)["lastUpdated"].(string)})
	}
	byID := func(a, b obs) int { return strings.Compare(a.id, b.id) }
	byUpdate := func(a, b obs) int { return cmp.Or(compareInstants(t, a.updated, b.updated), byID(a, b)) }
	desc := func(f func(a, b obs) int) func(a, b obs) int { return func(a, b obs) int { return f(b, a) } }
	byStatus := func(a, b obs) int { return strings.Compare(a.status, b.status) }
	tests := []struct {
		sort  string
		order func(a, b obs) int
	}{
		{"_id", byID},
		{"-_id", desc(byID)},
		{"_lastUpdated", byUpdate},
		{"-_lastUpdated", func(a, b obs) int { return cmp.Or(compareInstants(t, b.updated, a.updated), byID(a, b)) }},
		{"status,_id", func(a, b obs) int { return cmp.Or(byStatus(a, b), byID(a, b)) }},
		{"status,-_id", func(a, b obs) int { return cmp.Or(byStatus(a, b), byID(b, a)) }},
		{"-status,_lastUpdated", func(a, b obs) int { return cmp.Or(byStatus(b, a), byUpdate(a, b)) }},
		{"-_id,status", desc(byID)},
	}
	for _, tt := range tests {
		want := slices.Clone(all)
		slices.SortFunc(want, tt.order)
		var wantRefs []string
		for _, o := range want {
			wantRefs = append(wantRefs, "Observation/"+o.id)
		}
		for _, count := range []int{1, 2, 3, 10} {
			t.Run(fmt.Sprintf("%s in pages of %d", tt.sort, count), func(t *testing.T) {
				path := fmt.Sprintf("/Observation?_sort=%s&_count=%d", tt.sort, count)
				got, _ := followPages(t, e, path)
				if !slices.Equal(got, wantRefs) {
					t.Fatalf("forwards: %v, want %v", got, wantRefs)
				}
				last, r := path, e.get(path)
				for next := bundleLink(t, r, "next"); next != ""; next = bundleLink(t, r, "next") {
					last, r = next, e.get(next)
				}
				var back []string
				for p := last; p != ""; p = bundleLink(t, r, "previous") {
					r = e.get(p)
					back = append(bundleRefs(t, r), back...)
				}
				if !slices.Equal(back, wantRefs) {
					t.Fatalf("backwards: %v, want %v", back, wantRefs)
				}
			})
		}
	}
}

// compareInstants orders two FHIR instants.
func compareInstants(t *testing.T, a, b string) int {
	t.Helper()
	ta, err := time.Parse(time.RFC3339Nano, a)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := time.Parse(time.RFC3339Nano, b)
	if err != nil {
		t.Fatal(err)
	}
	return ta.Compare(tb)
}

func TestSearchResultControls(t *testing.T) {
	e := searchEnv(t)
	t.Run("_summary=count gives the total only", func(t *testing.T) {
		r := e.get("/Patient?_summary=count")
		b := r.JSON(t)
		if b["total"].(interface{ String() string }).String() != "3" || b["entry"] != nil {
			t.Fatalf("%s", r.Body)
		}
	})
	t.Run("_count limits the page and total counts every match", func(t *testing.T) {
		r := e.get("/Patient?_count=2")
		if ids := matchIDs(t, r); len(ids) != 2 || r.JSON(t)["total"].(interface{ String() string }).String() != "3" {
			t.Fatalf("%s", r.Body)
		}
	})
	t.Run("_elements keeps the named elements and marks the subset", func(t *testing.T) {
		r := e.get("/Patient?_id=p1&_elements=name")
		res := r.JSON(t)["entry"].([]any)[0].(map[string]any)["resource"].(map[string]any)
		if res["name"] == nil || res["gender"] != nil || res["id"] != "p1" || !strings.Contains(string(r.Body), "SUBSETTED") {
			t.Fatalf("%s", r.Body)
		}
	})
	t.Run("_elements names a choice element without its type", func(t *testing.T) {
		o := e.get("/Observation?_id=o1&_elements=value,effective").JSON(t)["entry"].([]any)[0].(map[string]any)["resource"].(map[string]any)
		if o["valueQuantity"] == nil || o["effectiveDateTime"] == nil || o["status"] != nil {
			t.Fatalf("_elements=value,effective: %v", o)
		}
	})
	t.Run("_summary=true keeps the summary elements", func(t *testing.T) {
		r := e.get("/Patient?_id=p1&_summary=true")
		res := r.JSON(t)["entry"].([]any)[0].(map[string]any)["resource"].(map[string]any)
		for _, k := range []string{"name", "gender", "birthDate", "identifier", "active", "address", "managingOrganization"} {
			if res[k] == nil {
				t.Errorf("summary lacks %s: %s", k, r.Body)
			}
		}
		if res["telecom"] == nil || !strings.Contains(string(r.Body), "SUBSETTED") {
			t.Fatalf("%s", r.Body)
		}
		o := e.get("/Observation?_id=o1&_summary=true").JSON(t)["entry"].([]any)[0].(map[string]any)["resource"].(map[string]any)
		if o["valueQuantity"] == nil || o["effectiveDateTime"] == nil || o["status"] == nil {
			t.Fatalf("Observation summary lacks choice elements: %v", o)
		}
	})
	t.Run("_summary=text keeps the narrative only", func(t *testing.T) {
		r := e.get("/Patient?_id=p1&_summary=text")
		res := r.JSON(t)["entry"].([]any)[0].(map[string]any)["resource"].(map[string]any)
		if res["name"] != nil || res["id"] != "p1" {
			t.Fatalf("%s", r.Body)
		}
	})
	t.Run("POST _search takes form parameters", func(t *testing.T) {
		r := e.do(request{Method: http.MethodPost, Path: "/Patient/_search", Body: "family=smith",
			Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
		if got := matchIDs(t, r); !slices.Equal(got, []string{"p3"}) {
			t.Fatalf("%v", got)
		}
	})
	t.Run("unknown parameters are ignored by default and left out of the self link", func(t *testing.T) {
		for _, prefer := range []string{"", "handling=lenient"} {
			r := e.do(request{Method: http.MethodGet, Path: "/Patient?nonsense=1&family=smith", Header: map[string]string{"Prefer": prefer}})
			if got := matchIDs(t, r); !slices.Equal(got, []string{"p3"}) {
				t.Fatalf("%v", got)
			}
			self := r.JSON(t)["link"].([]any)[0].(map[string]any)["url"].(string)
			if strings.Contains(self, "nonsense") || !strings.Contains(self, "family=smith") {
				t.Fatalf("self link %s", self)
			}
		}
	})
	t.Run("strict handling rejects unknown parameters", func(t *testing.T) {
		r := e.do(request{Method: http.MethodGet, Path: "/Patient?nonsense=1", Header: map[string]string{"Prefer": "handling=strict"}})
		wantOutcome(t, r, http.StatusBadRequest, "nonsense")
	})
}

func TestBadSearchesAre400(t *testing.T) {
	e := searchEnv(t)
	for _, tt := range []struct{ name, query, expr string }{
		{"_count over 100", "Patient?_count=101", "_count"},
		{"_count not a number", "Patient?_count=ten", "_count"},
		{"malformed date", "Patient?birthdate=1990-13", "birthdate"},
		{"unknown prefix", "Patient?birthdate=xx1990", "birthdate"},
		{"malformed quantity", "Observation?value-quantity=heavy", "value-quantity"},
		{"bad :missing value", "Patient?gender:missing=maybe", "gender:missing"},
		{"unknown modifier", "Patient?family:fuzzy=x", "family:fuzzy"},
		{"sort by an unknown parameter", "Patient?_sort=nonsense", "_sort"},
		{"sort by more than five keys", "Patient?_sort=family,given,birthdate,gender,address,telecom", "_sort"},
		{"sort by one key twice", "Patient?_sort=family,-family", "_sort"},
		{"bad _summary", "Patient?_summary=some", "_summary"},
		{"bad cursor", "Patient?_cursor=abc", "_cursor"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantOutcome(t, e.get("/"+tt.query), http.StatusBadRequest, tt.expr)
		})
	}
}

func TestSearchValuesAreDataNotOperators(t *testing.T) {
	e := searchEnv(t)
	for _, q := range []string{"Patient?family=.*", "Patient?family=(a%2B)%2B$", "Patient?family=$ne", "Patient?identifier=%7C.*", "Patient?name:contains=.", "Patient?_id=$gt"} {
		if got := matchIDs(t, e.get("/"+q)); len(got) != 0 {
			t.Errorf("%s matched %v", q, got)
		}
	}
	for _, q := range []string{"Patient?family[$ne]=x", "Patient?_id[$gt]=", "Patient?$where=1"} {
		wantOutcome(t, e.do(request{Method: http.MethodGet, Path: "/" + q, Header: map[string]string{"Prefer": "handling=strict"}}), http.StatusBadRequest, "")
		if got := matchIDs(t, e.get("/"+q)); len(got) != 3 {
			t.Errorf("%s is not ignored as an unknown parameter: %v", q, got)
		}
	}
}

// TestSearchSortsMissingValuesLastOverPages sorts by two keys that some
// Patients lack, each way, one per page: the rows without a key's value
// follow those with one in either direction, and the previous links read
// the same pages back.
func TestSearchSortsMissingValuesLastOverPages(t *testing.T) {
	e := newEnv(t)
	type pat struct{ id, family, birth string }
	pats := []pat{
		{"m1", "Baker", "1980-01-01"}, {"m2", "Baker", ""}, {"m3", "", "1990-05-05"},
		{"m4", "Adams", "1970-02-02"}, {"m5", "", ""}, {"m6", "Baker", "1985-03-03"},
		{"m7", "Adams", ""}, {"m8", "", "1960-07-07"}, {"m9", "Cole", "1980-01-01"},
	}
	for _, p := range pats {
		body := `{"resourceType":"Patient","id":"` + p.id + `"`
		if p.family != "" {
			body += `,"name":[{"family":"` + p.family + `"}]`
		}
		if p.birth != "" {
			body += `,"birthDate":"` + p.birth + `"`
		}
		if r := e.put("/Patient/"+p.id, body+"}"); r.Status != http.StatusCreated {
			t.Fatalf("store %s: %d %s", p.id, r.Status, r.Body)
		}
	}
	// compare orders one key: present values in the direction, missing last.
	compare := func(a, b string, desc bool) int {
		switch {
		case a == b:
			return 0
		case a == "":
			return 1
		case b == "":
			return -1
		case desc:
			return strings.Compare(b, a)
		}
		return strings.Compare(a, b)
	}
	for _, sort := range []string{"family,-birthdate", "-family,birthdate", "birthdate,family", "-birthdate,-family"} {
		t.Run(sort, func(t *testing.T) {
			keys := strings.Split(sort, ",")
			value := func(p pat, key string) string {
				if strings.TrimPrefix(key, "-") == "family" {
					return strings.ToLower(p.family)
				}
				return p.birth
			}
			want := slices.Clone(pats) // written in this order: ties keep it
			slices.SortStableFunc(want, func(a, b pat) int {
				for _, k := range keys {
					if c := compare(value(a, k), value(b, k), strings.HasPrefix(k, "-")); c != 0 {
						return c
					}
				}
				return 0
			})
			var wantIDs []string
			for _, p := range want {
				wantIDs = append(wantIDs, p.id)
			}
			r := e.get("/Patient?_sort=" + sort + "&_count=2")
			var got []string
			var pages [][]string
			for {
				ids := matchIDs(t, r)
				got, pages = append(got, ids...), append(pages, ids)
				next := synLink(t, r.JSON(t), "next")
				if next == "" || len(pages) > len(pats) {
					break
				}
				r = e.get(next)
			}
			if !slices.Equal(got, wantIDs) {
				t.Fatalf("_sort=%s: got %v, want %v", sort, got, wantIDs)
			}
			if msg := synBackward(t, e, sort, r, pages); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}
