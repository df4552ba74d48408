package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.uber.org/zap"

	"fhirstore/store/engine"
)

// Options configure an Engine.
type Options struct {
	// Logger receives the engine's few log lines (nil: none).
	Logger *zap.Logger
	// Monitor, when set, is told of every operation as the MongoDB
	// command it stands for, so that metrics read the same on every engine.
	Monitor *event.CommandMonitor
	// ReadConns is the number of reader connections per file (default 4).
	ReadConns int
	// CacheBytes is the page cache of each file (default 16 MiB): half
	// for its writer, half shared by its readers.
	CacheBytes int64
	// MmapBytes is how much of each file its connections map into memory
	// (default 0: none; pages are read into the page cache).
	MmapBytes int64
	// SharedField names a top-level field (one without index entries, such
	// as the store's "resource") whose values are kept once per file: the
	// documents holding the same value share it (see codec.go).
	SharedField string
	// WordPaths are the paths holding documents' word lists (a full-text
	// index kept by the documents' writer, such as FHIR's _content),
	// searched by equality and prefix only; they are kept in a full-text
	// table rather than the general index (see the package documentation).
	WordPaths []string
	// WALLimit is the size each file's WAL is kept under while writes
	// stream in (default DefaultWALLimit; see checkpoint.go).
	WALLimit int64

	// converting, when set, is called as a conversion goes: to format 2
	// after each batch of a collection's documents (committed false) and
	// after each collection's transaction (true); to format 3 with the
	// collection's name after rowsStep, before and after its commit
	// (tests).
	converting func(coll string, committed bool)
}

// Engine is a directory of SQLite files, one per database.
type Engine struct {
	dir    string
	opts   Options
	log    *zap.Logger
	ids    atomic.Int64 // monitor request ids
	pins   *pinned
	counts *countCache
	words  *wordPaths
	stats  writeStats
	codec  *codec

	mu     sync.Mutex
	files  map[string]*file
	closed bool
}

var _ engine.Engine = (*Engine)(nil)

// Open opens the engine on dir (created if need be); files are opened on
// first use.
func Open(ctx context.Context, dir string, opts Options) (*Engine, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open SQLite engine: %w", err)
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open SQLite engine: %w: %w", engine.ErrUnavailable, err)
	}
	words, err := newWordPaths(opts.WordPaths)
	if err != nil {
		return nil, fmt.Errorf("open SQLite engine: %w", err)
	}
	if f := opts.SharedField; f != "" && (!unindexed[f] || f == "_id") {
		return nil, fmt.Errorf("open SQLite engine: shared field %q: only a field without index entries (%s) may be shared: %w", f, "resource, numText", engine.ErrUnsupported)
	}
	cd, err := newCodec()
	if err != nil {
		return nil, fmt.Errorf("open SQLite engine: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Engine{dir: dir, opts: opts, log: log, files: map[string]*file{}, pins: pin(), counts: newCountCache(), words: words, codec: cd}, nil
}

// Name is "sqlite".
func (e *Engine) Name() string { return "sqlite" }

// Database is the database of that name: the file <dir>/<name>.db.
func (e *Engine) Database(name string) engine.Database {
	return &database{e: e, name: name}
}

// Ping checks that the engine is open and its directory is there.
func (e *Engine) Ping(ctx context.Context) error {
	return e.observe(ctx, "admin", "ping", func() error {
		e.mu.Lock()
		closed := e.closed
		e.mu.Unlock()
		if closed {
			return fmt.Errorf("ping SQLite engine: %w: %w", engine.ErrUnavailable, errClosed)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("ping SQLite engine: %w: %w", engine.ErrUnavailable, err)
		}
		if fi, err := os.Stat(e.dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("ping SQLite engine: %w: %s is not a directory (%v)", engine.ErrUnavailable, e.dir, err)
		}
		return nil
	})
}

// Close closes every file; the engine cannot be used afterwards.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	files, closed := e.files, e.closed
	e.files, e.closed = map[string]*file{}, true
	e.mu.Unlock()
	if !closed {
		defer e.pins.release()
		defer e.codec.close()
	}
	var errs []error
	for name, f := range files {
		if err := f.close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// file returns the open file of database name, opening it the first time.
func (e *Engine) file(ctx context.Context, name string) (*file, error) {
	if err := checkDatabaseName(name); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("database %s: %w: %w", name, engine.ErrUnavailable, errClosed)
	}
	if f, ok := e.files[name]; ok {
		return f, nil
	}
	wm, rm := memoryOf(e.opts.CacheBytes, e.opts.MmapBytes, e.opts.ReadConns)
	f, err := openFile(e.dir, name, fileOptions{readConns: e.opts.ReadConns, writer: wm, reader: rm, words: e.words, stats: &e.stats, codec: e.codec, shared: e.opts.SharedField, log: e.log, converting: e.opts.converting, walLimit: walLimit(e.opts.WALLimit)})
	if err != nil {
		return nil, err
	}
	e.log.Debug("opened SQLite file", zap.String("database", name))
	e.files[name] = f
	return f, nil
}

// WriteStats counts the writes of the engine's files and the
// transactions that committed them: several writes queued together
// commit in one transaction (see the package documentation).
type WriteStats struct {
	Writes, Transactions int64
	// WALResets counts the checkpoints that emptied a WAL grown past a
	// quarter of its limit, WALBusy those that readers kept from it.
	WALResets, WALBusy int64
}

// writeStats are the engine's counts of WriteStats.
type writeStats struct {
	writes, transactions atomic.Int64
	walResets, walBusy   atomic.Int64
}

// WriteStats returns the counts of writes and transactions since Open.
func (e *Engine) WriteStats() WriteStats {
	return WriteStats{Writes: e.stats.writes.Load(), Transactions: e.stats.transactions.Load(), WALResets: e.stats.walResets.Load(), WALBusy: e.stats.walBusy.Load()}
}

// checkDatabaseName refuses names that are not plain file names.
func checkDatabaseName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("database name %q: not a file name: %w", name, engine.ErrUnsupported)
	}
	return nil
}

// Limits of the embedded engine: SQLite itself would keep documents up to
// 1 GB and index values of any length (long ones go to overflow pages),
// so the engine takes MongoDB's 16 MiB document limit, which keeps every
// stored resource movable to a MongoDB deployment, and no key limit.
func (e *Engine) Limits(context.Context) engine.Limits {
	return engine.Limits{MaxDocumentBytes: 16 * engine.MiB, Source: "the embedded engine"}
}
