package profile_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
)

// mutation is a change to a US Core example that a profile refuses.
type mutation struct {
	name    string
	version string // the US Core package
	example string // file name in package/example
	profile string // the profile validated against; "" for the claimed one
	change  func(r map[string]any)
	// at is the expression the error must name exactly; text is a piece of
	// its message (the rule, the constraint key).
	at, text string
}

const uc = "http://hl7.org/fhir/us/core/StructureDefinition/"

func TestMutationsAreRefusedAtTheElement(t *testing.T) {
	runMutations(t, mutations, "error")
}

func TestCautionsAreWarningsAtTheElement(t *testing.T) {
	runMutations(t, cautions, "warning")
	for _, m := range cautions {
		issues := mutate(t, m)
		if errs := errorsOf(issues); len(errs) > 0 {
			t.Errorf("%s: want no error, got %q", m.name, errs)
		}
	}
}

// runMutations checks that each mutation yields an issue of severity at
// its element.
func runMutations(t *testing.T, table []mutation, severity string) {
	for _, m := range table {
		t.Run(m.name, func(t *testing.T) {
			issues := mutate(t, m)
			var found []string
			for _, is := range issues {
				if is.Severity != severity {
					continue
				}
				e := is.Expression + ": " + is.Diagnostics
				if strings.HasPrefix(e, m.at+": ") && strings.Contains(e, m.text) {
					return
				}
				found = append(found, e)
			}
			t.Errorf("want an issue of severity %s at %s saying %q; got %q", severity, m.at, m.text, found)
		})
	}
}

// mutate applies m to its example and validates the result.
func mutate(t *testing.T, m mutation) []fhirschema.Issue {
	t.Helper()
	pkg := usCore(t, m.version)
	ex := clone(t, pkg.examples[m.example])
	if ex == nil {
		t.Fatalf("no example %s", m.example)
	}
	m.change(ex)
	url := m.profile
	if url == "" {
		url = claimed(ex)[0]
	}
	issues, err := validator.Validate(context.Background(), profile.Merge(pkg.defs, profile.Core()), ex, url)
	if err != nil {
		t.Fatal(err)
	}
	return issues
}

func clone(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	if r == nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// obj and list build JSON values briefly.
type obj = map[string]any
type list = []any
