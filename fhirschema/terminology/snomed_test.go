package terminology

import "testing"

func TestSNOMEDConceptIdentifiers(t *testing.T) {
	for _, c := range []struct {
		name, id string
		ok       bool
	}{
		{"core body temperature", "276885007", true},
		{"clinical finding", "404684003", true},
		{"a concept of a national extension (namespace, partition 10)", "32506021000036107", true},
		{"a letter after the digits", "276885007x", false},
		{"one digit", "1", false},
		{"a wrong check digit", "276885008", false},
		{"a description identifier (partition 01)", "2342342123", false},
		{"a description identifier of an extension (partition 11)", "6547210000124112", false},
		{"a SNOMED RT code", "T-15460", false},
		{"a leading zero", "0276885007", false},
	} {
		if got := ConceptID(c.id); got != c.ok {
			t.Errorf("%s: ConceptID(%q) = %v, want %v", c.name, c.id, got, c.ok)
		}
	}
}

func TestECLConstraints(t *testing.T) {
	for _, c := range []struct {
		name, ecl string
		ok        bool
	}{
		{"descendants or self with a term", "<< 404684003 |Clinical finding|", true},
		{"a refinement", "< 404684003 : 363698007 = << 39057004", true},
		{"a disjunction", "<< 73211009 OR << 46635009", true},
		{"members of a reference set", "^ 700043003", true},
		{"an attribute group with a cardinality", "< 404684003 : [1..*] { 363698007 = *, 116676008 = * }", true},
		{"a nested exclusion", "(< 404684003 AND < 64572001) MINUS << 73211009", true},
		{"a concrete value", "< 763158003 : 1142135004 >= #250", true},
		{"any concept", "*", true},
		{"a filter block", "< 404684003 {{ term = \"heart\" }}", true},
		{"two concepts with a constraint operator between", "234234 << 234234", false},
		{"a valid concept followed by an operator", "73211009 << 73211009", false},
		{"an operator without a concept", "<<", false},
		{"an unclosed parenthesis", "(< 404684003", false},
		{"an attribute without a value", "< 404684003 : 363698007 =", false},
		{"nothing", " ", false},
	} {
		if err := CheckECL(c.ecl); (err == nil) != c.ok {
			t.Errorf("%s: CheckECL(%q) = %v, want ok %v", c.name, c.ecl, err, c.ok)
		}
	}
}

func TestFilterValuesOfPropertyTypes(t *testing.T) {
	for _, c := range []struct {
		typ, value string
		ok         bool
	}{
		{"boolean", "true", true},
		{"boolean", "1", false},
		{"Coding", "http://example.org/cs#a", true},
		{"Coding", "http://example.org/cs|2.0#a", true},
		{"Coding", "a", false},
		{"integer", "12", true},
		{"integer", "1.5", false},
		{"decimal", "1.5", true},
		{"code", "anything", true},
	} {
		if why := filterValue(c.typ, c.value); (why == "") != c.ok {
			t.Errorf("a %s filter value %q: %q, want ok %v", c.typ, c.value, why, c.ok)
		}
	}
}
