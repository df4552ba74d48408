package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	sqlite3 "modernc.org/sqlite/lib"
)

// pathsTable counts documents per path (see the package documentation);
// docsPath is its row counting every document of a collection.
const (
	pathsTable   = `"_paths"`
	indexesTable = `"_indexes"`
	docsPath     = "\x00"
)

// pragmas configure every connection: waiting (not failing) for other
// processes' writes; the writer also sets WAL (so that readers and the
// writer do not block each other) and NORMAL synchronization (durable at
// checkpoints). The file's checkpointer copies the WAL into the database
// after writes and keeps it bounded (checkpoint.go); the writer
// checkpoints itself only when the WAL outgrows 1 GiB (the checkpointer
// fell behind). Page caches and memory mapping
// are sized by memory (below).
var (
	pragmas       = []string{"busy_timeout = 10000", "temp_store = MEMORY", "foreign_keys = 0"}
	writerPragmas = []string{"page_size = 8192", "journal_mode = WAL", "synchronous = NORMAL", "wal_autocheckpoint = 131072"}
	readerPragmas = []string{"query_only = 1"}
)

// Memory of a file's connections (Options.CacheBytes, Options.MmapBytes):
// the writer's page cache is half the file's budget, the readers share
// the other half (each reader's cache is what reads come back to: the
// reader used last is taken first), the checkpointer keeps SQLite's
// smallest. Mapping the file makes reads cheaper but counts every page
// read in the process's resident memory, growing with the file: it is off
// unless asked for.
const (
	defaultCacheBytes = 16 << 20
	minCacheKiB       = 256
)

// memory is the page cache and mapping of one kind of connection.
type memory struct {
	cacheKiB, mmapBytes int64
}

func (m memory) pragmas() []string {
	return []string{fmt.Sprintf("cache_size = -%d", max(m.cacheKiB, minCacheKiB)), fmt.Sprintf("mmap_size = %d", m.mmapBytes)}
}

// memoryOf splits a file's cache budget between its writer and its
// readers.
func memoryOf(cacheBytes, mmapBytes int64, readConns int) (writer, reader memory) {
	if cacheBytes <= 0 {
		cacheBytes = defaultCacheBytes
	}
	half := cacheBytes / 2 >> 10
	return memory{half, mmapBytes}, memory{half / int64(max(readConns, 1)), mmapBytes}
}

// file is one database's SQLite file: its writer and its readers.
type file struct {
	name string
	path string

	wmu sync.Mutex // held by the writer running queued writes (commit.go)
	w   *conn      // every write, in transactions begun by commit

	qmu   sync.Mutex
	queue []*writeReq // writes waiting for the writer

	log    *zap.Logger
	stats  *writeStats
	codec  *codec
	shared string // the engine's Options.SharedField

	readerMemory memory // of each reader
	walLimit     int64  // the WAL's bound (checkpoint.go)

	compact bool // a conversion at open shrank the file's contents: VACUUM once

	turns chan struct{} // one per reader in use (at most ReadConns)

	wake        chan struct{} // a write committed: the checkpointer has work
	stop        chan struct{} // closed by close: the checkpointer stops
	checkpoints chan struct{} // closed when the checkpointer has stopped

	mu     sync.Mutex
	idle   []*conn         // readers not in use, the last used last
	tables map[string]bool // collections whose tables are known to exist
	closed bool
}

// fileOptions are what a file takes of its engine.
type fileOptions struct {
	readConns  int
	writer     memory
	reader     memory
	words      *wordPaths
	stats      *writeStats
	codec      *codec
	shared     string // Options.SharedField
	log        *zap.Logger
	converting func(coll string, committed bool) // Options.converting
	walLimit   int64                             // Options.WALLimit
}

// openFile opens (creating it if need be) the file of database name in
// dir, converting a file of an older format (logged to o.log).
func openFile(dir, name string, o fileOptions) (*file, error) {
	path := filepath.Join(dir, name+".db")
	w, err := openConn(path, slices.Concat(pragmas, writerPragmas, walPragmas(walLimit(o.walLimit)), o.writer.pragmas()))
	if err != nil {
		return nil, classify("open "+path, err)
	}
	w.codes, w.paths = &fieldCodes{}, &pathLog{}
	if err := registerFuncs(w, o.codec); err != nil {
		w.close()
		return nil, classify("open "+path, err)
	}
	f := &file{
		name:        name,
		path:        path,
		w:           w,
		turns:       make(chan struct{}, o.readConns),
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		checkpoints: make(chan struct{}),
		tables:      map[string]bool{},
		log:         o.log,
		stats:       o.stats,
		codec:       o.codec,
		shared:      o.shared,

		readerMemory: o.reader,
		walLimit:     walLimit(o.walLimit),
	}
	go f.checkpointer()
	if err := f.open(context.Background(), o); err != nil {
		_ = f.close()
		return nil, err
	}
	return f, nil
}

// open brings the file to the current format and word paths.
func (f *file) open(ctx context.Context, o fileOptions) error {
	start := time.Now()
	converted, err := f.upgrade(ctx)
	if err != nil {
		return classify("upgrade "+f.path, err)
	}
	if converted > 0 {
		o.log.Info("converted the index entries of an older file to numbered paths",
			zap.String("file", f.path), zap.Int("collections", converted), zap.Duration("took", time.Since(start)))
	}
	if err := f.upgradeDocs(ctx, o.converting); err != nil {
		return classify("convert the documents of "+f.path, err)
	}
	if err := f.upgradeRows(ctx, o.converting); err != nil {
		return classify("convert the rows of "+f.path, err)
	}
	if err := f.upgradeRowFields(ctx); err != nil {
		return classify("convert the index entries of "+f.path, err)
	}
	if f.compact {
		// The conversions shrank the file's contents in place, leaving
		// pages mostly empty: the file is rewritten once, compactly (in a
		// transaction of its own: a kill leaves the converted file as it
		// was).
		start := time.Now()
		if err := f.w.run(ctx, "VACUUM"); err != nil {
			return classify("compact the converted file "+f.path, err)
		}
		o.log.Info("compacted the file after its conversion", zap.String("file", f.path), zap.Duration("took", time.Since(start)))
		f.compact = false
	}
	start = time.Now()
	reindexed, err := f.syncWords(ctx, o.words)
	if err != nil {
		return classify("index the words of "+f.path, err)
	}
	if reindexed > 0 {
		o.log.Info("moved the word lists of a file's documents to its word tables",
			zap.String("file", f.path), zap.Strings("paths", o.words.paths), zap.Int("collections", reindexed), zap.Duration("took", time.Since(start)))
	}
	return nil
}

// checkpointEvery is how often at most the checkpointer runs while writes
// go on.
const checkpointEvery = time.Second

// checkpointer copies the pages the writes committed to the WAL into the
// database file, on a connection of its own, so that the writer does not
// (a checkpoint of a large transaction writes and syncs thousands of
// pages), and keeps the WAL under its limit (checkpoint.go). It stops
// when stop is closed.
func (f *file) checkpointer() {
	defer close(f.checkpoints)
	var c *conn
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	for {
		select {
		case <-f.stop:
			return
		case <-f.wake:
		}
		if c == nil {
			var err error
			if c, err = f.checkpointConn(); err != nil {
				c = nil // the writer's own checkpoints remain
				continue
			}
		}
		wait := f.checkpoint(c)
		if !f.pause(wait) {
			return
		}
		if wait < checkpointEvery { // the WAL is still past its bound
			select {
			case f.wake <- struct{}{}:
			default:
			}
		}
	}
}

// reader takes a reader connection (opening one when all are in use and
// fewer than ReadConns are open), in a read transaction: what a read
// plans with and reads is one snapshot. release ends the transaction and
// gives the connection back.
func (f *file) reader(ctx context.Context) (*conn, error) {
	c, err := f.take(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.exec(ctx, "BEGIN"); err != nil {
		f.release(c)
		return nil, fmt.Errorf("begin reading %s: %w", f.name, err)
	}
	return c, nil
}

// take waits for a turn and takes the reader used last (its page cache is
// the warmest), opening one when none is idle.
func (f *file) take(ctx context.Context) (*conn, error) {
	select {
	case f.turns <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for a reader of %s: %w", f.name, ctx.Err())
	}
	f.mu.Lock()
	if n := len(f.idle); n > 0 {
		c := f.idle[n-1]
		f.idle = f.idle[:n-1]
		f.mu.Unlock()
		return c, nil
	}
	f.mu.Unlock()
	c, err := openConn(f.path, slices.Concat(pragmas, readerPragmas, f.readerMemory.pragmas()))
	if err == nil {
		if err = registerFuncs(c, f.codec); err != nil {
			c.close()
		}
	}
	if err != nil {
		<-f.turns
		return nil, fmt.Errorf("open %s for reading: %w", f.path, err)
	}
	return c, nil
}

// release ends a reader's transaction and gives it back.
func (f *file) release(c *conn) {
	if sqlite3.Xsqlite3_get_autocommit(c.tls, c.db) == 0 {
		if _, err := c.exec(context.Background(), "COMMIT"); err != nil {
			_, _ = c.exec(context.Background(), "ROLLBACK")
		}
	}
	f.mu.Lock()
	closed := f.closed
	if !closed {
		f.idle = append(f.idle, c)
	}
	f.mu.Unlock()
	if closed {
		c.close()
	}
	<-f.turns
}

// close closes the writer and the idle readers (readers in use close when
// released).
func (f *file) close() error {
	f.mu.Lock()
	f.closed = true
	idle := f.idle
	f.idle = nil
	f.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	close(f.stop)
	<-f.checkpoints
	_ = f.w.run(context.Background(), "PRAGMA optimize")
	return f.w.close()
}

// known tells whether the collection's tables were created by this process.
func (f *file) known(coll string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tables[coll]
}

// forget drops what is known of the tables (another process dropped them).
func (f *file) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.tables)
}

func (f *file) remember(coll string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tables[coll] = true
}

// createTables creates the collection's tables (and the shared ones).
func createTables(ctx context.Context, w *conn, n names, ws *wordPaths) error {
	stmts := []string{
		"CREATE TABLE IF NOT EXISTS " + pathsTable + " (c TEXT NOT NULL, f TEXT NOT NULL, n INTEGER NOT NULL, e INTEGER NOT NULL, PRIMARY KEY (c, f)) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS " + indexesTable + " (c TEXT NOT NULL, name TEXT NOT NULL, keys BLOB, PRIMARY KEY (c, name)) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS " + n.d + " (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, doc BLOB NOT NULL, b INTEGER, k BLOB)",
		createBlobsTable,
		createFieldsTable,
		"CREATE TABLE IF NOT EXISTS " + n.x + " (f INTEGER NOT NULL, v ANY NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (f, v, rid)) STRICT, WITHOUT ROWID",
		createWordsTable,
	}
	for _, p := range ws.paths {
		stmts = append(stmts, "INSERT INTO "+wordsTable+" (path) VALUES ("+sqlString(p)+") ON CONFLICT DO NOTHING")
	}
	if ws.any() {
		stmts = append(stmts, createWordTable(n))
	}
	for _, s := range stmts {
		if err := w.run(ctx, s); err != nil {
			return fmt.Errorf("create tables of %s: %w", n.coll, err)
		}
	}
	return nil
}
