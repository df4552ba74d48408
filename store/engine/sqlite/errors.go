package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sqlite3 "modernc.org/sqlite/lib"

	"fhirstore/store/engine"
)

// classify wraps err with op, marking what means the file is out of reach
// (engine.ErrUnavailable) and unique-key violations (engine.ErrDuplicateKey).
func classify(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrDuplicateKey), errors.Is(err, engine.ErrUnavailable),
		errors.Is(err, engine.ErrUnsupported), errors.Is(err, engine.ErrNoDocuments):
		return fmt.Errorf("%s: %w", op, err)
	case isUnique(err):
		return fmt.Errorf("%s: %w: %w", op, engine.ErrDuplicateKey, err)
	case unreachable(err):
		return fmt.Errorf("%s: %w: %w", op, engine.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func sqliteCode(err error) int {
	var se *sqliteError
	if errors.As(err, &se) {
		return se.code & 0xff // the primary result code
	}
	return -1
}

func isUnique(err error) bool {
	var se *sqliteError
	return errors.As(err, &se) && (se.code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

// unreachable tells the errors that mean the database cannot be used now:
// a closed engine, a file that cannot be opened or read, a lock held too
// long by another process, or the caller giving up while waiting.
func unreachable(err error) bool {
	if errors.Is(err, errClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch sqliteCode(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_INTERRUPT,
		sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOMEM:
		return true
	}
	return false
}

// noTable tells the error of reading a collection that has no tables yet
// (or any more): it holds nothing. SQLite reports it when it prepares the
// statement (SQLITE_ERROR) or, for a statement prepared on a connection
// whose schema already had the tables, when it prepares it again for a
// read snapshot taken before they were created (SQLITE_SCHEMA).
func noTable(err error) bool {
	var se *sqliteError
	if !errors.As(err, &se) || !strings.HasPrefix(se.msg, "no such table") {
		return false
	}
	code := se.code & 0xff
	return code == sqlite3.SQLITE_ERROR || code == sqlite3.SQLITE_SCHEMA
}

// errClosed is the error of using a closed engine.
var errClosed = errors.New("engine closed")
