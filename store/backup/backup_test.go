package backup

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine/sqlite"
)

var layout = Layout{DatabaseDir: "sqlite", Prefix: "fhirstore_", Files: []string{"dev-signing.key"}}

// dataDir makes a data dir with the system database and tenants a and b,
// each holding a Patient and its history row.
func dataDir(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	e, err := sqlite.Open(ctx, filepath.Join(dir, "sqlite"), sqlite.Options{SharedField: "resource"})
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{"fhirstore_system", "fhirstore_a", "fhirstore_b"} {
		if err := e.Database(db).Collection("Patient").InsertOne(ctx, bson.D{{Key: "_id", Value: "p1"}, {Key: "resource", Value: bson.D{{Key: "id", Value: "p1"}}}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Database(db).Collection("history").InsertOne(ctx, bson.D{{Key: "_id", Value: "Patient/p1/1"}, {Key: "resource", Value: bson.D{{Key: "id", Value: "p1"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dev-signing.key"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBackupOfOneTenantHoldsItAndTheSystemDatabase: --tenant limits the
// backup to that tenant's database, the system database and the key.
func TestBackupOfOneTenantHoldsItAndTheSystemDatabase(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "b")
	m, err := Create(ctx, dataDir(t), out, Options{Layout: layout, Tenant: "b"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, " "); got != "sqlite/fhirstore_b.db sqlite/fhirstore_system.db dev-signing.key" || strings.Join(m.Tenants, ",") != "b" {
		t.Fatalf("files %s, tenants %v", got, m.Tenants)
	}
	if m.Files[0].Documents["Patient"] != 1 || m.Files[0].Documents["history"] != 1 || m.Files[0].StorageFormat != sqlite.CurrentFormat {
		t.Fatalf("tenant b's file: %+v", m.Files[0])
	}
	rep, err := Check(ctx, out, CheckOptions{Layout: layout, Full: true})
	if err != nil || !rep.Clean() || !rep.Backup || rep.Files != 2 || rep.Documents != 4 {
		t.Fatalf("check: %v, %+v", err, rep)
	}
}

// TestFailedBackupLeavesNothing: a backup that fails (a tenant that does
// not exist, a target that exists) leaves no directory that looks like a
// backup, nor a partial one.
func TestFailedBackupLeavesNothing(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	parent := t.TempDir()
	if _, err := Create(ctx, dir, filepath.Join(parent, "b"), Options{Layout: layout, Tenant: "nobody"}); err == nil {
		t.Fatal("a backup of a tenant without a database succeeded")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Create(canceled, dir, filepath.Join(parent, "c"), Options{Layout: layout}); err == nil {
		t.Fatal("a canceled backup succeeded")
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("failed backups left %v", entries)
	}
	if err := os.Mkdir(filepath.Join(parent, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(ctx, dir, filepath.Join(parent, "d"), Options{Layout: layout}); !errors.Is(err, ErrExists) {
		t.Fatalf("a backup into an existing directory: %v, want ErrExists", err)
	}
}

// TestRestoreRefusesWhatTheManifestDoesNotVouchFor: a file missing, a
// manifest naming a file outside the backup, an unknown format.
func TestRestoreRefusesWhatTheManifestDoesNotVouchFor(t *testing.T) {
	ctx := context.Background()
	fresh := func() string {
		out := filepath.Join(t.TempDir(), "b")
		if _, err := Create(ctx, dataDir(t), out, Options{Layout: layout}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	editManifest := func(out string, edit func(m map[string]any)) {
		raw, err := os.ReadFile(filepath.Join(out, ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		raw, _ = json.Marshal(m)
		if err := os.WriteFile(filepath.Join(out, ManifestFile), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		damage func(out string)
		want   string
	}{
		{"a file is missing", func(out string) { _ = os.Remove(filepath.Join(out, "dev-signing.key")) }, "dev-signing.key is missing"},
		{"a file is longer", func(out string) {
			f, _ := os.OpenFile(filepath.Join(out, "sqlite", "fhirstore_a.db"), os.O_APPEND|os.O_WRONLY, 0)
			_, _ = f.Write([]byte("x"))
			_ = f.Close()
		}, "sqlite/fhirstore_a.db"},
		{"the manifest names a file outside the backup", func(out string) {
			editManifest(out, func(m map[string]any) { m["files"].([]any)[0].(map[string]any)["name"] = "../outside.db" })
		}, `"../outside.db", not a file of the backup`},
		{"the format is unknown", func(out string) { editManifest(out, func(m map[string]any) { m["format"] = 99 }) }, "backup format 99 is unknown"},
		{"no manifest", func(out string) { _ = os.Remove(filepath.Join(out, ManifestFile)) }, ManifestFile},
	}
	for _, c := range cases {
		out := fresh()
		c.damage(out)
		target := filepath.Join(t.TempDir(), "data")
		_, err := Restore(ctx, out, target)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: restore: %v, want an error naming %q", c.name, err, c.want)
		}
		if _, err := os.Stat(target); err == nil {
			t.Errorf("%s: the refused restore made %s", c.name, target)
		}
	}
}

// TestScheduleKeepsTheNewestBackups: a schedule backs up at its interval
// and removes the oldest backups beyond Keep; each one left verifies.
func TestScheduleKeepsTheNewestBackups(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Schedule{DataDir: dataDir(t), Dir: t.TempDir(), Every: 1100 * time.Millisecond, Keep: 2, Layout: layout}
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for s.Last().Successes < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	if o := s.Last(); o.Successes < 3 || o.Failures != 0 || o.Bytes == 0 || o.LastSuccess.IsZero() {
		t.Fatalf("outcome %+v, want 3 successes and no failure", o)
	}
	names, err := s.backups()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 {
		t.Fatalf("backups left %v, want the newest 2", names)
	}
	for _, n := range names {
		if _, err := Verify(filepath.Join(s.Dir, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// TestScheduleRetriesAFailedBackup: a failed backup is counted and retried
// after RetryAfter, and the schedule goes on once the cause is gone.
func TestScheduleRetriesAFailedBackup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data := dataDir(t)
	hidden := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(filepath.Join(data, "sqlite"), hidden); err != nil {
		t.Fatal(err)
	}
	s := &Schedule{DataDir: data, Dir: t.TempDir(), Every: time.Hour, Keep: 3, Layout: layout, RetryAfter: 100 * time.Millisecond}
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Last().Failures < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.Rename(hidden, filepath.Join(data, "sqlite")); err != nil {
		t.Fatal(err)
	}
	for s.Last().Successes < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if o := s.Last(); o.Failures < 2 || o.Successes != 1 {
		t.Fatalf("outcome %+v, want failures then one success", o)
	}
	if entries, _ := os.ReadDir(s.Dir); len(entries) != 1 {
		t.Fatalf("%d entries in the backup dir, want the one backup (failed ones leave nothing)", len(entries))
	}
}

// TestScheduleWaitsAnIntervalAfterTheNewestBackup: a restarted server does
// not back up again before the interval since the newest backup is over.
func TestScheduleWaitsAnIntervalAfterTheNewestBackup(t *testing.T) {
	s := &Schedule{DataDir: dataDir(t), Dir: t.TempDir(), Every: time.Hour, Keep: 3, Layout: layout}
	if d := time.Until(s.due()); d > time.Second {
		t.Fatalf("with no backup, the first is due in %s, want now", d)
	}
	if err := s.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Until(s.due()); d < 59*time.Minute {
		t.Fatalf("after a backup, the next is due in %s, want an hour", d)
	}
}
