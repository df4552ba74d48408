package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestFilterSearchesAsTheFHIRFilterGrammarDefines(t *testing.T) {
	e := searchEnv(t)
	tests := []struct {
		name, typ, filter string
		want              []string
	}{
		{"string eq is the whole value, any case", "Patient", `family eq "CHALMERS"`, []string{"p1"}},
		{"the spec's given and birthdate", "Patient", `given eq "peter" and birthdate ge 1970-01-01`, []string{"p1"}},
		{"co, accent-insensitive", "Patient", `name co "mül"`, []string{"p2"}},
		{"sw or eq", "Patient", `family sw "Ch" or family eq "smith"`, []string{"p1", "p3"}},
		{"ew", "Patient", `family ew "ers"`, []string{"p1"}},
		{"ew inside or", "Patient", `family ew "ller" or gender eq male`, []string{"p1", "p2"}},
		{"ne on a string: no value equals", "Patient", `family ne "smith"`, []string{"p1", "p2"}},
		{"not of a token", "Patient", `not (gender eq male)`, []string{"p2", "p3"}},
		{"not of an and", "Patient", `not (gender eq female and birthdate eq 1960)`, []string{"p1"}},
		{"and/or left to right without precedence", "Patient", `gender eq male or gender eq female and family eq "smith"`, []string{"p3"}},
		{"parentheses group", "Patient", `gender eq male or (gender eq female and family eq "smith")`, []string{"p1", "p3"}},
		{"po: a date overlapping a period", "Patient", `birthdate po 1960`, []string{"p2", "p3"}},
		{"date eq inside not", "Patient", `birthdate eq 1960 and not (family eq "smith")`, []string{"p2"}},
		{"pr true", "Patient", `address-city pr true`, []string{"p1", "p2"}},
		{"pr false", "Patient", `address-city pr false`, []string{"p3"}},
		{"_id", "Patient", `_id eq p2`, []string{"p2"}},
		{"a string with a comma is one value", "Patient", `family eq "Chalmers,Smith"`, []string{}},
		{"the spec's token example", "Observation", `code eq http://loinc.org|29463-7`, []string{"o2", "o3"}},
		{"the spec's chained example", "Observation", `subject.name co "peter"`, []string{"o1", "o3"}},
		{"chain inside not", "Observation", `not (subject.gender eq female)`, []string{"o1"}},
		{"quantity gt", "Observation", `value-quantity gt 50`, []string{"o2"}},
		{"quantity with a unit", "Observation", `value-quantity lt 10|http://unitsofmeasure.org|kg`, []string{"o3"}},
		{"reference re", "Observation", `subject re Patient/p2`, []string{"o2"}},
		{"reference ne", "Observation", `subject ne Patient/p2`, []string{"o1", "o3"}},
		{"date sa", "Observation", `date sa 2024-03-01`, []string{"o2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matchIDs(t, e.get("/"+tt.typ+"?_count=100&_filter="+url.QueryEscape(tt.filter)))
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s?_filter=%s = %v, want %v", tt.typ, tt.filter, got, tt.want)
			}
		})
	}
}

func TestFilterCombinesWithOtherParametersAndPaging(t *testing.T) {
	e := searchEnv(t)
	r := e.get("/Patient?_count=1&_sort=family&gender=female&_filter=" + url.QueryEscape(`birthdate po 1960 or family eq "chalmers"`))
	if got := matchIDs(t, r); !slices.Equal(got, []string{"p2"}) {
		t.Fatalf("first page %v, want [p2]", got)
	}
	if total := r.JSON(t)["total"]; total == nil || total.(interface{ String() string }).String() != "2" {
		t.Errorf("total %v, want 2", total)
	}
}

func TestMalformedOrUnanswerableFiltersAre400(t *testing.T) {
	e := searchEnv(t)
	tests := []struct{ name, filter, says string }{
		{"an unclosed parenthesis", `family eq "Filterson" and (`, "position 28"},
		{"an unknown operator", `family is "x"`, "position 8"},
		{"an unknown parameter", `shoe eq 1`, `is not a search parameter of Patient`},
		{"an operator the type cannot answer", `birthdate sw 2020`, "the sw operator does not apply to birthdate"},
		{"a filtered path", `name[family eq "x"].given eq "y"`, "filtered parameter paths"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get("/Patient?_filter=" + url.QueryEscape(tt.filter))
			wantOutcome(t, r, http.StatusBadRequest, "_filter")
			if !strings.Contains(string(r.Body), tt.says) {
				t.Errorf("%s, want it to say %q", r.Body, tt.says)
			}
		})
	}
}
