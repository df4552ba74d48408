package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// namesViewFile writes a view of each patient's id and family name.
func namesViewFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "patient_names.json")
	def := `{"resourceType":"ViewDefinition","name":"patient_names","status":"active","resource":"Patient",
		"select":[{"column":[{"name":"id","path":"getResourceKey()"},{"name":"family","path":"name.family.first()"}]}]}`
	if err := os.WriteFile(path, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestViewRunsAViewFileOverAServerOrItsDatabase: fhirstore view writes a
// view's rows as the server computes them (--url) and as it computes them
// itself on the data dir (--direct), to standard output or --out.
func TestViewRunsAViewFileOverAServerOrItsDatabase(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	host, tok := "127.0.0.1:"+s.port, tokenFor(t, dir, "demo")
	var ids []string
	for _, family := range []string{"Smith", "Jones", "Brown"} {
		ids = append(ids, createPatient(t, s, host, tok, family))
	}
	slices.Sort(ids)
	viewFile := namesViewFile(t)
	base := "http://" + host + "/fhir/r4"

	stdout, stderr, err := runCmd(t, "view", "--url", base, "--data-dir", dir, viewFile)
	if err != nil {
		t.Fatalf("view over HTTP: %v\n%s", err, stderr)
	}
	wantCSV(t, stdout, ids)
	if !strings.Contains(stderr, "view patient_names: 3 rows") {
		t.Errorf("no summary on stderr: %q", stderr)
	}

	stdout, stderr, err = runCmd(t, "view", "--direct", "--data-dir", dir, viewFile)
	if err != nil {
		t.Fatalf("view --direct: %v\n%s", err, stderr)
	}
	wantCSV(t, stdout, ids)
	if !strings.Contains(stderr, "3 rows from 3 resources") {
		t.Errorf("no summary on stderr: %q", stderr)
	}

	out := filepath.Join(t.TempDir(), "views")
	for _, format := range []string{"ndjson", "parquet"} {
		if _, stderr, err := runCmd(t, "view", "--url", base, "--token", tok, "--format", format, "--out", out, viewFile); err != nil {
			t.Fatalf("view --format %s: %v\n%s", format, err, stderr)
		}
	}
	nd, err := os.ReadFile(filepath.Join(out, "patient_names.ndjson"))
	if err != nil || bytes.Count(nd, []byte("\n")) != 3 {
		t.Fatalf("ndjson file: %v %q", err, nd)
	}
	var row map[string]any
	if err := json.Unmarshal(bytes.Split(nd, []byte("\n"))[0], &row); err != nil || row["family"] == nil {
		t.Errorf("ndjson row %v: %v", row, err)
	}
	pq, err := os.ReadFile(filepath.Join(out, "patient_names.parquet"))
	if err != nil || !bytes.HasPrefix(pq, []byte("PAR1")) {
		t.Errorf("parquet file: %v", err)
	}
}

func wantCSV(t *testing.T, out string, ids []string) {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != len(ids)+1 || strings.Join(recs[0], ",") != "id,family" {
		t.Fatalf("csv %q: %v", out, err)
	}
	var got []string
	for _, r := range recs[1:] {
		got = append(got, r[0])
	}
	slices.Sort(got)
	if !slices.Equal(got, ids) {
		t.Errorf("ids %v, want %v", got, ids)
	}
}

// TestViewRefusesBadInvocations: each fails with one line saying why.
func TestViewRefusesBadInvocations(t *testing.T) {
	dir := t.TempDir()
	good := namesViewFile(t)
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"resourceType":"ViewDefinition","select":[{"column":[{"name":"id","path":"id"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"view"}, "no VIEW.json"},
		{[]string{"view", "--format", "xlsx", good}, "--format"},
		{[]string{"view", "--direct", "--data-dir", dir, good, good}, "--out"},
		{[]string{"view", "--direct", "--data-dir", dir, bad}, "ViewDefinition.resource"},
		{[]string{"view", "--direct", "--data-dir", dir, "--since", "yesterday", good}, "--since"},
	} {
		wantFail(t, tc.want, tc.args...)
	}
}
