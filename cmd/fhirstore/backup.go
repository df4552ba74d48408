package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
	"fhirstore/store/backup"
)

// backupLayout is where a data dir keeps what a backup copies: the
// embedded databases, the dev signing key, and the audit trail's log of
// records not yet stored as rows (stored when the restored data dir is
// served; those stored already are not stored twice).
var backupLayout = backup.Layout{DatabaseDir: sqliteDir, Prefix: "fhirstore_", Files: []string{auth.DevKeyFile, server.AuditLogFile}}

// Exit statuses of check: problems found, or the check could not run.
const (
	checkFoundProblems = 1
	checkFailed        = 2
)

// backupCmd backs up an embedded data dir, online, into a new directory.
func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("backup", "data-dir")
	out := cfg.fs.String("out", "", "directory the backup is written to; must not exist")
	tenant := cfg.fs.String("tenant", "", "back up only this tenant (and the system database); empty: every tenant")
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, "fhirstore backup --out DIR [--data-dir DIR] [--tenant NAME]")
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
	if errors.Is(err, backup.ErrExists) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w; no backup was written at %s (is the disk full?)", err, *out)
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
	cfg := newConfig("restore", "data-dir", "from")
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, "fhirstore restore --from BACKUP --data-dir NEWDIR")
		}
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("restore takes no arguments, not %q (see fhirstore restore -h)", strings.Join(pos, " "))
	}
	from := cfg.str("from")
	if from == "" {
		return errors.New("restore: --from is required: the backup's directory (see fhirstore restore -h)")
	}
	dataDir := cfg.str("data-dir")
	m, err := backup.Restore(ctx, from, dataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored the backup of %s (%d files, tenants %s) into %s; start it with: fhirstore serve --data-dir %s\n",
		m.Created.Format(time.RFC3339), len(m.Files), strings.Join(m.Tenants, ", "), dataDir, dataDir)
	return nil
}

// checkCmd checks a stopped data dir or a backup.
func checkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("check", "data-dir", "mongodb-uri", "full")
	pos, err := cfg.parse(boolFlagArgs(args, "full"))
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, "fhirstore check [--full] [--data-dir DIR | --mongodb-uri URI]")
			return err
		}
		return &exitError{code: checkFailed, err: err}
	}
	if len(pos) > 0 {
		return &exitError{code: checkFailed, err: fmt.Errorf("check takes no arguments, not %q (see fhirstore check -h)", strings.Join(pos, " "))}
	}
	full, err := strconv.ParseBool(cfg.str("full"))
	if err != nil {
		return &exitError{code: checkFailed, err: fmt.Errorf("--full: %q is not true or false", cfg.str("full"))}
	}
	if uri := cfg.str("mongodb-uri"); uri != "" {
		return checkDatabase(ctx, uri, full, stdout)
	}
	dir := cfg.str("data-dir")
	if _, err := os.Stat(dir); err != nil {
		return &exitError{code: checkFailed, err: fmt.Errorf("check: %w", err)}
	}
	rep, err := backup.Check(ctx, dir, backup.CheckOptions{Layout: backupLayout, Full: full})
	if err != nil {
		return &exitError{code: checkFailed, err: err}
	}
	what := "data dir"
	if rep.Backup {
		what = "backup"
	}
	sample := "a sample of each table"
	if full {
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

// checkDatabase checks every tenant of a MongoDB deployment through the
// store: documents decode, current versions are in history, index entries
// agree with the documents. The files are MongoDB's to check (validate).
func checkDatabase(ctx context.Context, uri string, full bool, stdout io.Writer) error {
	registry, err := search.NewRegistry(fhirschema.StoredTypes())
	if err != nil {
		return &exitError{code: checkFailed, err: err}
	}
	db, err := openDatabase(ctx, uri, "", true, storeOptions{registry: registry}, zap.NewNop())
	if err != nil {
		return &exitError{code: checkFailed, err: fmt.Errorf("check: %w", err)}
	}
	defer db.close()
	tenants, err := db.store.ListTenants(ctx)
	if err != nil {
		return &exitError{code: checkFailed, err: fmt.Errorf("check: %w", err)}
	}
	var docs int64
	problems := 0
	for _, t := range tenants {
		rep, err := db.store.CheckTenant(ctx, t.Name, store.CheckOptions{Full: full})
		if err != nil {
			return &exitError{code: checkFailed, err: fmt.Errorf("check tenant %s: %w", t.Name, err)}
		}
		docs += rep.Documents
		for _, p := range rep.Problems {
			fmt.Fprintf(stdout, "tenant %s: %s\n", t.Name, p)
		}
		problems += len(rep.Problems)
	}
	if problems > 0 {
		return &exitError{code: checkFoundProblems, err: fmt.Errorf("check: MongoDB at %s: %d problems (listed on standard output)", redact(uri), problems)}
	}
	sample := "a sample of each collection"
	if full {
		sample = "every document"
	}
	fmt.Fprintf(stdout, "ok: MongoDB at %s: %d tenants, %d documents decoded (%s)\n", redact(uri), len(tenants), docs, sample)
	return nil
}

// backupSchedule is the server's schedule of backups when --backup-dir is
// set (nil otherwise): only the embedded database has files to back up.
func backupSchedule(cfg *config, logger *zap.Logger) (*backup.Schedule, error) {
	dir := cfg.str("backup-dir")
	if dir == "" {
		return nil, nil
	}
	if cfg.str("mongodb-uri") != "" {
		return nil, errors.New("--backup-dir: scheduled backups are of the embedded database; back up MongoDB with mongodump or the cluster's own backup (docs/guide/backup.md)")
	}
	every, err := cfg.duration("backup-every")
	if err != nil {
		return nil, err
	}
	keep, err := cfg.int64("backup-keep")
	if err != nil {
		return nil, err
	}
	return &backup.Schedule{DataDir: cfg.str("data-dir"), Dir: dir, Every: every, Keep: int(keep), Layout: backupLayout, Logger: logger.Named("backup")}, nil
}

// startBackups runs the schedule, if any, until ctx ends, its outcome in
// the metrics.
func startBackups(ctx context.Context, s *backup.Schedule, metrics *server.Metrics, logger *zap.Logger) {
	if s == nil {
		return
	}
	if metrics != nil {
		metrics.Registry().MustRegister(s.Collector())
	}
	go s.Run(ctx)
	logger.Info("scheduled backups", zap.String("dir", s.Dir), zap.Duration("every", s.Every), zap.Int("keep", s.Keep))
}
