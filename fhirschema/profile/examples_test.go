package profile_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
)

// validator is shared by the tests, as a server shares one.
var validator = profile.NewValidator()

// exampleDefects are the errors the packages' own examples do have, by
// version and file: each must be reported, and nothing else.
var exampleDefects = map[string]string{
	// The flow-rate component is in L/min, outside ucum-vitals-common,
	// which 3.1.1's pulse oximetry profile binds as required (inherited from
	// the core vitalsigns profile); 6.1.0 makes that binding extensible.
	"3.1.1 Observation-satO2-fiO2.json": "Observation.component[0].valueQuantity: Observation.component.value[x]: the code http://unitsofmeasure.org|L/min is not in the required value set http://hl7.org/fhir/ValueSet/ucum-vitals-common",
}

// TestEveryUSCoreExampleConformsToItsProfiles: each example of both US Core
// packages validates without error against every profile it claims that
// the package or the core defines.
func TestEveryUSCoreExampleConformsToItsProfiles(t *testing.T) {
	for _, version := range []string{"3.1.1", "6.1.0"} {
		pkg := usCore(t, version)
		checkExamples(t, version, pkg, profile.Merge(pkg.defs, profile.Core()))
	}
}

// TestEveryUSCoreExampleConformsToGeneratedSnapshots: the same, with the
// package's profiles stripped of their snapshots where their base is at
// hand, so that validation runs on generated snapshots.
func TestEveryUSCoreExampleConformsToGeneratedSnapshots(t *testing.T) {
	for _, version := range []string{"3.1.1", "6.1.0"} {
		pkg := usCore(t, version)
		full := profile.Merge(pkg.defs, profile.Core())
		stripped := profile.NewMemory()
		for _, typ := range []string{"StructureDefinition", "ValueSet", "CodeSystem"} {
			for _, url := range pkg.urls(typ) {
				r, _ := pkg.defs.Resource(context.Background(), typ, url)
				if typ == "StructureDefinition" && hasBase(full, r) {
					r = withoutSnapshot(r)
				}
				stripped.Add(r)
			}
		}
		checkExamples(t, version, pkg, profile.Merge(stripped, profile.Core()))
	}
}

func hasBase(defs profile.Definitions, sd map[string]any) bool {
	base, _ := sd["baseDefinition"].(string)
	b, _ := defs.Resource(context.Background(), "StructureDefinition", base)
	return b != nil
}

func withoutSnapshot(sd map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range sd {
		if k != "snapshot" {
			out[k] = v
		}
	}
	return out
}

// checkExamples validates each example against the profiles it claims:
// no error but the known defects.
func checkExamples(t *testing.T, version string, pkg *igPackage, defs profile.Definitions) {
	t.Helper()
	names := make([]string, 0, len(pkg.examples))
	for name := range pkg.examples {
		names = append(names, name)
	}
	sort.Strings(names)
	checked := 0
	for _, name := range names {
		for _, url := range claimed(pkg.examples[name]) {
			if checkExample(t, version, name, pkg.examples[name], url, defs) {
				checked++
			}
		}
	}
	t.Logf("US Core %s: %d examples checked against their profiles", version, checked)
}

// checkExample validates one example against one profile; false when the
// profile is not known.
func checkExample(t *testing.T, version, name string, ex map[string]any, url string, defs profile.Definitions) bool {
	t.Helper()
	issues, err := validator.Validate(context.Background(), defs, ex, url)
	if errors.Is(err, profile.ErrUnknownProfile) {
		return false
	}
	if err != nil {
		t.Errorf("%s %s against %s: %v", version, name, url, err)
		return true
	}
	want := exampleDefects[version+" "+name]
	errs := errorsOf(issues)
	for _, e := range errs {
		if want == "" || !strings.HasPrefix(e, want) {
			t.Errorf("%s %s: %s", version, name, e)
		}
	}
	if want != "" && len(errs) == 0 {
		t.Errorf("%s %s: want the error %s", version, name, want)
	}
	return true
}

func claimed(r map[string]any) []string {
	meta, _ := r["meta"].(map[string]any)
	list, _ := meta["profile"].([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// errorsOf keeps the errors of issues, as "expression: text".
func errorsOf(issues []fhirschema.Issue) []string {
	var out []string
	for _, is := range issues {
		if is.Severity == "error" {
			out = append(out, is.Expression+": "+is.Diagnostics)
		}
	}
	return out
}
