package console

import (
	"encoding/json"
	"testing"

	"fhirstore/fhirschema/fhirpath"
)

// TestQuestionnaireCalculatedValuesBecomeAnswersOfTheItemsType: what a
// calculatedExpression yields is an answer of the item's type, or none.
func TestQuestionnaireCalculatedValuesBecomeAnswersOfTheItemsType(t *testing.T) {
	coding := map[string]any{"system": "http://loinc.org", "code": "LA6569-3"}
	qty := fhirpath.Quantity{Value: 82.5, Unit: "kg"}
	tests := []struct {
		name string
		typ  string
		node fhirpath.Node
		want string // the answer as JSON; "" for none
	}{
		{"a decimal from a Decimal", "decimal", fhirpath.Node{Value: json.Number("26.8"), Type: "System.Decimal"}, `{"valueDecimal":26.8}`},
		{"a decimal from an Integer", "decimal", fhirpath.Node{Value: int64(3), Type: "System.Integer"}, `{"valueDecimal":3}`},
		{"a decimal from a Quantity's value", "decimal", fhirpath.Node{Value: qty, Type: "System.Quantity"}, `{"valueDecimal":82.5}`},
		{"an integer from an Integer", "integer", fhirpath.Node{Value: int64(3), Type: "System.Integer"}, `{"valueInteger":3}`},
		{"an integer from a whole Decimal", "integer", fhirpath.Node{Value: json.Number("3.0"), Type: "System.Decimal"}, `{"valueInteger":3}`},
		{"no integer from a fraction", "integer", fhirpath.Node{Value: json.Number("3.5"), Type: "System.Decimal"}, ""},
		{"a boolean", "boolean", fhirpath.Node{Value: true, Type: "System.Boolean"}, `{"valueBoolean":true}`},
		{"no boolean from a string", "boolean", fhirpath.Node{Value: "true", Type: "System.String"}, ""},
		{"a string", "string", fhirpath.Node{Value: "stable", Type: "System.String"}, `{"valueString":"stable"}`},
		{"a string from a number", "text", fhirpath.Node{Value: json.Number("4.5"), Type: "System.Decimal"}, `{"valueString":"4.5"}`},
		{"a url", "url", fhirpath.Node{Value: "https://example.org", Type: "System.String"}, `{"valueUri":"https://example.org"}`},
		{"a date", "date", fhirpath.Node{Value: "1941-03-09", Type: "date"}, `{"valueDate":"1941-03-09"}`},
		{"a dateTime", "dateTime", fhirpath.Node{Value: "2026-12-06T09:30:00Z", Type: "dateTime"}, `{"valueDateTime":"2026-12-06T09:30:00Z"}`},
		{"a time", "time", fhirpath.Node{Value: "14:00:00", Type: "time"}, `{"valueTime":"14:00:00"}`},
		{"a choice's Coding", "choice", fhirpath.Node{Value: coding, Type: "Coding"}, `{"valueCoding":{"code":"LA6569-3","system":"http://loinc.org"}}`},
		{"an open choice's text", "open-choice", fhirpath.Node{Value: "other", Type: "System.String"}, `{"valueString":"other"}`},
		{"a quantity", "quantity", fhirpath.Node{Value: qty, Type: "System.Quantity"}, `{"valueQuantity":{"code":"kg","system":"http://unitsofmeasure.org","unit":"kg","value":82.5}}`},
		{"a quantity from a number", "quantity", fhirpath.Node{Value: int64(2), Type: "System.Integer"}, `{"valueQuantity":{"value":2}}`},
		{"a reference", "reference", fhirpath.Node{Value: map[string]any{"reference": "Patient/p1"}, Type: "Reference"}, `{"valueReference":{"reference":"Patient/p1"}}`},
		{"nothing for a group", "group", fhirpath.Node{Value: int64(1), Type: "System.Integer"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := answerOf(tt.typ, tt.node)
			if tt.want == "" {
				if ok {
					t.Errorf("answer %v, want none", got)
				}
				return
			}
			b, _ := json.Marshal(got)
			if !ok || string(b) != tt.want {
				t.Errorf("answer %s (%v), want %s", b, ok, tt.want)
			}
		})
	}
}
