package search_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"fhirstore/search"
)

// TestFilterParsesTheSpecExamples: the examples of the R4 _filter page
// become queries; the one using a filtered path is refused by name.
func TestFilterParsesTheSpecExamples(t *testing.T) {
	r := newRegistry(t)
	tests := []struct{ typ, filter, refused string }{
		{"Patient", `name co "pet"`, ""},
		{"Patient", `given eq "peter" and birthdate ge 2014-10-10`, ""},
		{"Observation", `code eq http://loinc.org|1234-5`, ""},
		{"Observation", `subject.name co "pet"`, ""},
		{"Observation", `related[type eq "has-component"].target pr true`, "position 1: filtered parameter paths (related[...]) are not supported"},
		{"Observation", `related[type eq has-component].target re Observation/4`, "position 1: filtered parameter paths"},
		{"Patient", `not (gender eq male) or (birthdate po 2014 and name ew "son")`, ""},
		{"Observation", `code in http://example.org/vs or code ni ValueSet/x and code ss http://snomed.info/sct|1`, ""},
		{"Patient", `(family sw "Ch" OR family eq "smith") AND active eq true`, ""},
	}
	for _, tt := range tests {
		q, err := r.Parse(tt.typ, url.Values{"_filter": {tt.filter}}, search.ParseOptions{Strict: true})
		switch {
		case tt.refused == "" && err != nil:
			t.Errorf("%s?_filter=%s: %v", tt.typ, tt.filter, err)
		case tt.refused == "" && len(q.Conditions) != 1:
			t.Errorf("%s?_filter=%s: %d conditions, want 1", tt.typ, tt.filter, len(q.Conditions))
		case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
			t.Errorf("%s?_filter=%s: error %v, want one saying %q", tt.typ, tt.filter, err, tt.refused)
		}
	}
}

// TestMalformedFiltersNameThePosition: every syntax error is a search
// error on _filter that says where the expression went wrong.
func TestMalformedFiltersNameThePosition(t *testing.T) {
	r := newRegistry(t)
	tests := []struct{ filter, want string }{
		{``, "position 1: the filter is empty"},
		{`family eq "Filterson" and (`, `position 28: expected a test, "(" or "not" but the filter ends`},
		{`(family eq "a"`, "position 1: the parenthesis opened here is never closed"},
		{`family eq "abc`, "position 11: the string that starts here is never closed"},
		{`family eq`, "position 10: expected a space and a value"},
		{`family xx "a"`, `position 8: "xx" is not an operator`},
		{`family eq "a" garbage`, `position 15: unexpected "garbage"`},
		{`family eq "a" and`, "position 18: expected a test"},
		{`family eq "a" and (given eq "b"]`, `position 32: expected ")" but found "]"`},
		{`.family eq "a"`, `position 1: expected a search parameter name`},
		{`family eq "a\q"`, "position 11: the string is not a valid JSON string"},
		{`shoesize eq 42`, `position 1: "shoesize" is not a search parameter of Patient`},
		{`family eq "a" and birthdate co 2020`, "position 19: the co operator does not apply to birthdate"},
		{`gender pr maybe`, "position 1: pr takes true or false"},
		{`birthdate eq yesterday`, "position 1 (birthdate eq)"},
		{`name[family eq "x"].given eq "y"`, "position 1: filtered parameter paths"},
		{`gender.name eq "x"`, `position 1: "gender" is a token parameter; only reference parameters can be chained`},
	}
	for _, tt := range tests {
		_, err := r.Parse("Patient", url.Values{"_filter": {tt.filter}}, search.ParseOptions{})
		var se *search.Error
		if !errors.As(err, &se) || se.Param != "_filter" || !strings.Contains(se.Msg, tt.want) {
			t.Errorf("_filter=%s: %v, want a _filter error saying %q", tt.filter, err, tt.want)
		}
	}
}

// listResolver answers deferred parts with fixed lists, as the store
// would from the database.
type listResolver struct{}

func (listResolver) Codes(context.Context, *search.CodeSet) ([]string, error) {
	return []string{"http://s|a", "http://s|b"}, nil
}
func (listResolver) IDs(context.Context, *search.Query) ([]string, error) { return []string{"x"}, nil }
func (listResolver) References(context.Context, *search.Chain) ([]string, error) {
	return []string{"Patient/x"}, nil
}

// TestFiltersResolveToIndexFriendlyQueries: every operator of every
// parameter type, and the terminology modifiers, become equality, $in,
// $nin, ranges and prefixes on idx fields (co and ew: a literal infix)
// once their value sets, chains and sub-searches are resolved.
func TestFiltersResolveToIndexFriendlyQueries(t *testing.T) {
	r := newRegistry(t)
	tests := []struct{ typ, params string }{
		{"Patient", `_filter=family eq "a" or family ne "b" or family sw "c" or family gt "d" or family le "e" or family pr false`},
		{"Patient", `_filter=family co "a" and family ew "b"`},
		{"Patient", `_filter=gender eq male and not (gender in http://vs) and gender ni ValueSet/x and gender ss http://s|a and gender sb http://s|b`},
		{"Patient", `_filter=birthdate eq 2020 or birthdate ne 2020 or birthdate po 2020 or birthdate sa 2020 or birthdate eb 2020 or birthdate ap 2020`},
		{"Patient", `_filter=not (birthdate gt 2020 and family ew "x")`},
		{"Patient", `_filter=general-practitioner re Practitioner/1 or general-practitioner ne Practitioner/2 or organization.name sw "x"`},
		{"Observation", `_filter=value-quantity gt 5|http://unitsofmeasure.org|mg or value-quantity le 1 or subject.birthdate lt 2000`},
		{"ValueSet", `_filter=url eq http://a or url sw http://b or url ss http://c or url sb http://d/e or url ne http://f`},
		{"Observation", `code:in=http://vs1,ValueSet/x&code:not-in=http://vs2&code:below=http://s|a&category:above=http://s|b`},
	}
	for _, tt := range tests {
		params, err := url.ParseQuery(strings.NewReplacer("+", "%2B", " ", "+").Replace(tt.params))
		if err != nil {
			t.Fatal(err)
		}
		q, err := r.Parse(tt.typ, params, search.ParseOptions{Strict: true})
		if err != nil {
			t.Errorf("%s?%s: %v", tt.typ, tt.params, err)
			continue
		}
		if err := q.Resolve(context.Background(), listResolver{}); err != nil || q.Deferred() {
			t.Errorf("%s?%s: resolve: %v, still deferred: %v", tt.typ, tt.params, err, q.Deferred())
		}
		walkFilter(t, tt.typ+"?"+tt.params, q.Filter(), strings.Contains(tt.params, " co ") || strings.Contains(tt.params, " ew "))
	}
}
