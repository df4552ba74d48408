package viewsql

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Functions are the SQL functions a query may call: SQLite's core scalar,
// aggregate, window, date, math and JSON functions that read their
// arguments and nothing else. Left out: load_extension, randomblob and
// zeroblob (memory), and every function that reports on or changes the
// database itself.
var Functions = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`
		abs char coalesce concat concat_ws format glob hex ifnull iif instr length like likelihood likely
		lower ltrim max min nullif octet_length printf quote random replace round rtrim sign soundex
		substr substring trim typeof unhex unicode unlikely upper
		avg count group_concat string_agg sum total
		row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
		date time datetime julianday unixepoch strftime timediff
		acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10 log2
		mod pi pow power radians sin sinh sqrt tan tanh trunc
		json json_array json_array_length json_extract json_insert json_object json_patch json_quote
		json_remove json_replace json_set json_type json_valid json_group_array json_group_object`) {
		Functions[f] = true
	}
}

// Authorizer action codes and answers (sqlite3.h).
const (
	actionRead      = 20
	actionSelect    = 21
	actionFunction  = 31
	actionRecursive = 33
	authOK          = 0
	authDeny        = 1
)

// actionNames name the refused actions in errors.
var actionNames = map[int32]string{
	0: "COPY", 1: "CREATE INDEX", 2: "CREATE TABLE", 3: "CREATE TEMP INDEX", 4: "CREATE TEMP TABLE",
	5: "CREATE TEMP TRIGGER", 6: "CREATE TEMP VIEW", 7: "CREATE TRIGGER", 8: "CREATE VIEW", 9: "DELETE",
	10: "DROP INDEX", 11: "DROP TABLE", 12: "DROP TEMP INDEX", 13: "DROP TEMP TABLE", 14: "DROP TEMP TRIGGER",
	15: "DROP TEMP VIEW", 16: "DROP TRIGGER", 17: "DROP VIEW", 18: "INSERT", 19: "PRAGMA", 22: "a transaction",
	23: "UPDATE", 24: "ATTACH", 25: "DETACH", 26: "ALTER TABLE", 27: "REINDEX", 28: "ANALYZE",
	29: "CREATE VIRTUAL TABLE", 30: "DROP VIRTUAL TABLE", 32: "a savepoint",
}

// policy is what the authorizer of one connection allows: reading the
// views' tables and calling Functions. It remembers the first refusal.
type policy struct {
	id     uintptr
	tables map[string]bool
	mu     sync.Mutex
	denied string
}

// policies are the installed policies by id: the authorizer receives
// the id, a plain number, from SQLite.
var policies = struct {
	sync.Mutex
	m    map[uintptr]*policy
	next uintptr
}{m: map[uintptr]*policy{}}

func newPolicy(tables map[string]bool) *policy {
	policies.Lock()
	defer policies.Unlock()
	policies.next++
	p := &policy{id: policies.next, tables: tables}
	policies.m[p.id] = p
	return p
}

func (p *policy) release() {
	policies.Lock()
	defer policies.Unlock()
	delete(policies.m, p.id)
}

// refusal is why the last statement was refused, "" when it was not.
func (p *policy) refusal() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.denied
}

func (p *policy) deny(format string, args ...any) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.denied == "" {
		p.denied = fmt.Sprintf(format, args...)
	}
	return authDeny
}

// authorize is the SQLite authorizer callback (sqlite3_set_authorizer).
func authorize(_ *libc.TLS, arg uintptr, action int32, z1, z2, db, _ uintptr) int32 {
	policies.Lock()
	p := policies.m[arg]
	policies.Unlock()
	if p == nil {
		return authDeny
	}
	switch action {
	case actionSelect, actionRecursive:
		return authOK
	case actionRead:
		table := libc.GoString(z1)
		// A common table expression is read in no database.
		if db == 0 || p.tables[strings.ToLower(table)] {
			return authOK
		}
		return p.deny("the query reads %s, which is not one of its views' tables", table)
	case actionFunction:
		fn := strings.ToLower(libc.GoString(z2))
		if Functions[fn] {
			return authOK
		}
		return p.deny("the query calls %s(), which is not among the functions allowed over views", fn)
	}
	what := actionNames[action]
	if what == "" {
		what = fmt.Sprintf("action %d", action)
	}
	return p.deny("the query runs %s; only reading the views' tables is allowed", what)
}

// errDriver: the SQLite driver's connection is not what install expects.
var errDriver = errors.New("sql over views: the SQLite driver's connection has changed; no authorizer can be set")

// install sets p as the authorizer of conn. database/sql and the driver
// expose no authorizer, so the driver connection's handle is read by
// reflection and passed to SQLite's own sqlite3_set_authorizer.
func install(conn *sql.Conn, p *policy) error {
	return conn.Raw(func(dc any) error {
		v := reflect.ValueOf(dc)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return errDriver
		}
		db, tls := v.Elem().FieldByName("db"), v.Elem().FieldByName("tls")
		if db.Kind() != reflect.Uintptr || !tls.IsValid() || tls.Type() != reflect.TypeOf((*libc.TLS)(nil)) {
			return errDriver
		}
		t := (*libc.TLS)(tls.UnsafePointer())
		if rc := sqlite3.Xsqlite3_set_authorizer(t, uintptr(db.Uint()), cFuncPointer(authorize), p.id); rc != sqlite3.SQLITE_OK {
			return fmt.Errorf("sql over views: set the authorizer: code %d", rc)
		}
		return nil
	})
}

// cFuncPointer is the address SQLite calls for the Go function f, a
// top-level function (whose function value never moves).
func cFuncPointer[T any](f T) uintptr {
	return *(*uintptr)(unsafe.Pointer(&struct{ f T }{f}))
}

// FunctionNames lists Functions alphabetically.
func FunctionNames() []string {
	out := make([]string, 0, len(Functions))
	for f := range Functions {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}
