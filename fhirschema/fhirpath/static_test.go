package fhirpath_test

import (
	"slices"
	"testing"

	"fhirstore/fhirschema/fhirpath"
)

// elements is a small model: Obs.subject 0..1 Ref, Obs.value[x] 0..1
// (Quantity or string), Obs.category 0..*, Obs.part 0..1 Part,
// Part.item 0..* Ref, Ref.reference 0..1 string.
func elements(def, name string) ([]string, bool, bool) {
	switch def + "." + name {
	case "Obs.subject":
		return []string{"Ref"}, false, true
	case "Obs.value":
		return []string{"Quantity", "string"}, false, true
	case "Obs.category":
		return []string{"Concept"}, true, true
	case "Obs.part":
		return []string{"Part"}, false, true
	case "Part.item":
		return []string{"Ref"}, true, true
	case "Ref.reference":
		return []string{"string"}, false, true
	}
	return nil, false, false
}

func TestAtMostOne(t *testing.T) {
	for _, c := range []struct {
		expr  string
		one   bool
		types []string
	}{
		{"Obs.subject", true, []string{"Ref"}},
		{"Obs.subject.reference", true, []string{"string"}},
		{"Obs.subject.where(resolve() is Patient)", true, []string{"Ref"}},
		{"Obs.value", true, []string{"Quantity", "string"}},
		{"(Obs.value as Quantity)", true, []string{"Quantity"}},
		{"Obs.value.ofType(string)", true, []string{"string"}},
		{"(Obs.value as Quantity) | (Obs.value as string)", true, []string{"Quantity", "string"}},
		{"Obs.part.item.first()", true, []string{"Ref"}},
		{"Obs.part.item[0]", true, []string{"Ref"}},
		{"Obs.category", false, nil},
		{"Obs.part.item", false, nil},
		{"Obs.subject | Obs.part.item", false, nil},
		{"(Obs.value as Quantity) | (Obs.value as Quantity)", false, nil},
		{"Obs.subject.resolve().name", false, nil},
		{"Obs.unknown", false, nil},
		{"Obs.extension('http://example.org')", false, nil},
	} {
		e, err := fhirpath.Compile(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		types, one := e.AtMostOne("Obs", elements)
		if one != c.one || one && !slices.Equal(types, c.types) {
			t.Errorf("%s: at most one %v of %v, want %v of %v", c.expr, one, types, c.one, c.types)
		}
	}
}
