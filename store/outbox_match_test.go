package store_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/storetest"
)

// TestMatchChangesAgreesWithSearch: over every official Observation
// example, the changes MatchChanges says a subscription's criteria match
// are exactly the resources the same search finds, whether the criteria
// are decided on the versions' index values (token and reference
// equalities) or by running the search, and in any mix of the two.
func TestMatchChangesAgreesWithSearch(t *testing.T) {
	ctx := context.Background()
	st := db.Open(t, db.Options())
	tenant := db.Tenant(t, st)
	files, err := filepath.Glob("../testdata/fhir/examples/Observation-*.json")
	if err != nil || len(files) < 20 {
		t.Fatalf("official Observation examples: %d, %v", len(files), err)
	}
	var changes []*store.Change
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			t.Fatal(err)
		}
		r, _, err := st.Update(ctx, tenant, "Observation", head.ID, body, store.WriteOptions{})
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		changes = append(changes, &store.Change{Key: "Observation/" + r.ID, Resource: r})
	}
	criteria := []string{
		"code=http://loinc.org|8867-4",
		"code=85354-9",
		"code=http://loinc.org|",
		"status=final",
		"status=final,amended,preliminary",
		"subject=Patient/example",
		"patient=example",
		"category=vital-signs&status=final",
		"code=http://loinc.org|29463-7&subject=Patient/example",
		"identifier=urn:ietf:rfc:3986|urn:uuid:187e0c12-8dd2-67e2-99b2-bf273c878281",
		"performer=Practitioner/example",
		"value-quantity=gt100",
		"date=ge2013-01-01",
		"code:text=blood",
		"subject:missing=true",
		"status:not=final",
		"component-code-value-quantity=http://loinc.org|8480-6$gt100",
		"code=no-such-code",
		"_id=example",
		"_id=example,bp&status=final",
		"_id:not=example",
		"code=http://loinc.org|&_id=bp",
	}
	parse := func(c string) *search.Query {
		t.Helper()
		values, err := url.ParseQuery(c + "&_count=100")
		if err != nil {
			t.Fatal(err)
		}
		q, err := db.Registry().Parse("Observation", values, search.ParseOptions{Strict: true})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		return q
	}
	queries := make([]*search.Query, len(criteria))
	for i, c := range criteria {
		queries[i] = parse(c)
	}
	got, err := st.MatchChanges(ctx, tenant, "Observation", queries, changes)
	if err != nil {
		t.Fatal(err)
	}
	nonEmpty := 0
	for i, c := range criteria {
		var want []string
		for _, r := range storetest.SearchAll(t, st, tenant, parse(c)) {
			want = append(want, "Observation/"+r.ID)
		}
		var have []string
		for k := range got[i] {
			have = append(have, k)
		}
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(have, want) {
			t.Errorf("%s: matched %v, the search finds %v", c, have, want)
		}
		if len(want) > 0 {
			nonEmpty++
		}
	}
	if nonEmpty < len(criteria)/2 {
		t.Fatalf("only %d of %d criteria match any example: the table tests little", nonEmpty, len(criteria))
	}
}
