package fhirschema_test

import (
	"testing"

	"fhirstore/fhirschema"
)

func TestSummaryElementsFollowTheOfficialDefinitions(t *testing.T) {
	for _, tt := range []struct {
		typ, property string
		want          bool
	}{
		{"Patient", "name", true},
		{"Patient", "birthDate", true},
		{"Patient", "_birthDate", true},
		{"Patient", "deceasedBoolean", true},
		{"Patient", "deceasedDateTime", true},
		{"Patient", "deceased", false},
		{"Patient", "photo", false},
		{"Patient", "contact", false},
		{"Patient", "text", false},
		{"Observation", "valueQuantity", true},
		{"Observation", "valueString", true},
		{"Observation", "note", false},
		{"Observation", "status", true},
		{"NoSuchType", "id", false},
	} {
		if got := fhirschema.IsSummaryElement(tt.typ, tt.property); got != tt.want {
			t.Errorf("%s.%s summary = %v, want %v", tt.typ, tt.property, got, tt.want)
		}
	}
}
