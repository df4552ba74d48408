package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestReferencesBetweenEntriesAreCheckedByTheTargetsProfile: in a
// transaction or batch, a US Core lab result whose subject is another
// entry of the Bundle needs that entry to claim US Core Patient, or else
// to conform to it — as the profile validator says of a Bundle; a
// transaction breaking it is refused at Bundle.entry[1].resource.subject
// with nothing stored, a batch refuses that entry alone. (A batch's
// entries refer to each other by type and id: a urn:uuid names nothing
// there.)
func TestReferencesBetweenEntriesAreCheckedByTheTargetsProfile(t *testing.T) {
	const uc = "http://hl7.org/fhir/us/core/StructureDefinition/"
	e := newEnv(t)
	e.install(usCorePackage(t, "6.1.0"))
	if r := e.put("/StructureDefinition/born-patient", differentialProfile("born-patient", "http://hl7.org/fhir/StructureDefinition/Patient",
		`{"id":"Patient.birthDate","path":"Patient.birthDate","min":1}`)); r.Status != http.StatusCreated {
		t.Fatalf("a profile of the tenant: %d %s", r.Status, r.Body)
	}
	const (
		conforming = `"identifier":[{"system":"urn:x","value":"1"}],"name":[{"family":"Doe"}],"gender":"female"`
		claiming   = `"meta":{"profile":["` + uc + `us-core-patient"]},` + conforming
		bare       = `"gender":"female"`
		otherClaim = `"meta":{"profile":["http://example.org/fhir/StructureDefinition/born-patient"]},"birthDate":"1970-01-01"`
	)
	tests := []struct {
		name string
		// target is the other entry: its type and content; subject names
		// it by "fullUrl" or by "Type/id".
		targetType, target, subject string
		// text is in the issue at the subject; "" when the Bundle is stored.
		text string
	}{
		{"a Patient entry claiming US Core Patient", "Patient", claiming, "fullUrl", ""},
		{"a Patient entry claiming nothing that conforms to it", "Patient", conforming, "fullUrl", ""},
		{"a Patient entry claiming nothing that does not conform", "Patient", bare, "fullUrl", "the referenced Patient conforms to none of " + uc + "us-core-patient"},
		{"a Patient entry claiming another profile, not conforming", "Patient", otherClaim, "fullUrl", "the referenced Patient conforms to none of " + uc + "us-core-patient"},
		{"a Patient entry named by type and id, not conforming", "Patient", bare, "Type/id", "the referenced Patient conforms to none of"},
		{"a Device entry", "Device", `"status":"active"`, "fullUrl", "the reference points to a Device, but only Patient"},
	}
	for i, tt := range tests {
		for _, kind := range []string{"transaction", "batch"} {
			t.Run(tt.name+" in a "+kind, func(t *testing.T) {
				tid, oid := fmt.Sprintf("bt-%s-%d", kind, i), fmt.Sprintf("bo-%s-%d", kind, i)
				full := "urn:uuid:0b1c4f0e-8e2a-4c59-9d2b-00000000000" + fmt.Sprint(i)
				ref := full
				if tt.subject == "Type/id" || kind == "batch" { // a batch's entries do not refer to each other by fullUrl
					ref = tt.targetType + "/" + tid
				}
				obs := example(t, "Observation-cbc-hemoglobin.json")
				obs["id"], obs["subject"] = oid, map[string]any{"reference": ref}
				target := `{"resourceType":"` + tt.targetType + `","id":"` + tid + `",` + tt.target + `}`
				bundle := `{"resourceType":"Bundle","type":"` + kind + `","entry":[` +
					`{"fullUrl":"` + full + `","resource":` + target + `,"request":{"method":"PUT","url":"` + tt.targetType + `/` + tid + `"}},` +
					`{"resource":` + toJSON(t, obs) + `,"request":{"method":"PUT","url":"Observation/` + oid + `"}}]}`
				r := e.post("/", bundle)
				stored := func(path string) bool { return e.get(path).Status == http.StatusOK }
				switch {
				case tt.text == "":
					if r.Status != http.StatusOK || strings.Contains(string(r.Body), `"status":"422`) {
						t.Fatalf("%s: %d %.3000s", kind, r.Status, r.Body)
					}
					if !stored("/Observation/"+oid) || !stored("/"+tt.targetType+"/"+tid) {
						t.Fatalf("the entries were not stored: %.3000s", r.Body)
					}
				case kind == "transaction":
					wantOutcome(t, r, http.StatusUnprocessableEntity, "Bundle.entry[1].resource.subject")
					if !strings.Contains(string(r.Body), tt.text) || !strings.Contains(string(r.Body), uc+"us-core-observation-lab") {
						t.Fatalf("the outcome does not say %q of the lab profile: %s", tt.text, r.Body)
					}
					if stored("/Observation/"+oid) || stored("/"+tt.targetType+"/"+tid) {
						t.Fatal("a refused transaction stored an entry")
					}
				default:
					if r.Status != http.StatusOK {
						t.Fatalf("batch: %d %s", r.Status, r.Body)
					}
					entries := r.JSON(t)["entry"].([]any)
					resp := entries[1].(map[string]any)["response"].(map[string]any)
					if !strings.HasPrefix(resp["status"].(string), "422") {
						t.Fatalf("the Observation entry: %v", resp)
					}
					out := toJSON(t, resp["outcome"])
					if !strings.Contains(out, `"Bundle.entry[1].resource.subject"`) || !strings.Contains(out, tt.text) {
						t.Fatalf("the Observation entry's outcome: %s", out)
					}
					if stored("/Observation/"+oid) || !stored("/"+tt.targetType+"/"+tid) {
						t.Fatal("a batch stored the refused entry, or not the other one")
					}
				}
			})
		}
	}
}

// TestContainedReferenceTargetsAreCheckedByTheTargetsProfile: a US Core
// lab result whose subject is a contained Patient needs it to claim US
// Core Patient or to conform to it.
func TestContainedReferenceTargetsAreCheckedByTheTargetsProfile(t *testing.T) {
	const uc = "http://hl7.org/fhir/us/core/StructureDefinition/"
	e := newEnv(t)
	e.install(usCorePackage(t, "6.1.0"))
	for i, tt := range []struct {
		name, patient, text string
	}{
		{"a contained Patient conforming to US Core Patient", `{"resourceType":"Patient","id":"p","identifier":[{"system":"urn:x","value":"1"}],"name":[{"family":"Doe"}],"gender":"male"}`, ""},
		{"a contained Patient that does not conform", `{"resourceType":"Patient","id":"p","gender":"male"}`, "the referenced Patient conforms to none of " + uc + "us-core-patient"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obs := example(t, "Observation-cbc-hemoglobin.json")
			id := fmt.Sprintf("contained-subject-%d", i)
			obs["id"], obs["subject"] = id, map[string]any{"reference": "#p"}
			body := strings.Replace(toJSON(t, obs), "{", `{"contained":[`+tt.patient+`],`, 1)
			r := e.put("/Observation/"+id, body)
			if tt.text == "" {
				if r.Status != http.StatusCreated {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				return
			}
			wantOutcome(t, r, http.StatusUnprocessableEntity, "Observation.subject")
			if !strings.Contains(string(r.Body), tt.text) {
				t.Fatalf("the outcome does not say %q: %s", tt.text, r.Body)
			}
			if got := e.get("/Observation/" + id); got.Status != http.StatusNotFound {
				t.Fatalf("the refused resource was stored: %d", got.Status)
			}
		})
	}
}
