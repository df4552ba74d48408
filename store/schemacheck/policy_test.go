package schemacheck_test

import (
	"testing"

	"fhirstore/store/schemacheck"
)

func TestProfilePolicySettingsAreRead(t *testing.T) {
	const us = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"
	tests := []struct {
		name, unknown, required string
		wantErr                 bool
		strict                  map[string]bool // tenant → unknown is an error
	}{
		{"the default", "", "", false, map[string]bool{"acme": false}},
		{"every tenant strict", "error", "", false, map[string]bool{"acme": true, "other": true}},
		{"one tenant strict", "warning,acme=error", "", false, map[string]bool{"acme": true, "other": false}},
		{"one tenant lenient", "error,sandbox=warning", "", false, map[string]bool{"acme": true, "sandbox": false}},
		{"a severity that is neither", "fatal", "", true, nil},
		{"a tenant name that is none", "warning,Acme!=error", "", true, nil},
		{"a required profile", "", "Patient=" + us + ",acme/Observation=http://example.org/obs", false, nil},
		{"a required profile of no type", "", "Patients=" + us, true, nil},
		{"a required profile without URL", "", "Patient", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := schemacheck.ParsePolicy(tt.unknown, tt.required)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			for tenant, want := range tt.strict {
				got, ok := p.UnknownIsError[tenant]
				if !ok {
					got = p.UnknownIsError["*"] // every tenant not named
				}
				if got != want {
					t.Errorf("tenant %s: unknown profiles an error %v, want %v", tenant, got, want)
				}
			}
		})
	}
}
