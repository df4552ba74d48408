package main

// Tests of FHIR packages: `fhirstore load PACKAGE.tgz` into a running
// server, and `fhirstore validate` offline.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var igDir = filepath.Join("..", "..", "testdata", "ig")

func usCorePath(version string) string {
	return filepath.Join(igDir, "hl7.fhir.us.core-"+version+".tgz")
}

// packageFiles reads the files of a package archive: name → content.
func packageFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if out[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

// writePackage writes files as a .tgz.
func writePackage(t *testing.T, path string, files map[string][]byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.String())
	return path
}

// changed returns the package's files with one file replaced (nil removes it).
func changed(files map[string][]byte, name string, body []byte) map[string][]byte {
	out := make(map[string][]byte, len(files))
	for k, v := range files {
		out[k] = v
	}
	if body == nil {
		delete(out, name)
	} else {
		out[name] = body
	}
	return out
}

// mutateJSON decodes a file, applies change and encodes it again.
func mutateJSON(t *testing.T, body []byte, change func(map[string]any)) []byte {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	change(r)
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLoadInstallsPackages: a package installs its conformance resources
// by their ids in one go; a second install of the same version writes
// nothing; a newer version updates them; a malformed package is refused
// with the file and reason and nothing of it is written.
func TestLoadInstallsPackages(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	base := "http://127.0.0.1:" + s.port + "/fhir/r4"
	host := "127.0.0.1:" + s.port
	tok := tokenFor(t, dataDir, "demo")
	count := func(query string) int {
		t.Helper()
		r := call(t, http.MethodGet, s.url("/fhir/r4/"+query), host, tok, "")
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", query, r.status, r.body)
		}
		n, _ := r.json(t)["total"].(float64)
		return int(n)
	}
	load := func(path string, extra ...string) (string, error) {
		out, _, err := runLoad(t, append([]string{"--url", base, "--token", tok}, append(extra, path)...)...)
		return out, err
	}

	uc6 := packageFiles(t, usCorePath("6.1.0"))
	const patientFile = "package/StructureDefinition-us-core-patient.json"
	dir := t.TempDir()
	malformed := []struct {
		name, file, reason string
		files              map[string][]byte
		raw                string
	}{
		{name: "not gzip", raw: "this is not a package", reason: "not a gzip file"},
		{name: "no package.json", files: changed(uc6, "package/package.json", nil), reason: "no package/package.json"},
		{name: "a file that is not JSON", files: changed(uc6, patientFile, []byte(`{"resourceType":"StructureDefinition",`)), file: patientFile, reason: "not JSON"},
		{name: "a resource that fails validation", file: "package/ValueSet-us-core-condition-code.json", reason: "status",
			files: changed(uc6, "package/ValueSet-us-core-condition-code.json", mutateJSON(t, uc6["package/ValueSet-us-core-condition-code.json"], func(r map[string]any) { r["status"] = "finished" }))},
		{name: "a snapshot that contradicts its base", file: patientFile, reason: "Patient.gender has max *",
			files: changed(uc6, patientFile, mutateJSON(t, uc6[patientFile], func(r map[string]any) {
				for _, e := range r["snapshot"].(map[string]any)["element"].([]any) {
					if e.(map[string]any)["id"] == "Patient.gender" {
						e.(map[string]any)["max"] = "*"
					}
				}
			}))},
	}
	for _, tt := range malformed {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".tgz")
			if tt.files != nil {
				writePackage(t, path, tt.files)
			} else {
				writeFile(t, path, tt.raw)
			}
			out, err := load(path)
			if err == nil || !strings.Contains(out, "FAILED") || !strings.Contains(out, tt.file) || !strings.Contains(out, tt.reason) {
				t.Fatalf("want FAILED naming %q and %q, got %v:\n%s", tt.file, tt.reason, err, out)
			}
			if n := count("StructureDefinition?_summary=count") + count("ValueSet?_summary=count") + count("SearchParameter?_summary=count"); n != 0 {
				t.Fatalf("%d resources of the refused package were written", n)
			}
		})
	}

	const profile = "/fhir/r4/StructureDefinition/us-core-patient"
	version := func() (string, string) {
		r := call(t, http.MethodGet, s.url(profile), host, tok, "")
		m := r.json(t)
		return m["version"].(string), m["meta"].(map[string]any)["versionId"].(string)
	}
	t.Run("install", func(t *testing.T) {
		out, err := load(usCorePath("3.1.1"))
		if err != nil || !strings.Contains(out, "written, 0 unchanged") {
			t.Fatalf("%v\n%s", err, out)
		}
		if v, _ := version(); v != "3.1.1" {
			t.Fatalf("us-core-patient version %s", v)
		}
	})
	t.Run("a second install of the same version changes nothing", func(t *testing.T) {
		_, before := version()
		out, err := load(usCorePath("3.1.1"))
		if err != nil || !strings.Contains(out, ": 0 conformance resources written") {
			t.Fatalf("%v\n%s", err, out)
		}
		if _, after := version(); after != before {
			t.Fatalf("us-core-patient went from version %s to %s", before, after)
		}
	})
	t.Run("a new version updates the resources and reports the dependencies missing", func(t *testing.T) {
		out, err := load(usCorePath("6.1.0"), "--examples")
		if err != nil || !strings.Contains(out, "updating version 3.1.1") || !strings.Contains(out, "dependency us.nlm.vsac#0.10.0 is not installed") {
			t.Fatalf("%v\n%s", err, out)
		}
		if v, _ := version(); v != "6.1.0" {
			t.Fatalf("us-core-patient version %s", v)
		}
		if n := count("Observation?_summary=count"); n < 100 {
			t.Fatalf("%d Observations: the examples were not loaded", n)
		}
	})
}

// TestValidateOffline: fhirstore validate checks files against the
// profiles of the packages given and exits 0, 1 or 2.
func TestValidateOffline(t *testing.T) {
	dir := t.TempDir()
	uc6 := packageFiles(t, usCorePath("6.1.0"))
	patient := uc6["package/example/Patient-example.json"]
	good := filepath.Join(dir, "patient.json")
	writeFile(t, good, string(patient))
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, bad, string(mutateJSON(t, patient, func(r map[string]any) { delete(r, "identifier") })))
	bundle := filepath.Join(dir, "bundle.json")
	writeFile(t, bundle, `{"resourceType":"Bundle","type":"collection","entry":[{"resource":`+string(patient)+`},{"resource":`+string(mutateJSON(t, patient, func(r map[string]any) { r["id"] = "second"; delete(r, "identifier") }))+`}]}`)
	refs := filepath.Join(dir, "refs.json")
	obs := mutateJSON(t, uc6["package/example/Observation-cbc-hemoglobin.json"], func(r map[string]any) { r["subject"] = map[string]any{"reference": "urn:uuid:1"} })
	writeFile(t, refs, `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:1","resource":{"resourceType":"Patient","gender":"male"}},{"resource":`+string(obs)+`}]}`)
	xml := filepath.Join(dir, "patient.xml")
	writeFile(t, xml, `<Patient xmlns="http://hl7.org/fhir"><meta><profile value="http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"/></meta><gender value="male"/></Patient>`)
	ig := "--ig=" + usCorePath("6.1.0")
	tests := []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"a valid resource", []string{ig, good}, 0, "0 errors"},
		{"an invalid resource names the element", []string{ig, bad}, 1, "error Patient.identifier:"},
		{"a Bundle entry by entry", []string{ig, bundle}, 1, "entry 1 (Patient/second): error Patient.identifier:"},
		{"a reference to another entry by the profile it must claim or conform to", []string{ig, refs}, 1, "entry 1 (Observation/cbc-hemoglobin): error Observation.subject: Observation.subject: the referenced Patient conforms to none of"},
		{"XML", []string{ig, xml}, 1, "error Patient.identifier:"},
		{"without the package the profile is unknown", []string{bad}, 0, "unknown to this server"},
		{"a profile named on the command line", []string{ig, "--profile", "http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient", xml}, 1, "error Patient.name:"},
		{"no file", []string{ig}, 2, ""},
		{"a file that does not exist", []string{filepath.Join(dir, "nothing.json")}, 2, ""},
		{"a package that is not one", []string{"--ig", good, good}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t, append([]string{"validate"}, tt.args...)...)
			if got := exitStatus(err); got != tt.status || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d (%v), want %d; output:\n%s", got, err, tt.status, out)
			}
		})
	}
}

// exitStatus is the status main would exit with after err.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	return exitCode(err)
}
