// Package backup makes, restores and checks backups of an embedded data
// dir: a consistent snapshot of each SQLite file (taken while a server
// keeps writing them), the data dir's other files worth keeping (the dev
// signing key), and a manifest with the SHA-256 of each file.
//
// A backup is a directory laid out as a data dir (its databases in the
// same sub-directory), plus manifest.json: a restore copies its files
// into an empty data dir, and the check of a data dir works on a backup
// as it is.
package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"fhirstore/store/engine/sqlite"
)

// ManifestFile is the name of a backup's manifest.
const ManifestFile = "manifest.json"

// Format is the version of the backup layout and manifest this package
// writes; Restore and Check refuse a manifest of another one.
const Format = 1

// Layout names the files of a data dir.
type Layout struct {
	// DatabaseDir is the sub-directory holding the SQLite files.
	DatabaseDir string
	// Prefix starts every database's name; the system database is
	// Prefix+"system", a tenant's Prefix+tenant.
	Prefix string
	// Files are other files of the data dir that a backup copies when
	// they exist (the dev signing key).
	Files []string
}

// system is the name of the system database.
func (l Layout) system() string { return l.Prefix + "system" }

// Manifest describes a backup.
type Manifest struct {
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
	// Tenants are the tenants whose databases the backup holds.
	Tenants []string `json:"tenants"`
	Files   []File   `json:"files"`
}

// File is one file of a backup.
type File struct {
	// Name is its path in the backup (and in a restored data dir), with
	// slashes.
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Database is the database the file holds; Tenant its tenant ("" for
	// the system database and other files).
	Database string `json:"database,omitempty"`
	Tenant   string `json:"tenant,omitempty"`
	// StorageFormat is the database file's format version.
	StorageFormat int64 `json:"storageFormat,omitempty"`
	// Documents counts the documents of each collection: a resource
	// type's current versions, history (every version), and the store's
	// own collections.
	Documents map[string]int64 `json:"documents,omitempty"`
}

// ErrExists refuses to write a backup over an existing path.
var ErrExists = errors.New("exists already")

// ErrDamaged is a backup whose files are not those its manifest
// describes.
var ErrDamaged = errors.New("backup is damaged")

// Options configure Create.
type Options struct {
	Layout Layout
	// Tenant limits the backup to that tenant (and the system database).
	Tenant string
	Logger *zap.Logger
}

// databaseFiles lists the databases of dir (names of its .db files
// without the extension) that start with the layout's prefix.
func databaseFiles(dir string, l Layout) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list the databases: %w", err)
	}
	var out []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".db")
		if ok && e.Type().IsRegular() && strings.HasPrefix(name, l.Prefix) {
			out = append(out, name)
		}
	}
	return out, nil
}

// tenantOf is the tenant of database db ("" for the system database).
func (l Layout) tenantOf(db string) string {
	if db == l.system() {
		return ""
	}
	return strings.TrimPrefix(db, l.Prefix)
}

// Create backs up the embedded databases of dataDir into out, a new
// directory: each SQLite file is snapshotted at one instant while a
// server may keep writing it. The backup is written under a temporary
// name beside out and renamed when complete, so that an interrupted
// backup never looks like one.
func Create(ctx context.Context, dataDir, out string, opts Options) (*Manifest, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	l := opts.Layout
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("backup %s: %w; give a new directory", out, ErrExists)
	}
	src := filepath.Join(dataDir, l.DatabaseDir)
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("backup: %s holds no embedded database (no %s directory)", dataDir, l.DatabaseDir)
	}
	dbs, err := databaseFiles(src, l)
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", dataDir, err)
	}
	if opts.Tenant != "" {
		want := []string{l.system(), l.Prefix + opts.Tenant}
		if !slices.Contains(dbs, want[1]) {
			return nil, fmt.Errorf("backup: tenant %q has no database in %s", opts.Tenant, src)
		}
		dbs = slices.DeleteFunc(dbs, func(db string) bool { return !slices.Contains(want, db) })
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".partial-")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Mkdir(filepath.Join(tmp, l.DatabaseDir), 0o700); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	m := &Manifest{Format: Format, Created: time.Now().UTC().Truncate(time.Second), Tenants: []string{}}
	for _, db := range dbs {
		start := time.Now()
		name := l.DatabaseDir + "/" + db + ".db"
		to := filepath.Join(tmp, filepath.FromSlash(name))
		if err := sqlite.Snapshot(ctx, filepath.Join(src, db+".db"), to); err != nil {
			return nil, fmt.Errorf("backup %s: %w", db, err)
		}
		info, err := sqlite.Inspect(ctx, to)
		if err != nil {
			return nil, fmt.Errorf("backup %s: %w", db, err)
		}
		f, err := describe(to)
		if err != nil {
			return nil, fmt.Errorf("backup %s: %w", db, err)
		}
		f.Name, f.Database, f.Tenant, f.StorageFormat, f.Documents = name, db, l.tenantOf(db), info.Format, info.Documents
		if f.Tenant != "" {
			m.Tenants = append(m.Tenants, f.Tenant)
		}
		m.Files = append(m.Files, f)
		log.Info("backed up a database", zap.String("database", db), zap.Int64("bytes", f.Size), zap.Duration("took", time.Since(start)))
	}
	for _, name := range l.Files {
		from := filepath.Join(dataDir, name)
		if _, err := os.Stat(from); errors.Is(err, os.ErrNotExist) {
			continue
		}
		to := filepath.Join(tmp, name)
		if err := copyFile(from, to); err != nil {
			return nil, fmt.Errorf("backup %s: %w", name, err)
		}
		f, err := describe(to)
		if err != nil {
			return nil, fmt.Errorf("backup %s: %w", name, err)
		}
		f.Name = filepath.ToSlash(name)
		m.Files = append(m.Files, f)
	}
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("backup: manifest: %w", err)
	}
	if err := writeSynced(filepath.Join(tmp, ManifestFile), append(raw, '\n')); err != nil {
		return nil, fmt.Errorf("backup: manifest: %w", err)
	}
	for _, d := range []string{filepath.Join(tmp, l.DatabaseDir), tmp} {
		if err := syncDir(d); err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
	}
	// A directory renamed over an empty one replaces it: look again.
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("backup %s: %w (made while the backup ran)", out, ErrExists)
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, fmt.Errorf("backup: move the backup into place: %w", err)
	}
	done = true
	if err := syncDir(filepath.Dir(out)); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return m, nil
}

// describe is the size and SHA-256 of the file at path, synced to disk.
func describe(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return File{}, fmt.Errorf("sync %s: %w", path, err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", path, err)
	}
	return File{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// copyFile copies from into to (a new file, mode 0600), synced.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("sync %s: %w", to, err)
	}
	return out.Close()
}

// writeSynced writes data to a new file at path, synced.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes the entries of directory dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// ReadManifest reads the manifest of the backup in dir, refusing one of
// an unknown format or naming a file outside the backup.
func ReadManifest(dir string) (*Manifest, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("read the manifest of %s: %w", dir, err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %s is not a manifest: %w", ErrDamaged, dir, ManifestFile, err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%s: backup format %d is unknown (this release reads format %d)", dir, m.Format, Format)
	}
	for _, f := range m.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Name)) || f.Name == ManifestFile {
			return nil, fmt.Errorf("%w: %s: the manifest names %q, not a file of the backup", ErrDamaged, dir, f.Name)
		}
	}
	return &m, nil
}

// Verify checks every file the manifest of the backup in dir lists:
// present, of its size and SHA-256. The error names the first file that
// is not.
func Verify(dir string) (*Manifest, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	for _, want := range m.Files {
		if err := verifyFile(dir, want); err != nil {
			return m, err
		}
	}
	return m, nil
}

// verifyFile checks one file of a backup against the manifest.
func verifyFile(dir string, want File) error {
	got, err := describe(filepath.Join(dir, filepath.FromSlash(want.Name)))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s is missing from %s", ErrDamaged, want.Name, dir)
	}
	if err != nil {
		return fmt.Errorf("%w: %s of %s cannot be read: %w", ErrDamaged, want.Name, dir, err)
	}
	if got.Size != want.Size {
		return fmt.Errorf("%w: %s of %s has %d bytes, the manifest says %d", ErrDamaged, want.Name, dir, got.Size, want.Size)
	}
	if got.SHA256 != want.SHA256 {
		return fmt.Errorf("%w: %s of %s does not match its SHA-256 in the manifest", ErrDamaged, want.Name, dir)
	}
	return nil
}

// Restore verifies the backup in from and copies its files into
// dataDir, which must be empty or not exist. On failure, what it copied
// is removed.
func Restore(ctx context.Context, from, dataDir string) (*Manifest, error) {
	m, err := Verify(from)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	entries, err := os.ReadDir(dataDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("restore: %w", err)
	case len(entries) > 0:
		return nil, fmt.Errorf("restore: %s is not empty; restore into a new or empty directory", dataDir)
	}
	done := false
	defer func() {
		if done {
			return
		}
		entries, _ := os.ReadDir(dataDir)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(dataDir, e.Name()))
		}
	}()
	dirs := []string{dataDir}
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		to := filepath.Join(dataDir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		if !slices.Contains(dirs, filepath.Dir(to)) {
			dirs = append(dirs, filepath.Dir(to))
		}
		if err := copyFile(filepath.Join(from, filepath.FromSlash(f.Name)), to); err != nil {
			return nil, fmt.Errorf("restore %s: %w", f.Name, err)
		}
		// What was copied is what was verified: the backup did not change
		// in between.
		if err := verifyFile(dataDir, f); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
	}
	for _, d := range slices.Backward(dirs) {
		if err := syncDir(d); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
	}
	done = true
	return m, nil
}
