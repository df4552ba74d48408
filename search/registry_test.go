package search_test

import (
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/search"
)

func newRegistry(t testing.TB) *search.Registry {
	t.Helper()
	r, err := search.NewRegistry(fhirschema.ResourceTypes())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEveryR4ParameterIsRegistered walks the official definitions: every
// string, token, reference, date, number, quantity and uri parameter with
// an expression must be registered for each of its base types.
func TestEveryR4ParameterIsRegistered(t *testing.T) {
	r := newRegistry(t)
	raw, err := os.ReadFile("search-parameters.json")
	if err != nil {
		t.Fatal(err)
	}
	var bundle struct {
		Entry []struct {
			Resource struct {
				Code, Type, Expression string
				Base                   []string
			}
		}
	}
	if err := json.Unmarshal(raw, &bundle); err != nil {
		t.Fatal(err)
	}
	types := fhirschema.ResourceTypes()
	var checked int
	for _, e := range bundle.Entry {
		d := e.Resource
		if d.Type == "composite" || d.Type == "special" || d.Expression == "" {
			continue
		}
		bases := d.Base
		if bases[0] == "Resource" || bases[0] == "DomainResource" {
			bases = types
		}
		for _, base := range bases {
			checked++
			p, ok := r.Lookup(base, d.Code)
			if !ok {
				t.Errorf("%s %s (%s) is not registered", base, d.Code, d.Type)
				continue
			}
			if p.Type != d.Type || p.Expression != d.Expression {
				t.Errorf("%s %s registered as %s %q", base, d.Code, p.Type, p.Expression)
			}
		}
	}
	var counts []string
	total := 0
	for _, typ := range types {
		n := len(r.Params(typ))
		total += n
		counts = append(counts, typ+"="+strconv.Itoa(n))
	}
	t.Logf("%d (type, parameter) pairs checked; registered per type (%d in all): %s", checked, total, strings.Join(counts, " "))
	for _, s := range r.Skipped() {
		t.Logf("skipped %s %v %s: %s", s.Code, s.Base, s.Type, s.Reason)
		if s.Type != "composite" && s.Type != "special" && s.Reason != "no expression" {
			t.Errorf("%s %v (%s) skipped: %s", s.Code, s.Base, s.Type, s.Reason)
		}
	}
}

func TestParamsAreSortedAndLookupAgrees(t *testing.T) {
	r := newRegistry(t)
	params := r.Params("Patient")
	if !sort.SliceIsSorted(params, func(i, j int) bool { return params[i].Code < params[j].Code }) {
		t.Error("Patient parameters are not sorted by code")
	}
	for _, p := range params {
		if q, ok := r.Lookup("Patient", p.Code); !ok || q != p {
			t.Errorf("Lookup(Patient, %s) disagrees with Params", p.Code)
		}
	}
	for _, code := range []string{"_id", "_lastUpdated", "_tag", "_security", "_profile", "_source", "name", "birthdate", "general-practitioner"} {
		if _, ok := r.Lookup("Patient", code); !ok {
			t.Errorf("Patient %s missing", code)
		}
	}
	p, _ := r.Lookup("Observation", "subject")
	if p.Type != "reference" || !contains(p.Target, "Patient") || !contains(p.Base, "Observation") {
		t.Errorf("Observation subject = %+v", p)
	}
	for _, code := range []string{"_query", "nope"} {
		if _, ok := r.Lookup("Observation", code); ok {
			t.Errorf("Observation %s should not be registered", code)
		}
	}
	for code, typ := range map[string]string{"code-value-quantity": "composite", "_text": "special", "_content": "special"} {
		if p, ok := r.Lookup("Observation", code); !ok || p.Type != typ {
			t.Errorf("Observation %s is not registered as %s", code, typ)
		}
	}
	if _, ok := r.Lookup("NotAType", "_id"); ok {
		t.Error("_id registered for an unknown type")
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
