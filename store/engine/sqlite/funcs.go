package sqlite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQL functions the planner's statements call to check a document they
// hold (see rowkeys.go):
//
//	fs_row(k, doc, f, path, op, kind, v...)  an entry at path (numbered f) satisfies op
//	fs_sort(k, doc, f, path, desc)           the least (greatest) scalar at path, or NULL
//
// k is the document's row keys, doc its stored form: it is decompressed
// only when the answer depends on text k does not hold. For op opExists,
// f is a JSON array of the numbers of the path and of the paths below it.

// rowFuncs is the state of one connection's functions.
type rowFuncs struct {
	codec *codec

	// the last document the doc forms decoded, and its entries
	doc     []byte
	entries []entry
	buf     []byte
	err     error

	lists map[string][]int64 // fs_row's JSON path numbers, parsed

	out     uintptr // C memory a result is copied through
	outSize int
}

// funcStates maps the user data of a registered function to its
// connection's state: SQLite hands C callbacks an integer only, so the
// connections' states are kept here while they are open.
var funcStates sync.Map // uintptr → *rowFuncs

var lastFuncState atomic.Uintptr

// registerFuncs creates the functions on connection c.
func registerFuncs(c *conn, cd *codec) error {
	h := lastFuncState.Add(1)
	funcStates.Store(h, &rowFuncs{codec: cd, lists: map[string][]int64{}})
	c.funcs = h
	for _, f := range []struct {
		name string
		fn   func(*libc.TLS, uintptr, int32, uintptr)
	}{
		{"fs_row", rowFunc},
		{"fs_sort", sortFunc},
	} {
		name, err := libc.CString(f.name)
		if err != nil {
			return err
		}
		rc := sqlite3.Xsqlite3_create_function(c.tls, c.db, name, -1, sqlite3.SQLITE_UTF8|sqlite3.SQLITE_DETERMINISTIC, h,
			*(*uintptr)(unsafe.Pointer(&struct {
				f func(*libc.TLS, uintptr, int32, uintptr)
			}{f.fn})), 0, 0)
		libc.Xfree(c.tls, name)
		if rc != sqlite3.SQLITE_OK {
			return fmt.Errorf("create function %s: %w", f.name, c.error(rc))
		}
	}
	return nil
}

// releaseFuncs forgets the state of c's functions (c is closing).
func releaseFuncs(c *conn) {
	if c.funcs == 0 {
		return
	}
	if s, ok := funcStates.LoadAndDelete(c.funcs); ok {
		st := s.(*rowFuncs)
		if st.out != 0 {
			libc.Xfree(c.tls, st.out)
		}
	}
	c.funcs = 0
}

// call is one invocation of a function.
type call struct {
	tls  *libc.TLS
	ctx  uintptr
	argv uintptr
	argc int
	st   *rowFuncs
}

func newCall(tls *libc.TLS, ctx uintptr, argc int32, argv uintptr) *call {
	s, _ := funcStates.Load(sqlite3.Xsqlite3_user_data(tls, ctx))
	st, _ := s.(*rowFuncs)
	return &call{tls: tls, ctx: ctx, argv: argv, argc: int(argc), st: st}
}

func (c *call) value(i int) uintptr {
	return readPointer(c.argv + uintptr(i)*ptrSize)
}

// arg reads argument i as an entry value would be: REAL and INTEGER as
// float64, TEXT as string, BLOB as []byte (valid during the call), NULL
// as nil.
func (c *call) arg(i int) any {
	v := c.value(i)
	switch sqlite3.Xsqlite3_value_type(c.tls, v) {
	case sqlite3.SQLITE_INTEGER:
		return float64(sqlite3.Xsqlite3_value_int64(c.tls, v))
	case sqlite3.SQLITE_FLOAT:
		return sqlite3.Xsqlite3_value_double(c.tls, v)
	case sqlite3.SQLITE_TEXT:
		p := sqlite3.Xsqlite3_value_text(c.tls, v)
		n := sqlite3.Xsqlite3_value_bytes(c.tls, v)
		return string(libc.GoBytes(p, int(n)))
	case sqlite3.SQLITE_BLOB:
		p := sqlite3.Xsqlite3_value_blob(c.tls, v)
		n := sqlite3.Xsqlite3_value_bytes(c.tls, v)
		if n == 0 {
			return []byte{}
		}
		return libc.GoBytes(p, int(n))
	}
	return nil
}

func (c *call) int(i int) int64 { return sqlite3.Xsqlite3_value_int64(c.tls, c.value(i)) }

// cond reads the condition of arguments from (op, kind, values...).
func (c *call) cond(from int) *cond {
	cd := &cond{op: op(c.int(from)), kind: kind(c.int(from + 1))}
	for i := from + 2; i < c.argc; i++ {
		v := c.arg(i)
		if b, ok := v.([]byte); ok {
			v = bytes.Clone(b)
		}
		cd.vals = append(cd.vals, v)
	}
	return cd
}

func (c *call) resultBool(b bool) {
	sqlite3.Xsqlite3_result_int(c.tls, c.ctx, int32(boolInt(b)))
}

func (c *call) resultError(err error) {
	msg := err.Error()
	p := c.out(len(msg))
	copy(libc.GoBytes(p, len(msg)), msg)
	sqlite3.Xsqlite3_result_error(c.tls, c.ctx, p, int32(len(msg)))
}

// out is C memory for n bytes of a result.
func (c *call) out(n int) uintptr {
	st := c.st
	if n+1 > st.outSize {
		if st.out != 0 {
			libc.Xfree(c.tls, st.out)
		}
		st.outSize = max(256, n+1)
		st.out = libc.Xmalloc(c.tls, types.Size_t(st.outSize))
	}
	return st.out
}

// result returns an entry value (nil: NULL).
func (c *call) result(v any) {
	switch x := v.(type) {
	case nil:
		sqlite3.Xsqlite3_result_null(c.tls, c.ctx)
	case float64:
		sqlite3.Xsqlite3_result_double(c.tls, c.ctx, x)
	case int64:
		sqlite3.Xsqlite3_result_double(c.tls, c.ctx, float64(x))
	case string:
		p := c.out(len(x))
		copy(libc.GoBytes(p, len(x)), x)
		sqlite3.Xsqlite3_result_text(c.tls, c.ctx, p, int32(len(x)), transient)
	case []byte:
		p := c.out(len(x))
		copy(libc.GoBytes(p, len(x)), x)
		sqlite3.Xsqlite3_result_blob(c.tls, c.ctx, p, int32(len(x)), transient)
	}
}

// rowFunc is fs_row(k, doc, f, path, op, kind, v...).
func rowFunc(tls *libc.TLS, ctx uintptr, argc int32, argv uintptr) {
	c := newCall(tls, ctx, argc, argv)
	if c.st == nil || argc < 6 {
		c.resultError(errRowKeys)
		return
	}
	k, _ := c.arg(0).([]byte)
	path, _ := c.arg(3).(string)
	cd := c.cond(4)
	var fs []int64
	switch f := c.arg(2).(type) {
	case float64:
		fs = []int64{int64(f)}
	case string:
		fs = c.st.list(f)
	}
	found, text := false, false
	last := int64(-1)
	for _, f := range fs {
		last = max(last, f)
	}
	r := rowReader{k: k}
	for !found && r.next() && r.f <= last {
		if !slices.Contains(fs, r.f) {
			continue
		}
		switch {
		case cd.op == opExists:
			found = true
		case r.text:
			text = true
			found = cd.op == opScalar
		default:
			found = cd.holds(r.value())
		}
	}
	if r.err != nil {
		c.resultError(r.err)
		return
	}
	if !found && text && cd.onText() {
		doc, _ := c.arg(1).([]byte)
		entries, err := c.st.docEntries(doc)
		if err != nil {
			c.resultError(err)
			return
		}
		for _, e := range entries {
			if e.f == path && cd.holds(e.v) {
				found = true
				break
			}
		}
	}
	c.resultBool(found)
}

// onText tells whether c can hold for a text value.
func (c *cond) onText() bool {
	switch c.op {
	case opPrefix, opSubstr:
		return true
	case opEq, opIn, opGt, opGte, opLt, opLte:
		return c.kind == kindString
	}
	return false
}

// list parses a JSON array of path numbers.
func (st *rowFuncs) list(s string) []int64 {
	if l, ok := st.lists[s]; ok {
		return l
	}
	var l []int64
	_ = json.Unmarshal([]byte(s), &l)
	if len(st.lists) > 64 {
		clear(st.lists)
	}
	st.lists[s] = l
	return l
}

// sortFunc is fs_sort(k, doc, f, path, desc).
func sortFunc(tls *libc.TLS, ctx uintptr, argc int32, argv uintptr) {
	c := newCall(tls, ctx, argc, argv)
	if c.st == nil || argc != 5 {
		c.resultError(errRowKeys)
		return
	}
	k, _ := c.arg(0).([]byte)
	f, _ := c.arg(2).(float64)
	desc := c.int(4) != 0
	var vals []any
	text := false
	r := rowReader{k: k}
	for r.next() && r.f <= int64(f) {
		switch {
		case r.f != int64(f):
		case r.text:
			text = true
		default:
			vals = append(vals, r.value())
		}
	}
	if r.err != nil {
		c.resultError(r.err)
		return
	}
	if text {
		doc, _ := c.arg(1).([]byte)
		path, _ := c.arg(3).(string)
		entries, err := c.st.docEntries(doc)
		if err != nil {
			c.resultError(err)
			return
		}
		vals = vals[:0]
		for _, e := range entries {
			if e.f == path {
				vals = append(vals, e.v)
			}
		}
	}
	c.result(sortsBy(vals, desc))
}

// docEntries returns the entries of a stored document, decoding it
// unless it is the one decoded last.
func (st *rowFuncs) docEntries(doc []byte) ([]entry, error) {
	if st.doc != nil && bytes.Equal(st.doc, doc) {
		return st.entries, st.err
	}
	st.doc = append(st.doc[:0], doc...)
	rest, err := st.codec.restOf(doc, st.buf)
	if err == nil {
		st.buf = rest
		st.entries, err = docEntries(rest)
	}
	st.err = err
	return st.entries, err
}
