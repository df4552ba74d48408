package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// typeOfCase is the resource type a case file holds, by its first
// element or resourceType.
func typeOfCase(t *testing.T, file string) string {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(validatorCases, file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(body)
	if strings.HasSuffix(file, ".xml") {
		for i := strings.IndexByte(s, '<'); i >= 0; i = strings.IndexByte(s[i+1:], '<') + i + 1 {
			if s[i+1] != '?' && s[i+1] != '!' {
				return strings.FieldsFunc(s[i+1:], func(r rune) bool { return r == ' ' || r == '>' || r == '/' })[0]
			}
		}
	}
	_, rest, _ := strings.Cut(s, `"resourceType"`)
	_, rest, _ = strings.Cut(rest, `"`)
	typ, _, _ := strings.Cut(rest, `"`)
	return typ
}

// TestTerminologyOfTheValidatorSuite writes the terminology cases of the
// HL7 validator's suite: each is refused at the element whose code breaks
// an R4 rule, or stored.
func TestTerminologyOfTheValidatorSuite(t *testing.T) {
	for _, c := range []struct {
		name       string
		file       string
		supporting []string
		at         string // "" when the resource is valid
	}{
		{"a code element with a required binding has only a data absent reason", "allergy.json", nil, "AllergyIntolerance.category[0]"},
		{"an identifier said to be a URI holds a bare OID", "cs-bad-oid.xml", nil, "CodeSystem.identifier[0]"},
		{"a code system of content not-present lists concepts", "cs-bad-oid.xml", nil, "CodeSystem.concept[0]"},
		{"a value set lists 1 as a SNOMED CT code", "vs-bad-code.json", nil, "ValueSet.compose.include[0].concept[0]"},
		{"an Observation of body temperature by SNOMED CT only, without LOINC 8310-5", "obs-temp-bad.json", nil, "Observation.code"},
		{"a supplement that says its content is complete", "supplement-cs.json", nil, "CodeSystem.content"},
		{"a SNOMED CT code that is not a concept identifier", "obs-temp-code2.json", nil, "Observation.code.coding[1].code"},
		{"a standard property URI given another type", "cs-bad-props.json", nil, "CodeSystem.property[0]"},
		{"a property code defined twice", "cs-bad-props.json", nil, "CodeSystem.property[1]"},
		{"a property URI defined twice", "cs-bad-props.json", nil, "CodeSystem.property[2]"},
		{"a concept property of another type than its definition's", "cs-bad-props.json", nil, "CodeSystem.concept[0].property[1]"},
		{"a concept filter on SNOMED CT naming no concept", "vs-bad-props.json", nil, "ValueSet.compose.include[0].filter[0]"},
		{"a SNOMED CT relationship filtered with not-in", "vs-bad-props.json", nil, "ValueSet.compose.include[0].filter[2]"},
		{"a boolean property filtered with 1", "vs-bad-props.json", nil, "ValueSet.compose.include[1].filter[0]"},
		{"a Coding property filtered with a bare code", "vs-filter-property-bad2.json", []string{"cs-filter.json", "cs-sub-prop.json"}, "ValueSet.compose.include[0].filter[0]"},
		{"a filter expression naming an undeclared parameter", "vs-params-2.json", nil, "ValueSet.compose.include[0].filter[0].value.extension[0]"},
		{"a filter expression that is not FHIRPath", "vs-params-3.json", nil, "ValueSet.compose.include[0].filter[0].value.extension[0]"},
		{"a filter expression in CQL", "vs-params-4.json", nil, "ValueSet.compose.include[0].filter[0].value.extension[0]"},
		{"an ECL constraint that does not parse", "vs-bad-ecl.json", nil, "ValueSet.compose.include[0].filter[0]"},
		{"a code unknown to a core code system", "contract-binding-test.json", nil, "Contract.legalState.coding[0].code"},
		{"a code unknown to the resource types", "contract-binding-test.json", nil, "Contract.term[0].asset[0].relationship.code"},
		{"a supplement of content complete defining a code", "supplement-cs-1a.json", nil, "CodeSystem.content"},
		{"a code system of the tenant's with filters and Coding properties", "cs-filter.json", []string{"cs-sub-prop.json"}, ""},
		{"SNOMED CT codes of an extension", "snomed-ca.json", nil, ""},
		{"an HGVS variant", "obs-hgvs.json", nil, ""},
		{"a value set of canonical codes", "vs-canonical-good.json", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			for _, s := range c.supporting {
				if r := postCase(t, e, "/"+typeOfCase(t, s), s); r.Status != http.StatusCreated {
					t.Fatalf("supporting %s: %d %s", s, r.Status, r.Body)
				}
			}
			r := postCase(t, e, "/"+typeOfCase(t, c.file), c.file)
			wantStoredOrRefusedAt(t, r, c.at)
		})
	}
}

// TestCodesAgainstTheirSystems writes resources whose codes keep or break
// the rules of their code systems and bindings.
func TestCodesAgainstTheirSystems(t *testing.T) {
	const base = `{"resourceType":"CodeSystem","url":"http://example.org/cs/base","status":"active","content":"complete","concept":[{"code":"a","display":"Alpha"}]}`
	const supplement = `{"resourceType":"CodeSystem","url":"http://example.org/cs/supplement","status":"active","content":"supplement","supplements":"http://example.org/cs/base","concept":[{"code":"a","designation":[{"language":"fr","value":"Alpha (fr)"}]}]}`
	for _, c := range []struct {
		name, path, body, at string // at: "" when the resource is valid
	}{
		{"a supplement that only adds designations to its base's codes", "/CodeSystem", supplement, ""},
		{"a supplement defining a code its base does not have", "/CodeSystem",
			strings.Replace(supplement, `"code":"a"`, `"code":"b"`, 1), "CodeSystem.concept[0]"},
		{"a Coding whose system is a supplement", "/Observation",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://example.org/cs/supplement","code":"a"}]}}`,
			"Observation.code.coding[0].system"},
		{"a Coding of a code system of the tenant's", "/Observation",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://example.org/cs/base","code":"a","display":"alpha"}]}}`, ""},
		{"a Coding whose code the tenant's code system lacks", "/Observation",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://example.org/cs/base","code":"z"}]}}`,
			"Observation.code.coding[0].code"},
		{"a wrong display is only a warning", "/Observation",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://example.org/cs/base","code":"a","display":"Beta"}]}}`, ""},
		{"a clinical status outside its required value set", "/AllergyIntolerance",
			`{"resourceType":"AllergyIntolerance","clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"active"}]},"patient":{"reference":"Patient/p"}}`,
			"AllergyIntolerance.clinicalStatus"},
		{"a clinical status from its required value set", "/AllergyIntolerance",
			`{"resourceType":"AllergyIntolerance","clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical","code":"active"}]},"patient":{"reference":"Patient/p"}}`, ""},
		{"an identifier said to be a URI holding one", "/Patient",
			`{"resourceType":"Patient","identifier":[{"system":"urn:ietf:rfc:3986","value":"urn:oid:2.16.840.1.113883.19.5"}]}`, ""},
		{"a v2 table code unknown to the table", "/Patient",
			`{"resourceType":"Patient","identifier":[{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0203","code":"NOPE"}]},"value":"1"}]}`,
			"Patient.identifier[0].type.coding[0].code"},
		{"a v3 code in an extension's Coding", "/Patient",
			`{"resourceType":"Patient","extension":[{"url":"http://example.org/ext","valueCoding":{"system":"http://terminology.hl7.org/CodeSystem/v3-MaritalStatus","code":"Q"}}]}`,
			"Patient.extension[0].value.ofType(Coding).code"},
		{"a SNOMED CT constraint in valid ECL", "/ValueSet",
			`{"resourceType":"ValueSet","status":"active","compose":{"include":[{"system":"http://snomed.info/sct","filter":[{"property":"constraint","op":"=","value":"< 404684003 |Clinical finding| : 363698007 |Finding site| = << 39057004 |Pulmonary valve structure|"}]}]}}`, ""},
		{"a body weight carrying LOINC 29463-7 beside another code", "/Observation",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"3141-9"},{"system":"http://loinc.org","code":"29463-7"}]}}`, ""},
		{"a body weight without LOINC 29463-7 in a collection", "/Bundle",
			`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5a0e8e3a-9d3e-4a40-9d1c-2b6f9a1e0c11","resource":{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://snomed.info/sct","code":"27113001"}]}}}]}`,
			"Bundle.entry[0].resource.code"},
		{"a body weight by another LOINC code only", "/Observation",
			`{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"3141-9"}]}}`, "Observation.code"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			for _, s := range []string{base, supplement} {
				if r := e.post("/CodeSystem", s); r.Status != http.StatusCreated && c.body != s {
					t.Fatalf("supporting: %d %s", r.Status, r.Body)
				}
			}
			r := e.post(c.path, c.body)
			wantStoredOrRefusedAt(t, r, c.at)
		})
	}
}
