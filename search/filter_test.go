package search_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/fhirschema"
	"fhirstore/search"
)

// sampleSearches are values of each parameter type with every modifier and
// prefix the engine supports.
var sampleSearches = map[string][]string{
	"string":    {"=abc", ":exact=Abc", ":contains=bc", "=a,b", ":missing=true"},
	"token":     {"=c", "=s|c", "=|c", "=s|", ":not=c", ":not=s|,c", ":text=abc", ":of-type=s|c|v", ":missing=false"},
	"reference": {"=Patient/1", "=1", "=http://x/fhir/Patient/1", ":Patient=1", ":identifier=s|v", ":missing=true"},
	"date":      {"=2020", "=eq2020-01", "=ne2020-01-01", "=gt2020", "=lt2020", "=ge2020", "=le2020", "=sa2020", "=eb2020", "=ap2020-01-01"},
	"number":    {"=1.5", "=gt1", "=lt1", "=ge1", "=le1", "=sa1", "=eb1", "=ne1", "=ap1"},
	"quantity":  {"=1.5", "=gt1|http://unitsofmeasure.org|mg", "=le1||mg", "=ap5"},
	"uri":       {"=http://a/b", ":below=http://a", ":above=http://a/b/c", ":contains=a/b"},
}

// allowedOperators are the index-friendly operators the engine may emit.
var allowedOperators = map[string]bool{
	"$and": true, "$or": true, "$in": true, "$nin": true, "$exists": true,
	"$gt": true, "$gte": true, "$lt": true, "$lte": true,
	"$not": true, // of an anchored prefix (walkFilter checks every regex)
}

// notForID are the token modifiers that do not apply to _id, which the
// parser refuses for it.
var notForID = map[string]bool{":text=abc": true, ":of-type=s|c|v": true}

// TestEveryGeneratedFilterIsIndexFriendly parses a search with each
// parameter of every type and modifier and walks the filter: only idx.*
// fields, equality, $in, ranges and anchored prefixes (:contains, the one
// infix match FHIR defines, excepted).
func TestEveryGeneratedFilterIsIndexFriendly(t *testing.T) {
	r := newRegistry(t)
	checked := 0
	for _, typ := range fhirschema.ResourceTypes() {
		for _, p := range r.Params(typ) {
			for _, sample := range sampleSearches[p.Type] {
				suffix, value, _ := strings.Cut(sample, "=")
				q, err := r.Parse(typ, url.Values{p.Code + suffix: {value}}, search.ParseOptions{Strict: true})
				if p.Code == "_id" && notForID[sample] {
					var se *search.Error
					if !errors.As(err, &se) {
						t.Errorf("%s?%s%s: %v, want a search error", typ, p.Code, sample, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s?%s%s: %v", typ, p.Code, sample, err)
					continue
				}
				walkFilter(t, typ+"?"+p.Code+sample, q.Filter(), strings.Contains(sample, ":contains"))
				checked++
			}
		}
	}
	t.Logf("%d generated filters checked", checked)
}

func walkFilter(t *testing.T, search string, v any, infixAllowed bool) {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			switch {
			case strings.HasPrefix(e.Key, "$"):
				if !allowedOperators[e.Key] {
					t.Errorf("%s: operator %s", search, e.Key)
				}
			case !strings.HasPrefix(e.Key, "idx.") && e.Key != "_id":
				t.Errorf("%s: field %s outside idx", search, e.Key)
			}
			walkFilter(t, search, e.Value, infixAllowed)
		}
	case bson.A:
		for _, el := range x {
			walkFilter(t, search, el, infixAllowed)
		}
	case bson.Regex:
		if !strings.HasPrefix(x.Pattern, "^") && !infixAllowed {
			t.Errorf("%s: unanchored regex %q", search, x.Pattern)
		}
	}
}

// TestHasDepthIsBounded: reverse chains nest at most MaxChainDepth levels,
// each level being one more database query.
func TestHasDepthIsBounded(t *testing.T) {
	r := newRegistry(t)
	two := url.Values{"_has:Observation:subject:_has:Provenance:target:agent": {"Practitioner/x"}}
	if _, err := r.Parse("Patient", two, search.ParseOptions{}); err != nil {
		t.Fatalf("two levels: %v", err)
	}
	three := url.Values{"_has:Observation:subject:_has:Provenance:target:_has:AuditEvent:entity:agent": {"Practitioner/x"}}
	var se *search.Error
	if _, err := r.Parse("Patient", three, search.ParseOptions{}); !errors.As(err, &se) {
		t.Fatalf("three levels: %v, want a search error", err)
	}
}
