package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"fhirstore/store"
	"fhirstore/store/storetest"
)

// The crash test runs this test binary as a child that commits
// transactions until it is killed; these variables tell the child where.
const (
	crashDirEnv    = "FHIRSTORE_CRASH_CHILD_DIR"
	crashRunEnv    = "FHIRSTORE_CRASH_RUN"
	crashTenantEnv = "FHIRSTORE_CRASH_TENANT"
	// CrashTrialsEnv sets how many times TestCrashRecoveryAfterSIGKILL kills
	// the child (default 4; the full run is 200).
	crashTrialsEnv = "FHIRSTORE_CRASH_TRIALS"
)

// TestCrashChild is the child process of TestCrashRecoveryAfterSIGKILL: it
// commits transactions in a loop until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child of TestCrashRecoveryAfterSIGKILL")
	}
	ctx := context.Background()
	d, err := storetest.StartAt(ctx, dir, os.Getenv(crashRunEnv))
	if err != nil {
		t.Fatal(err)
	}
	st, err := d.OpenStore(ctx, d.Options())
	if err != nil {
		t.Fatal(err)
	}
	tenant := os.Getenv(crashTenantEnv)
	if err := st.EnsureTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	seedLedger(t, st, tenant)
	fmt.Println("ready")
	for i := 0; ; i++ {
		if _, err := st.Transaction(ctx, tenant, crashOps(fmt.Sprintf("%s-%d", tenant, i))); err != nil {
			fmt.Fprintln(os.Stderr, "transaction:", err)
		}
	}
}

// TestCrashRecoveryAfterSIGKILL kills a process that is committing
// transactions at random moments; after recovery every transaction must be
// wholly applied or wholly absent.
func TestCrashRecoveryAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts processes; skipped with -short")
	}
	trials := 4
	if v := os.Getenv(crashTrialsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q is not a positive number", crashTrialsEnv, v)
		}
		trials = n
	}
	dir, run := t.TempDir(), fmt.Sprintf("crash%d_", time.Now().UnixNano()%1_000_000_000)
	var committed, forward, back int
	for i := range trials {
		tenant := fmt.Sprintf("k%d", i)
		killChild(t, dir, run, tenant, time.Duration(rand.IntN(800))*time.Millisecond)
		r, tags := recoverAndCheck(t, dir, run, tenant)
		committed += len(tags)
		forward += r.RolledForward
		back += r.RolledBack
	}
	t.Logf("%d kills: %d transactions committed; recovery rolled %d forward and %d back", trials, committed, forward, back)
}

// killChild starts the child, lets it commit for delay and kills it with
// SIGKILL.
func killChild(t *testing.T, dir, run, tenant string, delay time.Duration) {
	t.Helper()
	storetest.KillChild(t, "TestCrashChild", []string{crashDirEnv + "=" + dir, crashRunEnv + "=" + run, crashTenantEnv + "=" + tenant}, delay)
}

// recoverAndCheck opens the killed child's database, recovers and checks
// that every transaction is all or nothing; it returns the recovery report
// and the committed transactions.
func recoverAndCheck(t *testing.T, dir, run, tenant string) (store.RecoveryReport, map[string]bool) {
	t.Helper()
	ctx := context.Background()
	d, err := storetest.StartAt(ctx, dir, run)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st, err := d.OpenStore(ctx, d.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close(ctx) }()
	r, err := st.RecoverTenant(ctx, tenant, 0)
	if err != nil && !errors.Is(err, store.ErrTenantNotFound) {
		t.Fatal(err)
	}
	tags := readCrashState(t, st, tenant).committedTags(t)
	if _, err := st.Transaction(ctx, tenant, crashOps(tenant+"-after")); err != nil {
		t.Fatalf("transaction after recovery: %v", err)
	}
	return r, tags
}
