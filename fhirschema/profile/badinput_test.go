package profile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"fhirstore/fhirschema/profile"
)

// sd builds a constraint on base from differential elements given as JSON.
func sd(t *testing.T, url, typ, base string, elements ...string) map[string]any {
	t.Helper()
	r, err := decode([]byte(`{"resourceType":"StructureDefinition","url":"` + url + `","name":"T","status":"active","kind":"resource","abstract":false,"type":"` + typ +
		`","baseDefinition":"` + base + `","derivation":"constraint","differential":{"element":[` + strings.Join(elements, ",") + `]}}`))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const corePatient = "http://hl7.org/fhir/StructureDefinition/Patient"

// TestDifferentialsThatCannotBeApplied: each is refused, naming the
// element.
func TestDifferentialsThatCannotBeApplied(t *testing.T) {
	for _, c := range []struct {
		name, element, path, reason string
	}{
		{"an element the base does not have", `{"id":"Patient.nickname","path":"Patient.nickname","min":1}`, "Patient.nickname", "the base has no element Patient.nickname"},
		{"a min above the max", `{"id":"Patient.name","path":"Patient.name","min":2,"max":"1"}`, "Patient.name", "min 2 is more than max 1"},
		{"a max above the base's", `{"id":"Patient.gender","path":"Patient.gender","max":"*"}`, "Patient.gender", "max * is more than the base's 1"},
		{"a min below the base's", `{"id":"Patient.link.other","path":"Patient.link.other","min":0}`, "Patient.link.other", "min 0 is less than the base's 1"},
		{"a type the base does not allow", `{"id":"Patient.birthDate","path":"Patient.birthDate","type":[{"code":"Period"}]}`, "Patient.birthDate", "type Period is not among the base's types date"},
		{"children of a choice of several types", `{"id":"Patient.deceased[x].start","path":"Patient.deceased[x].start"}`, "Patient.deceased[x].start", "has 2 types: constrain it to one before its children"},
		{"a root that is not the base's", `{"id":"Observation","path":"Observation"}`, "Observation", "the base's root is Patient"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := sd(t, ex+"bad", "Patient", corePatient, `{"id":"Patient","path":"Patient"}`, c.element)
			_, err := profile.GenerateSnapshot(context.Background(), profile.Core(), s)
			var de *profile.DifferentialError
			if !errors.As(err, &de) {
				t.Fatalf("want a *DifferentialError, got %v", err)
			}
			if de.Path != c.path || !strings.Contains(de.Reason, c.reason) {
				t.Errorf("got %s: %s; want %s: %s", de.Path, de.Reason, c.path, c.reason)
			}
		})
	}
}

// TestProfilesThatCannotBeUsed: a broken profile is ErrInvalidProfile, an
// unknown one ErrUnknownProfile; neither panics nor hangs.
func TestProfilesThatCannotBeUsed(t *testing.T) {
	self := sd(t, ex+"self", "Patient", ex+"self", `{"id":"Patient","path":"Patient"}`)
	a := sd(t, ex+"a", "Patient", ex+"b", `{"id":"Patient","path":"Patient"}`)
	b := sd(t, ex+"b", "Patient", ex+"a", `{"id":"Patient","path":"Patient"}`)
	orphan := sd(t, ex+"orphan", "Patient", ex+"nowhere", `{"id":"Patient","path":"Patient"}`)
	snap := func(url string, elements string) map[string]any {
		r, _ := decode([]byte(`{"resourceType":"StructureDefinition","url":"` + ex + url + `","type":"Patient","kind":"resource","snapshot":{"element":[` + elements + `]}}`))
		return r
	}
	defs := profile.Merge(profile.NewMemory(self, a, b, orphan,
		snap("no-path", `{"id":"Patient","path":"Patient"},{"id":"x"}`),
		snap("bad-min", `{"id":"Patient","path":"Patient"},{"id":"Patient.name","path":"Patient.name","min":"one"}`),
		snap("no-root", `{"id":"Patient.name","path":"Patient.name"}`),
		snap("orphan-slice", `{"id":"Patient","path":"Patient"},{"id":"Patient.name:x","path":"Patient.name","sliceName":"x"}`),
		snap("bad-discriminator", `{"id":"Patient","path":"Patient"},{"id":"Patient.name","path":"Patient.name","slicing":{"discriminator":[{"type":"colour","path":"use"}]}}`),
		snap("bad-max", `{"id":"Patient","path":"Patient"},{"id":"Patient.name","path":"Patient.name","max":"many"}`),
	), profile.Core())
	patient := map[string]any{"resourceType": "Patient"}
	for _, c := range []struct{ url, want string }{
		{"self", "derives from itself"},
		{"a", "derives from itself"},
		{"orphan", "its base http://example.org/fhir/StructureDefinition/nowhere is not known"},
		{"no-path", "an element has no path"},
		{"bad-min", "min"},
		{"no-root", "the first element must be the root"},
		{"orphan-slice", "slice x has no base element"},
		{"bad-discriminator", `discriminator type "colour"`},
		{"bad-max", `max "many"`},
	} {
		_, err := validator.Validate(context.Background(), defs, patient, ex+c.url)
		if !errors.Is(err, profile.ErrInvalidProfile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want ErrInvalidProfile saying %q, got %v", c.url, c.want, err)
		}
	}
	if _, err := validator.Validate(context.Background(), defs, patient, ex+"missing"); !errors.Is(err, profile.ErrUnknownProfile) {
		t.Errorf("an unknown profile: want ErrUnknownProfile, got %v", err)
	}
}

// TestSelfReferenceIsBounded: an extension whose branches are itself,
// nested far deeper than the bound, is checked to the bound with a
// warning.
func TestSelfReferenceIsBounded(t *testing.T) {
	defs := testDefinitions(t)
	leaf := map[string]any{"url": ex + "test-tree", "valueString": "leaf"}
	for i := 0; i < 500; i++ {
		leaf = map[string]any{"url": ex + "test-tree", "extension": []any{leaf}}
	}
	r := map[string]any{"resourceType": "Patient", "identifier": []any{map[string]any{"system": "urn:example:mrn"}}, "extension": []any{leaf}}
	start := time.Now()
	issues, err := validator.Validate(context.Background(), defs, r, ex+"test-patient")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	for _, is := range issues {
		if is.Severity == "warning" && strings.HasPrefix(is.Expression, "Patient.extension[0].extension[0].extension[0]") && strings.Contains(is.Diagnostics, "stops at 64 nested levels") {
			return
		}
	}
	t.Errorf("want the warning of the bound deep in Patient.extension[0]; got %v", issues)
}

// TestMalformedResourcesDoNotPanic: values of the wrong JSON shape, which
// the base validation refuses first, are walked without a panic.
func TestMalformedResourcesDoNotPanic(t *testing.T) {
	defs := testDefinitions(t)
	for _, body := range []string{
		`{"resourceType":"Patient","identifier":5,"name":"Amy","extension":{"url":1},"gender":["female"]}`,
		`{"resourceType":"Patient","identifier":[5,null,"x",{"system":7}],"name":[null,{"family":[1]}],"extension":[null,3,{"url":null}]}`,
		`{"resourceType":"Patient","_gender":{"extension":[{"url":"http://example.org/x"}]},"_birthDate":[1],"telecom":[{"period":"2000"}]}`,
		`{"resourceType":"Patient","contained":[{"resourceType":"Patient","meta":{"profile":[1,"` + ex + `test-patient"]}},{"id":"x"},7],"managingOrganization":{"reference":"#x"}}`,
		`{"resourceType":"Patient","multipleBirthInteger":"twelve","maritalStatus":{"coding":"M"},"contact":[{"relationship":[{"coding":[{"code":5}]}]}]}`,
		`{"resourceType":"Patient","modifierExtension":[{"url":"` + ex + `test-tree","extension":[{"url":"` + ex + `test-tree","extension":"x"}]}]}`,
	} {
		r, err := decode([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		for _, url := range []string{ex + "test-patient", uc + "us-core-patient", corePatient} {
			if _, err := validator.Validate(context.Background(), defs, r, url); err != nil {
				t.Errorf("%s: %v", url, err)
			}
		}
	}
}
