package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/fhirschema/igpackage"
	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
	"fhirstore/store/schemacheck"
)

// usCore reads testdata/ig/hl7.fhir.us.core-VERSION.tgz once.
var usCore = struct {
	sync.Mutex
	pkgs map[string]*igpackage.Package
}{pkgs: map[string]*igpackage.Package{}}

func usCorePackage(t testing.TB, version string) *igpackage.Package {
	t.Helper()
	usCore.Lock()
	defer usCore.Unlock()
	if p := usCore.pkgs[version]; p != nil {
		return p
	}
	p, err := igpackage.ReadFile("../testdata/ig/hl7.fhir.us.core-" + version + ".tgz")
	if err != nil {
		t.Fatal(err)
	}
	usCore.pkgs[version] = p
	return p
}

// install writes the package's conformance resources into the env's
// tenant in one transaction, as fhirstore load does.
func (e *env) install(p *igpackage.Package) {
	e.t.Helper()
	if testing.Short() {
		e.t.Skip("installs a US Core package: run without -short")
	}
	r := e.post("/", string(igpackage.Transaction(p.Resources)))
	if r.Status != http.StatusOK {
		e.t.Fatalf("install %s: %d %.2000s", p.Key(), r.Status, r.Body)
	}
}

// withPolicy sets the profile policy of an env's store.
func withPolicy(unknown, required string) func(*server.Config, *store.Options) {
	return func(_ *server.Config, o *store.Options) {
		p, err := schemacheck.ParsePolicy(unknown, required)
		if err != nil {
			panic(err)
		}
		o.Validate = schemacheck.Validator(db.Validator(), schemacheck.WithPolicy(p))
	}
}

// conformanceExample marks the examples that are conformance resources
// (written with the package, not by the tests).
var conformanceExample = map[string]bool{"ImplementationGuide": true, "CapabilityStatement": true, "OperationDefinition": true,
	"StructureDefinition": true, "ValueSet": true, "CodeSystem": true, "SearchParameter": true}

// brokenExamples are the US Core examples that break R4 or their own
// profiles, with where: each is refused there and only there.
var brokenExamples = map[string]string{
	// An entry's fullUrl must be absolute.
	"3.1.1 Bundle/uscore-mo3": "Bundle.entry[1].fullUrl",
	// A vital sign without the LOINC code its core profile fixes: body
	// length 8306-3 only (bodyheight wants 8302-2), 59408-5 only
	// (oxygensat wants 2708-6); US Core 6.1.0 corrects both.
	"3.1.1 Observation/length":            "Observation.code",
	"3.1.1 Observation/oxygen-saturation": "Observation.code",
	// "EQH/..AgME": '.' is not in the base64 alphabet.
	"3.1.1 DiagnosticReport/cardiology-report": "DiagnosticReport.presentedForm[0].hash",
	// The inhaled oxygen flow rate in L/min, a unit outside the required
	// ucum-vitals-common value set of R4's vital signs (6.1.0 lifts it).
	"3.1.1 Observation/satO2-fiO2": "Observation.component[0].valueQuantity",
}

// TestEveryUSCoreExampleIsStoredAgainstTheProfilesItClaims: with the
// package installed, each example passes $validate with no error and every
// profile of the package it claims known, and is stored; the few broken
// ones are refused where they are broken, and not stored.
func TestEveryUSCoreExampleIsStoredAgainstTheProfilesItClaims(t *testing.T) {
	for _, version := range []string{"3.1.1", "6.1.0"} {
		t.Run(version, func(t *testing.T) {
			p := usCorePackage(t, version)
			e := newEnv(t)
			e.install(p)
			for _, f := range p.Examples {
				if conformanceExample[f.Type] {
					continue
				}
				t.Run(f.Type+"/"+f.ID, func(t *testing.T) {
					if where, broken := brokenExamples[version+" "+f.Type+"/"+f.ID]; broken {
						wantOutcome(t, e.put("/"+f.Type+"/"+f.ID, string(f.JSON)), http.StatusUnprocessableEntity, where)
						return
					}
					v := e.post("/"+f.Type+"/$validate", string(f.JSON))
					if v.Status != http.StatusOK || strings.Contains(string(v.Body), "profile "+p.Canonical) && strings.Contains(string(v.Body), "unknown to this server") {
						t.Fatalf("$validate: %d %.3000s", v.Status, v.Body)
					}
					if r := e.put("/"+f.Type+"/"+f.ID, string(f.JSON)); r.Status/100 != 2 {
						t.Fatalf("PUT: %d %.3000s", r.Status, r.Body)
					}
				})
			}
		})
	}
}

// example returns a US Core 6.1.0 example, decoded, to change.
func example(t testing.TB, file string) map[string]any {
	t.Helper()
	p := usCorePackage(t, "6.1.0")
	for _, f := range append(p.Examples[:len(p.Examples):len(p.Examples)], p.Resources...) {
		if path.Clean("package/example/"+file) == f.Path {
			r, err := f.Decode()
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("no example %s", file)
	return nil
}

func toJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWritesBreakingAClaimedProfileAreRefusedAtTheElement: an example
// changed to break a rule of the profile it claims is refused with 422 at
// the element, the profile and rule named, and nothing is stored — by
// PUT, POST and in a transaction.
func TestWritesBreakingAClaimedProfileAreRefusedAtTheElement(t *testing.T) {
	const uc = "http://hl7.org/fhir/us/core/StructureDefinition/"
	e := newEnv(t)
	e.install(usCorePackage(t, "6.1.0"))
	tests := []struct {
		name, file     string
		change         func(r map[string]any)
		where, profile string
		key            string
	}{
		{"a patient without identifier", "Patient-example.json", func(r map[string]any) { delete(r, "identifier") }, "Patient.identifier", uc + "us-core-patient", ""},
		{"a patient name with neither family nor given", "Patient-example.json", func(r map[string]any) { r["name"] = []any{map[string]any{"text": "Amy"}} }, "Patient.name", uc + "us-core-patient", "us-core-6"},
		{"a blood pressure with one component", "Observation-blood-pressure.json", func(r map[string]any) { r["component"] = r["component"].([]any)[:1] }, "Observation.component", uc + "us-core-blood-pressure", ""},
		{"a lab result without the laboratory category", "Observation-cbc-hemoglobin.json", func(r map[string]any) { r["category"] = []any{map[string]any{"text": "lab"}} }, "Observation.category", uc + "us-core-observation-lab", ""},
		{"a lab result about a device", "Observation-cbc-hemoglobin.json", func(r map[string]any) { r["subject"] = map[string]any{"reference": "Device/udi-1"} }, "Observation.subject", uc + "us-core-observation-lab", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := example(t, tt.file)
			tt.change(r)
			typ := r["resourceType"].(string)
			id := fmt.Sprintf("mutated-%d", i)
			r["id"] = id
			body := toJSON(t, r)
			tx := `{"resourceType":"Bundle","type":"transaction","entry":[{"resource":` + body + `,"request":{"method":"PUT","url":"` + typ + `/` + id + `"}}]}`
			for _, w := range []struct {
				how, expr string
				resp      *response
			}{
				{"PUT", tt.where, e.put("/"+typ+"/"+id, body)},
				{"POST", tt.where, e.post("/"+typ, body)},
				{"transaction", "Bundle.entry[0].resource." + strings.TrimPrefix(tt.where, typ+"."), e.post("/", tx)},
			} {
				wantOutcome(t, w.resp, http.StatusUnprocessableEntity, w.expr)
				text := string(w.resp.Body)
				if !strings.Contains(text, tt.profile) || !strings.Contains(text, tt.key) {
					t.Errorf("%s: the outcome does not name %s %s: %s", w.how, tt.profile, tt.key, text)
				}
			}
			if got := e.get("/" + typ + "/" + id); got.Status != http.StatusNotFound {
				t.Fatalf("the refused resource was stored: %d", got.Status)
			}
		})
	}
	t.Run("a patch removing the identifier", func(t *testing.T) {
		if r := e.put("/Patient/example", toJSON(t, example(t, "Patient-example.json"))); r.Status/100 != 2 {
			t.Fatalf("PUT: %d %s", r.Status, r.Body)
		}
		r := e.do(request{Method: http.MethodPatch, Path: "/Patient/example", Body: `[{"op":"remove","path":"/identifier"}]`,
			Header: map[string]string{"Content-Type": "application/json-patch+json"}})
		wantOutcome(t, r, http.StatusUnprocessableEntity, "Patient.identifier")
		if got := e.get("/Patient/example").JSON(t)["identifier"]; got == nil {
			t.Fatal("the refused patch was applied")
		}
	})
}

// sibling is a second server on the env's database and tenant, as another
// instance behind the same load balancer (or the same one restarted).
func (e *env) sibling() *env {
	e.t.Helper()
	st := db.Open(e.t, db.Options())
	h := server.New(e.cfg, st, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	return &env{t: e.t, srv: srv, store: st, tenant: e.tenant, token: e.token, cfg: e.cfg, h: h}
}

const requireIdentifier = "http://example.org/fhir/StructureDefinition/identified-patient"

// identifiedPatient is a profile with a snapshot: a Patient needs an
// identifier.
func identifiedPatient(t testing.TB) string {
	t.Helper()
	sd := example(t, "../StructureDefinition-us-core-patient.json")
	sd["id"], sd["url"], sd["name"], sd["title"] = "identified-patient", requireIdentifier, "IdentifiedPatient", "Identified patient"
	delete(sd, "version")
	return toJSON(t, sd)
}

// TestProfilesTakeEffectOnEveryServerAsSoonAsWritten: a profile written
// through one server refuses a resource at once on another server of the
// same database, and a new server started afterwards knows it too.
func TestProfilesTakeEffectOnEveryServerAsSoonAsWritten(t *testing.T) {
	one := newEnv(t)
	other := one.sibling()
	bad := `{"resourceType":"Patient","meta":{"profile":["` + requireIdentifier + `"]},"gender":"male"}`
	if r := other.post("/Patient", bad); r.Status != http.StatusCreated {
		t.Fatalf("before the profile: %d %s", r.Status, r.Body)
	}
	if r := one.put("/StructureDefinition/identified-patient", identifiedPatient(t)); r.Status != http.StatusCreated {
		t.Fatalf("write the profile: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, other.post("/Patient", bad), http.StatusUnprocessableEntity, "Patient.identifier")
	wantOutcome(t, one.sibling().post("/Patient", bad), http.StatusUnprocessableEntity, "Patient.identifier")
	if r := one.do(request{Method: http.MethodDelete, Path: "/StructureDefinition/identified-patient"}); r.Status/100 != 2 {
		t.Fatalf("delete the profile: %d %s", r.Status, r.Body)
	}
	if r := other.post("/Patient", bad); r.Status != http.StatusCreated {
		t.Fatalf("after the profile is deleted: %d %s", r.Status, r.Body)
	}
}

// TestValidateChecksTheProfileTheRequestNames: $validate with profile (in
// the query or the Parameters) checks that profile besides those claimed.
func TestValidateChecksTheProfileTheRequestNames(t *testing.T) {
	e := newEnv(t)
	e.install(usCorePackage(t, "6.1.0"))
	patient := example(t, "Patient-example.json")
	delete(patient, "meta")
	delete(patient, "identifier")
	body := toJSON(t, patient)
	const uc = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"
	params := `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":` + body + `},{"name":"profile","valueCanonical":"` + uc + `"}]}`
	tests := []struct {
		name, path, body string
		status           int
		where            string
	}{
		{"the profile in the query", "/Patient/$validate?profile=" + uc, body, 422, "Patient.identifier"},
		{"the profile in the Parameters", "/Patient/$validate", params, 422, "Patient.identifier"},
		{"the profile at the base", "/$validate", params, 422, "Patient.identifier"},
		{"no profile: the base definition only", "/Patient/$validate", body, 200, ""},
		{"an unknown profile named by the request", "/Patient/$validate?profile=http://example.org/nothing", body, 422, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post(tt.path, tt.body)
			if tt.status == http.StatusOK {
				if r.Status != http.StatusOK || strings.Contains(string(r.Body), `"severity":"error"`) {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				return
			}
			wantOutcome(t, r, tt.status, tt.where)
		})
	}
}

// TestParametersValidateTakesTheResourceParameter: at Parameters/$validate
// a Parameters holding a resource parameter is the operation's input; one
// without is the Parameters to validate.
func TestParametersValidateTakesTheResourceParameter(t *testing.T) {
	e := newEnv(t)
	inner := `{"resourceType":"Parameters","parameter":[{"name":"x","valueBoolean":"yes"}]}`
	tests := []struct {
		name, body string
		status     int
		where      string
	}{
		{"the resource parameter is validated", `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":` + inner + `}]}`, 422, "Parameters.parameter[0].value"},
		{"a valid resource parameter", `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":{"resourceType":"Parameters","parameter":[{"name":"x","valueBoolean":true}]}}]}`, 200, ""},
		{"without a resource parameter the body is the resource", inner, 422, "Parameters.parameter[0].value"},
		{"the resource parameter names another type", `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":{"resourceType":"Patient"}}]}`, 400, "resourceType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post("/Parameters/$validate", tt.body)
			if tt.status == http.StatusOK {
				if r.Status != http.StatusOK {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				return
			}
			wantOutcome(t, r, tt.status, tt.where)
		})
	}
}

// TestUnknownAndRequiredProfilesFollowTheTenantsPolicy: a profile the
// tenant does not know is a warning unless its policy makes it an error;
// a policy may require a profile of every resource of a type.
func TestUnknownAndRequiredProfilesFollowTheTenantsPolicy(t *testing.T) {
	const unknown = "http://example.org/fhir/StructureDefinition/unknown"
	claiming := func(profiles ...string) string {
		return toJSON(t, map[string]any{"resourceType": "Patient", "meta": map[string]any{"profile": profiles}, "identifier": []any{map[string]any{"system": "urn:x", "value": "1"}}, "name": []any{map[string]any{"family": "Doe"}}, "gender": "female"})
	}
	lenient := newEnv(t)
	r := lenient.do(request{Method: http.MethodPost, Path: "/Patient", Body: claiming(unknown), Header: map[string]string{"Prefer": "return=OperationOutcome"}})
	if r.Status != http.StatusCreated || !strings.Contains(string(r.Body), unknown) || !strings.Contains(string(r.Body), `"severity":"warning"`) {
		t.Fatalf("an unknown profile by default: %d %s", r.Status, r.Body)
	}

	strict := newEnv(t, withPolicy("error", ""))
	wantOutcome(t, strict.post("/Patient", claiming(unknown)), http.StatusUnprocessableEntity, "Patient.meta.profile[0]")
	other := newEnv(t, withPolicy("warning,"+strict.tenant+"=error", ""))
	if r := other.post("/Patient", claiming(unknown)); r.Status != http.StatusCreated {
		t.Fatalf("another tenant's policy applied: %d %s", r.Status, r.Body)
	}

	required := newEnv(t, withPolicy("", "Patient="+requireIdentifier))
	if r := required.put("/StructureDefinition/identified-patient", identifiedPatient(t)); r.Status != http.StatusCreated {
		t.Fatalf("write the profile: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, required.post("/Patient", claiming()), http.StatusUnprocessableEntity, "Patient.meta.profile")
	if r := required.post("/Patient", claiming(requireIdentifier)); r.Status != http.StatusCreated {
		t.Fatalf("a Patient claiming the required profile: %d %s", r.Status, r.Body)
	}
	if r := required.post("/Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`); r.Status != http.StatusCreated {
		t.Fatalf("another type: %d %s", r.Status, r.Body)
	}
}

// TestCapabilityStatementListsTheTenantsProfiles: the types' supported
// profiles are the tenant's, shown to callers with a token of the tenant.
func TestCapabilityStatementListsTheTenantsProfiles(t *testing.T) {
	e := newEnv(t)
	e.install(usCorePackage(t, "6.1.0"))
	supported := func(r *response, typ string) []any {
		var cs struct {
			Rest []struct {
				Resource []struct {
					Type             string `json:"type"`
					SupportedProfile []any  `json:"supportedProfile"`
				} `json:"resource"`
			} `json:"rest"`
		}
		if err := json.Unmarshal(r.Body, &cs); err != nil || len(cs.Rest) == 0 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		for _, res := range cs.Rest[0].Resource {
			if res.Type == typ {
				return res.SupportedProfile
			}
		}
		return nil
	}
	got := supported(e.get("/metadata"), "Observation")
	if !slicesContain(got, "http://hl7.org/fhir/us/core/StructureDefinition/us-core-blood-pressure") || slicesContain(got, "http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient") {
		t.Fatalf("Observation's supported profiles: %v", got)
	}
	if got := supported(e.do(request{Method: http.MethodGet, Path: "/metadata", Token: e2eStr("")}), "Patient"); len(got) != 0 {
		t.Fatalf("a caller without a token sees the tenant's profiles: %v", got)
	}
}

func slicesContain(list []any, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestConformanceResourcesAreSearchable: the installed definitions are
// found by their official search parameters.
func TestConformanceResourcesAreSearchable(t *testing.T) {
	e := newEnv(t)
	e.install(usCorePackage(t, "6.1.0"))
	tests := []struct {
		name, query string
		want        string
	}{
		{"a profile by url", "/StructureDefinition?url=http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient", "us-core-patient"},
		{"a profile by url and version", "/StructureDefinition?url=http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient&version=6.1.0", "us-core-patient"},
		{"a profile by name", "/StructureDefinition?name=USCorePatientProfile", "us-core-patient"},
		{"the profiles of a type", "/StructureDefinition?type=Patient&derivation=constraint", "us-core-patient"},
		{"the profiles on a base", "/StructureDefinition?base=http://hl7.org/fhir/StructureDefinition/Patient", "us-core-patient"},
		{"a search parameter by code and base", "/SearchParameter?code=race&base=Patient", "us-core-race"},
		{"a value set by url", "/ValueSet?url=http://hl7.org/fhir/us/core/ValueSet/us-core-condition-code", "us-core-condition-code"},
		{"a code system by a code it defines", "/CodeSystem?code=health-concern", "condition-category"},
		{"the guide by url and version", "/ImplementationGuide?url=http://hl7.org/fhir/us/core/ImplementationGuide/hl7.fhir.us.core&version=6.1.0", "hl7.fhir.us.core"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get(tt.query)
			var b struct {
				Entry []struct {
					Resource struct {
						ID string `json:"id"`
					} `json:"resource"`
				} `json:"entry"`
			}
			if err := json.Unmarshal(r.Body, &b); err != nil || r.Status != http.StatusOK {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			for _, en := range b.Entry {
				if en.Resource.ID == tt.want {
					return
				}
			}
			t.Fatalf("%s not found: %.500s", tt.want, r.Body)
		})
	}
}

// syntheaFiles reads the Synthea sample: the providers' batches, then the
// patients' transactions.
func syntheaFiles(t testing.TB) (providers, patients [][]byte) {
	t.Helper()
	read := func(pattern string) [][]byte {
		files, err := filepath.Glob(filepath.Join(synDir, pattern))
		if err != nil || len(files) == 0 {
			t.Fatalf("no %s in %s: %v", pattern, synDir, err)
		}
		var out [][]byte
		for _, f := range files {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, body)
		}
		return out
	}
	return read("*Information.json"), read("*_*.json")
}

// TestSyntheaLoadsWithUSCore: Synthea's sample is stored whole with US
// Core 6.1.0 installed, its resources checked against the profiles they
// claim; the US Core 5 profiles some Observations still claim are unknown
// to 6.1.0, which a tenant refusing unknown profiles refuses (see
// docs/guide/profiles.md).
func TestSyntheaLoadsWithUSCore(t *testing.T) {
	providers, patients := syntheaFiles(t)
	e := newEnv(t)
	e.install(usCorePackage(t, "6.1.0"))
	for _, body := range append(providers, patients...) {
		r := e.post("/", string(body))
		if r.Status != http.StatusOK || strings.Contains(string(r.Body), `"status":"4`) {
			t.Fatalf("%d %.2000s", r.Status, r.Body)
		}
	}

	var bundle map[string]any
	if err := json.Unmarshal(patients[0], &bundle); err != nil {
		t.Fatal(err)
	}
	entries := bundle["entry"].([]any)
	patient := entries[0].(map[string]any)["resource"].(map[string]any)
	if patient["resourceType"] != "Patient" {
		t.Fatalf("the first entry is a %s", patient["resourceType"])
	}
	delete(patient, "identifier")
	wantOutcome(t, e.post("/", toJSON(t, bundle)), http.StatusUnprocessableEntity, "Bundle.entry[0].resource.identifier")

	strict := newEnv(t, withPolicy("error", ""))
	strict.install(usCorePackage(t, "6.1.0"))
	for _, body := range providers {
		if r := strict.post("/", string(body)); r.Status != http.StatusOK {
			t.Fatalf("%d %.2000s", r.Status, r.Body)
		}
	}
	r := strict.post("/", string(patients[0]))
	wantOutcome(t, r, http.StatusUnprocessableEntity, ".resource.meta.profile[")
	if !strings.Contains(string(r.Body), "us-core-observation-") {
		t.Fatalf("the refusal does not name the unknown profile: %.2000s", r.Body)
	}
}

// differentialProfile is a profile of Patient with only a differential.
func differentialProfile(id, base string, elements ...string) string {
	return `{"resourceType":"StructureDefinition","id":"` + id + `","url":"http://example.org/fhir/StructureDefinition/` + id + `","name":"P` + strings.ReplaceAll(id, "-", "") + `",` +
		`"status":"active","kind":"resource","abstract":false,"type":"Patient","baseDefinition":"` + base + `","derivation":"constraint",` +
		`"differential":{"element":[` + strings.Join(elements, ",") + `]}}`
}

// TestStructureDefinitionsAreCheckedWhenWritten: a profile posted with a
// differential only gets its snapshot generated and takes effect; one
// whose differential cannot be applied, or whose snapshot contradicts its
// base, or that derives from itself, is refused at the element.
func TestStructureDefinitionsAreCheckedWhenWritten(t *testing.T) {
	e := newEnv(t)
	const patient = "http://hl7.org/fhir/StructureDefinition/Patient"
	if r := e.put("/StructureDefinition/needs-identifier", differentialProfile("needs-identifier", patient,
		`{"id":"Patient.identifier","path":"Patient.identifier","min":1}`)); r.Status != http.StatusCreated {
		t.Fatalf("a differential-only profile: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, e.post("/Patient", `{"resourceType":"Patient","meta":{"profile":["http://example.org/fhir/StructureDefinition/needs-identifier"]},"gender":"male"}`),
		http.StatusUnprocessableEntity, "Patient.identifier")

	contradicting := example(t, "../StructureDefinition-us-core-patient.json")
	contradicting["id"], contradicting["url"] = "wide-gender", "http://example.org/fhir/StructureDefinition/wide-gender"
	for _, el := range contradicting["snapshot"].(map[string]any)["element"].([]any) {
		if el.(map[string]any)["id"] == "Patient.gender" {
			el.(map[string]any)["max"] = "*"
		}
	}
	tests := []struct {
		name, id, body, where string
	}{
		{"a differential element the base does not have", "nosuch", differentialProfile("nosuch", patient, `{"id":"Patient.nosuch","path":"Patient.nosuch","min":1}`), "StructureDefinition.differential"},
		{"a snapshot wider than its base", "wide-gender", toJSON(t, contradicting), "StructureDefinition.snapshot.element["},
		{"a profile derived from itself", "itself", differentialProfile("itself", "http://example.org/fhir/StructureDefinition/itself", `{"id":"Patient","path":"Patient"}`), "StructureDefinition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantOutcome(t, e.put("/StructureDefinition/"+tt.id, tt.body), http.StatusUnprocessableEntity, tt.where)
			if r := e.get("/StructureDefinition/" + tt.id); r.Status != http.StatusNotFound {
				t.Fatalf("the refused definition was stored: %d", r.Status)
			}
		})
	}
}
