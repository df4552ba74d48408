package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// The engine talks to SQLite through its C API (modernc.org/sqlite/lib,
// SQLite compiled to Go) rather than through database/sql: the driver
// prepares every statement again on each execution, which costs more than
// running most of this engine's queries; here each connection keeps its
// prepared statements.

// transient tells SQLite to copy a bound value (SQLITE_TRANSIENT).
const transient = ^uintptr(0)

// conn is one SQLite connection, used by one goroutine at a time.
type conn struct {
	tls     *libc.TLS
	db      uintptr
	stmts   map[string]*stmt
	scratch uintptr // C memory values are copied through to be bound
	size    int
	codes   *fieldCodes // the writer's path numbers (nil on readers)
	paths   *pathLog    // the writer's changes of the path counts (nil on readers)
	funcs   uintptr     // the state of its SQL functions (funcs.go), 0 without
}

// stmtCacheSize bounds the statements a connection keeps prepared: a
// query's SQL depends on its filter's shape, not on its values.
const stmtCacheSize = 256

// openConn opens path and runs the pragmas.
func openConn(path string, pragmas []string) (*conn, error) {
	c := &conn{tls: libc.NewTLS(), stmts: map[string]*stmt{}}
	name, err := libc.CString(path)
	if err != nil {
		c.tls.Close()
		return nil, err
	}
	defer libc.Xfree(c.tls, name)
	pdb := libc.Xmalloc(c.tls, ptrSize)
	defer libc.Xfree(c.tls, pdb)
	flags := int32(sqlite3.SQLITE_OPEN_READWRITE | sqlite3.SQLITE_OPEN_CREATE | sqlite3.SQLITE_OPEN_FULLMUTEX)
	rc := sqlite3.Xsqlite3_open_v2(c.tls, name, pdb, flags, 0)
	c.db = readPointer(pdb)
	if rc != sqlite3.SQLITE_OK {
		err := c.error(rc)
		c.close()
		return nil, err
	}
	sqlite3.Xsqlite3_extended_result_codes(c.tls, c.db, 1)
	for _, p := range pragmas {
		if err := c.run(context.Background(), "PRAGMA "+p); err != nil {
			c.close()
			return nil, fmt.Errorf("PRAGMA %s: %w", p, err)
		}
	}
	return c, nil
}

// close finalizes the statements and closes the connection.
func (c *conn) close() error {
	defer releaseFuncs(c)
	for q, s := range c.stmts {
		sqlite3.Xsqlite3_finalize(c.tls, s.p)
		delete(c.stmts, q)
	}
	var err error
	if c.db != 0 {
		if rc := sqlite3.Xsqlite3_close_v2(c.tls, c.db); rc != sqlite3.SQLITE_OK {
			err = c.error(rc)
		}
		c.db = 0
	}
	if c.scratch != 0 {
		libc.Xfree(c.tls, c.scratch)
		c.scratch = 0
	}
	c.tls.Close()
	return err
}

// sqliteError is an error SQLite reported, with its (extended) result code.
type sqliteError struct {
	code int
	msg  string
}

func (e *sqliteError) Error() string { return fmt.Sprintf("sqlite: %s (%d)", e.msg, e.code) }

// error is the connection's last error, for result code rc.
func (c *conn) error(rc int32) error {
	msg := "unknown error"
	if c.db != 0 {
		msg = libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db))
		if ext := sqlite3.Xsqlite3_extended_errcode(c.tls, c.db); ext&0xff == rc&0xff {
			rc = ext
		}
	}
	return &sqliteError{code: int(rc), msg: msg}
}

// stmt is a prepared statement of a connection.
type stmt struct {
	c      *conn
	p      uintptr
	q      string
	params int
	busy   bool // stepping: a second use needs a statement of its own
	cached bool
}

// prepare returns the statement for q: the cached one when it is free.
func (c *conn) prepare(q string) (*stmt, error) {
	if s, ok := c.stmts[q]; ok && !s.busy {
		return s, nil
	}
	s, err := c.prepareOnce(q)
	if err != nil {
		return nil, err
	}
	if _, taken := c.stmts[q]; !taken {
		if len(c.stmts) >= stmtCacheSize {
			for k, old := range c.stmts { // evict one, any free one
				if !old.busy {
					sqlite3.Xsqlite3_finalize(c.tls, old.p)
					delete(c.stmts, k)
					break
				}
			}
		}
		c.stmts[q] = s
		s.cached = true
	}
	return s, nil
}

// prepareOnce prepares q for one use.
func (c *conn) prepareOnce(q string) (*stmt, error) {
	cq, err := libc.CString(q)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, cq)
	pp := libc.Xmalloc(c.tls, ptrSize)
	defer libc.Xfree(c.tls, pp)
	if rc := sqlite3.Xsqlite3_prepare_v3(c.tls, c.db, cq, -1, sqlite3.SQLITE_PREPARE_PERSISTENT, pp, 0); rc != sqlite3.SQLITE_OK {
		return nil, c.error(rc)
	}
	s := &stmt{c: c, p: readPointer(pp), q: q}
	if s.p == 0 {
		return nil, fmt.Errorf("sqlite: empty statement %q", q)
	}
	s.params = int(sqlite3.Xsqlite3_bind_parameter_count(c.tls, s.p))
	return s, nil
}

// bind binds args to the statement's parameters, in order.
func (s *stmt) bind(args []any) error {
	if len(args) != s.params {
		return fmt.Errorf("sqlite: %d arguments for %d parameters of %q", len(args), s.params, s.q)
	}
	c := s.c
	for i, a := range args {
		n := int32(i + 1)
		var rc int32
		switch v := a.(type) {
		case nil:
			rc = sqlite3.Xsqlite3_bind_null(c.tls, s.p, n)
		case string:
			rc = sqlite3.Xsqlite3_bind_text(c.tls, s.p, n, copyIn(c, v), int32(len(v)), transient)
		case []byte:
			rc = sqlite3.Xsqlite3_bind_blob(c.tls, s.p, n, copyIn(c, v), int32(len(v)), transient)
		case float64:
			rc = sqlite3.Xsqlite3_bind_double(c.tls, s.p, n, v)
		case int64:
			rc = sqlite3.Xsqlite3_bind_int64(c.tls, s.p, n, v)
		case int:
			rc = sqlite3.Xsqlite3_bind_int64(c.tls, s.p, n, int64(v))
		case bool:
			rc = sqlite3.Xsqlite3_bind_int64(c.tls, s.p, n, int64(boolInt(v)))
		default:
			return fmt.Errorf("sqlite: cannot bind %T", a)
		}
		if rc != sqlite3.SQLITE_OK {
			return c.error(rc)
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// copyIn copies v into the connection's scratch memory (which SQLite
// copies from in turn), returning its address (never 0: a zero address
// would bind NULL).
func copyIn[T string | []byte](c *conn, v T) uintptr {
	n := len(v)
	if n+1 > c.size {
		size := max(64, 2*c.size, n+1)
		if c.scratch != 0 {
			libc.Xfree(c.tls, c.scratch)
		}
		c.scratch, c.size = libc.Xmalloc(c.tls, types.Size_t(size)), size
	}
	copy(libc.GoBytes(c.scratch, n), v)
	return c.scratch
}

// readPointer reads the pointer SQLite wrote at p.
func readPointer(p uintptr) uintptr {
	if ptrSize == 4 {
		return uintptr(binary.NativeEndian.Uint32(libc.GoBytes(p, 4)))
	}
	return uintptr(binary.NativeEndian.Uint64(libc.GoBytes(p, 8)))
}

const ptrSize = 4 << (^uintptr(0) >> 63) // 4 or 8

// rows is a statement being stepped through.
type rows struct {
	s    *stmt
	stop func() bool // ends the context watch
	// interrupted is closed once the watch, when it fired, has interrupted
	// the connection
	interrupted chan struct{}
	done        bool
	err         error
	ctx         context.Context
}

// query starts q with args; the caller must close the rows.
func (c *conn) query(ctx context.Context, q string, args []any) (*rows, error) {
	s, err := c.prepare(q)
	if err != nil {
		return nil, err
	}
	return c.start(ctx, s, args)
}

// start binds args and starts stepping s.
func (c *conn) start(ctx context.Context, s *stmt, args []any) (*rows, error) {
	if err := ctx.Err(); err != nil {
		if !s.cached {
			sqlite3.Xsqlite3_finalize(c.tls, s.p)
		}
		return nil, err
	}
	if err := s.bind(args); err != nil {
		sqlite3.Xsqlite3_clear_bindings(c.tls, s.p)
		if !s.cached {
			sqlite3.Xsqlite3_finalize(c.tls, s.p)
		}
		return nil, err
	}
	s.busy = true
	r := &rows{s: s, ctx: ctx}
	if ctx.Done() != nil {
		db := c.db
		r.interrupted = make(chan struct{})
		r.stop = context.AfterFunc(ctx, func() {
			defer close(r.interrupted)
			tls := libc.NewTLS()
			sqlite3.Xsqlite3_interrupt(tls, db)
			tls.Close()
		})
	}
	return r, nil
}

// next steps to the next row, reporting whether there is one.
func (r *rows) next() bool {
	if r.done {
		return false
	}
	c := r.s.c
	switch rc := sqlite3.Xsqlite3_step(c.tls, r.s.p); rc {
	case sqlite3.SQLITE_ROW:
		return true
	case sqlite3.SQLITE_DONE:
	default:
		r.err = c.error(rc)
		if rc&0xff == sqlite3.SQLITE_INTERRUPT && r.ctx.Err() != nil {
			r.err = fmt.Errorf("%w: %w", r.ctx.Err(), r.err)
		}
	}
	r.close()
	return false
}

// close resets the statement for its next use.
func (r *rows) close() {
	if r.done {
		return
	}
	r.done = true
	if r.stop != nil && !r.stop() {
		// The watch fired: its interrupt must land before the connection
		// runs anyone else's statement (it would stop that one instead).
		<-r.interrupted
	}
	s := r.s
	sqlite3.Xsqlite3_reset(s.c.tls, s.p)
	s.busy = false
	if !s.cached {
		sqlite3.Xsqlite3_finalize(s.c.tls, s.p)
	}
}

// null tells whether column i is NULL.
func (r *rows) null(i int) bool {
	return sqlite3.Xsqlite3_column_type(r.s.c.tls, r.s.p, int32(i)) == sqlite3.SQLITE_NULL
}

// int64 is column i as an integer.
func (r *rows) int64(i int) int64 {
	return sqlite3.Xsqlite3_column_int64(r.s.c.tls, r.s.p, int32(i))
}

// bytes is a copy of column i as a blob.
func (r *rows) bytes(i int) []byte {
	c := r.s.c
	p := sqlite3.Xsqlite3_column_blob(c.tls, r.s.p, int32(i))
	n := int(sqlite3.Xsqlite3_column_bytes(c.tls, r.s.p, int32(i)))
	out := make([]byte, n)
	copy(out, libc.GoBytes(p, n))
	return out
}

// view is column i as a blob in SQLite's memory, without a copy: valid
// until the statement steps again or is reset.
func (r *rows) view(i int) []byte {
	c := r.s.c
	p := sqlite3.Xsqlite3_column_blob(c.tls, r.s.p, int32(i))
	n := int(sqlite3.Xsqlite3_column_bytes(c.tls, r.s.p, int32(i)))
	return libc.GoBytes(p, n)
}

// text is column i as a string.
func (r *rows) text(i int) string {
	c := r.s.c
	p := sqlite3.Xsqlite3_column_text(c.tls, r.s.p, int32(i))
	n := int(sqlite3.Xsqlite3_column_bytes(c.tls, r.s.p, int32(i)))
	return string(libc.GoBytes(p, n))
}

// value is column i as an entry value: string, float64, int64, []byte or nil.
func (r *rows) value(i int) any {
	switch sqlite3.Xsqlite3_column_type(r.s.c.tls, r.s.p, int32(i)) {
	case sqlite3.SQLITE_TEXT:
		return r.text(i)
	case sqlite3.SQLITE_FLOAT:
		return sqlite3.Xsqlite3_column_double(r.s.c.tls, r.s.p, int32(i))
	case sqlite3.SQLITE_INTEGER:
		return r.int64(i)
	case sqlite3.SQLITE_BLOB:
		return r.bytes(i)
	}
	return nil
}

// exec runs q with args to its end, returning the rows it changed.
func (c *conn) exec(ctx context.Context, q string, args ...any) (int64, error) {
	r, err := c.query(ctx, q, args)
	if err != nil {
		return 0, err
	}
	return c.finish(r)
}

func (c *conn) finish(r *rows) (int64, error) {
	for r.next() {
	}
	if r.err != nil {
		return 0, r.err
	}
	return int64(sqlite3.Xsqlite3_changes(c.tls, c.db)), nil
}

// run runs q (no arguments) without keeping it prepared.
func (c *conn) run(ctx context.Context, q string) error {
	s, err := c.prepareOnce(q)
	if err != nil {
		return err
	}
	r, err := c.start(ctx, s, nil)
	if err != nil {
		return err
	}
	_, err = c.finish(r)
	return err
}

// lastID is the rowid of the connection's last insert.
func (c *conn) lastID() int64 { return sqlite3.Xsqlite3_last_insert_rowid(c.tls, c.db) }

// queryStrings runs q and returns its first column's strings.
func queryStrings(ctx context.Context, w *conn, q string) ([]string, error) {
	r, err := w.query(ctx, q, nil)
	if err != nil {
		return nil, err
	}
	defer r.close()
	var out []string
	for r.next() {
		out = append(out, r.text(0))
	}
	return out, r.err
}

// queryRow runs q and reads its first row into dest (*int64, *nullInt64,
// *[]byte, *string); it reports whether there was a row.
func (c *conn) queryRow(ctx context.Context, q string, args []any, dest ...any) (bool, error) {
	r, err := c.query(ctx, q, args)
	if err != nil {
		return false, err
	}
	defer r.close()
	if !r.next() {
		return false, r.err
	}
	for i, d := range dest {
		switch p := d.(type) {
		case *int64:
			*p = r.int64(i)
		case *nullInt64:
			*p = nullInt64{v: r.int64(i), ok: !r.null(i)}
		case *[]byte:
			*p = r.bytes(i)
		case *string:
			*p = r.text(i)
		default:
			return false, fmt.Errorf("sqlite: cannot scan into %T", d)
		}
	}
	return true, nil
}

// nullInt64 is an integer column that may be NULL.
type nullInt64 struct {
	v  int64
	ok bool
}
