package fhirpath

import (
	"strings"
	"sync"
	"testing"
)

// refs is a resource whose subjects reference targets in several forms.
const refs = `{"resourceType": "Observation", "id": "o1",
	"contained": [{"resourceType": "Patient", "id": "p1"}],
	"subject": [
		{"reference": "Patient/123"},
		{"reference": "http://x/fhir/Patient/456"},
		{"reference": "http://x/fhir/Patient/789/_history/2"},
		{"reference": "Group/g1"},
		{"reference": "urn:uuid:0d3c9b40-1d6f-4b4e-9d3e-4b9b0b0f0b0f", "type": "Patient"},
		{"identifier": {"value": "x"}, "type": "Patient"},
		{"reference": "#p1"},
		{"reference": "#missing"},
		{"display": "no reference"}
	]}`

// TestResolve checks resolve() is T for every form of reference.
func TestResolve(t *testing.T) {
	runEvalCases(t, []evalCase{
		{name: "is Patient", resource: refs, expr: "Observation.subject.where(resolve() is Patient).reference",
			want: nodes(t, "", `"Patient/123"`, `"http://x/fhir/Patient/456"`,
				`"http://x/fhir/Patient/789/_history/2"`, `"urn:uuid:0d3c9b40-1d6f-4b4e-9d3e-4b9b0b0f0b0f"`, `"#p1"`)},
		{name: "type element", resource: refs, expr: "Observation.subject.where(resolve() is Patient).identifier.value",
			want: nodes(t, "", `"x"`)},
		{name: "is Group", resource: refs, expr: "Observation.subject.where(resolve() is Group)",
			want: nodes(t, "", `{"reference":"Group/g1"}`)},
		{name: "is Resource", resource: refs, expr: "Observation.subject.where(resolve() is Resource).count()",
			want: nodes(t, "integer", "7")},
		{name: "resolve returns references", resource: refs, expr: "Observation.subject[3].resolve()",
			want: nodes(t, "", `{"reference":"Group/g1"}`)},
		{name: "canonical", resource: `{"resourceType":"Measure","library":["http://x/Library/l1|1.0"]}`,
			expr: "Measure.library.where(resolve() is Library)", want: nodes(t, "", `"http://x/Library/l1|1.0"`)},
		{name: "container", resource: `{"resourceType":"Patient","link":[{"other":{"reference":"#"}}]}`,
			expr: "Patient.link.other.where(resolve() is Patient).reference", want: nodes(t, "", `"#"`)},
	})
}

// TestOperators checks the operators and functions on inline resources.
func TestOperators(t *testing.T) {
	p := `{"resourceType": "Patient", "active": true, "multipleBirthInteger": 2,
		"name": [{"use": "official", "family": "A", "given": ["x", null, "y"]}, {"use": "usual", "family": "B"}],
		"extension": [{"url": "u1", "valueDecimal": 1.50}, {"url": "u2", "valueBoolean": false}]}`
	runEvalCases(t, []evalCase{
		{name: "and", resource: p, expr: "Patient.name.where(use='official' and family='A').family",
			want: nodes(t, "", `"A"`)},
		{name: "or", resource: p, expr: "Patient.name.where(use='nope' or family='B').family", want: nodes(t, "", `"B"`)},
		{name: "not equal", resource: p, expr: "Patient.name.where(use != 'official').family", want: nodes(t, "", `"B"`)},
		{name: "nulls skipped", resource: p, expr: "Patient.name.given", want: nodes(t, "", `"x"`, `"y"`)},
		{name: "first", resource: p, expr: "Patient.name.first().family", want: nodes(t, "", `"A"`)},
		{name: "last", resource: p, expr: "Patient.name.last().family", want: nodes(t, "", `"B"`)},
		{name: "index", resource: p, expr: "Patient.name[1].family", want: nodes(t, "", `"B"`)},
		{name: "index out of range", resource: p, expr: "Patient.name[5]"},
		{name: "union dedupes", resource: p, expr: "Patient.name.family | Patient.name.family | 'C'",
			want: []Node{{Value: "A"}, {Value: "B"}, {Value: "C", Type: "string"}}},
		{name: "number equality", resource: p, expr: "Patient.extension('u1').value = 1.5",
			want: nodes(t, "boolean", "true")},
		{name: "integer choice", resource: p, expr: "Patient.multipleBirth", want: nodes(t, "integer", "2")},
		{name: "is integer", resource: p, expr: "Patient.multipleBirth is integer", want: nodes(t, "boolean", "true")},
		{name: "boolean not", resource: p, expr: "Patient.active.not()", want: nodes(t, "boolean", "false")},
		{name: "empty", resource: p, expr: "Patient.deceased.empty()", want: nodes(t, "boolean", "true")},
		{name: "exists criteria", resource: p, expr: "Patient.name.exists(family = 'B')", want: nodes(t, "boolean", "true")},
		{name: "empty equality", resource: p, expr: "Patient.gender = 'male'"},
		{name: "and with empty", resource: p, expr: "Patient.gender.exists() and Patient.gender = 'x'",
			want: nodes(t, "boolean", "false")},
		{name: "implies", resource: p, expr: "Patient.active implies Patient.gender = 'x'"},
		{name: "ofType", resource: p, expr: "Patient.extension.value.ofType(boolean)", want: nodes(t, "boolean", "false")},
		{name: "this", resource: p, expr: "Patient.name.family.where($this = 'B')", want: nodes(t, "", `"B"`)},
		{name: "resource variable", resource: p, expr: "Patient.name.where(%resource.active).family",
			want: nodes(t, "", `"A"`, `"B"`)},
		{name: "select", resource: p, expr: "Patient.name.select(given)", want: nodes(t, "", `"x"`, `"y"`)},
		{name: "delimited", resource: p, expr: "Patient.`name`.family.first()", want: nodes(t, "", `"A"`)},
		{name: "comment", resource: p, expr: "Patient.active // trailing\n", want: nodes(t, "", "true")},
		{name: "Age is Quantity", resource: `{"resourceType":"Condition","onsetAge":{"value":3}}`,
			expr: "Condition.onset as Quantity", want: nodes(t, "Age", `{"value":3}`)},
		{name: "Range", resource: `{"resourceType":"Condition","onsetRange":{"low":{"value":3}}}`,
			expr: "Condition.onset.as(Age) | Condition.onset.as(Range)", want: nodes(t, "Range", `{"low":{"value":3}}`)},
		{name: "not a choice name", resource: `{"resourceType":"Coverage","subscriberId":"s"}`,
			expr: "Coverage.subscriber"},
		{name: "System type", resource: `{"resourceType":"Patient","deceasedDateTime":"2020"}`,
			expr: "Patient.deceased as System.DateTime", want: nodes(t, "dateTime", `"2020"`)},
	})
}

// TestCompileErrors checks that unsupported syntax fails with a clear error.
func TestCompileErrors(t *testing.T) {
	for src, want := range map[string]string{
		"":                           "unexpected end of expression",
		"Patient.name +1":            "operator '+' is not supported",
		"Patient.birthDate < '2020'": "operator '<' is not supported",
		"Patient.birthDate = @2020":  "date/time literals are not supported",
		"Patient.name.foo()":         "function 'foo' is not supported",
		"Patient.name.where(":        "in where()",
		"Patient.name[a]":            "indexer must be",
		"Patient.name.first(1)":      "takes no arguments",
		"Patient.name.where()":       "missing argument",
		"Patient.name as":            "expected a type name",
		"'abc":                       "unterminated",
		"%vs":                        "environment variable '%vs'",
		"$index":                     "variable '$index'",
		"Patient.name ~ 'x'":         "operator '~' is not supported",
		"Patient.name)":              "unexpected ')'",
		"-Patient":                   "unary '-'",
		"Patient #":                  "unexpected character",
		"a in b":                     "operator 'in' is not supported",
		strings.Repeat("(", 500):     "nested deeper",
	} {
		_, err := Compile(src)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "fhirpath: compile") {
			t.Errorf("Compile(%q) = %v, want error containing %q", src, err, want)
		}
	}
}

// TestConcurrentEvaluate evaluates one Expr from many goroutines (run with
// -race).
func TestConcurrentEvaluate(t *testing.T) {
	e, err := Compile("Patient.telecom.where(system='phone').value | Patient.name.family")
	if err != nil {
		t.Fatal(err)
	}
	r := example(t, "Patient-example")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if n := len(e.Evaluate(r)); n != 5 {
					t.Errorf("got %d nodes, want 5", n)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestStringAndNil checks String and the nil cases of Evaluate.
func TestStringAndNil(t *testing.T) {
	const src = "Patient.name | Patient.telecom"
	e, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if e.String() != src {
		t.Errorf("String() = %q", e.String())
	}
	if got := e.Evaluate(nil); got != nil {
		t.Errorf("Evaluate(nil) = %v", got)
	}
	var nilExpr *Expr
	if nilExpr.String() != "" || nilExpr.Evaluate(map[string]any{}) != nil {
		t.Error("nil *Expr misbehaves")
	}
}
