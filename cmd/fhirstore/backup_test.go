package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"fhirstore/store/backup"
)

// ackedWrite is a version the server acknowledged, and when.
type ackedWrite struct {
	id      string
	version int
	at      time.Time
}

// writePatients creates Patients and updates each once, through the
// server, until stop is closed; it returns every acknowledged version.
func writePatients(s *testServer, host, tok string, stop <-chan struct{}) ([]ackedWrite, error) {
	var acked []ackedWrite
	send := func(method, path, body string) (map[string]any, error) {
		req, err := http.NewRequest(method, s.url(path), strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/fhir+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode >= 300 {
			return nil, fmt.Errorf("%s %s: %d %v", method, path, resp.StatusCode, err)
		}
		return out, nil
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return acked, nil
		default:
		}
		out, err := send(http.MethodPost, "/fhir/r4/Patient", fmt.Sprintf(`{"resourceType":"Patient","name":[{"family":"W%d"}]}`, i))
		if err != nil {
			return acked, err
		}
		id, _ := out["id"].(string)
		acked = append(acked, ackedWrite{id, 1, time.Now()})
		if _, err := send(http.MethodPut, "/fhir/r4/Patient/"+id, fmt.Sprintf(`{"resourceType":"Patient","id":%q,"name":[{"family":"W%d-2"}]}`, id, i)); err != nil {
			return acked, err
		}
		acked = append(acked, ackedWrite{id, 2, time.Now()})
	}
}

// TestBackupWhileWritingRestoresEveryAcknowledgedVersion: a backup taken
// while a client keeps creating and updating resources on a server
// process holds every version acknowledged before it started; restored
// into a new data dir, the store opens it with those resources and
// versions; the backup, the live and the restored data dirs check clean;
// and the dev tokens of the original data dir work on a server of the
// restored one.
func TestBackupWhileWritingRestoresEveryAcknowledgedVersion(t *testing.T) {
	dir := t.TempDir()
	s, _ := startServerProcess(t, "--addr", "127.0.0.1:0", "--data-dir", dir) // the server is another process, as in production
	tok := tokenFor(t, dir, "demo")
	host := "demo.localhost:" + s.port
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		acked    []ackedWrite
		writeErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		acked, writeErr = writePatients(s, host, tok, stop)
	}()
	time.Sleep(500 * time.Millisecond) // some versions first
	started := time.Now()
	out := filepath.Join(t.TempDir(), "backup")
	stdout, _, err := runCmd(t, "backup", "--data-dir", dir, "--out", out)
	// A data dir being written checks clean too: each file at one instant.
	liveOut, _, liveErr := runCmd(t, "check", "--full", "--data-dir", dir)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if writeErr != nil {
		t.Fatalf("writes during the backup: %v", writeErr)
	}
	if liveErr != nil || !strings.HasPrefix(liveOut, "ok: data dir ") {
		t.Fatalf("check of the data dir while it is written: %v\n%s", liveErr, liveOut)
	}
	if !strings.Contains(stdout, "backed up "+dir+" into "+out) {
		t.Fatalf("backup printed %q", stdout)
	}
	m, err := backup.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]backup.File{}
	for _, f := range m.Files {
		names[f.Name] = f
	}
	for _, want := range []string{"sqlite/fhirstore_system.db", "sqlite/fhirstore_demo.db", "dev-signing.key"} {
		if f, ok := names[want]; !ok || len(f.SHA256) != 64 || f.Size == 0 {
			t.Fatalf("the manifest has no %s with its size and SHA-256: %+v", want, m.Files)
		}
	}
	if strings.Join(m.Tenants, ",") != "demo" || names["sqlite/fhirstore_demo.db"].Documents["Patient"] == 0 {
		t.Fatalf("manifest tenants %q, demo's documents %v", m.Tenants, names["sqlite/fhirstore_demo.db"].Documents)
	}
	if _, _, err := runCmd(t, "backup", "--data-dir", dir, "--out", out); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("a second backup into %s: %v, want refused", out, err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	if stdout, _, err := runCmd(t, "check", "--full", "--data-dir", out); err != nil || !strings.HasPrefix(stdout, "ok: backup ") {
		t.Fatalf("check of the backup: %v\n%s", err, stdout)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if _, _, err := runCmd(t, "restore", "--from", out, "--data-dir", restored); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if stdout, _, err := runCmd(t, "check", "--full", "--data-dir", restored); err != nil || !strings.HasPrefix(stdout, "ok: data dir ") {
		t.Fatalf("check of the restored data dir: %v\n%s", err, stdout)
	}
	if _, _, err := runCmd(t, "restore", "--from", out, "--data-dir", restored); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a restore into a non-empty dir: %v, want refused", err)
	}

	ctx := context.Background()
	st := openDataDirStore(t, restored, nil)
	newest := map[string]int{}
	before := 0
	for _, w := range acked {
		if w.at.Before(started) {
			newest[w.id] = max(newest[w.id], w.version)
			before++
		}
	}
	if before == 0 {
		t.Fatal("no write was acknowledged before the backup started")
	}
	for id, v := range newest {
		res, err := st.Read(ctx, "demo", "Patient", id)
		if err != nil {
			t.Fatalf("restored Patient/%s: %v", id, err)
		}
		if res.VersionID < v {
			t.Fatalf("restored Patient/%s is at version %d; version %d was acknowledged before the backup", id, res.VersionID, v)
		}
		for n := 1; n <= res.VersionID; n++ {
			if _, err := st.VRead(ctx, "demo", "Patient", id, strconv.Itoa(n)); err != nil {
				t.Fatalf("restored Patient/%s version %d: %v", id, n, err)
			}
		}
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d versions of %d resources acknowledged before the backup, %d in all", before, len(newest), len(acked))

	// A server of the restored dir accepts the original dir's tokens.
	s = startServer(t, "--addr", "127.0.0.1:0", "--data-dir", restored)
	for id := range newest {
		if got := readFamily(t, s, "demo.localhost:"+s.port, tok, id); !strings.HasPrefix(got, "W") {
			t.Fatalf("restored Patient/%s: family %q", id, got)
		}
		break
	}
}

// smallBackup is a backup of a data dir holding a few Patients, each
// updated once, and the ids of those Patients.
func smallBackup(t *testing.T) (out string, ids []string) {
	t.Helper()
	dir := t.TempDir()
	s := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	tok := tokenFor(t, dir, "demo")
	host := "demo.localhost:" + s.port
	for i := range 5 {
		id := createPatient(t, s, host, tok, fmt.Sprintf("Small%d", i))
		r := call(t, http.MethodPut, s.url("/fhir/r4/Patient/"+id), host, tok, `{"resourceType":"Patient","id":"`+id+`","name":[{"family":"Updated"}]}`)
		if r.status != http.StatusOK {
			t.Fatalf("update: %d %s", r.status, r.body)
		}
		ids = append(ids, id)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(t.TempDir(), "backup")
	mustRun(t, "backup", "--data-dir", dir, "--out", out)
	return out, ids
}

// TestRestoreRefusesADamagedBackupAndCheckReportsIt: a backup file whose
// bytes changed is refused by restore, naming the file, and nothing is
// left in the target; check lists it and exits 1.
func TestRestoreRefusesADamagedBackupAndCheckReportsIt(t *testing.T) {
	out, _ := smallBackup(t)
	path := filepath.Join(out, "sqlite", "fhirstore_demo.db")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	_, _, err = runCmd(t, "restore", "--from", out, "--data-dir", target)
	if err == nil || !strings.Contains(err.Error(), "backup is damaged") || !strings.Contains(err.Error(), "sqlite/fhirstore_demo.db") {
		t.Fatalf("restore of a damaged backup: %v, want refused naming sqlite/fhirstore_demo.db", err)
	}
	if _, err := os.Stat(target); err == nil {
		if entries, _ := os.ReadDir(target); len(entries) > 0 {
			t.Fatalf("a refused restore left %d entries in %s", len(entries), target)
		}
	}
	stdout, _, err := runCmd(t, "check", "--data-dir", out)
	if exitCode(err) != checkFoundProblems || !strings.Contains(stdout, "sqlite/fhirstore_demo.db: tenant demo: ") {
		t.Fatalf("check of a damaged backup: exit %d (%v), stdout:\n%s", exitCode(err), err, stdout)
	}
}

// TestCheckNamesTheTenantTableResourceAndVersion: a history row damaged
// in a stopped data dir is reported by check, with and without --full,
// as tenant, table, resource and version; a clean dir exits 0 and a dir
// that is no data dir exits 2.
func TestCheckNamesTheTenantTableResourceAndVersion(t *testing.T) {
	out, ids := smallBackup(t)
	dir := filepath.Join(t.TempDir(), "data")
	mustRun(t, "restore", "--from", out, "--data-dir", dir)
	if stdout, _, err := runCmd(t, "check", "--data-dir", dir); err != nil || !strings.HasPrefix(stdout, "ok: ") {
		t.Fatalf("check of a clean data dir: %v\n%s", err, stdout)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "sqlite", "fhirstore_demo.db"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE "d_history" SET doc = substr(doc, 1, length(doc) - 3) || x'000000' WHERE id = ?`, "Patient/"+ids[2]+"/1")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("damaged %d rows, want 1", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want := "sqlite/fhirstore_demo.db: tenant demo: table history: Patient/" + ids[2] + " version 1: "
	for _, args := range [][]string{{"check", "--data-dir", dir}, {"check", "--full", "--data-dir", dir}} {
		stdout, _, err := runCmd(t, args...)
		if exitCode(err) != checkFoundProblems || !strings.HasPrefix(stdout, want) || strings.Count(stdout, "\n") != 1 {
			t.Fatalf("%q: exit %d (%v), stdout:\n%s\nwant one line starting %q", args, exitCode(err), err, stdout, want)
		}
		checkOneLine(t, args, err.Error())
	}
	_, _, err = runCmd(t, "check", "--data-dir", filepath.Join(dir, "nowhere"))
	if exitCode(err) != checkFailed {
		t.Fatalf("check of a missing dir: exit %d (%v), want %d", exitCode(err), err, checkFailed)
	}
	var help bytes.Buffer
	if err := run(context.Background(), []string{"check", "-h"}, &help, &help); err == nil || !strings.Contains(help.String(), "examples:") {
		t.Fatalf("check -h: %v\n%s", err, help.String())
	}
}

// TestServeMakesScheduledBackups: with --backup-dir the server backs up its
// data dir at start (no backup there yet), the backup checks clean and
// holds the data, /metrics tells when it was made, and the server goes on
// serving; --backup-dir with MongoDB is refused at start.
func TestServeMakesScheduledBackups(t *testing.T) {
	dir, backups := t.TempDir(), t.TempDir()
	first := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	tok := tokenFor(t, dir, "demo")
	id := createPatient(t, first, "demo.localhost:"+first.port, tok, "Scheduled")
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir, "--backup-dir", backups, "--backup-every", "1h", "--backup-keep", "2")
	host := "demo.localhost:" + s.port
	var made string
	for deadline := time.Now().Add(20 * time.Second); made == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		entries, _ := os.ReadDir(backups)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue // a backup being written
			}
			if _, err := os.Stat(filepath.Join(backups, e.Name(), backup.ManifestFile)); err == nil {
				made = filepath.Join(backups, e.Name())
			}
		}
	}
	if made == "" || !strings.HasPrefix(filepath.Base(made), "fhirstore-") {
		t.Fatalf("no scheduled backup in %s within 20s (got %q)\n%s", backups, made, s.stderr)
	}
	r := call(t, http.MethodGet, s.url("/metrics"), host, "", "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "fhirstore_backups_total{result=\"ok\"} 1") || strings.Contains(string(r.body), "fhirstore_backup_last_success_timestamp_seconds 0\n") {
		t.Fatalf("metrics after a scheduled backup: %d\n%s", r.status, r.body)
	}
	if !strings.Contains(s.stderr.String(), `"backup made"`) {
		t.Fatalf("no log line for the scheduled backup:\n%s", s.stderr)
	}
	if got := readFamily(t, s, host, tok, id); got != "Scheduled" {
		t.Fatalf("the server after a backup: family %q", got)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "check", "--full", "--data-dir", made)
	restored := filepath.Join(t.TempDir(), "restored")
	mustRun(t, "restore", "--from", made, "--data-dir", restored)
	s2 := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", restored)
	if got := readFamily(t, s2, "demo.localhost:"+s2.port, tokenFor(t, restored, "demo"), id); got != "Scheduled" {
		t.Fatalf("the restored scheduled backup: family %q", got)
	}
	wantFail(t, "scheduled backups are of the embedded database", "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--mongodb-uri", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100", "--backup-dir", backups)
}

// TestCheckAMongoDBDeployment: check --mongodb-uri reads every tenant
// through the engine and exits 0 on a clean deployment (FerretDB here,
// speaking MongoDB's protocol).
func TestCheckAMongoDBDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts FerretDB")
	}
	uri := startFerretDB(t, t.TempDir())
	dir := t.TempDir()
	s := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir, "--mongodb-uri", uri)
	tok := tokenFor(t, dir, "demo")
	for i := range 3 {
		createPatient(t, s, "demo.localhost:"+s.port, tok, fmt.Sprintf("Mongo%d", i))
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "check", "--full", "--mongodb-uri", uri)
	if !strings.HasPrefix(out, "ok: MongoDB at ") || !strings.Contains(out, "every document") {
		t.Fatalf("check of a clean deployment: %q", out)
	}
}

// mainProcess is `fhirstore args...` as a process of its own (the test
// binary running main), run through bash so that shell limits apply.
func mainProcess(t *testing.T, shell string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := mainCommand(t, args...)
	cmd.Args = []string{"bash", "-c", shell + `; exec "$0"`, cmd.Path}
	cmd.Path = "/bin/bash"
	return cmd
}

// bigDataDir is a stopped data dir whose tenant database holds size bytes
// besides its resources, so that a backup of it takes a while.
func bigDataDir(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	s := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	createPatient(t, s, "demo.localhost:"+s.port, tokenFor(t, dir, "demo"), "Big")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "sqlite", "fhirstore_demo.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE filler (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	for range size >> 20 {
		if _, err := db.Exec(`INSERT INTO filler VALUES (randomblob(1048576))`); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBackupKilledLeavesNoBackup: a backup process killed with SIGKILL in
// the middle leaves no directory at --out (only a hidden .partial one
// beside it), which check and restore refuse; the next backup succeeds.
func TestBackupKilledLeavesNoBackup(t *testing.T) {
	dir := bigDataDir(t, 48<<20)
	parent := t.TempDir()
	out := filepath.Join(parent, "backup")
	cmd := mainProcess(t, "true", "backup", "--data-dir", dir, "--out", out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	partial := ""
	for deadline := time.Now().Add(30 * time.Second); partial == "" && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".backup.partial-") {
				partial = e.Name()
			}
		}
	}
	time.Sleep(20 * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if partial == "" {
		t.Fatal("the backup wrote no .partial directory before it was killed")
	}
	if _, err := os.Stat(out); err == nil {
		t.Skip("the backup finished before it was killed; nothing to check")
	}
	if _, _, err := runCmd(t, "check", "--data-dir", out); exitCode(err) != checkFailed {
		t.Fatalf("check of the killed backup's --out: %v, want exit 2 (nothing there)", err)
	}
	if _, _, err := runCmd(t, "restore", "--from", filepath.Join(parent, partial), "--data-dir", filepath.Join(t.TempDir(), "r")); err == nil {
		t.Fatal("restore of the killed backup's .partial directory succeeded")
	}
	mustRun(t, "backup", "--data-dir", dir, "--out", out)
}

// TestBackupOnAFullDiskFailsCleanly: a backup that cannot write its files
// (a file size limit stands for a full disk) exits non-zero with the
// cause, and leaves nothing behind.
func TestBackupOnAFullDiskFailsCleanly(t *testing.T) {
	dir := bigDataDir(t, 2<<20)
	parent := t.TempDir()
	out := filepath.Join(parent, "backup")
	cmd := mainProcess(t, "ulimit -f 512", "backup", "--data-dir", dir, "--out", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		t.Fatal("a backup larger than the disk allows succeeded")
	}
	if !strings.Contains(stderr.String(), "fhirstore_demo") || !strings.Contains(stderr.String(), "no backup was written") {
		t.Fatalf("the failed backup said %q; want the database and that no backup was written", stderr.String())
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("the failed backup left %v", entries)
	}
}

// TestARestoredBackupHasTheAuditRecordsOfItsRequests: the audit records
// of the requests answered before a backup of a served data dir, stored
// as rows or still in the trail's log, are AuditEvents of the restored
// data dir.
func TestARestoredBackupHasTheAuditRecordsOfItsRequests(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	tok := tokenFor(t, dir, "demo")
	host := "demo.localhost:" + s.port
	var ids []string
	for i := range 5 {
		ids = append(ids, createPatient(t, s, host, tok, fmt.Sprintf("Audited%d", i)))
	}
	out := filepath.Join(t.TempDir(), "backup")
	mustRun(t, "backup", "--data-dir", dir, "--out", out)
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	mustRun(t, "restore", "--from", out, "--data-dir", restored)
	s2 := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", restored)
	tok2 := tokenFor(t, restored, "demo")
	for _, id := range ids {
		var n float64
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			r := call(t, http.MethodGet, s2.url("/fhir/r4/AuditEvent?entity=Patient/"+id+"&subtype=create&_summary=count"), "demo.localhost:"+s2.port, tok2, "")
			if n, _ = r.json(t)["total"].(float64); n == 1 {
				break
			}
		}
		if n != 1 {
			t.Fatalf("the create of Patient/%s has %v audit records in the restored data dir, want 1", id, n)
		}
	}
}
