// Package viewsql runs read-only SQL over SQL on FHIR views. Each view a
// query names is materialized into a table of a private SQLite database, a
// temporary file of its own that no tenant's database ever shares; the
// query then runs there on a connection whose authorizer allows reading
// those tables and calling the functions of Functions, and refuses
// everything else (writes, ATTACH, PRAGMA, schema changes, extensions).
// Time, row and size limits bound every query.
package viewsql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"

	"fhirstore/fhirschema/view"
)

// Limits bound one query; zero fields take the defaults.
type Limits struct {
	// Timeout bounds materializing the views and running the query
	// (default 30s).
	Timeout time.Duration
	// MaxRows is the most rows an answer may have (default 100,000).
	MaxRows int
	// MaxBytes bounds the materialized tables on disk (default 1 GiB).
	MaxBytes int64
	// CacheBytes bounds the memory of the database's page cache (default
	// 64 MiB); sorts and temporary results beyond it go to temporary files.
	CacheBytes int64
}

// Defaults of Limits.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxRows    = 100_000
	DefaultMaxBytes   = 1 << 30
	DefaultCacheBytes = 64 << 20
)

// WithDefaults fills the zero fields of l.
func (l Limits) WithDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxRows <= 0 {
		l.MaxRows = DefaultMaxRows
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.CacheBytes <= 0 {
		l.CacheBytes = DefaultCacheBytes
	}
	return l
}

// pageSize is the page size of the private databases.
const pageSize = 4096

// Errors of a query; the HTTP layer maps them to statuses.
var (
	// ErrNotAllowed: the query does something other than reading the
	// views' tables with the allowed functions (403).
	ErrNotAllowed = errors.New("not allowed in a query over views")
	// ErrBadQuery: the query is not one SELECT, does not compile, or names
	// a table that is not one of its views (400).
	ErrBadQuery = errors.New("bad query")
	// ErrLimit: the query went past a time, row or size limit (400).
	ErrLimit = errors.New("query limit reached")
)

// DB is a private SQLite database for one query: create the views'
// tables, fill them, then Query. It is not safe for concurrent use.
type DB struct {
	limits Limits
	dir    string
	db     *sql.DB
	conn   *sql.Conn
	tables map[string]bool
	names  []string
	guard  *policy
	// writers are the tables' writers, rolled back on Close if left open.
	writers []*tableWriter
}

// Open creates a private database in a new temporary directory under
// tmpDir ("" for the system's).
func Open(ctx context.Context, tmpDir string, limits Limits) (*DB, error) {
	limits = limits.WithDefaults()
	dir, err := os.MkdirTemp(tmpDir, "fhirstore-sql-*")
	if err != nil {
		return nil, fmt.Errorf("sql over views: temporary directory: %w", err)
	}
	d := &DB{limits: limits, dir: dir, tables: map[string]bool{}}
	if err := d.open(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

func (d *DB) open(ctx context.Context) error {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.dir, "views.db"))
	if err != nil {
		return fmt.Errorf("sql over views: open: %w", err)
	}
	db.SetMaxOpenConns(1)
	d.db = db
	if d.conn, err = db.Conn(ctx); err != nil {
		return fmt.Errorf("sql over views: connect: %w", err)
	}
	pragmas := []string{
		"PRAGMA page_size=" + strconv.Itoa(pageSize),
		"PRAGMA journal_mode=OFF",
		"PRAGMA synchronous=OFF",
		"PRAGMA temp_store=FILE",
		"PRAGMA mmap_size=0",
		"PRAGMA trusted_schema=OFF",
		fmt.Sprintf("PRAGMA cache_size=-%d", max(d.limits.CacheBytes/1024, 1)),
		fmt.Sprintf("PRAGMA max_page_count=%d", max(d.limits.MaxBytes/pageSize, 16)),
	}
	for _, p := range pragmas {
		if _, err := d.conn.ExecContext(ctx, p); err != nil {
			return fmt.Errorf("sql over views: %s: %w", p, err)
		}
	}
	return nil
}

// Close closes the database and removes its files.
func (d *DB) Close() error {
	var errs []error
	for _, w := range d.writers {
		if w.tx != nil {
			w.abort()
		}
	}
	if d.conn != nil {
		errs = append(errs, d.conn.Close())
	}
	if d.db != nil {
		errs = append(errs, d.db.Close())
	}
	if d.guard != nil {
		d.guard.release()
	}
	errs = append(errs, os.RemoveAll(d.dir))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sql over views: close: %w", err)
	}
	return nil
}

// sqlType is the SQLite column type of a view column.
func sqlType(c view.Column) string {
	if c.Collection {
		return "TEXT" // the values as a JSON array
	}
	switch c.Type {
	case "integer", "positiveInt", "unsignedInt", "integer64", "boolean":
		return "INTEGER"
	case "decimal":
		return "REAL"
	}
	return "TEXT"
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Table creates the table name with the view's columns and returns a
// writer of its rows (a view Sink), which must be closed before Query.
func (d *DB) Table(ctx context.Context, name string, cols []view.Column) (view.Sink, error) {
	key := strings.ToLower(name)
	if d.tables[key] {
		return nil, fmt.Errorf("%w: table %s is named twice", ErrBadQuery, name)
	}
	if d.guard != nil {
		return nil, errors.New("sql over views: tables are created before the query runs")
	}
	defs := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = quoteIdent(c.Name) + " " + sqlType(c)
		marks[i] = "?"
	}
	if _, err := d.conn.ExecContext(ctx, "CREATE TABLE "+quoteIdent(name)+" ("+strings.Join(defs, ", ")+")"); err != nil {
		return nil, fmt.Errorf("sql over views: create table %s: %w", name, err)
	}
	d.tables[key] = true
	d.names = append(d.names, name)
	tx, err := d.conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sql over views: fill %s: %w", name, err)
	}
	per := max(1, min(insertRows, maxVariables/max(len(cols), 1)))
	tuple := "(" + strings.Join(marks, ", ") + ")"
	stmt, err := tx.PrepareContext(ctx, "INSERT INTO "+quoteIdent(name)+" VALUES "+strings.Repeat(tuple+", ", per-1)+tuple)
	if err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("sql over views: fill %s: %w", name, err)
	}
	w := &tableWriter{ctx: ctx, name: name, tx: tx, stmt: stmt, per: per, width: len(cols), maxBytes: d.limits.MaxBytes,
		insert: "INSERT INTO " + quoteIdent(name) + " VALUES " + tuple}
	d.writers = append(d.writers, w)
	return w, nil
}

// insertRows is how many rows one INSERT statement writes, at most
// maxVariables values in all (SQLite's limit on a statement's parameters).
const (
	insertRows   = 64
	maxVariables = 32000
)

// tableWriter inserts a view's rows into its table, in one transaction.
type tableWriter struct {
	ctx  context.Context
	name string
	tx   *sql.Tx
	// stmt inserts per rows at once from args; insert is the statement of
	// one row, for the rows left at Close.
	stmt     *sql.Stmt
	per      int
	width    int
	args     []any
	insert   string
	maxBytes int64
}

// WriteRow inserts one row; after an error the writer is done (its
// transaction rolled back, the connection free for Close).
func (w *tableWriter) WriteRow(row []any) error {
	if w.tx == nil {
		return fmt.Errorf("sql over views: fill %s: the table is closed", w.name)
	}
	for _, v := range row {
		a, err := sqlValue(v)
		if err != nil {
			w.abort()
			return err
		}
		w.args = append(w.args, a)
	}
	if len(w.args) < w.per*w.width {
		return nil
	}
	_, err := w.stmt.ExecContext(w.ctx, w.args...)
	w.args = w.args[:0]
	return w.failed(err)
}

// failed ends the writer on an insert's error, saying which limit it hit.
func (w *tableWriter) failed(err error) error {
	if err == nil {
		return nil
	}
	w.abort()
	if isFull(err) {
		return fmt.Errorf("%w: the views' tables grow past %d bytes", ErrLimit, w.maxBytes)
	}
	if w.ctx.Err() != nil {
		return fmt.Errorf("%w: filling the views' tables ran longer than allowed", ErrLimit)
	}
	return fmt.Errorf("sql over views: fill %s: %w", w.name, err)
}

func (w *tableWriter) abort() {
	_ = w.stmt.Close()
	_ = w.tx.Rollback()
	w.tx = nil
}

// Close inserts the rows still held and commits the table.
func (w *tableWriter) Close() error {
	if w.tx == nil {
		return nil
	}
	for len(w.args) > 0 {
		_, err := w.tx.ExecContext(w.ctx, w.insert, w.args[:w.width]...)
		w.args = w.args[w.width:]
		if err := w.failed(err); err != nil {
			return err
		}
	}
	_ = w.stmt.Close()
	err := w.tx.Commit()
	w.tx = nil
	if err != nil {
		return fmt.Errorf("sql over views: fill %s: %w", w.name, err)
	}
	return nil
}

// isFull tells SQLite's "database or disk is full", which max_page_count gives.
func isFull(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == 13 // SQLITE_FULL
}

// sqlValue is a row value as SQLite stores it: booleans as 0 and 1,
// collections and complex values as JSON text.
func sqlValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, int64:
		return x, nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case interface{ Int64() (int64, error) }:
		s := fmt.Sprint(x)
		if !strings.ContainsAny(s, ".eE") {
			if n, err := x.Int64(); err == nil {
				return n, nil
			}
		}
		return strconv.ParseFloat(s, 64)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("sql over views: a row value: %w", err)
	}
	return string(b), nil
}
