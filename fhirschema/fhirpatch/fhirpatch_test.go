package fhirpatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"fhirstore/fhirschema/fhirpatch"
)

// op is one operation of a Parameters, its parts as JSON.
func op(parts ...string) string {
	return `{"name":"operation","part":[` + strings.Join(parts, ",") + `]}`
}

func params(ops ...string) string {
	return `{"resourceType":"Parameters","parameter":[` + strings.Join(ops, ",") + `]}`
}

func kind(k string) string { return `{"name":"type","valueCode":"` + k + `"}` }
func path(p string) string { return fmt.Sprintf(`{"name":"path","valueString":%q}`, p) }
func name(n string) string { return `{"name":"name","valueString":"` + n + `"}` }
func value(typ, v string) string {
	return `{"name":"value","value` + typ + `":` + v + `}`
}
func integer(part string, i int) string { return fmt.Sprintf(`{"name":%q,"valueInteger":%d}`, part, i) }

// TestOperationsChangeWhatTheyNameAndNothingElse: each row applies a patch
// and expects the resource, written byte for byte (key order and number
// text kept).
func TestOperationsChangeWhatTheyNameAndNothingElse(t *testing.T) {
	const obs = `{"resourceType":"Observation","status":"final","code":{"text":"weight"},"valueQuantity":{"value":72.50,"unit":"kg"}}`
	const pat = `{"resourceType":"Patient","name":[{"family":"F","given":["A","B","C"],"_given":[null,{"id":"b"},null]}],"birthDate":"1970-01-01","_birthDate":{"id":"bd"}}`
	for _, tc := range []struct {
		name, resource, patch, want string
	}{
		{"a narrative set from a string is written as FHIR writes one: quotes in text as &quot;", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"}}`,
			params(op(kind("replace"), path("Patient.text.div"), value("String", `"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p title=\"a\">Jim \"J\"</p></div>"`))),
			`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p title=\"a\">Jim &quot;J&quot;</p></div>"}}`},
		{"replace keeps the place of the element and the text of numbers", obs,
			params(op(kind("replace"), path("Observation.status"), value("Code", `"amended"`))),
			`{"resourceType":"Observation","status":"amended","code":{"text":"weight"},"valueQuantity":{"value":72.50,"unit":"kg"}}`},
		{"replace of a choice element may change its type", obs,
			params(op(kind("replace"), path("Observation.value"), value("String", `"heavy"`))),
			`{"resourceType":"Observation","status":"final","code":{"text":"weight"},"valueString":"heavy"}`},
		{"add of a choice element takes the value's type", `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`,
			params(op(kind("add"), path("Observation"), name("value"), value("Boolean", "true"))),
			`{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueBoolean":true}`},
		{"delete of a primitive takes its extensions", pat,
			params(op(kind("delete"), path("Patient.birthDate"))),
			`{"resourceType":"Patient","name":[{"family":"F","given":["A","B","C"],"_given":[null,{"id":"b"},null]}]}`},
		{"delete in a list keeps the extensions with their values", pat,
			params(op(kind("delete"), path("Patient.name[0].given[0]"))),
			`{"resourceType":"Patient","name":[{"family":"F","given":["B","C"],"_given":[{"id":"b"},null]}],"birthDate":"1970-01-01","_birthDate":{"id":"bd"}}`},
		{"delete of the one extended item drops the twin list", pat,
			params(op(kind("delete"), path("Patient.name[0].given[1]"))),
			`{"resourceType":"Patient","name":[{"family":"F","given":["A","C"]}],"birthDate":"1970-01-01","_birthDate":{"id":"bd"}}`},
		{"insert and move carry the extensions along", pat,
			params(op(kind("insert"), path("Patient.name[0].given"), value("String", `"Z"`), integer("index", 0)),
				op(kind("move"), path("Patient.name[0].given"), integer("source", 2), integer("destination", 3))),
			`{"resourceType":"Patient","name":[{"family":"F","given":["Z","A","C","B"],"_given":[null,null,null,{"id":"b"}]}],"birthDate":"1970-01-01","_birthDate":{"id":"bd"}}`},
		{"a primitive added with its extensions", `{"resourceType":"Patient"}`,
			params(op(kind("add"), path("Patient"), name("birthDate"), `{"name":"value","valueDate":"1970-01-01","_valueDate":{"id":"bd"}}`)),
			`{"resourceType":"Patient","birthDate":"1970-01-01","_birthDate":{"id":"bd"}}`},
		{"delete of what is not there changes nothing", obs,
			params(op(kind("delete"), path("Observation.issued"))), obs},
		{"an element selected by a function is found where it is", `{"resourceType":"Patient","identifier":[{"use":"usual","value":"1"},{"use":"official","value":"2"}]}`,
			params(op(kind("replace"), path("Patient.identifier.where(use = 'official').value"), value("String", `"3"`))),
			`{"resourceType":"Patient","identifier":[{"use":"usual","value":"1"},{"use":"official","value":"3"}]}`},
		{"strings with characters JSON escapes come back escaped, markup as it is", `{"resourceType":"Patient","name":[{"text":"a \"b\" \\ é\n"}]}`,
			params(op(kind("replace"), path("Patient.name[0].text"), value("String", `"<c> & \"d\""`))),
			`{"resourceType":"Patient","name":[{"text":"<c> & \"d\""}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fhirpatch.Apply(context.Background(), []byte(tc.resource), []byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestFaultsNameTheOperationAndPart: every fault is an *Error whose
// expression names the operation and part, Invalid for a malformed patch.
func TestFaultsNameTheOperationAndPart(t *testing.T) {
	const pat = `{"resourceType":"Patient","name":[{"family":"A"},{"family":"B"}],"gender":"male"}`
	ok := op(kind("delete"), path("Patient.gender"))
	for _, tc := range []struct {
		name, patch, expr string
		invalid           bool
	}{
		{"not JSON", `{"resourceType":`, "Parameters", true},
		{"not a Parameters", `{"resourceType":"Patient"}`, "Parameters", true},
		{"parameter is not an array", `{"resourceType":"Parameters","parameter":{}}`, "Parameters", true},
		{"a parameter not named operation", params(ok, `{"name":"x"}`), "Parameters.parameter[1]", true},
		{"no type", params(op(path("Patient.gender"))), "Parameters.parameter[0]", true},
		{"an unknown type", params(op(kind("copy"), path("Patient.gender"))), "Parameters.parameter[0].part[0]", true},
		{"no path", params(op(kind("delete"))), "Parameters.parameter[0]", true},
		{"a path that does not parse", params(op(kind("delete"), path("Patient.("))), "Parameters.parameter[0].part[1]", true},
		{"a path naming no element", params(op(kind("delete"), path("Patient.genre"))), "Parameters.parameter[0].part[1]", true},
		{"a value without value[x], resource or part", params(op(kind("replace"), path("Patient.gender"), `{"name":"value"}`)), "Parameters.parameter[0].part[2]", true},
		{"a negative index", params(op(kind("insert"), path("Patient.name"), value("HumanName", `{}`), integer("index", -1))), "Parameters.parameter[0].part[3]", true},
		{"an unknown part", params(op(kind("delete"), path("Patient.gender"), `{"name":"x","valueString":"y"}`)), "Parameters.parameter[0].part[2]", true},
		{"a part twice", params(op(kind("delete"), path("Patient.gender"), path("Patient.name"))), "Parameters.parameter[0].part[2]", true},
		{"delete of one of several", params(op(kind("delete"), path("Patient.name.family"))), "Parameters.parameter[0].part[1]", false},
		{"add under nothing", params(op(kind("add"), path("Patient.contact"), name("gender"), value("Code", `"male"`))), "Parameters.parameter[0].part[1]", false},
		{"add of an element the type does not have", params(op(kind("add"), path("Patient"), name("colour"), value("Code", `"red"`))), "Parameters.parameter[0].part[2]", false},
		{"add of a single element that has a value", params(op(kind("add"), path("Patient"), name("gender"), value("Code", `"other"`))), "Parameters.parameter[0].part[2]", false},
		{"insert into a single element", params(op(kind("insert"), path("Patient.gender"), value("Code", `"x"`), integer("index", 0))), "Parameters.parameter[0].part[1]", false},
		{"move past the end", params(op(kind("move"), path("Patient.name"), integer("source", 0), integer("destination", 2))), "Parameters.parameter[0].part[3]", false},
		{"replace of nothing in a later operation", params(ok, op(kind("replace"), path("Patient.gender"), value("Code", `"male"`))), "Parameters.parameter[1].part[1]", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fhirpatch.Apply(context.Background(), []byte(pat), []byte(tc.patch))
			var pe *fhirpatch.Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %s, %v; want an *Error", got, err)
			}
			if pe.Expression() != tc.expr || pe.Invalid != tc.invalid {
				t.Fatalf("error %q at %s (invalid %v), want at %s (invalid %v)", pe, pe.Expression(), pe.Invalid, tc.expr, tc.invalid)
			}
		})
	}
}
