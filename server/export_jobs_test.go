package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fhirstore/server/auth"
	"fhirstore/server/bulkexport"
	"fhirstore/store"
)

// versionAt is the version of Patient/id current at t by the store's
// history: its number, 0 when it did not exist or was deleted at t.
func versionAt(t *testing.T, st *store.Store, tenant, id string, at time.Time) int {
	t.Helper()
	page, err := st.History(context.Background(), tenant, store.HistoryQuery{Type: "Patient", ID: id, Count: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range page.Entries { // newest first
		if !v.LastUpdated.After(at) {
			if v.Deleted {
				return 0
			}
			return v.VersionID
		}
	}
	return 0
}

// TestExportIsASnapshotWhileWritersWrite: with writers updating, deleting
// and creating patients throughout the export, the files hold exactly the
// version of each resource current at transactionTime: nothing written
// later, nothing deleted by then, nothing missing.
func TestExportIsASnapshotWhileWritersWrite(t *testing.T) {
	x := newExportEnv(t, func(c *bulkexport.Config) { c.MaxFileBytes = 400 })
	var mu sync.Mutex
	var ids []string
	for i := range 150 {
		ids = append(ids, x.create("Patient", patientJSON(fmt.Sprintf("Snap%03d", i))))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				id := ids[rng.IntN(len(ids))]
				mu.Unlock()
				switch n % 5 {
				case 0:
					x.do(request{Method: http.MethodDelete, Path: "/Patient/" + id})
				case 1:
					r := x.post("/Patient", patientJSON("New"))
					var res struct {
						ID string `json:"id"`
					}
					if json.Unmarshal(r.Body, &res) == nil && res.ID != "" {
						mu.Lock()
						ids = append(ids, res.ID)
						mu.Unlock()
					}
				default:
					x.put("/Patient/"+id, `{"resourceType":"Patient","id":"`+id+`","name":[{"family":"Changed`+fmt.Sprint(n)+`"}]}`)
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	m, lines := x.export("/$export?_type=Patient")
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()

	got := map[string]int{}
	for _, line := range lines["Patient"] {
		var p struct {
			ID   string `json:"id"`
			Meta struct {
				VersionID   string    `json:"versionId"`
				LastUpdated time.Time `json:"lastUpdated"`
			} `json:"meta"`
		}
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[p.ID]; dup {
			t.Fatalf("Patient/%s exported twice", p.ID)
		}
		if p.Meta.LastUpdated.After(m.TransactionTime) {
			t.Fatalf("Patient/%s written at %s, after transactionTime %s", p.ID, p.Meta.LastUpdated, m.TransactionTime)
		}
		var v int
		fmt.Sscan(p.Meta.VersionID, &v)
		got[p.ID] = v
	}
	changedLater := 0
	for _, id := range ids {
		want := versionAt(t, x.store, x.tenant, id, m.TransactionTime)
		if got[id] != want {
			t.Fatalf("Patient/%s exported at version %d, current at transactionTime was %d (0: none)", id, got[id], want)
		}
		if want > 0 && versionAt(t, x.store, x.tenant, id, time.Now().Add(time.Hour)) != want {
			changedLater++
		}
	}
	if changedLater == 0 {
		t.Fatalf("no exported patient changed during the export: the test proves nothing")
	}
	t.Logf("%d resources, %d of them changed after transactionTime", len(got), changedLater)
}

// TestExportCancelDeletesJobAndFiles: DELETE on the status URL answers 202,
// then the status is 404 and the files are gone.
func TestExportCancelDeletesJobAndFiles(t *testing.T) {
	x := newExportEnv(t)
	x.create("Patient", patientJSON("Cancel"))
	status := x.kickoff("/$export?_type=Patient")
	id := status[strings.LastIndex(status, "/")+1:]
	if r := x.do(request{Method: http.MethodDelete, Path: status}); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, x.get(status), http.StatusNotFound, "")
	wantOutcome(t, x.do(request{Method: http.MethodDelete, Path: status}), http.StatusNotFound, "")
	if _, err := os.Stat(filepath.Join(x.dir, x.tenant, id)); !os.IsNotExist(err) {
		t.Fatalf("the job's files remain after cancel: %v", err)
	}

	// A completed job is deleted the same way, files and all.
	status = x.kickoff("/$export?_type=Patient")
	m := x.complete(status)
	file := x.relative(m.Output[0].URL)
	if r := x.do(request{Method: http.MethodDelete, Path: status}); r.Status != http.StatusAccepted {
		t.Fatalf("delete completed: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, x.get(file), http.StatusNotFound, "")
}

// TestExportExpiresJobsAndFiles: past the expiry a job answers 404 and a
// background sweep removes its files, and the files of jobs that no longer
// exist (a deleted tenant's) as well.
func TestExportExpiresJobsAndFiles(t *testing.T) {
	x := newExportEnv(t, func(c *bulkexport.Config) { c.Expiry, c.Lease = 1500*time.Millisecond, 300*time.Millisecond })
	ghost := filepath.Join(x.dir, "deleted-tenant", "old-job")
	if err := os.MkdirAll(ghost, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ghost, "Patient-1.ndjson"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(ghost, old, old); err != nil {
		t.Fatal(err)
	}
	x.create("Patient", patientJSON("Expire"))
	status := x.kickoff("/$export?_type=Patient")
	id := status[strings.LastIndex(status, "/")+1:]
	m := x.complete(status)
	if r := x.get(x.relative(m.Output[0].URL)); r.Status != http.StatusOK {
		t.Fatalf("file before expiry: %d", r.Status)
	}
	dir := filepath.Join(x.dir, x.tenant, id)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat(dir)
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("files of the expired job still there after 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantOutcome(t, x.get(status), http.StatusNotFound, "")
	if _, err := os.Stat(ghost); !os.IsNotExist(err) {
		t.Fatalf("files of a job that does not exist remain: %v", err)
	}
	var jobs []*bulkexport.Job
	if err := x.store.ExportJobs(context.Background(), x.tenant, &jobs); err != nil || len(jobs) != 0 {
		t.Fatalf("expired job still stored: %d, %v", len(jobs), err)
	}
}

// TestExportResumesAfterRestart: a job a crash interrupted half-way —
// state running, some files recorded, a half-written file and an
// unrecorded one on disk — is resumed by the next process from its last
// recorded file, and completes with every resource exactly once. A job
// interrupted too often fails with an OperationOutcome instead.
func TestExportResumesAfterRestart(t *testing.T) {
	x := newExportEnv(t, func(c *bulkexport.Config) { c.MaxFileBytes = 1 })
	cfg := bulkexport.Config{Dir: x.dir, Registry: db.Registry(), MaxFileBytes: 1, Exclusive: true}
	var want []string
	for i := range 6 {
		want = append(want, x.create("Patient", patientJSON(fmt.Sprintf("Resume%d", i))))
	}
	status := x.kickoff("/$export?_type=Patient")
	x.complete(status)
	id := status[strings.LastIndex(status, "/")+1:]
	var job bulkexport.Job
	if err := x.store.ExportJob(context.Background(), x.tenant, id, &job); err != nil {
		t.Fatal(err)
	}
	if len(job.Output) != 6 {
		t.Fatalf("%d files at one resource per file, want 6", len(job.Output))
	}

	// The state a crash after the second file leaves behind.
	dir := filepath.Join(x.dir, x.tenant, id)
	crash := func(attempts int) {
		t.Helper()
		job.State, job.Attempts, job.Output, job.Exported = bulkexport.StateRunning, attempts, job.Output[:2], 2
		job.Cursor = bulkexport.Cursor{Type: 0, After: slices.Sorted(slices.Values(want))[1], Part: 3}
		job.Heartbeat = time.Now().Add(-time.Hour)
		if err := x.store.PutExportJob(context.Background(), x.tenant, id, &job); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{"Patient-3.ndjson.part": `{"resourceType":"Pat`, "Patient-4.ndjson": "garbage\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	x.m.Close()
	crash(1)
	x.start(t, cfg)
	m := x.complete(status)
	lines := x.lines(m)
	if got := idsOf(t, lines["Patient"]); !slices.Equal(got, sortedIDs(want...)) {
		t.Fatalf("after resuming: ids %v, want each of %v once", got, sortedIDs(want...))
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".part") {
			t.Fatalf("half-written file %s left behind", e.Name())
		}
	}

	x.m.Close()
	if err := x.store.ExportJob(context.Background(), x.tenant, id, &job); err != nil {
		t.Fatal(err)
	}
	crash(bulkexport.DefaultMaxAttempts)
	x.start(t, cfg)
	wantOutcome(t, x.get(status), http.StatusInternalServerError, "")
	if r := x.get(status); !strings.Contains(string(r.Body), "interrupted") {
		t.Fatalf("failure does not say why: %s", r.Body)
	}
}

// runningJob stores a job that another live process runs: fresh
// heartbeat, not expired.
func runningJob(t *testing.T, x *exportEnv, id string) {
	t.Helper()
	now := time.Now().UTC()
	job := bulkexport.Job{ID: id, State: bulkexport.StateRunning, Level: bulkexport.LevelSystem, Types: []string{"Patient"},
		TransactionTime: now, CreatedAt: now, Heartbeat: now, ExpiresAt: now.Add(time.Hour), Owner: "another-process", Attempts: 1}
	if err := x.store.PutExportJob(context.Background(), x.tenant, id, &job); err != nil {
		t.Fatal(err)
	}
}

// TestExportLimitsAndPolling: a tenant running its maximum of jobs gets 429
// on kick-off; a running job answers polls with 202, X-Progress and
// Retry-After, and 429 to a client polling faster than that.
func TestExportLimitsAndPolling(t *testing.T) {
	x := newExportEnv(t, func(c *bulkexport.Config) { c.MaxJobs = 1 })
	runningJob(t, x, "busy")
	r := x.do(request{Method: http.MethodGet, Path: "/$export", Header: async})
	wantOutcome(t, r, http.StatusTooManyRequests, "")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After")
	}
	p := x.get("/$export-status/busy")
	if p.Status != http.StatusAccepted || p.Header.Get("X-Progress") == "" || p.Header.Get("Retry-After") == "" {
		t.Fatalf("poll of a running job: %d X-Progress %q Retry-After %q", p.Status, p.Header.Get("X-Progress"), p.Header.Get("Retry-After"))
	}
	fast := x.get("/$export-status/busy")
	wantOutcome(t, fast, http.StatusTooManyRequests, "")
	if fast.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After")
	}
	time.Sleep(x.m.RetryAfter())
	if p := x.get("/$export-status/busy"); p.Status != http.StatusAccepted {
		t.Fatalf("poll after Retry-After: %d", p.Status)
	}
	if err := x.store.DeleteExportJob(context.Background(), x.tenant, "busy"); err != nil {
		t.Fatal(err)
	}
	x.kickoff("/$export?_type=Patient") // the slot is free again
}

// TestExportAuthorization: kick-off, status and files follow the token
// rules of the API: no token 401, another tenant's token 403, scopes
// limit the exported types and the files a token may download.
func TestExportAuthorization(t *testing.T) {
	x := newExportEnv(t)
	x.create("Patient", patientJSON("Auth"))
	x.create("Observation", observationJSON(x.create("Patient", patientJSON("Auth2")), "1"))
	m, _ := x.export("/$export?_type=Patient,Observation")
	status := x.kickoff("/$export?_type=Patient,Observation")
	x.complete(status)
	var patientFile, obsFile string
	for _, o := range m.Output {
		switch o.Type {
		case "Patient":
			patientFile = x.relative(o.URL)
		case "Observation":
			obsFile = x.relative(o.URL)
		}
	}
	scoped := func(scope string) *string {
		tok, err := auth.SignHS256(testKey, auth.TokenRequest{Tenant: x.tenant, Scope: scope, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return &tok
	}
	none, other := "", signToken(t, "someoneelse", time.Hour)
	patientsOnly := scoped("system/Patient.read")
	cases := []struct {
		name, method, path string
		token              *string
		status             int
	}{
		{"kick-off without a token", "GET", "/$export", &none, 401},
		{"kick-off with another tenant's token", "GET", "/$export", &other, 403},
		{"kick-off of a type the token cannot read", "GET", "/$export?_type=Observation", patientsOnly, 403},
		{"kick-off with no read scope at all", "GET", "/$export", scoped("system/Patient.write"), 403},
		{"kick-off with a patient scope", "GET", "/$export", scoped("patient/*.read"), 403},
		{"status without a token", "GET", status, &none, 401},
		{"status with another tenant's token", "GET", status, &other, 403},
		{"status with no read scope", "GET", status, scoped("system/Patient.write"), 403},
		{"cancel with another tenant's token", "DELETE", status, &other, 403},
		{"file without a token", "GET", patientFile, &none, 401},
		{"file with another tenant's token", "GET", patientFile, &other, 403},
		{"file of a type the token cannot read", "GET", obsFile, patientsOnly, 403},
		{"file of a type the token can read", "GET", patientFile, patientsOnly, 200},
		{"file that the job does not list", "GET", strings.Replace(patientFile, "Patient-1", "Patient-9", 1), nil, 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := x.do(request{Method: c.method, Path: c.path, Token: c.token, Header: async})
			if c.status == 200 {
				if r.Status != 200 {
					t.Fatalf("status %d, want 200: %s", r.Status, r.Body)
				}
				return
			}
			wantOutcome(t, r, c.status, "")
		})
	}
	t.Run("a Patient-only token exports Patients only", func(t *testing.T) {
		r := x.do(request{Method: http.MethodGet, Path: "/$export", Token: patientsOnly, Header: async})
		if r.Status != http.StatusAccepted {
			t.Fatalf("kick-off: %d %s", r.Status, r.Body)
		}
		m := x.complete(x.relative(r.Header.Get("Content-Location")))
		for _, o := range m.Output {
			if o.Type != "Patient" {
				t.Fatalf("a system/Patient.read token exported %s", o.Type)
			}
		}
		if len(m.Output) == 0 {
			t.Fatalf("nothing exported")
		}
	})
	t.Run("types asked for but not granted are reported", func(t *testing.T) {
		r := x.do(request{Method: http.MethodGet, Path: "/$export?_type=Patient,Observation", Token: patientsOnly, Header: async})
		if r.Status != http.StatusAccepted {
			t.Fatalf("kick-off: %d %s", r.Status, r.Body)
		}
		m := x.complete(x.relative(r.Header.Get("Content-Location")))
		if len(m.Error) != 1 {
			t.Fatalf("no error file for the type left out: %+v", m)
		}
		er := x.do(request{Method: http.MethodGet, Path: x.relative(m.Error[0].URL), Token: patientsOnly})
		if !strings.Contains(string(er.Body), "Observation") {
			t.Fatalf("error file: %d %s", er.Status, er.Body)
		}
	})
}

// TestCapabilityStatementListsExport: the statement lists $export at the
// system, Patient and Group levels.
func TestCapabilityStatementListsExport(t *testing.T) {
	x := newExportEnv(t)
	r := x.get("/metadata")
	var cs struct {
		Instantiates []string `json:"instantiates"`
		Rest         []struct {
			Operation []struct{ Name, Definition string } `json:"operation"`
			Resource  []struct {
				Type      string                              `json:"type"`
				Operation []struct{ Name, Definition string } `json:"operation"`
			} `json:"resource"`
		} `json:"rest"`
	}
	if err := json.Unmarshal(r.Body, &cs); err != nil {
		t.Fatal(err)
	}
	has := func(ops []struct{ Name, Definition string }, def string) bool {
		for _, o := range ops {
			if o.Name == "export" && strings.HasSuffix(o.Definition, "/OperationDefinition/"+def) {
				return true
			}
		}
		return false
	}
	if !has(cs.Rest[0].Operation, "export") || len(cs.Instantiates) == 0 {
		t.Fatalf("no system-level export in the CapabilityStatement")
	}
	for _, res := range cs.Rest[0].Resource {
		want := map[string]string{"Patient": "patient-export", "Group": "group-export"}[res.Type]
		if want != "" && !has(res.Operation, want) {
			t.Fatalf("%s lacks the %s operation", res.Type, want)
		}
		if want == "" && has(res.Operation, "export") {
			t.Fatalf("%s lists an export it does not have", res.Type)
		}
	}
}

// TestExportWritesTypesInParallelAndResumesInOrder: with several workers
// and a file per resource, every type's resources are exported once and
// the manifest lists the files in the order of _type. A crash while the
// second type is half done and a later type's worker ran ahead leaves
// that type's files unrecorded; the next process deletes them and writes
// every type from where the recorded cursor says, each resource once.
func TestExportWritesTypesInParallelAndResumesInOrder(t *testing.T) {
	x := newExportEnv(t, func(c *bulkexport.Config) { c.MaxFileBytes, c.Workers = 1, 3 })
	want := map[string][]string{}
	for i := range 4 {
		p := x.create("Patient", patientJSON(fmt.Sprintf("Parallel%d", i)))
		want["Patient"] = append(want["Patient"], p)
		want["Observation"] = append(want["Observation"], x.create("Observation", observationJSON(p, "8867-4")))
		want["Practitioner"] = append(want["Practitioner"], x.create("Practitioner", `{"resourceType":"Practitioner","active":true}`))
	}
	types := []string{"Practitioner", "Patient", "Observation"}
	check := func(m *manifest) {
		t.Helper()
		lines := x.lines(m)
		for _, typ := range types {
			if got := idsOf(t, lines[typ]); !slices.Equal(got, sortedIDs(want[typ]...)) {
				t.Fatalf("%s: ids %v, want each of %v once", typ, got, sortedIDs(want[typ]...))
			}
		}
		var order []string
		for _, o := range m.Output {
			if len(order) == 0 || order[len(order)-1] != o.Type {
				order = append(order, o.Type)
			}
		}
		if !slices.Equal(order, types) {
			t.Fatalf("manifest lists the types' files as %v, want them in _type order %v", order, types)
		}
	}
	status := x.kickoff("/$export?_type=" + strings.Join(types, ","))
	check(x.complete(status))

	id := status[strings.LastIndex(status, "/")+1:]
	var job bulkexport.Job
	if err := x.store.ExportJob(context.Background(), x.tenant, id, &job); err != nil {
		t.Fatal(err)
	}
	x.m.Close()
	// Practitioner done, Patient recorded up to its first resource;
	// Observation's worker had closed files not yet recorded.
	firstPatient := slices.Sorted(slices.Values(want["Patient"]))[0]
	job.State, job.Attempts, job.Output, job.Exported = bulkexport.StateRunning, 1, job.Output[:5], 5
	job.Cursor = bulkexport.Cursor{Type: 1, After: firstPatient, Part: 2}
	job.Heartbeat = time.Now().Add(-time.Hour)
	if err := x.store.PutExportJob(context.Background(), x.tenant, id, &job); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(x.dir, x.tenant, id)
	for _, name := range []string{"Observation-1.ndjson.part", "Observation-2.ndjson.part", "Patient-2.ndjson.part"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{\"resourceType\":\"Observation\"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	x.start(t, bulkexport.Config{Dir: x.dir, Registry: db.Registry(), MaxFileBytes: 1, Workers: 3, Exclusive: true})
	check(x.complete(status))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".part") {
			t.Fatalf("half-written file %s left behind", e.Name())
		}
	}
}
