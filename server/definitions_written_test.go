package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// A profile written as a differential only, its elements with a path but
// no id, as hand-written profiles often are.
const profileWithoutIDs = `{"resourceType":"StructureDefinition","url":"http://example.org/StructureDefinition/mrn-patient","name":"MrnPatient","status":"active",
 "kind":"resource","abstract":false,"type":"Patient","baseDefinition":"http://hl7.org/fhir/StructureDefinition/Patient","derivation":"constraint",
 "differential":{"element":[
  {"path":"Patient.identifier","slicing":{"discriminator":[{"type":"value","path":"system"}],"rules":"open"},"min":1},
  {"path":"Patient.identifier","sliceName":"mrn","min":1,"max":"1"},
  {"path":"Patient.identifier.system","min":1,"fixedUri":"http://example.org/mrn"},
  {"path":"Patient.birthDate","min":1}]}}`

func TestAProfileWithoutElementIDsGetsThemAndIsUsed(t *testing.T) {
	e := newEnv(t)
	r := e.post("/StructureDefinition", profileWithoutIDs)
	if r.Status != http.StatusCreated {
		t.Fatalf("store: %d %s", r.Status, r.Body)
	}
	ids := []string{}
	for _, el := range r.JSON(t)["differential"].(map[string]any)["element"].([]any) {
		ids = append(ids, el.(map[string]any)["id"].(string))
	}
	want := "Patient.identifier Patient.identifier:mrn Patient.identifier:mrn.system Patient.birthDate"
	if strings.Join(ids, " ") != want {
		t.Fatalf("ids %v, want %s", ids, want)
	}
	claim := `{"resourceType":"Patient","meta":{"profile":["http://example.org/StructureDefinition/mrn-patient"]},`
	if r := e.post("/Patient", claim+`"identifier":[{"system":"http://example.org/mrn","value":"1"}],"birthDate":"1950-01-01"}`); r.Status != http.StatusCreated {
		t.Fatalf("a conforming patient: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, e.post("/Patient", claim+`"identifier":[{"system":"http://example.org/mrn","value":"1"}]}`), http.StatusUnprocessableEntity, "Patient")
}

func TestDefinitionsR4AllowsAreStored(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ name, typ, body string }{
		{"a Bundle profile typing entry.response.outcome Resource, as R4's text does", "StructureDefinition", `{"resourceType":"StructureDefinition","url":"http://example.org/StructureDefinition/b","name":"B","status":"active","kind":"resource","abstract":false,"type":"Bundle",
		  "baseDefinition":"http://hl7.org/fhir/StructureDefinition/Bundle","derivation":"constraint","differential":{"element":[{"id":"Bundle.entry.response.outcome","path":"Bundle.entry.response.outcome","type":[{"code":"Resource"}]}]}}`},
		{"a slice allowing more repetitions than the element it slices", "StructureDefinition", `{"resourceType":"StructureDefinition","url":"http://example.org/StructureDefinition/p","name":"P","status":"active","kind":"resource","abstract":false,"type":"Parameters",
		  "baseDefinition":"http://hl7.org/fhir/StructureDefinition/Parameters","derivation":"constraint","differential":{"element":[
		  {"id":"Parameters.parameter","path":"Parameters.parameter","slicing":{"discriminator":[{"type":"value","path":"name"}],"rules":"open"},"max":"5"},
		  {"id":"Parameters.parameter:a","path":"Parameters.parameter","sliceName":"a","max":"10"}]}}`},
		{"an expression in a language R4 binds extensibly", "Measure", `{"resourceType":"Measure","status":"draft","group":[{"population":[{"criteria":{"language":"text/cql-identifier","expression":"Numerator"}}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := e.post("/"+tc.typ, tc.body); r.Status != http.StatusCreated {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
		})
	}
}

func TestProfileExtensionsOfElementsAreChecked(t *testing.T) {
	e := newEnv(t)
	profile := func(url, element, ext string) string {
		return `{"resourceType":"StructureDefinition","url":"` + url + `","name":"P","status":"active","kind":"resource","abstract":false,"type":"Patient",
		  "baseDefinition":"http://hl7.org/fhir/StructureDefinition/Patient","derivation":"constraint",
		  "differential":{"element":[{"id":"` + element + `","path":"` + element + `","extension":[` + ext + `]}]}}`
	}
	for url, body := range map[string]string{
		"http://example.org/sd/min-id":  profile("http://example.org/sd/min-id", "Patient.id", `{"url":"http://hl7.org/fhir/StructureDefinition/minLength","valueInteger":5}`),
		"http://example.org/sd/no-lang": profile("http://example.org/sd/no-lang", "Patient.text", `{"url":"http://hl7.org/fhir/StructureDefinition/narrative-language-control","valueCode":"_no"}`),
		"http://example.org/sd/lang":    profile("http://example.org/sd/lang", "Patient.text", `{"url":"http://hl7.org/fhir/StructureDefinition/narrative-language-control","valueCode":"_resource"}`),
	} {
		if r := e.post("/StructureDefinition", body); r.Status != http.StatusCreated {
			t.Fatalf("store %s: %d %s", url, r.Status, r.Body)
		}
	}
	sections := `"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><div lang=\"de\" xml:lang=\"de\">Hallo</div></div>"}`
	for _, tc := range []struct {
		name, profile, body string
		valid               bool
	}{
		{"an id as long as minLength", "min-id", `{"resourceType":"Patient","id":"abcdef"}`, true},
		{"an id shorter than minLength", "min-id", `{"resourceType":"Patient","id":"abc"}`, false},
		{"language sections where the profile prohibits them", "no-lang", `{"resourceType":"Patient",` + sections + `}`, false},
		{"no section in the resource's language", "lang", `{"resourceType":"Patient","language":"en",` + sections + `}`, false},
		{"a section in the resource's language", "lang", `{"resourceType":"Patient","language":"de",` + sections + `}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post("/Patient/$validate?profile=http://example.org/sd/"+tc.profile, tc.body)
			errs := 0
			for _, is := range r.JSON(t)["issue"].([]any) {
				if is.(map[string]any)["severity"] == "error" {
					errs++
				}
			}
			if (errs == 0) != tc.valid {
				t.Fatalf("valid %v, want %v: %s", errs == 0, tc.valid, r.Body)
			}
		})
	}
}

func TestADifferentialElementWhosePathIsNotItsIDIsRefused(t *testing.T) {
	e := newEnv(t)
	sd := `{"resourceType":"StructureDefinition","url":"http://example.org/sd/bla","name":"Bla","status":"active","kind":"resource","abstract":false,"type":"Observation",
	  "baseDefinition":"http://hl7.org/fhir/StructureDefinition/Observation","derivation":"constraint",
	  "differential":{"element":[{"id":"Observation.valueQuantity","path":"Observation.valueBla"}]}}`
	wantOutcome(t, e.post("/StructureDefinition", sd), http.StatusUnprocessableEntity, "")
	ok := strings.Replace(sd, "Observation.valueBla", "Observation.value[x]", 1)
	if r := e.post("/StructureDefinition", ok); r.Status != http.StatusCreated {
		t.Fatalf("a choice named by its element in the path and by its type in the id: %d %s", r.Status, r.Body)
	}
}

func TestDifferentialsThatBreakTheirBaseAreRefused(t *testing.T) {
	e := newEnv(t)
	ext := func(url, base, fixed string, more string) string {
		return `{"resourceType":"StructureDefinition","url":"` + url + `","name":"E","status":"active","kind":"complex-type","abstract":false,"type":"Extension",
		  "context":[{"type":"element","expression":"Patient"}],"baseDefinition":"` + base + `","derivation":"constraint",
		  "differential":{"element":[{"id":"Extension.url","path":"Extension.url","fixedUri":"` + fixed + `"},
		  {"id":"Extension.value[x]","path":"Extension.value[x]","type":[{"code":"string"}]}` + more + `]}}`
	}
	base := ext("http://example.org/sd/ext-base", "http://hl7.org/fhir/StructureDefinition/Extension", "http://example.org/sd/ext-base", "")
	if r := e.post("/StructureDefinition", base); r.Status != http.StatusCreated {
		t.Fatalf("the base extension: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, e.post("/StructureDefinition", ext("http://example.org/sd/ext-derived", "http://example.org/sd/ext-base", "http://example.org/sd/ext-derived", "")), http.StatusUnprocessableEntity, "")
	badSlicing := `,{"id":"Extension.extension","path":"Extension.extension","slicing":{"discriminator":[{"type":"value","path":"type"}],"rules":"open"}}`
	wantOutcome(t, e.post("/StructureDefinition", ext("http://example.org/sd/ext-sliced", "http://hl7.org/fhir/StructureDefinition/Extension", "http://example.org/sd/ext-sliced", badSlicing)), http.StatusUnprocessableEntity, "")
	goodSlicing := strings.Replace(badSlicing, `"path":"type"`, `"path":"url"`, 1)
	if r := e.post("/StructureDefinition", ext("http://example.org/sd/ext-sliced", "http://hl7.org/fhir/StructureDefinition/Extension", "http://example.org/sd/ext-sliced", goodSlicing)); r.Status != http.StatusCreated {
		t.Fatalf("slicing by url: %d %s", r.Status, r.Body)
	}
}

func TestACodeOfEitherVersionOfAV2TableIsKnown(t *testing.T) {
	e := newEnv(t)
	practitioner := func(code string) string {
		return `{"resourceType":"Practitioner","qualification":[{"code":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0360","code":"` + code + `"}]}}]}`
	}
	// RN is in v2-0360 2.7, not 2.3.1; MD in both.
	for _, code := range []string{"RN", "MD"} {
		if r := e.post("/Practitioner", practitioner(code)); r.Status != http.StatusCreated {
			t.Fatalf("v2-0360 %s: %d %s", code, r.Status, r.Body)
		}
	}
	wantOutcome(t, e.post("/Practitioner", practitioner("NOPE")), http.StatusUnprocessableEntity, "Practitioner.qualification[0].code.coding[0].code")
}
