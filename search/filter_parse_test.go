package search_test

import (
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
