package main

// Tests of `fhirstore load` over the real stack: an in-process server on a
// temporary data dir, or --direct into a data dir of its own.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var syntheaDir = filepath.Join("..", "..", "testdata", "synthea")

// runLoad runs `fhirstore load args...` in-process.
func runLoad(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err = run(ctx, append([]string{"load"}, args...), &out, &errb)
	if ctx.Err() != nil {
		t.Fatalf("load %q did not finish within 90s", args)
	}
	return out.String(), errb.String(), err
}

// loadSummary holds the counts and the FAILED lines of a load's summary.
type loadSummary struct {
	ok, failed, resources int
	failures              map[string]string // file base name -> rest of its line
}

// parseSummary reads the summary a load printed on stdout.
func parseSummary(t *testing.T, out string) loadSummary {
	t.Helper()
	s := loadSummary{ok: -1, failed: -1, resources: -1, failures: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "FAILED "); ok {
			path, why, _ := strings.Cut(rest, ": ")
			s.failures[filepath.Base(path)] = why
			continue
		}
		key, val, _ := strings.Cut(line, ":")
		n, err := strconv.Atoi(strings.TrimSpace(val))
		switch key {
		case "files ok":
			s.ok = n
		case "files failed":
			s.failed = n
		case "resources":
			s.resources = n
		default:
			continue
		}
		if err != nil {
			t.Fatalf("summary line %q: %v", line, err)
		}
	}
	if s.ok < 0 || s.failed < 0 || s.resources < 0 {
		t.Fatalf("summary lacks files ok, files failed or resources:\n%s", out)
	}
	return s
}

// syntheaFolder writes a folder of Synthea output into a temp dir: the
// smallest patient bundle as it is, and the hospital and practitioner
// batches cut down to the entries its conditional references name (the
// embedded database needs ~0.2s per conditional create, so the whole
// batches would take over a minute). It returns the folder, the number of
// entries in its files and the patient's family name.
func syntheaFolder(t *testing.T) (dir string, entries int, family string) {
	t.Helper()
	dir = t.TempDir()
	patientFile := smallestPatientBundle(t)
	patient := readBundle(t, patientFile)
	refs := map[string]bool{}
	collectConditionalRefs(patient, refs)
	for _, name := range []string{"hospitalInformation.json", "practitionerInformation.json"} {
		b := readBundle(t, filepath.Join(syntheaDir, name))
		var kept []any
		for _, e := range b["entry"].([]any) {
			e := e.(map[string]any)
			typ := e["resource"].(map[string]any)["resourceType"].(string)
			if cond, _ := e["request"].(map[string]any)["ifNoneExist"].(string); refs[typ+"?"+cond] {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			t.Fatalf("%s has none of the patient's conditional references", name)
		}
		b["entry"] = kept
		entries += len(kept)
		writeJSON(t, filepath.Join(dir, name), b)
	}
	raw, err := os.ReadFile(patientFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(patientFile)), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, e := range patient["entry"].([]any) {
		entries++
		r := e.(map[string]any)["resource"].(map[string]any)
		if r["resourceType"] == "Patient" {
			family = r["name"].([]any)[0].(map[string]any)["family"].(string)
		}
	}
	if family == "" {
		t.Fatalf("%s has no Patient", patientFile)
	}
	return dir, entries, family
}

// smallestPatientBundle is the smallest of the Synthea patient files.
func smallestPatientBundle(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(syntheaDir, "*_*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Synthea patient bundles in %s: %v", syntheaDir, err)
	}
	size := func(f string) int64 {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	sort.Slice(files, func(i, j int) bool { return size(files[i]) < size(files[j]) })
	return files[0]
}

func readBundle(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// collectConditionalRefs adds every reference of the form Type?criteria in v.
func collectConditionalRefs(v any, refs map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if s, ok := c.(string); ok && k == "reference" && strings.Contains(s, "?") {
				refs[s] = true
			}
			collectConditionalRefs(c, refs)
		}
	case []any:
		for _, c := range x {
			collectConditionalRefs(c, refs)
		}
	}
}

// searchFamilies returns the family names of the Patients a search finds.
func searchFamilies(t *testing.T, body []byte) []string {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource struct {
				Name []struct {
					Family string `json:"family"`
				} `json:"name"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("search answer: %v\n%s", err, body)
	}
	var out []string
	for _, e := range b.Entry {
		if len(e.Resource.Name) > 0 {
			out = append(out, e.Resource.Name[0].Family)
		}
	}
	return out
}

// ndjsonPatients is one Patient per line with the given ids.
func ndjsonPatients(ids ...string) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, `{"resourceType":"Patient","id":%q,"name":[{"family":"Nd-%s"}],"gender":"female"}`+"\n", id, id)
	}
	return b.String()
}

func TestLoadIntoRunningServer(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	base := "http://127.0.0.1:" + s.port + "/fhir/r4"
	host := "127.0.0.1:" + s.port
	tok := tokenFor(t, dataDir, "demo")

	t.Run("a Synthea folder loads, batches before the patient's transaction", func(t *testing.T) {
		// In name order the patient file comes first; its conditional
		// references only resolve because the batches are loaded before it.
		dir, entries, family := syntheaFolder(t)
		out, _, err := runLoad(t, "--url", base, "--data-dir", dataDir, "--workers", "3", dir)
		if err != nil {
			t.Fatalf("load: %v\n%s", err, out)
		}
		sum := parseSummary(t, out)
		if sum.ok != 3 || sum.failed != 0 || sum.resources != entries {
			t.Fatalf("summary: %d ok, %d failed, %d resources; want 3, 0, %d\n%s", sum.ok, sum.failed, sum.resources, entries, out)
		}
		r := call(t, http.MethodGet, s.url("/fhir/r4/Patient?family="+family), host, tok, "")
		if r.status != http.StatusOK {
			t.Fatalf("search: %d %s", r.status, r.body)
		}
		if got := searchFamilies(t, r.body); len(got) != 1 || got[0] != family {
			t.Fatalf("Patients named %s: %q, want one", family, got)
		}
		if got := fmt.Sprint(r.json(t)["entry"]); strings.Contains(got, "Practitioner?") || strings.Contains(got, "Organization?") {
			t.Fatalf("the stored Patient keeps a conditional reference: %s", got)
		}
	})

	t.Run("ndjson loads per chunk and failed files are listed", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "good.ndjson"), ndjsonPatients("g1", "g2", "g3"))
		// With --batch-size 2 the invalid third line is a chunk of its own:
		// the first two lines load, the file is reported.
		writeFile(t, filepath.Join(dir, "mixed.ndjson"), ndjsonPatients("m1", "m2")+`{"resourceType":"Patient","gender":"yes"}`+"\n")
		writeFile(t, filepath.Join(dir, "patient.json"), `{"resourceType":"Patient","id":"x"}`)
		out, _, err := runLoad(t, "--url", base, "--token", tok, "--batch-size", "2", dir)
		if err == nil {
			t.Fatalf("load with failing files succeeded:\n%s", out)
		}
		checkOneLine(t, []string{"load"}, err.Error())
		if !strings.Contains(err.Error(), "2 of 3 files failed") {
			t.Fatalf("error %q does not count the failed files", err)
		}
		sum := parseSummary(t, out)
		if sum.ok != 1 || sum.failed != 2 || sum.resources != 5 {
			t.Fatalf("summary: %d ok, %d failed, %d resources; want 1, 2, 5\n%s", sum.ok, sum.failed, sum.resources, out)
		}
		if why := sum.failures["mixed.ndjson"]; !strings.HasPrefix(why, "line 3: 4") || !strings.Contains(why, "gender") {
			t.Fatalf("mixed.ndjson: %q, want line 3, a 4xx status and the diagnostics about gender\n%s", why, out)
		}
		if why := sum.failures["patient.json"]; !strings.Contains(why, "must be a Bundle") {
			t.Fatalf("patient.json: %q, want that it is not a Bundle\n%s", why, out)
		}
		for _, id := range []string{"g1", "g2", "g3", "m1", "m2"} {
			if got := readFamily(t, s, host, tok, id); got != "Nd-"+id {
				t.Fatalf("Patient/%s: family %q", id, got)
			}
		}
	})

	t.Run("a *.localhost URL reaches the server on loopback and names the tenant", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "named.ndjson")
		writeFile(t, file, ndjsonPatients("lh1"))
		out, _, err := runLoad(t, "--url", "http://demo.localhost:"+s.port+"/fhir/r4", "--token", tok, file)
		if err != nil {
			t.Fatalf("load through demo.localhost: %v\n%s", err, out)
		}
		if got := readFamily(t, s, host, tok, "lh1"); got != "Nd-lh1" {
			t.Fatalf("Patient/lh1: family %q", got)
		}
	})

	t.Run("direct refuses the database of a running server", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "shared.ndjson")
		writeFile(t, file, ndjsonPatients("d1", "d2"))
		_, _, err := runLoad(t, "--direct", "--data-dir", dataDir, file)
		if err == nil || !strings.Contains(err.Error(), "without --direct") {
			t.Fatalf("load --direct next to a running server: %v, want a refusal naming the fix", err)
		}
		if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/d1"), host, tok, ""); r.status != http.StatusNotFound {
			t.Fatalf("Patient/d1 after a refused load: %d, want 404", r.status)
		}
	})
}

func TestLoadDirectWithoutServer(t *testing.T) {
	dataDir := t.TempDir()
	dir, entries, family := syntheaFolder(t)
	out, _, err := runLoad(t, "--direct=true", "--data-dir", dataDir, "--tenant", "acme", dir)
	if err != nil {
		t.Fatalf("load --direct: %v\n%s", err, out)
	}
	if sum := parseSummary(t, out); sum.ok != 3 || sum.resources != entries {
		t.Fatalf("summary: want 3 files and %d resources\n%s", entries, out)
	}
	if dataDirLocked(t, dataDir) {
		t.Fatal("load --direct left the data dir locked")
	}
	wantAbsent(t, dataDir, embeddedURIFile)

	// A later reader through the same handler stack finds the patient in
	// the tenant the load created.
	cfg := newConfig("load", loadFlags...)
	if _, err := cfg.parse([]string{"--data-dir", dataDir, "--tenant", "acme"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := &loader{}
	closeDB, err := l.connectDirect(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	// While a direct load writes, it is the data dir's only writer: no
	// server starts on it, no second direct load either; one-shot
	// commands still work.
	wantFail(t, "is in use by a running fhirstore", "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	wantFail(t, "without --direct", "load", "--direct", "--data-dir", dataDir, writeTemp(t, "p.ndjson", ndjsonPatients("p1")))
	if got := tenantList(t, dataDir); strings.Join(got, ",") != "acme" {
		t.Fatalf("tenant list next to a direct load: %q, want acme", got)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.base+"/Patient?family="+family, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := l.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("search: %d %s", resp.StatusCode, body)
	}
	if got := searchFamilies(t, body); len(got) != 1 || got[0] != family {
		t.Fatalf("Patients named %s in acme: %q, want one", family, got)
	}
}

func TestLoadReportsAnUnreachableServerPerFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.ndjson"), ndjsonPatients("a1"))
	writeFile(t, filepath.Join(dir, "b.json"), `{"resourceType":"Bundle","type":"batch","entry":[]}`)
	out, _, err := runLoad(t, "--url", "http://127.0.0.1:1/fhir/r4", "--token", "x", dir)
	if err == nil || !strings.Contains(err.Error(), "2 of 2 files failed") {
		t.Fatalf("error %v, want 2 of 2 files failed\n%s", err, out)
	}
	sum := parseSummary(t, out)
	for _, f := range []string{"a.ndjson", "b.json"} {
		if !strings.Contains(sum.failures[f], "connection refused") {
			t.Fatalf("%s: %q, want connection refused\n%s", f, sum.failures[f], out)
		}
	}
}

func TestLoadBadInvocationsFailWithOneLine(t *testing.T) {
	dataDir := t.TempDir()
	mustRun(t, "token", "--data-dir", dataDir) // a dev key to sign with
	file := filepath.Join(t.TempDir(), "p.ndjson")
	writeFile(t, file, ndjsonPatients("p1"))
	empty := t.TempDir()
	other := filepath.Join(empty, "notes.txt")
	writeFile(t, other, "hello")
	cases := []struct {
		name, want string
		args       []string
	}{
		{"missing path", "no such file", []string{"--data-dir", dataDir, filepath.Join(empty, "nope.json")}},
		{"no path", "no PATH", []string{"--data-dir", dataDir}},
		{"directory without data", "no .json or .ndjson files", []string{"--data-dir", dataDir, t.TempDir()}},
		{"file of another kind", "neither", []string{"--data-dir", dataDir, other}},
		{"bad workers", "--workers", []string{"--data-dir", dataDir, "--workers", "0", file}},
		{"bad batch size", "--batch-size", []string{"--data-dir", dataDir, "--batch-size", "many", file}},
		{"bad direct", "--direct", []string{"--data-dir", dataDir, "--direct=maybe", file}},
		{"bad url", "--url", []string{"--data-dir", dataDir, "--url", "ftp://example.test/fhir", file}},
		{"bad tenant", "--tenant", []string{"--data-dir", dataDir, "--tenant", "Bad_Name", file}},
		{"no token and no key", "no --token", []string{"--data-dir", empty, file}},
		{"bad flag", "-bogus", []string{"--bogus", file}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantFail(t, c.want, append([]string{"load"}, c.args...)...) })
	}
}

func TestLoadHelpShowsAnExample(t *testing.T) {
	out, _, err := runCmd(t, "load", "-h")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("load -h: %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"usage: fhirstore load [flags] PATH...", "examples:", "fhirstore load --", "-batch-size", "-direct", "FHIRSTORE_LOAD_WORKERS"} {
		if !strings.Contains(out, want) {
			t.Fatalf("load -h lacks %q:\n%s", want, out)
		}
	}
}

func TestNDJSONLinesBecomeTransactionEntries(t *testing.T) {
	cases := []struct {
		name, line, want, wantErr string
	}{
		{"a resource with an id is PUT under it", `{"resourceType":"Patient","id":"p1"}`, `"request":{"method":"PUT","url":"Patient/p1"}`, ""},
		{"a resource without an id is POSTed", `{"resourceType":"Observation","status":"final"}`, `"request":{"method":"POST","url":"Observation"}`, ""},
		{"decimals keep their text", `{"resourceType":"Observation","id":"o1","valueQuantity":{"value":1.50}}`, `"value":1.50`, ""},
		{"a line that is not JSON", `{"resourceType":"Patient",`, "", "not a JSON resource"},
		{"an unknown resource type", `{"resourceType":"Bogus","id":"b"}`, "", `"Bogus" is not an R4 resource type`},
		{"an id that cannot be in a URL", `{"resourceType":"Patient","id":"a/b"}`, "", `"a/b"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ndjsonEntry([]byte(c.line))
			switch {
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one mentioning %s", err, c.wantErr)
			case c.wantErr == "" && err != nil:
				t.Fatal(err)
			case !strings.Contains(string(got), c.want):
				t.Fatalf("entry %s lacks %s", got, c.want)
			}
		})
	}
}

// TestLoadReportsEveryEntryNotStored: each entry of a batch the server
// answers with an error is listed by index, request and reason, the
// others load, and the command fails; a transaction refused as a whole
// says that none of its entries is stored.
func TestLoadReportsEveryEntryNotStored(t *testing.T) {
	dataDir := t.TempDir()
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	base := "http://127.0.0.1:" + s.port + "/fhir/r4"
	dir := t.TempDir()
	entry := func(method, url, resource string) string {
		return `{"resource":` + resource + `,"request":{"method":"` + method + `","url":"` + url + `"}}`
	}
	writeFile(t, filepath.Join(dir, "batch.json"), `{"resourceType":"Bundle","type":"batch","entry":[`+
		entry("PUT", "Patient/ok1", `{"resourceType":"Patient","id":"ok1"}`)+`,`+
		entry("POST", "Patient", `{"resourceType":"Patient","gender":"yes"}`)+`,`+
		entry("PUT", "Patient/ok2", `{"resourceType":"Patient","id":"ok2"}`)+`,`+
		entry("PUT", "Patient/other", `{"resourceType":"Patient","id":"mismatch"}`)+`]}`)
	writeFile(t, filepath.Join(dir, "txn.json"), `{"resourceType":"Bundle","type":"transaction","entry":[`+
		entry("PUT", "Patient/t1", `{"resourceType":"Patient","id":"t1"}`)+`,`+
		entry("POST", "Patient", `{"resourceType":"Patient","gender":"yes"}`)+`]}`)
	out, _, err := runLoad(t, "--url", base, "--data-dir", dataDir, dir)
	if err == nil || !strings.Contains(err.Error(), "2 of 2 files failed, 2 entries not stored") {
		t.Fatalf("load: %v, want the failed files and entries counted\n%s", err, out)
	}
	sum := parseSummary(t, out)
	if sum.resources != 2 || sum.failed != 2 || !strings.Contains(out, "entries failed: 2") {
		t.Fatalf("summary: %+v\n%s", sum, out)
	}
	for _, want := range []string{
		"FAILED " + filepath.Join(dir, "batch.json") + ": entry 1 (POST Patient): 4",
		"FAILED " + filepath.Join(dir, "batch.json") + ": entry 3 (PUT Patient/other): 400",
		"FAILED " + filepath.Join(dir, "txn.json") + ": 4",
		"(none of its 2 entries stored)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "entry 0 ") || strings.Contains(out, "entry 2 ") {
		t.Errorf("stored entries are reported as failed:\n%s", out)
	}
}

// TestCountReplyNamesEveryEntryNotStored: entries answered with an error
// and entries the response leaves out are each a failure.
func TestCountReplyNamesEveryEntryNotStored(t *testing.T) {
	sent := sentEntries([]byte(`{"entry":[{"request":{"method":"PUT","url":"Patient/a"}},{"fullUrl":"urn:uuid:b","request":{"method":"POST","url":"Patient"}},{"request":{"method":"POST","url":"Observation"}}]}`))
	tests := []struct {
		name   string
		status int
		reply  string
		stored int
		failed []string
		err    string
	}{
		{"all stored", 200, `{"resourceType":"Bundle","entry":[{"response":{"status":"200 OK"}},{"response":{"status":"201 Created"}},{"response":{"status":"201"}}]}`, 3, nil, ""},
		{"one refused", 200, `{"resourceType":"Bundle","entry":[{"response":{"status":"200 OK"}},{"response":{"status":"422","outcome":{"resourceType":"OperationOutcome","issue":[{"code":"too-long","diagnostics":"too big"}]}}},{"response":{"status":"201"}}]}`, 2,
			[]string{"entry 1 (POST Patient, urn:uuid:b): 422 Unprocessable Entity: too big; not stored"}, ""},
		{"entries missing from the response", 200, `{"resourceType":"Bundle","entry":[{"response":{"status":"200 OK"}}]}`, 1,
			[]string{"entry 1 (POST Patient, urn:uuid:b): the response has no entry for it; not stored", "entry 2 (POST Observation): the response has no entry for it; not stored"}, ""},
		{"refused as a whole", 422, `{"resourceType":"OperationOutcome","issue":[{"code":"too-long","diagnostics":"too big"}]}`, 0, nil, "422 Unprocessable Entity: too big (none of its 3 entries stored)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, failed, err := countReply(tc.status, []byte(tc.reply), sent)
			if n != tc.stored || fmt.Sprint(failed) != fmt.Sprint(tc.failed) || fmt.Sprint(err) != fmt.Sprint(map[bool]any{true: nil, false: tc.err}[tc.err == ""]) {
				t.Fatalf("countReply: %d %q %v, want %d %q %q", n, failed, err, tc.stored, tc.failed, tc.err)
			}
		})
	}
}
