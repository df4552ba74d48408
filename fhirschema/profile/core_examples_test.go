package profile_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"fhirstore/fhirschema/profile"
)

// coreExampleDefects are the errors the official R4 examples have against
// their own type's definition, by file: a piece of each error they must
// yield and nothing else.
var coreExampleDefects = map[string][]string{
	// Modifier extensions whose definitions are nowhere to be found.
	"Basic-referral.json": {"the modifier extension http://example.org/do-not-use/fhir-extensions/referral#"},
	// References to types their elements do not allow in R4.
	"DeviceMetric-example.json":        {"DeviceMetric.parent: DeviceMetric.parent: the reference points to a DeviceDefinition"},
	"DeviceUseStatement-example.json":  {"DeviceUseStatement.reasonReference[0]: DeviceUseStatement.reasonReference: the reference points to a Procedure"},
	"MedicationRequest-medrx0301.json": {"MedicationRequest.dispenseRequest.performer: MedicationRequest.dispenseRequest.performer: the reference points to a Practitioner"},
	"Observation-clinical-gender.json": {"Observation.performer[0]: Observation.performer: the reference points to a Encounter"},
	// Nested items without the linkId R4 requires (see testdata/fhir/known-invalid.json).
	"Questionnaire-qs1.json": {".linkId: Questionnaire.item.linkId: minimum required = 1"},
}

// TestCoreExamplesConformToTheirTypes: each official R4 example validates
// against its own type's core definition — extensions in their contexts
// (through contentReference too), reference targets, bindings — without
// error but its known defects.
func TestCoreExamplesConformToTheirTypes(t *testing.T) {
	files, err := filepath.Glob("../../testdata/fhir/examples/*.json")
	if err != nil || len(files) == 0 {
		t.Skip("no R4 examples")
	}
	for _, f := range files {
		r := readJSON(t, f)
		typ, _ := r["resourceType"].(string)
		issues, err := validator.Validate(context.Background(), profile.Core(), r, "http://hl7.org/fhir/StructureDefinition/"+typ)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		known := coreExampleDefects[filepath.Base(f)]
		for _, e := range errorsOf(issues) {
			if !containsAny(e, known) {
				t.Errorf("%s: %s", filepath.Base(f), e)
			}
		}
		if len(known) > 0 && len(errorsOf(issues)) == 0 {
			t.Errorf("%s: want its known defects %q", filepath.Base(f), known)
		}
	}
}

func containsAny(s string, pieces []string) bool {
	for _, p := range pieces {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
