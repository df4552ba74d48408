package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/server/bulkexport"
)

// exportEnv is a test server with Bulk Data export on a fresh tenant.
type exportEnv struct {
	*env
	m   *bulkexport.Manager
	dir string
}

// newExportEnv starts a server with an export manager; mutate adjusts its config.
func newExportEnv(t testing.TB, mutate ...func(*bulkexport.Config)) *exportEnv {
	t.Helper()
	e := newEnv(t)
	dir := t.TempDir()
	cfg := bulkexport.Config{Dir: dir, Registry: db.Registry()}
	for _, f := range mutate {
		f(&cfg)
	}
	x := &exportEnv{env: e, dir: dir}
	x.start(t, cfg)
	return x
}

// start serves the env's tenant with a new manager of cfg (a server
// restart, as far as exports go).
func (x *exportEnv) start(t testing.TB, cfg bulkexport.Config) {
	t.Helper()
	m := bulkexport.New(x.store, cfg)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	x.m = m
	x.cfg.Export = m
	x.h = server.New(x.cfg, x.store, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	x.srv = httptest.NewServer(x.h)
	t.Cleanup(x.srv.Close)
}

// async is the Prefer header of a kick-off.
var async = map[string]string{"Prefer": "respond-async"}

// kickoff starts an export at path (e.g. /$export?_type=Patient) and
// returns the status path, failing unless 202.
func (x *exportEnv) kickoff(path string) string {
	x.t.Helper()
	r := x.do(request{Method: http.MethodGet, Path: path, Header: async})
	if r.Status != http.StatusAccepted {
		x.t.Fatalf("kick-off %s: %d %s", path, r.Status, r.Body)
	}
	return x.relative(r.Header.Get("Content-Location"))
}

// relative is the path after /fhir/r4 of an absolute URL of the server.
func (x *exportEnv) relative(abs string) string {
	x.t.Helper()
	u, err := url.Parse(abs)
	if err != nil || !strings.HasPrefix(u.Path, "/fhir/r4/") {
		x.t.Fatalf("not a URL of the FHIR base: %q", abs)
	}
	if want := x.tenant + ".localhost"; u.Host != want {
		x.t.Fatalf("URL %q is not on the tenant's host %s", abs, want)
	}
	return strings.TrimPrefix(u.EscapedPath(), "/fhir/r4")
}

// manifest is a completion manifest as the tests read it.
type manifest struct {
	TransactionTime     time.Time `json:"transactionTime"`
	Request             string    `json:"request"`
	RequiresAccessToken bool      `json:"requiresAccessToken"`
	Output              []struct {
		Type  string `json:"type"`
		URL   string `json:"url"`
		Count int    `json:"count"`
	} `json:"output"`
	Error []struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	} `json:"error"`
}

// await polls a status path until the job is no longer running; it
// returns the last answer.
func (x *exportEnv) await(status string) *response {
	x.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := x.get(status)
		if r.Status != http.StatusAccepted && r.Status != http.StatusTooManyRequests {
			return r
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("export %s still running after 60s: %s", status, r.Header.Get("X-Progress"))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// complete polls until the job completes and returns its manifest.
func (x *exportEnv) complete(status string) *manifest {
	x.t.Helper()
	r := x.await(status)
	if r.Status != http.StatusOK {
		x.t.Fatalf("export %s: %d %s", status, r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		x.t.Fatalf("manifest Content-Type %q", ct)
	}
	var m manifest
	if err := json.Unmarshal(r.Body, &m); err != nil {
		x.t.Fatalf("manifest: %v\n%s", err, r.Body)
	}
	if !m.RequiresAccessToken || m.TransactionTime.IsZero() || m.Request == "" {
		x.t.Fatalf("manifest lacks requiresAccessToken, transactionTime or request: %s", r.Body)
	}
	return &m
}

// export kicks off path, waits and returns the manifest and the
// downloaded lines by type.
func (x *exportEnv) export(path string) (*manifest, map[string][]string) {
	x.t.Helper()
	m := x.complete(x.kickoff(path))
	return m, x.lines(m)
}

// lines downloads every output file of m, checking each file's count.
func (x *exportEnv) lines(m *manifest) map[string][]string {
	x.t.Helper()
	out := map[string][]string{}
	for _, o := range m.Output {
		r := x.do(request{Method: http.MethodGet, Path: x.relative(o.URL), Header: map[string]string{"Accept": "application/fhir+ndjson"}})
		if r.Status != http.StatusOK {
			x.t.Fatalf("download %s: %d %s", o.URL, r.Status, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/fhir+ndjson" {
			x.t.Fatalf("file Content-Type %q", ct)
		}
		got := splitLines(r.Body)
		if len(got) != o.Count {
			x.t.Fatalf("%s has %d lines, the manifest says %d", o.URL, len(got), o.Count)
		}
		out[o.Type] = append(out[o.Type], got...)
	}
	return out
}

func splitLines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<26)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			out = append(out, sc.Text())
		}
	}
	return out
}

// idsOf are the sorted ids of ndjson lines.
func idsOf(t testing.TB, lines []string) []string {
	t.Helper()
	ids := []string{}
	for _, l := range lines {
		var r struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line is not a resource: %v: %s", err, l)
		}
		ids = append(ids, r.ID)
	}
	sort.Strings(ids)
	return ids
}

func sortedIDs(ids ...string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return out
}

func patientJSON(family string) string {
	return `{"resourceType":"Patient","name":[{"family":"` + family + `"}]}`
}

func observationJSON(patient, code string) string {
	return `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"` + code +
		`"}]},"subject":{"reference":"Patient/` + patient + `"},"valueQuantity":{"value":72.50,"unit":"/min"}}`
}

// TestExportSystemLevelWritesStoredResourcesVerbatim: a system export
// answers 202 with a status URL, completes with a manifest whose files
// hold each resource exactly as a read returns it, one per line.
func TestExportSystemLevelWritesStoredResourcesVerbatim(t *testing.T) {
	x := newExportEnv(t)
	p1, p2 := x.create("Patient", patientJSON("One")), x.create("Patient", patientJSON("Two"))
	o1 := x.create("Observation", observationJSON(p1, "8867-4"))
	gone := x.create("Patient", patientJSON("Gone"))
	if r := x.do(request{Method: http.MethodDelete, Path: "/Patient/" + gone}); r.Status >= 300 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	m, lines := x.export("/$export")
	if got, want := idsOf(t, lines["Patient"]), sortedIDs(p1, p2); !slices.Equal(got, want) {
		t.Fatalf("Patient ids %v, want %v (no deleted one)", got, want)
	}
	if got := idsOf(t, lines["Observation"]); !slices.Equal(got, []string{o1}) {
		t.Fatalf("Observation ids %v, want [%s]", got, o1)
	}
	if len(lines["AuditEvent"]) > 0 {
		t.Fatalf("the audit trail was exported without being asked for")
	}
	for typ, ls := range lines {
		for _, line := range ls {
			id := idsOf(t, []string{line})[0]
			r := x.get("/" + typ + "/" + id)
			if string(bytes.TrimSpace(r.Body)) != line {
				t.Fatalf("%s/%s exported as\n%s\nread as\n%s", typ, id, line, r.Body)
			}
		}
	}
	if !strings.HasSuffix(m.Request, "/fhir/r4/$export") {
		t.Fatalf("manifest request %q", m.Request)
	}
	if len(m.Error) != 0 {
		t.Fatalf("errors in a clean export: %+v", m.Error)
	}
}

// TestExportKickoffRejectsBadRequests: each bad kick-off is a 400 (or 404,
// 405) OperationOutcome pointing at the bad parameter, and starts no job.
func TestExportKickoffRejectsBadRequests(t *testing.T) {
	x := newExportEnv(t)
	params := `{"resourceType":"Parameters","parameter":[{"name":"_type","valueString":"Nope"}]}`
	cases := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		expr                     string
	}{
		{"no Prefer: respond-async", "GET", "/$export", "", nil, 400, ""},
		{"an unknown _type", "GET", "/$export?_type=Patient,NotAType", "", async, 400, "_type"},
		{"an _outputFormat other than ndjson", "GET", "/$export?_outputFormat=text/csv", "", async, 400, "_outputFormat"},
		{"a _since that is no instant", "GET", "/$export?_since=yesterday", "", async, 400, "_since"},
		{"an unsupported parameter", "GET", "/$export?includeAssociatedData=LatestProvenanceResources", "", async, 400, "includeAssociatedData"},
		{"an unknown parameter", "GET", "/$export?_until=2020-01-01T00:00:00Z", "", async, 400, "_until"},
		{"a _typeFilter that does not parse", "GET", "/$export?_type=Observation&_typeFilter=" + url.QueryEscape("Observation?nosuchparam=1"), "", async, 400, "_typeFilter"},
		{"a _typeFilter of a type not exported", "GET", "/$export?_type=Patient&_typeFilter=" + url.QueryEscape("Observation?status=final"), "", async, 400, "_typeFilter"},
		{"patient on a system export", "GET", "/$export?patient=Patient/1", "", async, 400, "patient"},
		{"a patient that is no Patient reference", "POST", "/Patient/$export",
			`{"resourceType":"Parameters","parameter":[{"name":"patient","valueReference":{"reference":"Group/1"}}]}`, async, 400, "patient"},
		{"a non-compartment type at Patient level", "GET", "/Patient/$export?_type=Organization", "", async, 400, "_type"},
		{"a POST body that is no Parameters", "POST", "/$export", `{"resourceType":"Patient"}`, async, 400, ""},
		{"a POST Parameters with an unknown _type", "POST", "/$export", params, async, 400, "_type"},
		{"an unknown Group", "GET", "/Group/nope/$export", "", async, 404, ""},
		{"PUT on the kick-off", "PUT", "/$export", "", async, 405, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := x.do(request{Method: c.method, Path: c.path, Body: c.body, Header: c.header})
			wantOutcome(t, r, c.status, c.expr)
		})
	}
	var jobs []*bulkexport.Job
	if err := x.store.ExportJobs(context.Background(), x.tenant, &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 0 {
		t.Fatalf("bad kick-offs started %d jobs", len(jobs))
	}
	t.Run("lenient handling ignores unsupported parameters and says so", func(t *testing.T) {
		x.create("Patient", patientJSON("Lenient"))
		r := x.do(request{Method: http.MethodGet, Path: "/$export?_type=Patient&includeAssociatedData=x",
			Header: map[string]string{"Prefer": "respond-async, handling=lenient"}})
		if r.Status != http.StatusAccepted {
			t.Fatalf("lenient kick-off: %d %s", r.Status, r.Body)
		}
		m := x.complete(x.relative(r.Header.Get("Content-Location")))
		if len(m.Error) != 1 {
			t.Fatalf("the ignored parameter is not reported: %+v", m)
		}
		er := x.get(x.relative(m.Error[0].URL))
		if er.Status != http.StatusOK || !strings.Contains(string(er.Body), "includeAssociatedData") || !strings.Contains(string(er.Body), `"OperationOutcome"`) {
			t.Fatalf("error file: %d %s", er.Status, er.Body)
		}
	})
}

// TestExportParameters: _type, _since, _typeFilter and _elements select
// and shape what is exported, by GET and by POST Parameters alike.
func TestExportParameters(t *testing.T) {
	x := newExportEnv(t)
	p1 := x.create("Patient", patientJSON("Early"))
	o1 := x.create("Observation", observationJSON(p1, "8867-4"))
	time.Sleep(20 * time.Millisecond)
	since := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	p2 := x.create("Patient", patientJSON("Late"))
	o2 := x.create("Observation", observationJSON(p2, "8310-5"))
	o3 := x.create("Observation", observationJSON(p2, "8867-4"))
	x.create("Practitioner", `{"resourceType":"Practitioner","name":[{"family":"Doc"}]}`)
	sinceQ := url.QueryEscape(since.Format(time.RFC3339Nano))
	heart := url.QueryEscape("Observation?code=http://loinc.org|8867-4")
	cases := []struct {
		name, method, path, body string
		want                     map[string][]string
	}{
		{"_outputFormat written with an unescaped +", "GET", "/$export?_type=Patient&_outputFormat=application/fhir+ndjson",
			"", map[string][]string{"Patient": {p1, p2}}},
		{"_type keeps the types listed", "GET", "/$export?_type=Patient,Observation",
			"", map[string][]string{"Patient": {p1, p2}, "Observation": {o1, o2, o3}}},
		{"_since keeps what was written at or after it", "GET", "/$export?_type=Patient,Observation&_since=" + sinceQ,
			"", map[string][]string{"Patient": {p2}, "Observation": {o2, o3}}},
		{"_typeFilter runs a search on its type", "GET", "/$export?_type=Patient,Observation&_typeFilter=" + heart,
			"", map[string][]string{"Patient": {p1, p2}, "Observation": {o1, o3}}},
		{"two _typeFilters of a type are ORed", "GET", "/$export?_type=Observation&_typeFilter=" + heart + "&_typeFilter=" + url.QueryEscape("Observation?subject=Patient/"+p2),
			"", map[string][]string{"Observation": {o1, o2, o3}}},
		{"_since and _typeFilter together", "GET", "/$export?_type=Observation&_since=" + sinceQ + "&_typeFilter=" + heart,
			"", map[string][]string{"Observation": {o3}}},
		{"POST Parameters", "POST", "/$export",
			`{"resourceType":"Parameters","parameter":[{"name":"_type","valueString":"Observation"},{"name":"_since","valueInstant":"` + since.Format(time.RFC3339Nano) + `"},{"name":"_outputFormat","valueString":"application/fhir+ndjson"}]}`,
			map[string][]string{"Observation": {o2, o3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := x.do(request{Method: c.method, Path: c.path, Body: c.body, Header: async})
			if r.Status != http.StatusAccepted {
				t.Fatalf("kick-off: %d %s", r.Status, r.Body)
			}
			lines := x.lines(x.complete(x.relative(r.Header.Get("Content-Location"))))
			if len(lines) != len(c.want) {
				t.Fatalf("exported types %v, want %v", typeKeys(lines), typeKeys(c.want))
			}
			for typ, ids := range c.want {
				if got := idsOf(t, lines[typ]); !slices.Equal(got, sortedIDs(ids...)) {
					t.Fatalf("%s ids %v, want %v", typ, got, sortedIDs(ids...))
				}
			}
		})
	}
	t.Run("_elements keeps the elements listed and marks the subset", func(t *testing.T) {
		_, lines := x.export("/$export?_type=Patient,Observation&_elements=Observation.status,name")
		for _, line := range lines["Observation"] {
			var o map[string]any
			_ = json.Unmarshal([]byte(line), &o)
			if o["status"] != "final" || o["code"] != nil || o["subject"] != nil || !strings.Contains(line, "SUBSETTED") {
				t.Fatalf("Observation not subsetted to status: %s", line)
			}
		}
		for _, line := range lines["Patient"] {
			if !strings.Contains(line, `"name"`) || !strings.Contains(line, "SUBSETTED") {
				t.Fatalf("Patient not subsetted to name: %s", line)
			}
		}
		_, lines = x.export("/$export?_type=Observation&_elements=Observation.value")
		for _, line := range lines["Observation"] {
			var o map[string]any
			_ = json.Unmarshal([]byte(line), &o)
			if o["status"] != nil || (o["valueQuantity"] == nil && o["valueString"] == nil && o["valueCodeableConcept"] == nil) {
				t.Fatalf("Observation not subsetted to its value[x]: %s", line)
			}
		}
	})
}

func typeKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestExportPatientAndGroupLevel: Patient and Group exports hold the
// Patient compartments of the patients in scope, and nothing else (a Group
// is in the compartment of its members).
func TestExportPatientAndGroupLevel(t *testing.T) {
	x := newExportEnv(t)
	p1, p2, p3 := x.create("Patient", patientJSON("A")), x.create("Patient", patientJSON("B")), x.create("Patient", patientJSON("C"))
	o1, o2, o3 := x.create("Observation", observationJSON(p1, "1")), x.create("Observation", observationJSON(p2, "1")), x.create("Observation", observationJSON(p3, "1"))
	orphan := x.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"no subject"}}`)
	enc := x.create("Encounter", `{"resourceType":"Encounter","status":"finished","class":{"code":"HH"},"subject":{"reference":"Patient/`+p2+`"}}`)
	x.create("Practitioner", `{"resourceType":"Practitioner","name":[{"family":"Doc"}]}`)
	group := x.create("Group", `{"resourceType":"Group","type":"person","actual":true,"member":[{"entity":{"reference":"Patient/`+p1+`"}},{"entity":{"reference":"Patient/`+p2+`"}}]}`)
	cases := []struct {
		name, method, path, body string
		want                     map[string][]string
	}{
		{"Patient level: every patient's compartment", "GET", "/Patient/$export",
			"", map[string][]string{"Patient": {p1, p2, p3}, "Observation": {o1, o2, o3}, "Encounter": {enc}, "Group": {group}}},
		{"Group level: the members' compartments", "GET", "/Group/" + group + "/$export",
			"", map[string][]string{"Patient": {p1, p2}, "Observation": {o1, o2}, "Encounter": {enc}, "Group": {group}}},
		{"Group level with _type", "GET", "/Group/" + group + "/$export?_type=Observation",
			"", map[string][]string{"Observation": {o1, o2}}},
		{"Patient level POST with patient", "POST", "/Patient/$export",
			`{"resourceType":"Parameters","parameter":[{"name":"patient","valueReference":{"reference":"Patient/` + p3 + `"}},{"name":"patient","valueReference":{"reference":"Patient/` + p1 + `"}}]}`,
			map[string][]string{"Patient": {p1, p3}, "Observation": {o1, o3}, "Group": {group}}},
		{"Group level with a _typeFilter", "GET", "/Group/" + group + "/$export?_type=Observation&_typeFilter=" + url.QueryEscape("Observation?subject=Patient/"+p2),
			"", map[string][]string{"Observation": {o2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := x.do(request{Method: c.method, Path: c.path, Body: c.body, Header: async})
			if r.Status != http.StatusAccepted {
				t.Fatalf("kick-off: %d %s", r.Status, r.Body)
			}
			lines := x.lines(x.complete(x.relative(r.Header.Get("Content-Location"))))
			if !slices.Equal(typeKeys(lines), typeKeys(c.want)) {
				t.Fatalf("exported types %v, want %v", typeKeys(lines), typeKeys(c.want))
			}
			for typ, ids := range c.want {
				if got := idsOf(t, lines[typ]); !slices.Equal(got, sortedIDs(ids...)) {
					t.Fatalf("%s ids %v, want %v (the subject-less %s must stay out)", typ, got, sortedIDs(ids...), orphan)
				}
			}
		})
	}
}

// TestExportSplitsFilesBySize: a type larger than the file size limit is
// split over several files, each complete, none holding a resource twice.
func TestExportSplitsFilesBySize(t *testing.T) {
	x := newExportEnv(t, func(c *bulkexport.Config) { c.MaxFileBytes = 300 })
	var ids []string
	for i := range 12 {
		ids = append(ids, x.create("Patient", patientJSON(fmt.Sprintf("Split%02d", i))))
	}
	m, lines := x.export("/$export?_type=Patient")
	if len(m.Output) < 3 {
		t.Fatalf("%d files for 12 patients at 300 bytes per file", len(m.Output))
	}
	if got := idsOf(t, lines["Patient"]); !slices.Equal(got, sortedIDs(ids...)) {
		t.Fatalf("ids %v, want %v", got, sortedIDs(ids...))
	}
}
