package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// pathsTable counts documents per path (see the package documentation);
// docsPath is its row counting every document of a collection.
const (
	pathsTable   = `"_paths"`
	indexesTable = `"_indexes"`
	docsPath     = "\x00"
)

// pragmas configure every connection: WAL so that readers and the writer
// do not block each other, waiting (not failing) for other processes'
// writes, and a modest page cache per connection.
var pragmas = []string{
	"busy_timeout(10000)",
	"journal_mode(WAL)",
	"synchronous(NORMAL)",
	"foreign_keys(0)",
	"cache_size(-16384)",
	"temp_store(MEMORY)",
}

// file is one database's SQLite file: its writer and its readers.
type file struct {
	name   string
	w      *sql.DB   // the writer's pool: wc only
	r      *sql.DB   // query_only connections
	rstmts *stmtCache // prepared on r

	wmu    sync.Mutex           // held by the write transaction in progress
	wc     *sql.Conn            // every write, in transactions begun by write
	wstmts map[string]*sql.Stmt // prepared on wc, under wmu

	mu     sync.Mutex
	tables map[string]bool // collections whose tables are known to exist
}

// openFile opens (creating it if need be) the file of database name in dir.
func openFile(ctx context.Context, dir, name string, readConns int) (*file, error) {
	path := filepath.Join(dir, name+".db")
	w, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	wc, err := w.Conn(ctx)
	if err == nil {
		err = wc.PingContext(ctx)
	}
	if err != nil {
		w.Close()
		return nil, classify(fmt.Sprintf("open %s", path), err)
	}
	r, err := sql.Open("sqlite", dsn(path, "_pragma=query_only(1)"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	return &file{
		name:   name,
		w:      w,
		wc:     wc,
		wstmts: map[string]*sql.Stmt{},
		r:      r,
		rstmts: newStmtCache(r),
		tables: map[string]bool{},
	}, nil
}

// dsn is the driver's name for path with the pragmas and extra parameters.
func dsn(path string, extra ...string) string {
	var q []string
	for _, p := range pragmas {
		q = append(q, "_pragma="+p)
	}
	q = append(q, extra...)
	return "file:" + escapePath(path) + "?" + strings.Join(q, "&")
}

// escapePath percent-encodes what a file: URI cannot hold literally.
func escapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' || c == '?' || c == '#' || c < 0x20 || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// close closes the file's connections.
func (f *file) close() error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	for _, s := range f.wstmts {
		s.Close()
	}
	f.rstmts.close()
	f.wc.Close()
	werr := f.w.Close()
	rerr := f.r.Close()
	if werr != nil {
		return werr
	}
	return rerr
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

// write runs fn in a write transaction (BEGIN IMMEDIATE: it waits for
// other processes' writers rather than failing at its first write).
func (f *file) write(ctx context.Context, fn func(w writer) error) (err error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if _, err := f.wc.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err == nil {
			if _, err = f.wc.ExecContext(ctx, "COMMIT"); err == nil {
				return
			}
			err = fmt.Errorf("commit: %w", err)
		}
		if _, rerr := f.wc.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil && !strings.Contains(rerr.Error(), "no transaction") {
			err = fmt.Errorf("%w (and roll back: %v)", err, rerr)
		}
	}()
	return fn(writer{f})
}

// createTables creates the collection's tables (and the shared ones).
func createTables(ctx context.Context, w writer, n names) error {
	stmts := []string{
		"CREATE TABLE IF NOT EXISTS " + pathsTable + " (c TEXT NOT NULL, f TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (c, f)) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS " + indexesTable + " (c TEXT NOT NULL, name TEXT NOT NULL, keys BLOB, PRIMARY KEY (c, name)) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS " + n.d + " (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, doc BLOB NOT NULL)",
		"CREATE TABLE IF NOT EXISTS " + n.x + " (f TEXT NOT NULL, v ANY NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (f, v, rid)) STRICT, WITHOUT ROWID",
		"CREATE INDEX IF NOT EXISTS " + n.r + " ON " + n.x + " (rid, f, v)",
	}
	for _, s := range stmts {
		if _, err := w.f.wc.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("create tables of %s: %w", n.coll, err)
		}
	}
	return nil
}
