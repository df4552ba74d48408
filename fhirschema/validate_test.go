package fhirschema_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/bundle"
	"fhirstore/fhirschema/profile"
	"fhirstore/fhirschema/terminology"
)

var validator = sync.OnceValues(fhirschema.NewValidator)

func mustValidator(t testing.TB) *fhirschema.Validator {
	t.Helper()
	v, err := validator()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestValidationReportsEachProblemWithItsFHIRPath(t *testing.T) {
	v := mustValidator(t)
	tests := []struct {
		name, typ, body string
		wantCode        string
		wantExpr        string
	}{
		{"unknown element", "Patient", `{"resourceType":"Patient","nosuch":1}`, "structure", "Patient.nosuch"},
		{"string for a boolean", "Patient", `{"resourceType":"Patient","active":"true"}`, "structure", "Patient.active"},
		{"object for an array", "Patient", `{"resourceType":"Patient","name":{"family":"X"}}`, "structure", "Patient.name"},
		{"bad code in a required binding", "Patient", `{"resourceType":"Patient","gender":"yes"}`, "code-invalid", "Patient.gender"},
		{"bad DiagnosticReport.status", "DiagnosticReport", `{"resourceType":"DiagnosticReport","status":"done","code":{"text":"x"}}`, "code-invalid", "DiagnosticReport.status"},
		{"missing DiagnosticReport.code", "DiagnosticReport", `{"resourceType":"DiagnosticReport","status":"final"}`, "required", "DiagnosticReport.code"},
		{"missing EpisodeOfCare.patient", "EpisodeOfCare", `{"resourceType":"EpisodeOfCare","status":"active"}`, "required", "EpisodeOfCare.patient"},
		{"missing List.mode", "List", `{"resourceType":"List","status":"current"}`, "required", "List.mode"},
		{"malformed date", "Patient", `{"resourceType":"Patient","birthDate":"1990-13-45"}`, "value", "Patient.birthDate"},
		{"malformed dateTime", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"effectiveDateTime":"2020-01-01 10:00"}`, "value", "Observation.effective.ofType(dateTime)"},
		{"malformed instant", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"issued":"2020-01-01"}`, "value", "Observation.issued"},
		{"malformed id", "Patient", `{"resourceType":"Patient","id":"a b"}`, "value", "Patient.id"},
		{"malformed uri", "Patient", `{"resourceType":"Patient","implicitRules":"a b"}`, "value", "Patient.implicitRules"},
		{"empty string in an array", "Patient", `{"resourceType":"Patient","name":[{"given":["A",""]}]}`, "value", "Patient.name[0].given[1]"},
		{"empty array", "Patient", `{"resourceType":"Patient","telecom":[]}`, "structure", "Patient.telecom"},
		{"empty object", "Patient", `{"resourceType":"Patient","maritalStatus":{}}`, "structure", "Patient.maritalStatus"},
		{"malformed primitive extension", "Patient", `{"resourceType":"Patient","birthDate":"1990-01-01","_birthDate":{"extension":"x"}}`, "structure", "Patient.birthDate.extension"},
		{"missing resourceType", "Patient", `{"name":[{"family":"X"}]}`, "required", "Patient"},
		{"contained resource checked against its own type", "Patient", `{"resourceType":"Patient","contained":[{"resourceType":"Observation","status":"bogus","code":{"text":"x"}}]}`, "code-invalid", "Patient.contained[0].status"},
		{"Bundle entry checked against its own type", "Bundle", `{"resourceType":"Bundle","type":"batch","entry":[{"resource":{"resourceType":"Patient","gender":"x"}}]}`, "code-invalid", "Bundle.entry[0].resource.gender"},
		{"narrative with an unclosed element", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"<div><p>open</div>"}}`, "invalid", "Patient.text.div"},
		{"narrative that is not a div", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"<span>x</span>"}}`, "invalid", "Patient.text.div"},
		{"narrative with text after the div", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"<div>x</div>tail"}}`, "invalid", "Patient.text.div"},
		{"narrative in another namespace", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"urn:x\">x</div>"}}`, "invalid", "Patient.text.div"},
		{"narrative with an entity XHTML does not define", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"<div>&bogus;</div>"}}`, "invalid", "Patient.text.div"},
		{"an Attachment whose size is not its data's", "DocumentReference", `{"resourceType":"DocumentReference","status":"current","content":[{"attachment":{"data":"aGVscA==","size":10}}]}`, "value", "DocumentReference.content[0].attachment.size"},
		{"an extension named by a relative URL", "Patient", `{"resourceType":"Patient","extension":[{"url":"something","valueString":"x"}]}`, "value", "Patient.extension[0].url"},
		{"a modifier extension named by a relative URL", "Patient", `{"resourceType":"Patient","name":[{"modifierExtension":[{"url":"x","valueBoolean":true}],"family":"F"}]}`, "value", "Patient.name[0].modifierExtension[0].url"},
		{"bad narrative of a contained resource", "Patient", `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","text":{"status":"generated","div":"<div><b></div>"}}]}`, "invalid", "Patient.contained[0].text.div"},
		{"bad narrative of a Bundle entry", "Bundle", `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","text":{"status":"generated","div":"<div>"}}}]}`, "invalid", "Bundle.entry[0].resource.text.div"},
		{"unknown nested resource type", "Bundle", `{"resourceType":"Bundle","type":"batch","entry":[{"resource":{"resourceType":"Nope"}}]}`, "invalid", "Bundle.entry[0].resource.resourceType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := v.Validate(tt.typ, []byte(tt.body), fhirschema.Options{})
			if r.Valid() {
				t.Fatalf("accepted %s", tt.body)
			}
			for _, is := range r.Issues {
				if is.Severity == "error" && is.Code == tt.wantCode && is.Expression == tt.wantExpr && is.Diagnostics != "" {
					return
				}
			}
			t.Fatalf("no %s error at %s in %+v", tt.wantCode, tt.wantExpr, r.Issues)
		})
	}
}

func TestValidationAcceptsWellFormedResources(t *testing.T) {
	v := mustValidator(t)
	for _, body := range []string{
		`{"resourceType":"Patient","birthDate":"1990-01-01","_birthDate":{"extension":[{"url":"http://x","valueString":"y"}]}}`,
		`{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,{"extension":[{"url":"http://x","valueString":"y"}]}]}]}`,
		`{"resourceType":"Patient","name":[{"text":"no\u00a0break space"}]}`,
		`{"resourceType":"Observation","status":"final","code":{"text":"w"},"valueQuantity":{"value":1.50,"unit":"kg"}}`,
	} {
		if r := v.Validate(strings.SplitN(body[17:], `"`, 2)[0], []byte(body), fhirschema.Options{}); !r.Valid() {
			t.Errorf("rejected %s: %+v", body, r.Issues)
		}
	}
}

func TestLenientHandlingMakesUnknownElementsWarnings(t *testing.T) {
	v := mustValidator(t)
	r := v.Validate("Patient", []byte(`{"resourceType":"Patient","nosuch":1}`), fhirschema.Options{Lenient: true})
	if !r.Valid() || len(r.Issues) != 1 || r.Issues[0].Severity != "warning" || r.Issues[0].Expression != "Patient.nosuch" {
		t.Fatalf("lenient: %+v", r.Issues)
	}
	r = v.Validate("Patient", []byte(`{"resourceType":"Patient","nosuch":1,"gender":"yes"}`), fhirschema.Options{Lenient: true})
	if r.Valid() {
		t.Fatal("lenient handling accepted a bad code")
	}
}

// examples returns the official R4 examples, by file name.
func examples(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("../testdata/fhir/examples/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in testdata: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

func resourceTypeOf(t testing.TB, body []byte) string {
	var head struct {
		ResourceType string `json:"resourceType"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		t.Fatal(err)
	}
	return head.ResourceType
}

// knownInvalid lists official examples that break the R4 rules, with why.
func knownInvalid(t testing.TB) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../testdata/fhir/known-invalid.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEveryOfficialExampleValidates: every official example keeps the base
// rules, its codes those of their code systems and bindings (package
// terminology), and a Bundle those holding its entries together (package
// bundle), but those listed as known to break them.
func TestEveryOfficialExampleValidates(t *testing.T) {
	v := mustValidator(t)
	terms := terminology.NewChecker(profile.NewValidator())
	invalid := knownInvalid(t)
	for name, body := range examples(t) {
		typ := resourceTypeOf(t, body)
		r := v.Validate(typ, body, fhirschema.Options{})
		if r.Valid() {
			var res map[string]any
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatal(err)
			}
			if typ == "Bundle" {
				r.Issues = append(r.Issues, bundle.Check(res)...)
			}
			codes, err := terms.Check(context.Background(), profile.Core(), res)
			if err != nil {
				t.Fatal(err)
			}
			r.Issues = append(r.Issues, codes...)
		}
		switch reason, known := invalid[name]; {
		case known && r.Valid():
			t.Errorf("%s is listed as invalid (%s) but validates", name, reason)
		case !known && !r.Valid():
			t.Errorf("%s: %+v", name, r.Issues)
		}
	}
}

// TestEveryBrokenExampleIsReportedWhereItIsBroken adds an unknown element to
// the first object inside the first array of each example and expects it
// reported at exactly that place, the same whether the validator decodes
// the body or is given it decoded (ValidateDecoded, which leaves it as it
// is).
func TestEveryBrokenExampleIsReportedWhereItIsBroken(t *testing.T) {
	v := mustValidator(t)
	for name, body := range examples(t) {
		typ := resourceTypeOf(t, body)
		broken, where := breakExample(t, body)
		want := typ + where + ".notAnElement"
		r := v.Validate(typ, broken, fhirschema.Options{})
		decoded, again := decodeJSON(t, broken), decodeJSON(t, broken)
		if rd := v.ValidateDecoded(typ, decoded, fhirschema.Options{}); !reflect.DeepEqual(rd.Issues, r.Issues) {
			t.Errorf("%s: decoded first, %+v; from the body, %+v", name, rd.Issues, r.Issues)
		}
		if !reflect.DeepEqual(decoded, again) {
			t.Errorf("%s: ValidateDecoded changed the document", name)
		}
		found := false
		for _, is := range r.Issues {
			found = found || (is.Severity == "error" && is.Expression == want)
		}
		if !found {
			t.Errorf("%s: no error at %s in %+v", name, want, r.Issues)
		}
	}
}

// TestValidateDecodedLeavesExtensionNullsInPlace: the schema's check of a
// resource pairing nulls with extensions works on a copy.
func TestValidateDecodedLeavesExtensionNullsInPlace(t *testing.T) {
	v := mustValidator(t)
	body := []byte(`{"resourceType":"Patient","bogus":1,"name":[{"given":["a",null],"_given":[null,{"extension":[{"url":"http://example.org/x","valueString":"y"}]}]}]}`)
	doc, want := decodeJSON(t, body), decodeJSON(t, body)
	r := v.ValidateDecoded("Patient", doc, fhirschema.Options{})
	if len(r.Issues) != 1 || r.Issues[0].Expression != "Patient.bogus" {
		t.Errorf("issues %+v, want one at Patient.bogus", r.Issues)
	}
	if !reflect.DeepEqual(doc, want) {
		t.Errorf("the document became %v", doc)
	}
}

func decodeJSON(t testing.TB, body []byte) any {
	t.Helper()
	var doc any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// breakExample inserts "notAnElement" into the first object found in a
// top-level array (or at the root) and returns the FHIRPath of that object.
func breakExample(t testing.TB, body []byte) ([]byte, string) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	where := ""
	target := doc
	for _, k := range keys {
		if k == "contained" || k == "entry" && doc["resourceType"] == "Bundle" {
			continue
		}
		if arr, ok := doc[k].([]any); ok && len(arr) > 0 {
			if obj, ok := arr[0].(map[string]any); ok {
				target, where = obj, "."+k+"[0]"
				break
			}
		}
	}
	target["notAnElement"] = true
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out, where
}

func BenchmarkValidatePatient(b *testing.B) {
	v := mustValidator(b)
	body, err := os.ReadFile("../testdata/fhir/examples/Patient-example.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := v.Validate("Patient", body, fhirschema.Options{}); !r.Valid() {
			b.Fatal(r.Issues)
		}
	}
}

// BenchmarkValidateSyntheaBundle validates a transaction Bundle of the first
// 50 entries of a Synthea patient.
func BenchmarkValidateSyntheaBundle(b *testing.B) {
	v := mustValidator(b)
	files, _ := filepath.Glob("../testdata/synthea/Alvin56*.json")
	if len(files) != 1 {
		b.Fatal("Synthea bundle not found")
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		b.Fatal(err)
	}
	var bundle map[string]any
	if err := json.Unmarshal(raw, &bundle); err != nil {
		b.Fatal(err)
	}
	bundle["entry"] = bundle["entry"].([]any)[:50]
	body, err := json.Marshal(bundle)
	if err != nil {
		b.Fatal(err)
	}
	if r := v.Validate("Bundle", body, fhirschema.Options{}); !r.Valid() {
		b.Fatalf("the Synthea bundle is invalid: %+v", r.Issues[:min(5, len(r.Issues))])
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v.Validate("Bundle", body, fhirschema.Options{})
	}
}

func TestEverySyntheaBundleValidates(t *testing.T) {
	v := mustValidator(t)
	files, _ := filepath.Glob("../testdata/synthea/*.json")
	if len(files) < 6 {
		t.Fatalf("%d Synthea bundles in testdata", len(files))
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if r := v.Validate("Bundle", body, fhirschema.Options{}); !r.Valid() {
			t.Errorf("%s: %d issues, first %+v", filepath.Base(f), len(r.Issues), r.Issues[0])
		}
	}
}
