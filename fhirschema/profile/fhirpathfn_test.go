package profile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"fhirstore/fhirschema/profile"
)

// TestElementDefinitionAndSliceInAProfilesInvariants: a profile derived
// from US Core Blood Pressure (a differential: its snapshot is generated
// from US Core's) adds an invariant at Observation; in it,
// elementDefinition() gives the ElementDefinition each value is validated
// against — US Core's slices and patterns included — and slice() picks
// US Core's systolic and diastolic components.
func TestElementDefinitionAndSliceInAProfilesInvariants(t *testing.T) {
	const bp = uc + "us-core-blood-pressure"
	pkg := usCore(t, "6.1.0")
	tests := []struct {
		name, expression string
		change           func(r map[string]any)
		severity         string
	}{
		{"the resource's own definition", "elementDefinition().path = 'Observation' and elementDefinition().id = 'Observation'", nil, ""},
		{"a complex element's definition, with US Core's pattern", "code.elementDefinition().patternCodeableConcept.coding.code = '85354-9'", nil, ""},
		{"a primitive's definition", "status.elementDefinition().path = 'Observation.status'", nil, ""},
		{"a choice's definition", "effective.elementDefinition().path = 'Observation.effective[x]'", nil, ""},
		{"each component's slice", "component.elementDefinition().sliceName = ('systolic' | 'diastolic')", nil, ""},
		{"a slice's cardinality", "component.where(code.coding.code = '8462-4').elementDefinition().min = 1", nil, ""},
		{"a value the profile leaves to its type's definition", "subject.display.elementDefinition().path = 'Reference.display'", nil, ""},
		{"a value not in the resource has none", "subject.identifier.elementDefinition().empty()", nil, ""},
		{"an element definition naming the wrong slice", "component.first().elementDefinition().sliceName = 'diastolic'", nil, "error"},
		{"slice() picks the systolic component", "component.slice('" + bp + "', 'systolic').value.ofType(Quantity).value = 109", nil, ""},
		{"slice() picks the diastolic component", "component.slice('" + bp + "', 'diastolic').code.coding.code = '8462-4'", nil, ""},
		{"a systolic pressure below 200 where it is not", "component.slice('" + bp + "', 'systolic').all(value.ofType(Quantity).value < 200)",
			func(r map[string]any) {
				r["component"].([]any)[0].(map[string]any)["valueQuantity"].(map[string]any)["value"] = json.Number("250")
			}, "error"},
		{"slice() of a slice the profile does not have", "component.slice('" + bp + "', 'mean').empty()", nil, "warning"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := fmt.Sprintf("%schecked-bp-%d", ex, i)
			rule := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(tt.expression)
			mem := profile.NewMemory(sd(t, url, "Observation", bp,
				`{"id":"Observation","path":"Observation","constraint":[{"key":"bp-x","severity":"error","human":"the rule under test","expression":"`+rule+`"}]}`))
			defs := profile.Merge(mem, profile.Merge(pkg.defs, profile.Core()))
			obs := clone(t, pkg.examples["Observation-blood-pressure.json"])
			if tt.change != nil {
				tt.change(obs)
			}
			issues, err := validator.Validate(context.Background(), defs, obs, url)
			if err != nil {
				t.Fatal(err)
			}
			checkIssue(t, issues, tt.severity, "Observation", "bp-x")
		})
	}
}

// TestElementDefinitionOfUSCorePatient: in an invariant of a profile
// derived from US Core Patient, elementDefinition() gives US Core's
// definitions of the elements, extension slices and bindings.
func TestElementDefinitionOfUSCorePatient(t *testing.T) {
	pkg := usCore(t, "6.1.0")
	for i, c := range []struct{ name, expression, severity string }{
		{"a US Core element", "name.all(elementDefinition().path = 'Patient.name' and elementDefinition().min = 1)", ""},
		{"an extension slice of US Core", "extension.where(url.endsWith('us-core-race')).elementDefinition().sliceName = 'race'", ""},
		{"a binding US Core states", "gender.elementDefinition().binding.strength = 'required'", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := fmt.Sprintf("%schecked-patient-%d", ex, i)
			mem := profile.NewMemory(sd(t, url, "Patient", uc+"us-core-patient",
				`{"id":"Patient","path":"Patient","constraint":[{"key":"pt-x","severity":"error","human":"the rule under test","expression":"`+c.expression+`"}]}`))
			issues, err := validator.Validate(context.Background(), profile.Merge(mem, profile.Merge(pkg.defs, profile.Core())), clone(t, pkg.examples["Patient-example.json"]), url)
			if err != nil {
				t.Fatal(err)
			}
			checkIssue(t, issues, c.severity, "Patient", "pt-x")
		})
	}
}
