package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/engine/mongodb"
	"fhirstore/store/engine/sqlite"
	"fhirstore/store/ferretdb"
)

// Where a data dir keeps its databases: the indexed engine's files, and
// those of the engine fhirstore used before it (FerretDB on SQLite).
const (
	sqliteDir = "sqlite"
	legacyDir = "db"
)

// lockFile is held, with an exclusive flock, by the process that serves a
// data dir (or loads into it directly) for as long as it runs; the kernel
// releases it when that process dies, however it dies.
const lockFile = "server.lock"

// embeddedURIFile records where a running server's legacy database
// listens, so that other commands on the same data dir use it instead of
// opening the files a second time.
const embeddedURIFile = "embedded-db.uri"

// errInUse refuses a second writer of a data dir.
var errInUse = errors.New("is in use by a running fhirstore")

// database is an open store and whatever must be stopped with it.
type database struct {
	store *store.Store
	// owned tells that this process alone writes the database: the server
	// (or a direct load) of a data dir.
	owned  bool
	legacy *ferretdb.Server
	// release gives up the data dir's lock or announcement.
	release func()
}

// storeOptions are what a server adds to the store: validation and indexing.
type storeOptions struct {
	validate        store.Validator
	registry        *search.Registry
	eagerIndexTypes []string
	// monitor observes every database command (metrics); nil for none.
	monitor *event.CommandMonitor
	// recoveryAttempts and recoveryBackoff tune the retries of committed
	// transactions the database refuses (zero: the store's defaults).
	recoveryAttempts int
	recoveryBackoff  time.Duration
	// memory sizes the embedded database's page caches and mapping (zero:
	// the engine's defaults).
	memory memoryOptions
}

func (so storeOptions) store(logger *zap.Logger) store.Options {
	return store.Options{ResourceTypes: fhirschema.IsStoredType, Validate: so.validate, Registry: so.registry, EagerIndexTypes: so.eagerIndexTypes, Logger: logger, Monitor: so.monitor,
		RecoveryAttempts: so.recoveryAttempts, RecoveryBackoff: so.recoveryBackoff}
}

// openDatabase opens the external MongoDB when uri is set; otherwise the
// embedded database of dataDir: shared with a server already running on
// it when share is true, refused when it is false (a server, or a direct
// load, must be its only writer).
func openDatabase(ctx context.Context, uri, dataDir string, share bool, so storeOptions, logger *zap.Logger) (*database, error) {
	opts := so.store(logger)
	if uri != "" {
		eng, err := mongodb.Open(uri, mongodb.Options{})
		if err != nil {
			return nil, fmt.Errorf("MongoDB at %s: %w", redact(uri), err)
		}
		st, err := store.Open(ctx, eng, opts)
		if err != nil {
			return nil, fmt.Errorf("MongoDB at %s: %w", redact(uri), err)
		}
		return &database{store: st, release: func() {}}, nil
	}
	if isLegacyDataDir(dataDir) {
		return openLegacy(ctx, dataDir, share, opts, logger)
	}
	return openEmbedded(ctx, dataDir, share, opts, so.memory, logger)
}

// openEmbedded opens the data dir's SQLite engine. A server holds the data
// dir's lock while it runs; other processes may still open the files
// (SQLite coordinates them) for tenant and client commands.
func openEmbedded(ctx context.Context, dataDir string, share bool, opts store.Options, mem memoryOptions, logger *zap.Logger) (*database, error) {
	dir := filepath.Join(dataDir, sqliteDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %w", dataDir, errors.Unwrap(err))
	}
	d := &database{release: func() {}}
	// A one-shot command leaves the lock alone: taking it, even for a
	// moment, would refuse a server that starts at that moment.
	if !share {
		lock, err := lockDataDir(dataDir)
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("data dir %s %w", dataDir, errInUse)
		}
		if err != nil {
			return nil, err
		}
		d.release, d.owned = lock.unlock, true
	}
	eng, err := sqlite.Open(ctx, dir, sqlite.Options{Logger: logger, WordPaths: search.WordListFields(), SharedField: store.SharedField,
		CacheBytes: mem.cacheBytes, MmapBytes: mem.mmapBytes})
	if err != nil {
		d.release()
		return nil, fmt.Errorf("embedded database: %w", err)
	}
	opts.Exclusive = d.owned // only the data dir's writer may keep search results its own writes decide
	st, err := store.Open(ctx, eng, opts)
	if err != nil {
		d.release()
		return nil, fmt.Errorf("embedded database: %w", err)
	}
	d.store = st
	return d, nil
}

// isLegacyDataDir tells a data dir made by fhirstore's previous embedded
// engine (FerretDB) that has not been migrated to the indexed engine.
func isLegacyDataDir(dataDir string) bool {
	if _, err := os.Stat(filepath.Join(dataDir, legacyDir)); err != nil {
		return false
	}
	_, err := os.Stat(filepath.Join(dataDir, sqliteDir))
	return os.IsNotExist(err)
}

// openLegacy serves a data dir of the previous embedded engine through it,
// as before: a FerretDB in-process, announced in embeddedURIFile so other
// commands reach it through the server.
func openLegacy(ctx context.Context, dataDir string, share bool, opts store.Options, logger *zap.Logger) (*database, error) {
	uriFile := filepath.Join(dataDir, embeddedURIFile)
	if live := liveEmbeddedURI(ctx, uriFile); live != "" {
		if !share {
			return nil, fmt.Errorf("data dir %s %w (database at %s)", dataDir, errInUse, live)
		}
		eng, err := mongodb.Open(live, mongodb.Options{Limits: &ferretdb.Limits})
		if err != nil {
			return nil, err
		}
		st, err := store.Open(ctx, eng, opts)
		if err != nil {
			return nil, fmt.Errorf("embedded database of the running server: %w", err)
		}
		return &database{store: st, release: func() {}}, nil
	}
	// Whoever runs FerretDB on the files holds the data dir's lock, so
	// that migrate never copies them while they are written.
	lock, err := lockDataDir(dataDir)
	if errors.Is(err, errLocked) {
		return nil, fmt.Errorf("data dir %s %w", dataDir, errInUse)
	}
	if err != nil {
		return nil, err
	}
	if !share {
		logger.Warn("the data dir holds the previous embedded engine's files (FerretDB, which scans every collection); serving them through it. Stop the server and run `fhirstore migrate` to move them into the indexed engine",
			zap.String("data_dir", dataDir))
	}
	srv, err := ferretdb.Start(ctx, filepath.Join(dataDir, legacyDir), logger)
	if err != nil {
		lock.unlock()
		return nil, err
	}
	opts.Exclusive = true // this process started the engine; the others reach it through the server
	st, err := openMongo(ctx, srv.URI(), opts)
	if err != nil {
		stopFerret(srv)
		lock.unlock()
		return nil, fmt.Errorf("embedded database: %w", err)
	}
	d := &database{store: st, owned: true, legacy: srv, release: lock.unlock}
	if !share { // a server announces its database; one-shot commands do not
		token := ownerPrefix(dataDir) + rand.Text()
		if err := st.SetOwner(ctx, token); err != nil {
			d.close()
			return nil, err
		}
		if err := os.WriteFile(uriFile, []byte(srv.URI()+"\n"+token+"\n"), 0o600); err != nil {
			d.close()
			return nil, fmt.Errorf("data dir %s is not writable: %w", dataDir, err)
		}
		d.release = func() { _ = os.Remove(uriFile); lock.unlock() }
	}
	return d, nil
}

// openMongo opens a store on the embedded FerretDB at uri.
func openMongo(ctx context.Context, uri string, opts store.Options) (*store.Store, error) {
	eng, err := mongodb.Open(uri, mongodb.Options{Limits: &ferretdb.Limits})
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, eng, opts)
}

// liveEmbeddedURI returns the URI in uriFile when the database answering
// there is the one that wrote the file (its owner token matches).
func liveEmbeddedURI(ctx context.Context, uriFile string) string {
	b, err := os.ReadFile(uriFile)
	if err != nil {
		return ""
	}
	uri, token, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	token = strings.TrimSpace(token)
	if !strings.HasPrefix(uri, "mongodb://127.0.0.1:") || !strings.HasPrefix(token, ownerPrefix(filepath.Dir(uriFile))) {
		return "" // a file copied from another data dir names that dir's database
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	eng, err := mongodb.Open(uri, mongodb.Options{ServerSelectionTimeout: time.Second})
	if err != nil {
		return ""
	}
	st, err := store.Open(ctx, eng, store.Options{ResourceTypes: fhirschema.IsStoredType})
	if err != nil {
		return ""
	}
	defer func() { _ = st.Close(context.WithoutCancel(ctx)) }()
	if owner, err := st.Owner(ctx); err != nil || owner != token {
		return ""
	}
	return uri
}

// ownerPrefix starts the owner token of a data dir's embedded database: the
// directory's canonical path, so an announcement only matches its own dir.
func ownerPrefix(dataDir string) string {
	dir, err := filepath.Abs(dataDir)
	if err == nil {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
	}
	return dir + "|"
}

func (d *database) close() {
	ctx, cancel := context.WithTimeout(context.Background(), ferretdb.StopTimeout)
	defer cancel()
	_ = d.store.Close(ctx)
	if d.legacy != nil {
		_ = d.legacy.Stop(ctx)
	}
	d.release() // once the files are closed
}

func stopFerret(srv *ferretdb.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), ferretdb.StopTimeout)
	defer cancel()
	_ = srv.Stop(ctx)
}

// redact hides the password of a connection string.
func redact(uri string) string {
	if at := strings.LastIndex(uri, "@"); at > 0 {
		if scheme := strings.Index(uri, "://"); scheme >= 0 && scheme < at {
			return uri[:scheme+3] + "***" + uri[at:]
		}
	}
	return uri
}

// engineOf is the engine a database runs on, for logs.
func engineOf(d *database) string {
	if d.legacy != nil {
		return "ferretdb"
	}
	return d.store.Engine()
}
