package main

// Tests of who may use a data dir at the same time: a server (or a direct
// load) holds the data dir's lock while it runs, across processes, and
// the kernel gives it up however the process ends; one-shot commands work
// next to it without taking it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fhirstore/store/ferretdb"
)

// asMainEnv makes the test binary run main with the JSON array of
// arguments it holds, as the fhirstore binary would, instead of the tests.
const asMainEnv = "CMD_FHIRSTORE_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if raw, ok := os.LookupEnv(asMainEnv); ok {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", asMainEnv, err)
			os.Exit(2)
		}
		os.Args = append([]string{"fhirstore"}, args...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startServerProcess runs `fhirstore args...` in a process of its own (the
// test binary running main) and waits until it listens. stop sends it
// SIGTERM; it is stopped when the test ends.
func startServerProcess(t *testing.T, args ...string) (*testServer, *os.Process) {
	t.Helper()
	cmd := mainCommand(t, args...)
	s := &testServer{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", args, err)
	}
	s.cancel = func() { _ = cmd.Process.Signal(syscall.SIGTERM) }
	go func() { s.done <- cmd.Wait() }()
	s.await(t, args)
	return s, cmd.Process
}

// mainCommand is `fhirstore args...` as a process of its own: the test
// binary running main.
func mainCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(withoutFHIRStoreEnv(), asMainEnv+"="+string(raw))
	return cmd
}

// kill ends a server process with SIGKILL: no shutdown code runs.
func (s *testServer) kill(t *testing.T, p *os.Process) {
	t.Helper()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Fatal("the server process did not end within 10s of SIGKILL")
		}
	})
}

// dataDirLocked reports whether a process (a server or a direct load)
// holds dir's lock, by trying to take it as a second server would.
func dataDirLocked(t *testing.T, dir string) bool {
	t.Helper()
	lock, err := lockDataDir(dir)
	if errors.Is(err, errLocked) {
		return true
	}
	if err != nil {
		t.Fatalf("try the lock of %s: %v", dir, err)
	}
	lock.unlock()
	return false
}

// wantAbsent fails unless none of names is in dir.
func wantAbsent(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s is in %s (%v), want it absent", name, dir, err)
		}
	}
}

// wantPresent fails unless every one of names is in dir.
func wantPresent(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s is not in %s: %v", name, dir, err)
		}
	}
}

// startFerretDB runs FerretDB on files in dir, as a MongoDB-compatible
// server, until the test ends; it returns the MongoDB URI.
func startFerretDB(t *testing.T, dir string) string {
	t.Helper()
	srv, err := ferretdb.Start(context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("start FerretDB on %s: %v", dir, err)
	}
	t.Cleanup(func() { stopFerret(srv) })
	return srv.URI()
}

// TestServerKilledWithSIGKILLLeavesTheDataDirUsable: a server in another
// process keeps a second server and direct loads off its data dir while
// one-shot commands work next to it; killed with SIGKILL, it runs no
// shutdown code, yet the next server starts at once with all its data.
func TestServerKilledWithSIGKILLLeavesTheDataDirUsable(t *testing.T) {
	dir := t.TempDir()
	first, proc := startServerProcess(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	if !dataDirLocked(t, dir) {
		t.Fatal("the data dir of a running server (another process) is not locked")
	}
	wantFail(t, "is in use by a running fhirstore", "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)

	// One-shot commands of this process write into the files the other
	// process serves, and it sees their changes at once.
	mustRun(t, "tenant", "create", "acme", "--data-dir", dir)
	host, tok := "acme.localhost:"+first.port, tokenFor(t, dir, "acme")
	id := createPatient(t, first, host, tok, "Killed")
	clientID, secret := createClient(t, "--tenant", "acme", "--scope", "system/*.read", "--data-dir", dir)
	if status, _ := requestToken(t, first, "acme", clientID, secret, "system/*.read"); status != http.StatusOK {
		t.Fatalf("token of a client created by another process: %d", status)
	}
	if got := tenantList(t, dir); strings.Join(got, ",") != "acme,demo" {
		t.Fatalf("tenant list next to a server process: %q, want acme, demo", got)
	}

	first.kill(t, proc)
	wantPresent(t, dir, "server.lock") // left behind, but no longer held
	if dataDirLocked(t, dir) {
		t.Fatal("the data dir is still locked after its server was killed")
	}
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	if got := readFamily(t, s, "acme.localhost:"+s.port, tok, id); got != "Killed" {
		t.Fatalf("Patient written before the kill: family %q", got)
	}
	if status, _ := requestToken(t, s, "acme", clientID, secret, "system/*.read"); status != http.StatusOK {
		t.Fatalf("token of a client created before the kill: %d", status)
	}
}
