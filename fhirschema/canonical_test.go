package fhirschema_test

import (
	"testing"

	"fhirstore/fhirschema"
)

// TestCanonicalElementsTakeExtensions: an element of type canonical is a
// primitive like any other, its _name twin holds its id and extensions.
func TestCanonicalElementsTakeExtensions(t *testing.T) {
	v, err := fhirschema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	ext := `{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/display","valueString":"PHQ-9"}]}`
	tests := []struct {
		name, typ, body, wantError string
	}{
		{"a single canonical", "QuestionnaireResponse", `{"resourceType":"QuestionnaireResponse","status":"completed","questionnaire":"http://example.org/q","_questionnaire":` + ext + `}`, ""},
		{"a repeating canonical", "CapabilityStatement", `{"resourceType":"CapabilityStatement","status":"active","date":"2023","kind":"instance","fhirVersion":"4.0.1","format":["json"],"implementation":{"description":"x"},` +
			`"rest":[{"mode":"server","resource":[{"type":"Patient","supportedProfile":["http://example.org/p"],"_supportedProfile":[` + ext + `]}]}]}`, ""},
		{"an unknown element in the twin", "QuestionnaireResponse", `{"resourceType":"QuestionnaireResponse","status":"completed","questionnaire":"http://example.org/q","_questionnaire":{"nosuch":1}}`, "QuestionnaireResponse.questionnaire.nosuch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := v.Validate(tt.typ, []byte(tt.body), fhirschema.Options{})
			var errs []string
			for _, is := range r.Issues {
				if is.Severity == "error" {
					errs = append(errs, is.Expression)
				}
			}
			switch {
			case tt.wantError == "" && len(errs) > 0:
				t.Fatalf("refused: %+v", r.Issues)
			case tt.wantError != "" && (len(errs) != 1 || errs[0] != tt.wantError):
				t.Fatalf("want one error at %s, got %+v", tt.wantError, r.Issues)
			}
		})
	}
}
