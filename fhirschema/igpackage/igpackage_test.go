package igpackage_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"sort"
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

// tgz packs files (name → content) as a FHIR package.
func tgz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAGuideWrittenTwiceKeepsItsCanonicalFile(t *testing.T) {
	ig := func(title string) string {
		return `{"resourceType":"ImplementationGuide","id":"acme","url":"http://example.org/ImplementationGuide/acme","name":"Acme","title":"` + title + `","status":"active","packageId":"acme.fhir","fhirVersion":["4.0.1"]}`
	}
	files := map[string]string{
		"package/package.json":                      `{"name":"acme.fhir","version":"1.0.0","fhirVersions":["4.0.1"]}`,
		"package/ImplementationGuide-acme.json":     ig("Acme (canonical)"),
		"package/ig-r4.json":                        ig("Acme (older copy)"),
		"package/StructureDefinition-acme-pat.json": `{"resourceType":"StructureDefinition","id":"acme-pat","url":"http://example.org/StructureDefinition/acme-pat"}`,
	}
	p, err := igpackage.Read(bytes.NewReader(tgz(t, files)))
	if err != nil {
		t.Fatalf("a package with its guide twice: %v", err)
	}
	var kept []string
	for _, f := range p.Resources {
		if f.Type == "ImplementationGuide" {
			kept = append(kept, f.Path)
			if !bytes.Contains(f.JSON, []byte("canonical")) {
				t.Errorf("kept the other copy: %s", f.JSON)
			}
		}
	}
	if len(kept) != 1 || kept[0] != "package/ImplementationGuide-acme.json" {
		t.Fatalf("kept %v", kept)
	}
	if len(p.Skipped) != 1 || !strings.HasPrefix(p.Skipped[0], "package/ig-r4.json") {
		t.Fatalf("skipped %v", p.Skipped)
	}
	// Two different copies of anything else are still refused.
	files["package/StructureDefinition-acme-pat2.json"] = `{"resourceType":"StructureDefinition","id":"acme-pat","url":"http://example.org/StructureDefinition/other"}`
	if _, err := igpackage.Read(bytes.NewReader(tgz(t, files))); err == nil {
		t.Fatal("two different StructureDefinitions of one id are accepted")
	}
}
