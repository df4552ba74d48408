package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validatorCases holds cases of the HL7 validator's R4 test suite, with
// the files they need first (testdata/validator).
const validatorCases = "../testdata/validator"

// postCase posts a file of validatorCases to path, as XML or JSON by its
// name.
func postCase(t *testing.T, e *env, path, file string) *response {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(validatorCases, file))
	if err != nil {
		t.Fatal(err)
	}
	ct := "application/fhir+json"
	if strings.HasSuffix(file, ".xml") {
		ct = "application/fhir+xml"
	}
	return e.do(request{Method: http.MethodPost, Path: path, Body: string(body), Header: map[string]string{"Content-Type": ct}})
}

// wantStoredOrRefusedAt checks a write: stored (201) when at is empty,
// else refused with 422 and an issue at at.
func wantStoredOrRefusedAt(t *testing.T, r *response, at string) {
	t.Helper()
	if at == "" {
		if r.Status != http.StatusCreated {
			t.Fatalf("status %d, want 201: %s", r.Status, r.Body)
		}
		return
	}
	wantOutcome(t, r, http.StatusUnprocessableEntity, at)
}

// TestBundlesOfTheValidatorSuite writes Bundles (and the resources about
// references) of the HL7 validator's suite: each is refused at the element
// that breaks an R4 rule, or stored.
func TestBundlesOfTheValidatorSuite(t *testing.T) {
	for _, c := range []struct {
		name       string
		file       string
		supporting []string
		typ        string
		at         string // "" when the resource is valid
	}{
		{"a document's section entry names a version the document does not hold", "bundle-document-versioned-references-bad.json", nil,
			"Bundle", "Bundle.entry[0].resource.section[0].entry[0]"},
		{"a document's section entry names a resource the document holds in two versions", "bundle-document-versioned-references-bad.json", nil,
			"Bundle", "Bundle.entry[0].resource.section[0].entry[1]"},
		{"an entry of a message has no fullUrl", "bundle-with-extensions.xml", []string{"bundle-with-extensions-ext.xml"},
			"Bundle", "Bundle.entry[0]"},
		{"a collection's fullUrl is relative (Patient/1)", "bundle-duplicate-id.json", nil,
			"Bundle", "Bundle.entry[0].fullUrl"},
		{"a document's fullUrls are relative", "bundle-india.xml", []string{"bundle-india-profile-document.xml", "bundle-india-profile-prescription.xml"},
			"Bundle", "Bundle.entry[0].fullUrl"},
		{"a document with relative fullUrls and distinct ids", "bundle-duplicate-ids-not.json", nil,
			"Bundle", "Bundle.entry[0].fullUrl"},
		{"a search result of mode outcome is an Immunization", "bundle-id-search-4.json", nil,
			"Bundle", "Bundle.entry[0].resource"},
		{"a search match without an id", "bundle-id-search-4.json", nil,
			"Bundle", "Bundle.entry[1].resource"},
		{"a RESTful fullUrl whose resource has no id", "relative_reference_to_fullUrl.id_in_target_resource.xml", nil,
			"Bundle", "Bundle.entry[0].fullUrl"},
		{"a RESTful fullUrl naming another type and id than its resource's is only a warning", "bundle-ihe-good.xml", []string{"bundle-ihe-profile.xml"},
			"Bundle", ""},
		{"a narrative link to a portion of the Composition's narrative it lacks", "ips-htmlrefs-backwards.json", nil,
			"Bundle", "Bundle.entry[2].resource.extension[0]"},
		// The HL7 validator skips contained resources when told to; their
		// ids are still ids of at most 64 characters.
		{"a contained resource's id of 65 characters", "contained-resource.json", nil,
			"Condition", "Condition.contained[0].id"},
		{"a contained Binary shown by the narrative's image", "binary-ref-internal.xml", nil,
			"Composition", ""},
		// Practitioner/x from an entry whose fullUrl is a urn:uuid has no
		// meaning in the Bundle (bundle.html): it does not find the
		// Organization urn:uuid:x, whose type therefore does not matter.
		{"a relative reference from an entry identified by a urn:uuid", "bad-bundle-reference-type.xml", nil,
			"Bundle", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			for _, s := range c.supporting {
				typ := "StructureDefinition"
				if r := postCase(t, e, "/"+typ, s); r.Status != http.StatusCreated {
					t.Fatalf("supporting %s: %d %s", s, r.Status, r.Body)
				}
			}
			r := postCase(t, e, "/"+c.typ, c.file)
			wantStoredOrRefusedAt(t, r, c.at)
		})
	}
}

// TestBundleRules writes Bundles that keep or break the rules holding their
// entries together.
func TestBundleRules(t *testing.T) {
	const patient = `{"fullUrl":"http://example.org/fhir/Patient/p1","resource":{"resourceType":"Patient","id":"p1"}}`
	const header = `{"fullUrl":"urn:uuid:0c2b3fce-4f5b-4a58-8f2a-8d1d2a3b4c5d","resource":{"resourceType":"MessageHeader","id":"0c2b3fce-4f5b-4a58-8f2a-8d1d2a3b4c5d",` +
		`"eventCoding":{"system":"http://example.org/events","code":"admit"},"source":{"endpoint":"http://example.org/app"},"focus":[{"reference":"%s"}]}}`
	for _, c := range []struct {
		name, body, at string // at: "" when the Bundle is valid
	}{
		{"a message whose focus is in the message",
			`{"resourceType":"Bundle","type":"message","timestamp":"2024-01-01T00:00:00Z","entry":[` + strings.Replace(header, "%s", "http://example.org/fhir/Patient/p1", 1) + `,` + patient + `]}`, ""},
		{"a message whose focus is not in the message",
			`{"resourceType":"Bundle","type":"message","timestamp":"2024-01-01T00:00:00Z","entry":[` + strings.Replace(header, "%s", "http://example.org/fhir/Patient/p2", 1) + `,` + patient + `]}`,
			"Bundle.entry[0].resource.focus[0]"},
		{"a search match of the type searched, with its outcome unidentified",
			`{"resourceType":"Bundle","type":"searchset","link":[{"relation":"self","url":"http://example.org/fhir/Patient?name=x"}],"entry":[` +
				`{"fullUrl":"http://example.org/fhir/Patient/p1","resource":{"resourceType":"Patient","id":"p1"},"search":{"mode":"match"}},` +
				`{"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"information","code":"informational"}]},"search":{"mode":"outcome"}}]}`, ""},
		{"a search match of another type than searched",
			`{"resourceType":"Bundle","type":"searchset","link":[{"relation":"self","url":"http://example.org/fhir/Patient?name=x"}],"entry":[` +
				`{"fullUrl":"http://example.org/fhir/Group/g1","resource":{"resourceType":"Group","id":"g1","type":"person","actual":true},"search":{"mode":"match"}}]}`,
			"Bundle.entry[0].resource"},
		{"a transaction's create with a RESTful fullUrl and no id",
			`{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"http://example.org/fhir/Patient/new","resource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}}]}`, ""},
		{"a reference whose type is not the type of the entry it finds",
			`{"resourceType":"Bundle","type":"collection","entry":[` +
				`{"fullUrl":"urn:uuid:1b0e8e3a-9d3e-4a40-9d1c-2b6f9a1e0c11","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"urn:uuid:2c1f9f4b-0e4f-4b51-8e2d-3c7a0b2f1d22","type":"Patient"}}},` +
				`{"fullUrl":"urn:uuid:2c1f9f4b-0e4f-4b51-8e2d-3c7a0b2f1d22","resource":{"resourceType":"Group","type":"person","actual":true}}]}`,
			"Bundle.entry[0].resource.subject.type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.post("/Bundle", c.body)
			wantStoredOrRefusedAt(t, r, c.at)
		})
	}
}

// TestReferenceAggregation: a profile that lets a reference be only
// bundled or only contained (ElementDefinition.type.aggregation) refuses
// the others.
func TestReferenceAggregation(t *testing.T) {
	profile := func(name, mode string) string {
		return `{"resourceType":"StructureDefinition","url":"http://example.org/fhir/StructureDefinition/` + name + `","name":"` + name + `","status":"active",` +
			`"kind":"resource","abstract":false,"type":"Encounter","baseDefinition":"http://hl7.org/fhir/StructureDefinition/Encounter","derivation":"constraint",` +
			`"differential":{"element":[{"id":"Encounter.subject","path":"Encounter.subject","type":[{"code":"Reference","targetProfile":["http://hl7.org/fhir/StructureDefinition/Patient"],"aggregation":["` + mode + `"]}]}]}}`
	}
	encounter := func(name, subject, contained string) string {
		return `{"resourceType":"Encounter","id":"e1","meta":{"profile":["http://example.org/fhir/StructureDefinition/` + name + `"]},` + contained +
			`"status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},"subject":{"reference":"` + subject + `"}}`
	}
	transaction := func(subject string) string {
		return `{"resourceType":"Bundle","type":"transaction","entry":[` +
			`{"fullUrl":"urn:uuid:9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f","resource":` + encounter("BundledSubject", subject, "") + `,"request":{"method":"POST","url":"Encounter"}},` +
			`{"fullUrl":"urn:uuid:3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f","resource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}}]}`
	}
	e := newEnv(t)
	for _, name := range []string{"BundledSubject", "ContainedSubject"} {
		mode := strings.ToLower(strings.TrimSuffix(name, "Subject"))
		if r := e.post("/StructureDefinition", profile(name, mode)); r.Status != http.StatusCreated {
			t.Fatalf("profile %s: %d %s", name, r.Status, r.Body)
		}
	}
	for _, c := range []struct {
		name, path, body, at string // at: "" when valid
	}{
		{"a bundled subject found in the transaction", "", transaction("urn:uuid:3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f"), ""},
		{"a bundled subject the transaction does not hold", "", transaction("Patient/p2"), "Bundle.entry[0].resource.subject"},
		{"a contained subject that is contained", "/Encounter", encounter("ContainedSubject", "#p", `"contained":[{"resourceType":"Patient","id":"p"}],`), ""},
		{"a contained subject that is a reference", "/Encounter", encounter("ContainedSubject", "Patient/p1", ""), "Encounter.subject"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.post(c.path, c.body)
			if c.at == "" {
				if r.Status/100 != 2 {
					t.Fatalf("status %d, want 201: %s", r.Status, r.Body)
				}
				return
			}
			wantOutcome(t, r, http.StatusUnprocessableEntity, c.at)
		})
	}
}
