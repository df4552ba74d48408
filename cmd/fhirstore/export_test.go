package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// runExport runs `fhirstore export args...` in-process.
func runExport(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err = run(ctx, append([]string{"export"}, args...), &out, &errb)
	if ctx.Err() != nil {
		t.Fatalf("export %q did not finish within 120s", args)
	}
	return out.String(), errb.String(), err
}

// withoutVersion drops what a load into another tenant changes: the
// version id and the time of the write.
func withoutVersion(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not a resource: %v: %s", err, raw)
	}
	if meta, ok := m["meta"].(map[string]any); ok {
		delete(meta, "versionId")
		delete(meta, "lastUpdated")
		if len(meta) == 0 {
			delete(m, "meta")
		}
	}
	return m
}

// TestExportRoundTrip: a tenant loaded with the Synthea sample is exported
// with `fhirstore export`, the files are loaded into a new tenant with
// `fhirstore load`, and every resource compares equal; each exported line
// is the resource as the first server reads it.
func TestExportRoundTrip(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	src := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", srcDir)
	dst := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dstDir, "--default-tenant", "copy")
	srcBase, srcHost, srcTok := "http://127.0.0.1:"+src.port+"/fhir/r4", "127.0.0.1:"+src.port, tokenFor(t, srcDir, "demo")
	dstBase, dstHost, dstTok := "http://127.0.0.1:"+dst.port+"/fhir/r4", "127.0.0.1:"+dst.port, tokenFor(t, dstDir, "copy")

	loaded, _, err := runLoad(t, "--url", srcBase, "--data-dir", srcDir, syntheaDir)
	if err != nil {
		t.Fatalf("load the sample: %v\n%s\nserver errors:\n%s", err, loaded, errorLines(src.stderr.String()))
	}
	entries := parseSummary(t, loaded).resources
	out := filepath.Join(t.TempDir(), "export")
	stdout, stderr, err := runExport(t, "--url", srcBase, "--token", srcTok, "--out", out)
	if err != nil {
		t.Fatalf("export: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "exported ") {
		t.Fatalf("no summary:\n%s\n%s", stdout, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.ndjson"))
	var lines [][]byte
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 0, 1<<20), 1<<26)
		for sc.Scan() {
			lines = append(lines, append([]byte(nil), sc.Bytes()...))
		}
		fh.Close()
	}
	if len(lines) < entries {
		t.Fatalf("%d resources exported, the sample has %d", len(lines), entries)
	}
	if o, _, err := runLoad(t, "--url", dstBase, "--token", dstTok, out); err != nil {
		t.Fatalf("load the export: %v\n%s\nserver errors:\n%s", err, o, errorLines(dst.stderr.String()))
	}
	for _, line := range lines {
		var head struct{ ResourceType, ID string }
		_ = json.Unmarshal(line, &head)
		path := "/fhir/r4/" + head.ResourceType + "/" + head.ID
		a := call(t, http.MethodGet, src.url(path), srcHost, srcTok, "")
		if a.status != http.StatusOK || string(bytes.TrimSpace(a.body)) != string(line) {
			t.Fatalf("%s: exported\n%s\nread (%d)\n%s", path, line, a.status, a.body)
		}
		b := call(t, http.MethodGet, dst.url(path), dstHost, dstTok, "")
		if b.status != http.StatusOK {
			t.Fatalf("%s in the new tenant: %d %s", path, b.status, b.body)
		}
		if !reflect.DeepEqual(withoutVersion(t, a.body), withoutVersion(t, b.body)) {
			t.Fatalf("%s differs after the round trip:\n%s\n%s", path, a.body, b.body)
		}
	}
	t.Logf("%d resources in %d files round-tripped", len(lines), len(files))

	t.Run("a refused export fails with the OperationOutcome", func(t *testing.T) {
		_, _, err := runExport(t, "--url", srcBase, "--token", srcTok, "--type", "NotAType", "--out", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "OperationOutcome") || !strings.Contains(err.Error(), "_type") {
			t.Fatalf("export of an unknown type: %v", err)
		}
	})
}

// errorLines are the lines of a server's log at warn level or above.
func errorLines(log string) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"level":"error"`) || strings.Contains(line, `"level":"warn"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
