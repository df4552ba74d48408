package search_test

import (
	"net/url"
	"strings"
	"testing"

	"fhirstore/search"
)

func TestCompositeNeedsTheElementCheckOnlyWhenSeveralElementsCanMatch(t *testing.T) {
	r := newRegistry(t)
	tests := []struct {
		name, typ, query string
		checked          bool
	}{
		{"one element, tokens", "Observation", "code-value-concept=http://loinc.org|72166-2$http://snomed.info/sct|266919005", false},
		{"one element, a string prefix", "Observation", "code-value-string=8302-2$tall", false},
		{"one element, a date after", "Observation", "code-value-date=8665-2$gt2016", false},
		{"one element, a date within (two bounds)", "Observation", "code-value-date=8665-2$2016", true},
		{"a quantity above a value: the point key decides", "Observation", "code-value-quantity=8302-2$gt150", false},
		{"a component's quantity below a value: the point key decides", "Observation", "component-code-value-quantity=8480-6$lt90", false},
		{"a component's quantity with a unit", "Observation", "component-code-value-quantity=8480-6$gt90|http://unitsofmeasure.org|mm[Hg]", true},
		{"a component's quantity equal to a value", "Observation", "component-code-value-quantity=8480-6$90", true},
		{"one of the alternatives needs the check", "Observation", "component-code-value-quantity=8480-6$gt90,8462-4$60", true},
		{"components: tokens of one component", "Observation", "component-code-value-concept=a$b", true},
		{"the observation and its components", "Observation", "combo-code-value-concept=a$b", true},
		{"use contexts", "PlanDefinition", "context-type-value=focus$x", true},
		{"an alternative that is not exact", "Observation", "code-value-date=a$gt2016,b$2016", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			q, err := r.Parse(tt.typ, params, search.ParseOptions{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := q.PostFilter != nil; got != tt.checked {
				t.Fatalf("%s: element check %v, want %v", tt.query, got, tt.checked)
			}
		})
	}
}

func TestCompositeValuesAreSplitAtUnescapedSeparators(t *testing.T) {
	r := newRegistry(t)
	tests := []struct {
		query string
		ok    bool
	}{
		{`code-value-string=a$b\$c`, true},
		{`code-value-string=a\$b$c`, true},
		{`code-value-string=a$b,c$d`, true},
		{`code-value-string=a$b\,c`, true},
		{`code-value-string=a$b$c`, false},
		{`code-value-string=a`, false},
		{`code-value-string=a$`, false},
		{`code-value-string=,`, false},
		{`code-value-quantity=a$gt`, false},
		{`code-value-quantity:not=a$1`, false},
		{`referenceseqid-variant-coordinate=x$1$2`, true},
		{`referenceseqid-variant-coordinate=x$1`, false},
	}
	for _, tt := range tests {
		params := url.Values{}
		name, value, _ := strings.Cut(tt.query, "=")
		params.Set(name, value)
		typ := "Observation"
		if name == "referenceseqid-variant-coordinate" {
			typ = "MolecularSequence"
		}
		_, err := r.Parse(typ, params, search.ParseOptions{Strict: true})
		if (err == nil) != tt.ok {
			t.Errorf("%s: error %v, want ok=%v", tt.query, err, tt.ok)
		}
	}
}
