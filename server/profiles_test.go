package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"fhirstore/fhirschema/igpackage"
	"fhirstore/server"
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

// outcomeIssues reads the issues of an OperationOutcome response.
func outcomeIssues(t testing.TB, r *response) []map[string]any {
	t.Helper()
	var oo struct {
		Issue []map[string]any `json:"issue"`
	}
	if err := json.Unmarshal(r.Body, &oo); err != nil {
		t.Fatalf("not an OperationOutcome: %s", r.Body)
	}
	return oo.Issue
}

// example returns a US Core 6.1.0 example, decoded, to change.
func example(t testing.TB, file string) map[string]any {
	t.Helper()
	for _, f := range usCorePackage(t, "6.1.0").Examples {
		if f.Path == "package/example/"+file {
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
}
