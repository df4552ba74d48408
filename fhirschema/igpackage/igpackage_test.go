package igpackage_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"fhirstore/fhirschema/igpackage"
)

// TestUSCorePackagesAreRead: both US Core packages read whole, their
// conformance resources apart from their examples, the copy of the guide
// in ig-r4.json dropped.
func TestUSCorePackagesAreRead(t *testing.T) {
	for _, tc := range []struct {
		version             string
		resources, examples int
		deps                int
	}{
		{"3.1.1", 146, 84, 1},
		{"6.1.0", 210, 183, 9},
	} {
		p, err := igpackage.ReadFile("../../testdata/ig/hl7.fhir.us.core-" + tc.version + ".tgz")
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != "hl7.fhir.us.core" || p.Version != tc.version || len(p.Resources) != tc.resources || len(p.Examples) != tc.examples || len(p.Dependencies) != tc.deps {
			t.Errorf("%s: %s#%s, %d resources, %d examples, %d dependencies; want %d, %d, %d", tc.version, p.Name, p.Version, len(p.Resources), len(p.Examples), len(p.Dependencies), tc.resources, tc.examples, tc.deps)
		}
	}
}

func TestAFileThatIsNoPackageIsRefused(t *testing.T) {
	_, err := igpackage.Read(strings.NewReader("plain text"))
	var pe *igpackage.Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "not a gzip file") {
		t.Fatalf("%v", err)
	}
}

func TestEntryIndexReadsTheEntryOfAnExpression(t *testing.T) {
	for expr, want := range map[string]int{"Bundle.entry[12].resource.name[0]": 12, "Bundle.entry[0]": 0, "Patient.name": -1, "Bundle.entry[x]": -1} {
		if got := igpackage.EntryIndex(expr); got != want {
			t.Errorf("%s: %d, want %d", expr, got, want)
		}
	}
}

func TestTheSameResourceIgnoresTheMetaAServerSets(t *testing.T) {
	f := &igpackage.File{JSON: []byte(`{"resourceType":"ValueSet","id":"a","status":"active","compose":{"include":[{"system":"x"}]}}`)}
	stored := []byte(`{"resourceType":"ValueSet","id":"a","meta":{"versionId":"3","lastUpdated":"2024-01-01T00:00:00.000Z"},"compose":{"include":[{"system":"x"}]},"status":"active"}`)
	if !f.Same(stored) {
		t.Fatal("a stored copy is not the same")
	}
	if f.Same(bytes.Replace(stored, []byte(`"active"`), []byte(`"retired"`), 1)) {
		t.Fatal("a changed copy is the same")
	}
}
