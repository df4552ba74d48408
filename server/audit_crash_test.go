package server_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
	"fhirstore/store/storetest"
)

// The audit crash test runs this test binary as a child serving writes
// until it is killed; this variable tells the child where its data is.
const auditCrashDirEnv = "FHIRSTORE_AUDIT_CRASH_DIR"

const auditCrashTenant = "auditcrash"

// startAuditCrashServer serves the crash test's tenant from the data in
// dir, with the trail's log there too.
func startAuditCrashServer(t *testing.T, ctx context.Context, dir string) (*store.Store, *server.Server, *httptest.Server) {
	d, err := storetest.StartAt(ctx, filepath.Join(dir, "db"), "auditcrash_")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	opts := d.Options()
	opts.Exclusive = true
	st, err := d.OpenStore(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureTenant(ctx, auditCrashTenant); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{BaseDomain: "localhost", DefaultTenant: auditCrashTenant, MaxBodyBytes: server.DefaultMaxBodyBytes, Registry: d.Registry(),
		Audit: true, AuditSpoolDir: filepath.Join(dir, "log")}
	h := server.New(cfg, st, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	return st, h, httptest.NewServer(h)
}

// TestAuditCrashChild is the child of TestAuditSurvivesSIGKILL: it creates
// Patients through HTTP from four clients and prints the id of each one
// whose creation was acknowledged, until it is killed.
func TestAuditCrashChild(t *testing.T) {
	dir := os.Getenv(auditCrashDirEnv)
	if dir == "" {
		t.Skip("the child of TestAuditSurvivesSIGKILL")
	}
	_, _, srv := startAuditCrashServer(t, context.Background(), dir)
	e := &env{t: t, srv: srv, tenant: auditCrashTenant, token: signToken(t, auditCrashTenant, time.Hour)}
	acks := make(chan string, 64)
	for range 4 {
		go func() {
			for {
				r, err := faultSend(e, request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","name":[{"family":"Crash"}]}`})
				if err == nil && r.Status == http.StatusCreated {
					acks <- r.JSON(t)["id"].(string)
				}
			}
		}()
	}
	fmt.Println("ready")
	for id := range acks {
		fmt.Println("ack", id)
	}
}

// TestAuditSurvivesSIGKILL kills a server that is creating resources at a
// random moment; after a restart, every creation it acknowledged is stored
// and has its audit record.
func TestAuditSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a process; skipped with -short")
	}
	dir := t.TempDir()
	acked := runAuditCrashChild(t, dir, time.Duration(300+rand.IntN(700))*time.Millisecond)
	if len(acked) == 0 {
		t.Fatal("the child acknowledged no creation before it was killed")
	}
	ctx := context.Background()
	st, h, srv := startAuditCrashServer(t, ctx, dir)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { closeServer(t, h); _ = st.Close(ctx) })
	e := &env{t: t, srv: srv, store: st, tenant: auditCrashTenant, token: signToken(t, auditCrashTenant, time.Hour), h: h}
	for _, id := range acked {
		if r := e.get("/Patient/" + id); r.Status != http.StatusOK {
			t.Fatalf("acknowledged Patient/%s after the crash: %d %s", id, r.Status, r.Body)
		}
		if n := waitForAuditEvents(t, e, "entity=Patient/"+id+"&subtype=create&outcome=0", 1); n != 1 {
			t.Fatalf("%d audit records of the acknowledged creation of Patient/%s, want 1", n, id)
		}
	}
	t.Logf("%d acknowledged creations, each stored with its audit record", len(acked))
}

// runAuditCrashChild runs the child in dir for delay after it is ready,
// kills it with SIGKILL and returns the ids it acknowledged.
func runAuditCrashChild(t *testing.T, dir string, delay time.Duration) []string {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^TestAuditCrashChild$", "-test.count=1")
	child.Env = append(os.Environ(), auditCrashDirEnv+"="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
	}()
	var acked []string
	ready := false
	timeout := time.After(2 * time.Minute)
	for !ready {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = child.Wait()
				t.Fatal("the crash child exited before it was ready")
			}
			ready = l == "ready"
		case <-timeout:
			_ = child.Process.Kill()
			t.Fatal("the crash child did not get ready")
		}
	}
	time.Sleep(delay)
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	for l := range lines {
		if id, ok := strings.CutPrefix(l, "ack "); ok {
			acked = append(acked, id)
		}
	}
	return acked
}
