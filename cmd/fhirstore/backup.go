package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fhirstore/server/auth"
	"fhirstore/store/backup"
)

// backupLayout is where a data dir keeps what a backup copies: the
// embedded databases and the dev signing key.
var backupLayout = backup.Layout{DatabaseDir: sqliteDir, Prefix: "fhirstore_", Files: []string{auth.DevKeyFile}}

// Exit statuses of check: problems found, or the check could not run.
const (
	checkFoundProblems = 1
	checkFailed        = 2
)

// backupExamples, restoreExamples and checkExamples are printed by -h.
var (
	backupExamples = []string{
		"fhirstore backup --data-dir ./data --out /backup/fhirstore-$(date +%F)",
		"    a consistent copy of every tenant and the system database, while the server keeps serving",
		"fhirstore backup --data-dir ./data --tenant acme --out /backup/acme-$(date +%F)",
		"    with MongoDB (--mongodb-uri) use mongodump or the cluster's backup instead",
	}
	restoreExamples = []string{
		"fhirstore restore --from /backup/fhirstore-2025-06-01 --data-dir ./data-restored",
		"fhirstore serve --data-dir ./data-restored",
	}
	checkExamples = []string{
		"fhirstore check --data-dir /backup/fhirstore-2025-06-01",
		"fhirstore check --full --data-dir ./data     # a stopped server's data dir; every document",
		"    exit status: 0 clean, 1 problems found (one line each), 2 the check could not run",
	}
)

// usageWithExamples prints the usage of cfg and examples.
func usageWithExamples(cfg *config, w io.Writer, synopsis string, examples []string) {
	cfg.usage(w, synopsis)
	fmt.Fprintln(w, "\nexamples:")
	for _, line := range examples {
		fmt.Fprintln(w, "  "+line)
	}
}

// backupCmd backs up an embedded data dir, online, into a new directory.
func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("backup", "data-dir")
	out := cfg.fs.String("out", "", "directory the backup is written to; must not exist")
	tenant := cfg.fs.String("tenant", "", "back up only this tenant (and the system database); empty: every tenant")
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usageWithExamples(cfg, stdout, "fhirstore backup --out DIR [--data-dir DIR] [--tenant NAME]", backupExamples)
		}
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("backup takes no arguments, not %q (see fhirstore backup -h)", strings.Join(pos, " "))
	}
	if *out == "" {
		return errors.New("backup: --out is required: a new directory for the backup (see fhirstore backup -h)")
	}
	dataDir := cfg.str("data-dir")
	if isLegacyDataDir(dataDir) {
		return fmt.Errorf("backup: data dir %s holds the previous embedded engine's files; stop the server and copy the data dir, or run fhirstore migrate first", dataDir)
	}
	if fi, err := os.Stat(filepath.Join(dataDir, sqliteDir)); err != nil || !fi.IsDir() {
		return fmt.Errorf("backup: data dir %s holds no embedded database (no %s directory); a MongoDB deployment (--mongodb-uri) is backed up with mongodump or the cluster's own backup", dataDir, sqliteDir)
	}
	logger, err := newLogger("warn", stderr)
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	start := time.Now()
	m, err := backup.Create(ctx, dataDir, *out, backup.Options{Layout: backupLayout, Tenant: *tenant, Logger: logger})
	if err != nil {
		return err
	}
	var size int64
	for _, f := range m.Files {
		size += f.Size
	}
	fmt.Fprintf(stdout, "backed up %s into %s: %d files, %d bytes, tenants %s, in %s\n", dataDir, *out, len(m.Files), size,
		strings.Join(m.Tenants, ", "), time.Since(start).Round(time.Millisecond))
	return nil
}

// restoreCmd restores a backup into a new data dir.
func restoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("restore", "data-dir")
	from := cfg.fs.String("from", "", "the backup to restore (a directory written by fhirstore backup)")
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usageWithExamples(cfg, stdout, "fhirstore restore --from BACKUP --data-dir NEWDIR", restoreExamples)
		}
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("restore takes no arguments, not %q (see fhirstore restore -h)", strings.Join(pos, " "))
	}
	if *from == "" {
		return errors.New("restore: --from is required: the backup's directory (see fhirstore restore -h)")
	}
	dataDir := cfg.str("data-dir")
	m, err := backup.Restore(ctx, *from, dataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored the backup of %s (%d files, tenants %s) into %s; start it with: fhirstore serve --data-dir %s\n",
		m.Created.Format(time.RFC3339), len(m.Files), strings.Join(m.Tenants, ", "), dataDir, dataDir)
	return nil
}

// checkCmd checks a stopped data dir or a backup.
func checkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("check", "data-dir")
	full := cfg.fs.Bool("full", false, "decode every stored document and version, not a sample of each table")
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usageWithExamples(cfg, stdout, "fhirstore check [--full] [--data-dir DIR]", checkExamples)
			return err
		}
		return &exitError{code: checkFailed, err: err}
	}
	if len(pos) > 0 {
		return &exitError{code: checkFailed, err: fmt.Errorf("check takes no arguments, not %q (see fhirstore check -h)", strings.Join(pos, " "))}
	}
	dir := cfg.str("data-dir")
	if _, err := os.Stat(dir); err != nil {
		return &exitError{code: checkFailed, err: fmt.Errorf("check: %w", err)}
	}
	rep, err := backup.Check(ctx, dir, backup.CheckOptions{Layout: backupLayout, Full: *full})
	if err != nil {
		return &exitError{code: checkFailed, err: err}
	}
	what := "data dir"
	if rep.Backup {
		what = "backup"
	}
	sample := "a sample of each table"
	if *full {
		sample = "every document"
	}
	if rep.Clean() {
		fmt.Fprintf(stdout, "ok: %s %s: %d database files, %d documents decoded (%s)\n", what, dir, rep.Files, rep.Documents, sample)
		return nil
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(stdout, p.String())
	}
	return &exitError{code: checkFoundProblems, err: fmt.Errorf("check: %s %s: %d problems (listed on standard output)", what, dir, len(rep.Problems))}
}
