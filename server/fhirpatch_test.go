package server_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// fpXML is the header of a body in FHIR XML.
var fpXML = map[string]string{"Content-Type": "application/fhir+xml"}

// fpCase is one case of the official FHIRPath Patch suite: XML as written.
type fpCase struct {
	name, input, diff, output string
	wantError                 bool
}

var (
	fpCaseRE = regexp.MustCompile(`(?s)<case name="([^"]*)"[^>]*>(.*?)</case>`)
	fpPartRE = map[string]*regexp.Regexp{
		"input":  regexp.MustCompile(`(?s)<input>(.*?)</input>`),
		"diff":   regexp.MustCompile(`(?s)<diff>(.*?)</diff>`),
		"output": regexp.MustCompile(`(?s)<output>(.*?)</output>`),
	}
)

// fpCases reads the official cases (testdata/fhirpatch).
func fpCases(t *testing.T) []fpCase {
	t.Helper()
	data, err := os.ReadFile("../testdata/fhirpatch/fhir-patch-tests.xml")
	if err != nil {
		t.Fatal(err)
	}
	part := func(body, tag string) string {
		if m := fpPartRE[tag].FindStringSubmatch(body); m != nil {
			return strings.TrimSpace(m[1])
		}
		return ""
	}
	var out []fpCase
	for _, m := range fpCaseRE.FindAllStringSubmatch(string(data), -1) {
		out = append(out, fpCase{name: m[1], input: part(m[2], "input"), diff: part(m[2], "diff"), output: part(m[2], "output"), wantError: strings.Contains(m[2], "<error")})
	}
	return out
}

// fpOp is one operation of a FHIRPath Patch, its parts as JSON.
func fpOp(parts ...string) string {
	return `{"name":"operation","part":[` + strings.Join(parts, ",") + `]}`
}

// fpParams is a Parameters resource of operations.
func fpParams(ops ...string) string {
	return `{"resourceType":"Parameters","parameter":[` + strings.Join(ops, ",") + `]}`
}

func fpType(kind string) string { return `{"name":"type","valueCode":"` + kind + `"}` }
func fpPath(path string) string { return fmt.Sprintf(`{"name":"path","valueString":%q}`, path) }
func fpName(name string) string { return `{"name":"name","valueString":"` + name + `"}` }
func fpValue(typ, v string) string {
	return `{"name":"value","value` + typ + `":` + v + `}`
}
func fpInt(name string, i int) string { return fmt.Sprintf(`{"name":%q,"valueInteger":%d}`, name, i) }

// fpPatch sends a PATCH with a JSON FHIRPath Patch.
func (e *env) fpPatch(path, params string, header map[string]string) *response {
	h := map[string]string{"Content-Type": "application/fhir+json"}
	for k, v := range header {
		h[k] = v
	}
	return e.do(request{Method: http.MethodPatch, Path: path, Body: params, Header: h})
}

// fpStripped is a resource read back without id and meta, as the cases
// compare them. Its narrative is compared as XHTML: the line breaks of an
// XML document are LF once parsed, and &quot; in text is a quote.
func fpStripped(t *testing.T, e *env, ref string) map[string]any {
	t.Helper()
	r := btRead(t, e, ref)
	delete(r, "id")
	delete(r, "meta")
	if text, ok := r["text"].(map[string]any); ok {
		if div, ok := text["div"].(string); ok {
			text["div"] = strings.NewReplacer("\r\n", "\n", "&quot;", `"`).Replace(div)
		}
	}
	return r
}

// TestOfficialFHIRPathPatchCasesOverHTTP: every case of the official suite
// is created as XML and patched with its Parameters as XML. The patched
// resource reads back equal to the case's output, itself stored as XML;
// when the server refuses that output as invalid (some outputs break a
// core invariant such as pat-1), it refuses the patch the same way. A case
// that expects an error is refused with a 4xx. A refused patch leaves the
// resource as it was.
func TestOfficialFHIRPathPatchCasesOverHTTP(t *testing.T) {
	e := newEnv(t)
	cases := fpCases(t)
	if len(cases) != 33 {
		t.Fatalf("read %d cases, want 33", len(cases))
	}
	post := func(xml string) *response {
		typ := regexp.MustCompile(`^<(\w+)`).FindStringSubmatch(xml)[1]
		return e.do(request{Method: http.MethodPost, Path: "/" + typ, Body: xml, Header: fpXML})
	}
	refOf := func(t *testing.T, r *response) string {
		t.Helper()
		e2eWantStatus(t, r, http.StatusCreated)
		m := r.JSON(t)
		return m["resourceType"].(string) + "/" + m["id"].(string)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := refOf(t, post(c.input))
			before := btRead(t, e, ref)
			r := e.do(request{Method: http.MethodPatch, Path: "/" + ref, Body: c.diff, Header: fpXML})
			unchanged := func(t *testing.T) {
				t.Helper()
				if after := btRead(t, e, ref); !reflect.DeepEqual(after, before) {
					t.Fatalf("the refused patch changed %s: %v", ref, after)
				}
			}
			if c.wantError {
				if r.Status < 400 || r.Status >= 500 {
					t.Fatalf("status %d, want a 4xx: %s", r.Status, r.Body)
				}
				wantOutcome(t, r, r.Status, "Parameters.parameter[0]")
				unchanged(t)
				return
			}
			out := post(c.output)
			if out.Status == http.StatusUnprocessableEntity {
				expr := fmt.Sprint(btAt(t, out.JSON(t), "issue", 0, "expression", 0))
				t.Logf("the output is refused at %s; so is the patch", expr)
				wantOutcome(t, r, http.StatusUnprocessableEntity, expr)
				unchanged(t)
				return
			}
			e2eWantStatus(t, r, http.StatusOK)
			want := fpStripped(t, e, refOf(t, out))
			if got := fpStripped(t, e, ref); !reflect.DeepEqual(got, want) {
				t.Fatalf("patched\n got  %v\n want %v", got, want)
			}
		})
	}
}

// TestFHIRPathPatchInJSONMakesANewVersion: a Parameters body in FHIR JSON
// (or plain JSON) patches the current version into a new one; history
// keeps the old one.
func TestFHIRPathPatchInJSONMakesANewVersion(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","active":true,"birthDate":"1950-01-01","name":[{"family":"Before","given":["A","B"]}]}`)
	r := e.fpPatch("/Patient/"+id, fpParams(
		fpOp(fpType("replace"), fpPath("Patient.birthDate"), fpValue("Date", `"1951-02-02"`)),
		fpOp(fpType("insert"), fpPath("Patient.name[0].given"), fpValue("String", `"Z"`), fpInt("index", 0)),
		fpOp(fpType("move"), fpPath("Patient.name[0].given"), fpInt("source", 2), fpInt("destination", 1)),
		fpOp(fpType("delete"), fpPath("Patient.active")),
	), map[string]string{"Content-Type": "application/json"})
	e2eWantStatus(t, r, http.StatusOK)
	e2eWantVersion(t, r, 2)
	p := r.JSON(t)
	if p["birthDate"] != "1951-02-02" || p["active"] != nil || fmt.Sprint(btAt(t, p, "name", 0, "given")) != "[Z B A]" {
		t.Fatalf("patched %s", r.Body)
	}
	if got := btRead(t, e, "Patient/"+id+"/_history/1")["birthDate"]; got != "1950-01-01" {
		t.Fatalf("version 1 birthDate %v", got)
	}
	t.Run("the CapabilityStatement lists the patch formats", func(t *testing.T) {
		formats := fmt.Sprint(btRead(t, e, "metadata")["patchFormat"])
		for _, f := range []string{"application/fhir+json", "application/fhir+xml", "application/json-patch+json"} {
			if !strings.Contains(formats, f) {
				t.Fatalf("patchFormat %s lacks %s", formats, f)
			}
		}
	})
}

// TestBadFHIRPathPatchesAreRefusedAtTheOperation: a patch that cannot be
// read is a 400, one that does not fit the resource or makes it invalid a
// 422, each pointing at the fault; none changes stored data.
func TestBadFHIRPathPatchesAreRefusedAtTheOperation(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","active":true,"gender":"male","identifier":[{"system":"`+btSys+`","value":"fp"}],"name":[{"family":"Kept"}]}`)
	unchanged := btUnchanged(t, e)
	replaceGender := fpParams(fpOp(fpType("replace"), fpPath("Patient.gender"), fpValue("Code", `"female"`)))
	for _, tc := range []struct {
		name, body string
		header     map[string]string
		status     int
		expr       string
	}{
		{"a body that is not JSON is 400", `{"resourceType":"Parameters",`, nil, 400, ""},
		{"XML that does not parse is 400", `<Parameters xmlns="http://hl7.org/fhir"><parameter>`, fpXML, 400, ""},
		{"a resource other than Parameters is 415", `{"resourceType":"Patient","id":"` + id + `"}`, nil, 415, ""},
		{"a parameter not named operation is 400", fpParams(`{"name":"op","part":[]}`), nil, 400, "Parameters.parameter[0]"},
		{"an unknown operation type is 400", fpParams(fpOp(fpType("upsert"), fpPath("Patient.active"))), nil, 400, "Parameters.parameter[0].part[0]"},
		{"an operation without its value is 400", fpParams(fpOp(fpType("replace"), fpPath("Patient.active"))), nil, 400, "Parameters.parameter[0]"},
		{"a path that does not parse is 400", fpParams(fpOp(fpType("delete"), fpPath("Patient.name[0"))), nil, 400, "Parameters.parameter[0].part[1]"},
		{"a path naming no element of the type is 400", fpParams(fpOp(fpType("delete"), fpPath("Patient.nosuch"))), nil, 400, "Parameters.parameter[0].part[1]"},
		{"replacing what does not exist is 422", fpParams(fpOp(fpType("replace"), fpPath("Patient.birthDate"), fpValue("Date", `"2000-01-01"`))), nil, 422, "Parameters.parameter[0].part[1]"},
		{"adding under what does not exist is 422", fpParams(fpOp(fpType("add"), fpPath("Patient.contact"), fpName("gender"), fpValue("Code", `"male"`))), nil, 422, "Parameters.parameter[0].part[1]"},
		{"adding an element that has a value is 422", fpParams(fpOp(fpType("add"), fpPath("Patient"), fpName("gender"), fpValue("Code", `"female"`))), nil, 422, "Parameters.parameter[0].part[2]"},
		{"inserting past the end of a list is 422", fpParams(fpOp(fpType("insert"), fpPath("Patient.name"), fpValue("HumanName", `{"family":"X"}`), fpInt("index", 5))), nil, 422, "Parameters.parameter[0].part[3]"},
		{"moving from past the end of a list is 422", fpParams(fpOp(fpType("move"), fpPath("Patient.name"), fpInt("source", 1), fpInt("destination", 0))), nil, 422, "Parameters.parameter[0].part[2]"},
		{"a later operation failing fails the patch", fpParams(fpOp(fpType("delete"), fpPath("Patient.active")), fpOp(fpType("replace"), fpPath("Patient.birthDate"), fpValue("Date", `"2000-01-01"`))), nil, 422, "Parameters.parameter[1]"},
		{"a result that is not a valid Patient is 422 at the element", fpParams(fpOp(fpType("replace"), fpPath("Patient.gender"), fpValue("Code", `"not-a-gender"`))), nil, 422, "Patient.gender"},
		{"a stale If-Match is 412", replaceGender, map[string]string{"If-Match": `W/"7"`}, 412, ""},
	} {
		t.Run(tc.name+" and changes nothing", func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/fhir+json"}
			for k, v := range tc.header {
				h[k] = v
			}
			wantOutcome(t, e.do(request{Method: http.MethodPatch, Path: "/Patient/" + id, Body: tc.body, Header: h}), tc.status, tc.expr)
			unchanged(t)
			if p := btRead(t, e, "Patient/"+id); p["gender"] != "male" || p["active"] != true || p["meta"].(map[string]any)["versionId"] != "1" {
				t.Fatalf("stored %v", p)
			}
		})
	}
	t.Run("a matching If-Match patches", func(t *testing.T) {
		r := e.fpPatch("/Patient/"+id, replaceGender, map[string]string{"If-Match": `W/"1"`})
		e2eWantStatus(t, r, http.StatusOK)
		e2eWantVersion(t, r, 2)
	})
}

// TestFHIRPathPatchChecksTheClaimedProfiles: the patched resource is
// checked against the profiles it claims, like any update.
func TestFHIRPathPatchChecksTheClaimedProfiles(t *testing.T) {
	e := newEnv(t)
	const patient = "http://hl7.org/fhir/StructureDefinition/Patient"
	if r := e.put("/StructureDefinition/needs-identifier", differentialProfile("needs-identifier", patient,
		`{"id":"Patient.identifier","path":"Patient.identifier","min":1}`)); r.Status != http.StatusCreated {
		t.Fatalf("profile: %d %s", r.Status, r.Body)
	}
	id := e.create("Patient", `{"resourceType":"Patient","meta":{"profile":["http://example.org/fhir/StructureDefinition/needs-identifier"]},"identifier":[{"value":"1"}]}`)
	r := e.fpPatch("/Patient/"+id, fpParams(fpOp(fpType("delete"), fpPath("Patient.identifier"))), nil)
	wantOutcome(t, r, http.StatusUnprocessableEntity, "Patient.identifier")
	if btRead(t, e, "Patient/"+id)["identifier"] == nil {
		t.Fatal("the refused patch was applied")
	}
}

// TestConditionalFHIRPathPatch: PATCH Type?criteria patches the one match;
// none is 404, two are 412.
func TestConditionalFHIRPathPatch(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", btPatient("Cond", "fpc"))
	e.create("Patient", btPatient("Twin", "fptwin"))
	e.create("Patient", btPatient("Twin", "fptwin"))
	params := fpParams(fpOp(fpType("add"), fpPath("Patient"), fpName("gender"), fpValue("Code", `"female"`)))
	r := e.fpPatch("/Patient?"+btCrit("fpc"), params, nil)
	e2eWantStatus(t, r, http.StatusOK)
	e2eWantVersion(t, r, 2)
	if g := btRead(t, e, "Patient/"+id)["gender"]; g != "female" {
		t.Fatalf("gender %v", g)
	}
	wantOutcome(t, e.fpPatch("/Patient?"+btCrit("nobody"), params, nil), http.StatusNotFound, "")
	wantOutcome(t, e.fpPatch("/Patient?"+btCrit("fptwin"), params, nil), http.StatusPreconditionFailed, "")
}

// TestFHIRPathPatchEntriesInBundles: a PATCH entry's resource is a
// Parameters (FHIRPath Patch) or a Binary holding a JSON Patch; a
// transaction applies them all or none, a batch each on its own.
func TestFHIRPathPatchEntriesInBundles(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","active":true,"birthDate":"1950-01-01"}`)
	other := e.create("Patient", btPatient("Other", "fpother"))
	jsonPatch := `{"resourceType":"Binary","contentType":"application/json-patch+json","data":"` +
		base64.StdEncoding.EncodeToString([]byte(`[{"op":"add","path":"/gender","value":"other"}]`)) + `"}`
	b := e.btTransaction(t,
		btOp("PATCH", "Patient/"+id, fpParams(fpOp(fpType("delete"), fpPath("Patient.active")))),
		btOp("PATCH", "Patient?"+btCrit("fpother"), fpParams(fpOp(fpType("add"), fpPath("Patient"), fpName("birthDate"), fpValue("Date", `"1951-01-01"`)))),
	)
	btWantStatuses(t, b, 200, 200)
	if p := btRead(t, e, "Patient/"+id); p["active"] != nil || p["meta"].(map[string]any)["versionId"] != "2" {
		t.Fatalf("patched %v", p)
	}
	if p := btRead(t, e, "Patient/"+other); p["birthDate"] != "1951-01-01" {
		t.Fatalf("conditionally patched %v", p)
	}
	t.Run("a transaction with a failing patch changes nothing", func(t *testing.T) {
		r := e.btSend(btBundle("transaction",
			btOp("PATCH", "Patient/"+id, jsonPatch),
			btOp("PATCH", "Patient/"+other, fpParams(fpOp(fpType("replace"), fpPath("Patient.deceased"), fpValue("Boolean", "true")))),
		), nil)
		wantOutcome(t, r, http.StatusUnprocessableEntity, "Bundle.entry[1].resource.parameter[0].part[1]")
		if g := btRead(t, e, "Patient/"+id)["gender"]; g != nil {
			t.Fatalf("gender %v: the transaction was partly applied", g)
		}
	})
	t.Run("a batch applies each patch on its own", func(t *testing.T) {
		r := e.btSend(btBundle("batch",
			btOp("PATCH", "Patient/"+id, jsonPatch),
			btOp("PATCH", "Patient/"+other, fpParams(fpOp(fpType("add"), fpPath("Patient"), fpName("gender"), fpValue("Code", `"nonsense"`)))),
		), nil)
		b := btDecode(t, r, "batch-response", 2)
		btWantStatuses(t, b, 200, 422)
		btWantOutcomeJSON(t, b.Entry[1].Response.Outcome, "Bundle.entry[1].resource.gender")
		if g := btRead(t, e, "Patient/"+id)["gender"]; g != "other" {
			t.Fatalf("gender %v", g)
		}
	})
	t.Run("an entry that is neither Parameters nor a JSON Patch Binary is 400", func(t *testing.T) {
		r := e.btSend(btBundle("transaction", btOp("PATCH", "Patient/"+id, `{"resourceType":"Patient"}`)), nil)
		wantOutcome(t, r, http.StatusBadRequest, "Bundle.entry[0].resource")
	})
}
