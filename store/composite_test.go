package store_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/engine/mongodb"
)

// TestCompositeOneSidedQuantitiesAreExactInTheDatabase: for a token$quantity
// composite with gt/lt and no unit, the database filter alone (before the
// store's element check) counts only the elements that have both the code
// and the value, on the embedded engine and on MongoDB alike.
func TestCompositeOneSidedQuantitiesAreExactInTheDatabase(t *testing.T) {
	ctx := context.Background()
	opts := db.Options()
	st := db.Open(t, opts)
	tenant := db.Tenant(t, st)
	for _, bp := range [][2]int{{150, 90}, {120, 150}, {118, 76}} {
		body := fmt.Sprintf(`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"85354-9"}]},
		  "component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueQuantity":{"value":%d}},
		               {"code":{"coding":[{"system":"http://loinc.org","code":"8462-4"}]},"valueQuantity":{"value":%d}}]}`, bp[0], bp[1])
		if _, err := st.Create(ctx, tenant, "Observation", []byte(body), store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := db.Engine(ctx, mongodb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	coll := eng.Database(opts.DatabasePrefix + tenant).Collection("Observation")
	tests := []struct {
		value string
		want  int64
	}{
		{"http://loinc.org|8480-6$gt140", 1},
		{"8480-6$gt140", 1},
		{"http://loinc.org|8462-4$gt100", 1},
		{"http://loinc.org|8462-4$lt100", 2},
		{"http://loinc.org|8480-6$ge150", 1},
		{"http://loinc.org|8480-6$le118", 1},
		{"http://loinc.org|8480-6$gt200", 0},
	}
	for _, tt := range tests {
		q, err := db.Registry().Parse("Observation", url.Values{"component-code-value-quantity": {tt.value}}, search.ParseOptions{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		n, err := coll.Count(ctx, q.Filter())
		if err != nil {
			t.Fatal(err)
		}
		if n != tt.want {
			t.Errorf("%s: the database filter counts %d, want %d", tt.value, n, tt.want)
		}
	}
}
