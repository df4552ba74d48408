package profile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
)

const ex = "http://example.org/fhir/StructureDefinition/"

// testDefinitions are the profiles of testdata/profiles, given only as
// differentials, with US Core 6.1.0 and the core.
func testDefinitions(t testing.TB) profile.Definitions {
	t.Helper()
	mem := profile.NewMemory()
	files, err := filepath.Glob("testdata/profiles/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test profiles: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		mem.Add(r)
	}
	return profile.Merge(mem, profile.Merge(usCore(t, "6.1.0").defs, profile.Core()))
}

// rule is a resource validated against a test profile, and the issue it
// must yield ("" severity: no error at all).
type rule struct {
	name, profile, resource string
	severity, at, text      string
}

const (
	mrn      = `{"system":"urn:example:mrn","value":"1"}`
	ssn      = `{"system":"http://hl7.org/fhir/sid/us-ssn","value":"2"}`
	patient  = `{"resourceType":"Patient","identifier":[` + mrn + `]`
	usPatRef = `{"resourceType":"Patient","id":"p","identifier":[{"system":"urn:x","value":"1"}],"name":[{"family":"Doe"}],"gender":"female"}`
)

var rules = []rule{
	{"a patient with its record number conforms", ex + "test-patient", patient + `}`, "", "", ""},
	{"a patient without a record number", ex + "test-patient", `{"resourceType":"Patient"}`, "error", "Patient.identifier", "slice mrn requires at least 1"},
	{"an identifier of no slice, the slicing closed", ex + "test-patient", patient[:len(patient)-1] + `,{"system":"urn:other","value":"3"}]}`, "error", "Patient.identifier[1]", "matches none of the slices, and the slicing is closed"},
	{"two record numbers", ex + "test-patient", patient[:len(patient)-1] + "," + mrn + `]}`, "error", "Patient.identifier", "slice mrn allows at most 1"},
	{"slices out of order, the slicing ordered", ex + "test-patient-ordered", `{"resourceType":"Patient","identifier":[` + ssn + "," + mrn + `]}`, "error", "Patient.identifier[1]", "slice mrn comes after slice ssn"},
	{"slices in order, the slicing ordered", ex + "test-patient-ordered", `{"resourceType":"Patient","identifier":[` + mrn + "," + ssn + `]}`, "", "", ""},
	{"an unsliced identifier first, the slicing open at end", ex + "test-patient-openatend", `{"resourceType":"Patient","identifier":[{"system":"urn:other"},` + mrn + `]}`, "error", "Patient.identifier[1]", "must come after those of slice mrn (openAtEnd)"},
	{"an unsliced identifier last, the slicing open at end", ex + "test-patient-openatend", `{"resourceType":"Patient","identifier":[` + mrn + `,{"system":"urn:other"}]}`, "", "", ""},
	{"a family name longer than maxLength", ex + "test-patient", patient + `,"name":[{"family":"Featherstonehaugh"}]}`, "error", "Patient.name[0].family", "more than maxLength 10"},
	{"a multiple birth above maxValue", ex + "test-patient", patient + `,"birthDate":"2000","multipleBirthInteger":12}`, "error", "Patient.multipleBirthInteger", "more than 9 (maxValueInteger)"},
	{"a multiple birth below minValue", ex + "test-patient", patient + `,"birthDate":"2000","multipleBirthInteger":0}`, "error", "Patient.multipleBirthInteger", "less than 1 (minValueInteger)"},
	{"a multiple birth as a boolean, not the sliced type", ex + "test-patient", patient + `,"birthDate":"2000","multipleBirthBoolean":true}`, "", "", ""},
	{"two dated telecoms (exists discriminator)", ex + "test-patient", patient + `,"telecom":[{"value":"1","period":{"start":"2000"}},{"value":"2","period":{"start":"2001"}},{"value":"3"}]}`, "error", "Patient.telecom", "slice dated allows at most 1"},
	{"a marital status outside the preferred value set", ex + "test-patient", patient + `,"maritalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-MaritalStatus","code":"Z"}]}}`, "warning", "Patient.maritalStatus", "not in the preferred value set"},
	{"a marital status in the preferred value set", ex + "test-patient", patient + `,"maritalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-MaritalStatus","code":"M"}]}}`, "", "", ""},
	{"a code of a value set that is not installed", ex + "test-patient", patient + `,"contact":[{"relationship":[{"coding":[{"system":"urn:x","code":"y"}]}]}]}`, "warning", "Patient.contact[0].relationship[0]", "the value set http://cts.nlm.nih.gov/fhir/ValueSet/2.16.840.1.113762.1.4.1 is not available"},
	{"a relationship with only text where a code is required", ex + "test-patient", patient + `,"contact":[{"relationship":[{"text":"aunt"}]}]}`, "error", "Patient.contact[0].relationship[0]", "no code given, and a code from http://cts.nlm.nih.gov/fhir/ValueSet/2.16.840.1.113762.1.4.1 is required"},
	{"a relationship absent for a reason", ex + "test-patient", patient + `,"contact":[{"relationship":[{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"unknown"}]}]}]}`, "", "", ""},
	{"a language exactly the fixed one", ex + "test-patient", patient + `,"communication":[{"language":{"coding":[{"system":"urn:ietf:bcp:47","code":"en"}]}}]}`, "", "", ""},
	{"a language with more than the fixed value", ex + "test-patient", patient + `,"communication":[{"language":{"coding":[{"system":"urn:ietf:bcp:47","code":"en","display":"English"}]}}]}`, "error", "Patient.communication[0].language", "the value must be"},
	{"the profile's invariant broken", ex + "test-patient", patient + `,"multipleBirthBoolean":true}`, "error", "Patient", "tp-1: A patient born in a multiple birth has a birth date"},
	{"a Bundle without a Patient (type discriminator)", ex + "test-bundle-type", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Device"}}]}`, "error", "Bundle.entry", "slice patient requires at least 1"},
	{"a Bundle with a Patient (type discriminator)", ex + "test-bundle-type", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Device"}},{"resource":{"resourceType":"Patient"}}]}`, "", "", ""},
	{"a Bundle without a US Core Patient (profile discriminator)", ex + "test-bundle-profile", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient"}}]}`, "error", "Bundle.entry", "slice patient requires at least 1"},
	{"a Bundle with a US Core Patient (profile discriminator)", ex + "test-bundle-profile", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":` + usPatRef + `}]}`, "", "", ""},
	{"a report whose results are no Observations (type discriminator through resolve())", ex + "test-diagnosticreport", `{"resourceType":"DiagnosticReport","status":"final","code":{"text":"x"},"result":[{"reference":"Media/1"}]}`, "error", "DiagnosticReport.result", "slice observation requires at least 1"},
	{"a report with an Observation result (type discriminator through resolve())", ex + "test-diagnosticreport", `{"resourceType":"DiagnosticReport","status":"final","code":{"text":"x"},"result":[{"reference":"Observation/1"}]}`, "", "", ""},
	{"a nickname on a name", ex + "test-patient", patient + `,"name":[{"family":"Doe","extension":[{"url":"` + ex + `test-nickname","valueString":"Jo"}]}]}`, "", "", ""},
	{"a nickname on the patient, outside its context", ex + "test-patient", patient + `,"extension":[{"url":"` + ex + `test-nickname","valueString":"Jo"}]}`, "error", "Patient.extension[0]", "is not allowed on Patient; its context is HumanName"},
	{"two nicknames on a name", ex + "test-patient", patient + `,"name":[{"family":"Doe","extension":[{"url":"` + ex + `test-nickname","valueString":"Jo"},{"url":"` + ex + `test-nickname","valueString":"J"}]}]}`, "error", "Patient.name[0].extension", "may appear at most 1 times"},
	{"a nickname that is a number", ex + "test-patient", patient + `,"name":[{"family":"Doe","extension":[{"url":"` + ex + `test-nickname","valueInteger":1}]}]}`, "error", "Patient.name[0].extension[0].valueInteger", "type integer is not allowed"},
	{"a modifier extension as a plain extension", ex + "test-patient", patient + `,"extension":[{"url":"` + ex + `test-do-not-resuscitate","valueBoolean":true}]}`, "error", "Patient.extension[0]", "must be in modifierExtension"},
	{"a known modifier extension", ex + "test-patient", patient + `,"modifierExtension":[{"url":"` + ex + `test-do-not-resuscitate","valueBoolean":true}]}`, "", "", ""},
	{"a nested item with a long link id (contentReference)", ex + "test-questionnaire", `{"resourceType":"Questionnaire","status":"draft","item":[{"linkId":"1","type":"group","item":[{"linkId":"1.1-too-long","type":"string"}]}]}`, "error", "Questionnaire.item[0].item[0].linkId", "more than maxLength 8"},
	{"four nested items (contentReference)", ex + "test-questionnaire", `{"resourceType":"Questionnaire","status":"draft","item":[{"linkId":"1","type":"group","item":[{"linkId":"a","type":"string"},{"linkId":"b","type":"string"},{"linkId":"c","type":"string"},{"linkId":"d","type":"string"}]}]}`, "error", "Questionnaire.item[0].item", "maximum allowed = 3"},
}

func TestRulesOfTestProfiles(t *testing.T) {
	defs := testDefinitions(t)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			res, err := decode([]byte(r.resource))
			if err != nil {
				t.Fatal(err)
			}
			issues, err := validator.Validate(context.Background(), defs, res, r.profile)
			if err != nil {
				t.Fatal(err)
			}
			checkIssue(t, issues, r.severity, r.at, r.text)
		})
	}
}

// checkIssue wants an issue of severity at at saying text, or, when
// severity is "", no error.
func checkIssue(t *testing.T, issues []fhirschema.Issue, severity, at, text string) {
	t.Helper()
	if severity == "" {
		if errs := errorsOf(issues); len(errs) > 0 {
			t.Errorf("want no error, got %q", errs)
		}
		return
	}
	var found []string
	for _, is := range issues {
		e := is.Expression + ": " + is.Diagnostics
		if is.Severity == severity && strings.HasPrefix(e, at+": ") && strings.Contains(e, text) {
			return
		}
		found = append(found, is.Severity+" "+e)
	}
	t.Errorf("want %s at %s saying %q; got %q", severity, at, text, found)
}

// TestSliceFunction: FHIRPath's slice() in an invariant picks a profile's
// slice.
func TestSliceFunction(t *testing.T) {
	mem := profile.NewMemory(sd(t, ex+"uses-slice", "Patient", ex+"test-patient", `{"id":"Patient","path":"Patient","constraint":[{"key":"us-1","severity":"error","human":"The record number is 8 characters","expression":"identifier.slice('`+ex+`test-patient', 'mrn').all(value.length() = 8)"}]}`))
	defs := profile.Merge(mem, testDefinitions(t))
	for _, c := range []struct{ value, severity string }{{"12345678", ""}, {"123", "error"}} {
		r, _ := decode([]byte(`{"resourceType":"Patient","identifier":[{"system":"urn:example:mrn","value":"` + c.value + `"}]}`))
		issues, err := validator.Validate(context.Background(), defs, r, ex+"uses-slice")
		if err != nil {
			t.Fatal(err)
		}
		checkIssue(t, issues, c.severity, "Patient", "us-1")
	}
}

// TestInvariantsOnPrimitivesSeeTheirExtensions: a profile's invariant on a
// primitive sees the extensions of its _name twin.
func TestInvariantsOnPrimitivesSeeTheirExtensions(t *testing.T) {
	const dar = "http://hl7.org/fhir/StructureDefinition/data-absent-reason"
	mem := profile.NewMemory(sd(t, ex+"birth", "Patient", corePatient, `{"id":"Patient","path":"Patient"}`,
		`{"id":"Patient.birthDate","path":"Patient.birthDate","constraint":[{"key":"bd-1","severity":"error","human":"A birth date or why it is absent","expression":"hasValue() or extension('`+dar+`').exists()"}]}`))
	defs := profile.Merge(mem, profile.Core())
	for _, c := range []struct{ name, body, severity string }{
		{"a value", `"birthDate":"2000-01-01"`, ""},
		{"a reason for its absence", `"_birthDate":{"extension":[{"url":"` + dar + `","valueCode":"unknown"}]}`, ""},
		{"another extension only", `"_birthDate":{"extension":[{"url":"http://example.org/x","valueString":"y"}]}`, "error"},
	} {
		r, _ := decode([]byte(`{"resourceType":"Patient",` + c.body + `}`))
		issues, err := validator.Validate(context.Background(), defs, r, ex+"birth")
		if err != nil {
			t.Fatal(err)
		}
		t.Run(c.name, func(t *testing.T) { checkIssue(t, issues, c.severity, "Patient.birthDate", "bd-1") })
	}
}
