package bundle_test

import (
	"encoding/json"
	"strings"
	"testing"

	"fhirstore/fhirschema/bundle"
)

// TestBundleRules: each Bundle keeps the rules holding its entries
// together, or breaks one at the element named.
func TestBundleRules(t *testing.T) {
	const comp = `{"resourceType":"Composition","id":"c1","status":"final","type":{"text":"x"},"date":"2024-01-01","title":"t","author":[{"reference":"Practitioner/a1"}]%s}`
	const author = `{"fullUrl":"http://example.org/fhir/Practitioner/a1","resource":{"resourceType":"Practitioner","id":"a1"}}`
	doc := func(compURL, extra string, entries ...string) string {
		c := strings.Replace(comp, "%s", extra, 1)
		return `{"resourceType":"Bundle","type":"document","entry":[{"fullUrl":"` + compURL + `","resource":` + c + `}` + prefix(entries) + `]}`
	}
	obs := func(url, id, version string) string {
		return `{"fullUrl":"` + url + `","resource":{"resourceType":"Observation","id":"` + id + `","meta":{"versionId":"` + version + `"},"status":"final","code":{"text":"x"}}}`
	}
	for _, c := range []struct {
		name, bundle, at string // at: "" when valid
	}{
		{"a document whose author resolves against the Composition's base", doc("http://example.org/fhir/Composition/c1", "", author), ""},
		{"a document whose author is missing", doc("http://example.org/fhir/Composition/c1", ""), "Bundle.entry[0].resource.author[0]"},
		{"a relative author from a Composition identified by a urn:uuid", doc("urn:uuid:7c1d0b8e-3d2a-4f6b-9a51-0e8f2c4d6a10", "", author), "Bundle.entry[0].resource.author[0]"},
		{"a section entry naming the version the document holds",
			doc("http://example.org/fhir/Composition/c1", `,"section":[{"entry":[{"reference":"Observation/o1/_history/2"}]}]`, author,
				obs("http://example.org/fhir/Observation/o1", "o1", "1"), obs("http://example.org/fhir/Observation/o1", "o1", "2")), ""},
		{"a section entry naming a resource held in two versions",
			doc("http://example.org/fhir/Composition/c1", `,"section":[{"entry":[{"reference":"Observation/o1"}]}]`, author,
				obs("http://example.org/fhir/Observation/o1", "o1", "1"), obs("http://example.org/fhir/Observation/o1", "o1", "2")), "Bundle.entry[0].resource.section[0].entry[0]"},
		{"a nested section's entry missing",
			doc("http://example.org/fhir/Composition/c1", `,"section":[{"title":"a","section":[{"entry":[{"reference":"urn:uuid:5d6e7f80-1a2b-4c3d-8e9f-0a1b2c3d4e5f"}]}]}]`, author),
			"Bundle.entry[0].resource.section[0].section[0].entry[0]"},
		{"a relative fullUrl", `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"Patient/1","resource":{"resourceType":"Patient","id":"1"}}]}`,
			"Bundle.entry[0].fullUrl"},
		{"a collection entry without fullUrl", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"1"}}]}`,
			"Bundle.entry[0]"},
		{"a batch entry without fullUrl", `{"resourceType":"Bundle","type":"batch","entry":[{"resource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}}]}`, ""},
		{"a RESTful fullUrl naming another id (a warning)", `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"http://example.org/fhir/Patient/2","resource":{"resourceType":"Patient","id":"1"}}]}`,
			""},
		{"a canonical-looking fullUrl that is no resource type's", `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"http://example.org/fhir/Things/2","resource":{"resourceType":"Patient","id":"1"}}]}`, ""},
		{"a search across types matching one of them",
			`{"resourceType":"Bundle","type":"searchset","link":[{"relation":"self","url":"http://example.org/fhir?_type=Patient,Group"}],"entry":[{"fullUrl":"http://example.org/fhir/Group/g","resource":{"resourceType":"Group","id":"g"},"search":{"mode":"match"}}]}`, ""},
		{"an include without an id",
			`{"resourceType":"Bundle","type":"searchset","entry":[{"fullUrl":"urn:uuid:6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d","resource":{"resourceType":"Patient"},"search":{"mode":"include"}}]}`,
			"Bundle.entry[0].resource"},
		{"a narrative link to a portion the target has",
			`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:1","resource":{"resourceType":"List","id":"l","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p id=\"a\">A</p></div>"}}},` +
				`{"fullUrl":"urn:uuid:2","resource":{"resourceType":"Patient","id":"p","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/narrativeLink","valueUrl":"urn:uuid:1#a"}]}}]}`, ""},
		{"a narrative link to a portion the target has not",
			`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:1","resource":{"resourceType":"List","id":"l","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p id=\"a\">A</p></div>"}}},` +
				`{"fullUrl":"urn:uuid:2","resource":{"resourceType":"Patient","id":"p","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/narrativeLink","valueUrl":"urn:uuid:1#b"}]}}]}`,
			"Bundle.entry[1].resource.extension[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b map[string]any
			if err := json.Unmarshal([]byte(c.bundle), &b); err != nil {
				t.Fatal(err)
			}
			issues := bundle.Check(b)
			if c.at == "" {
				for _, is := range issues {
					if is.Severity == "error" {
						t.Fatalf("want no error, got %+v", issues)
					}
				}
				return
			}
			for _, is := range issues {
				if is.Severity == "error" && is.Expression == c.at {
					return
				}
			}
			t.Fatalf("want an error at %s, got %+v", c.at, issues)
		})
	}
}

// prefix joins entries, each after a comma.
func prefix(entries []string) string {
	var sb strings.Builder
	for _, e := range entries {
		sb.WriteString("," + e)
	}
	return sb.String()
}
