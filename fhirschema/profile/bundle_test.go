package profile_test

import (
	"context"
	"encoding/json"
	"testing"

	"fhirstore/fhirschema/profile"
)

// TestReferenceTargetsInABundle: a lab Observation's subject, an entry of
// the same Bundle, counts by the profile it claims, or else by the one it
// conforms to.
func TestReferenceTargetsInABundle(t *testing.T) {
	pkg := usCore(t, "6.1.0")
	defs := profile.Merge(pkg.defs, profile.Core())
	conforming := `{"resourceType":"Patient","identifier":[{"system":"urn:x","value":"1"}],"name":[{"family":"Doe"}],"gender":"female"}`
	claiming := `{"resourceType":"Patient","meta":{"profile":["` + uc + `us-core-patient"]}}`
	for _, c := range []struct {
		name, subject, entry, severity, at, text string
	}{
		{"a Patient entry claiming US Core Patient", "urn:uuid:1", claiming, "", "", ""},
		{"a Patient entry conforming to US Core Patient", "urn:uuid:1", conforming, "", "", ""},
		{"a Patient entry that does not conform", "urn:uuid:1", `{"resourceType":"Patient"}`, "error", "Observation.subject", "the referenced Patient conforms to none of " + uc + "us-core-patient"},
		{"a Device entry", "urn:uuid:1", `{"resourceType":"Device"}`, "error", "Observation.subject", "the reference points to a Device"},
		{"an entry found by type and id", "Patient/7", `{"resourceType":"Patient","id":"7"}`, "error", "Observation.subject", "conforms to none"},
		{"a reference to nothing in the Bundle", "Patient/8", `{"resourceType":"Patient","id":"7"}`, "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs := clone(t, pkg.examples["Observation-cbc-hemoglobin.json"])
			obs["subject"] = obj{"reference": c.subject}
			entry, err := decode([]byte(c.entry))
			if err != nil {
				t.Fatal(err)
			}
			bundle := obj{"resourceType": "Bundle", "type": "transaction", "entry": list{
				obj{"fullUrl": "urn:uuid:1", "resource": entry},
				obj{"fullUrl": "urn:uuid:2", "resource": obs},
			}}
			// The same Bundle as a server holds a transaction's entries:
			// JSON, named by fullUrl and by the type and id of a PUT.
			id, _ := entry["id"].(string)
			obsJSON, err := json.Marshal(obs)
			if err != nil {
				t.Fatal(err)
			}
			asJSON := profile.IndexEntries([]profile.Entry{
				{FullURL: "urn:uuid:1", Type: entry["resourceType"].(string), ID: id, Resource: []byte(c.entry)},
				{FullURL: "urn:uuid:2", Type: "Observation", Resource: obsJSON},
			})
			for _, opt := range []profile.Option{profile.WithBundle(bundle), profile.WithIndexedBundle(asJSON)} {
				issues, err := validator.Validate(context.Background(), defs, obs, uc+"us-core-observation-lab", opt)
				if err != nil {
					t.Fatal(err)
				}
				checkIssue(t, issues, c.severity, c.at, c.text)
			}
		})
	}
}

// TestContainedResourcesAreCheckedAgainstTheirClaims: a contained resource
// claiming a profile is validated against it, at its place.
func TestContainedResourcesAreCheckedAgainstTheirClaims(t *testing.T) {
	pkg := usCore(t, "6.1.0")
	obs := clone(t, pkg.examples["Observation-cbc-hemoglobin.json"])
	obs["contained"] = list{obj{"resourceType": "Patient", "id": "p", "meta": obj{"profile": list{uc + "us-core-patient"}}, "gender": "male"}}
	obs["subject"] = obj{"reference": "#p"}
	issues, err := validator.Validate(context.Background(), profile.Merge(pkg.defs, profile.Core()), obs, uc+"us-core-observation-lab")
	if err != nil {
		t.Fatal(err)
	}
	checkIssue(t, issues, "error", "Observation.contained[0].identifier", "minimum required = 1")
}
