package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"fhirstore/store/engine"
)

// Backups and checks of one database file, from outside any Engine: the
// file may be open in a server (another process or this one) that keeps
// writing it. Both run on a connection of their own, in one read
// transaction: in WAL mode that is a snapshot of the file that the
// writers never wait for.

// snapshotPragmas configure the connection of Snapshot, Inspect and
// CheckFile: waiting for another process's write lock rather than
// failing. Inspect and CheckFile never write (query_only); Snapshot
// cannot be query_only, as VACUUM INTO writes its target through the
// connection, and writes nothing else.
var snapshotPragmas = []string{"busy_timeout = 10000"}

// openExisting opens the database file at path, refusing a path that is
// not a file (opening would create one); readOnly makes it query_only.
func openExisting(path string, readOnly bool) (*conn, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("open %s: not a file", path)
	}
	p := snapshotPragmas
	if readOnly {
		p = append(p[:len(p):len(p)], "query_only = 1")
	}
	c, err := openConn(path, p)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return c, nil
}

// Snapshot writes a consistent copy of the database file at src to dst,
// which must not exist, with VACUUM INTO: the state of src at one instant
// (its last commit when the copy began), in one self-contained file
// without a WAL, while other connections keep writing src.
func Snapshot(ctx context.Context, src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("snapshot %s: %s exists already", src, dst)
	}
	c, err := openExisting(src, false)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer c.close()
	if err := c.run(ctx, "VACUUM INTO "+sqlString(dst)); err != nil {
		return fmt.Errorf("snapshot %s into %s: %w", src, dst, err)
	}
	return nil
}

// FileInfo is what Inspect reads of a database file.
type FileInfo struct {
	// Format is the file's format version (PRAGMA user_version).
	Format int64
	// Documents counts the documents of each collection.
	Documents map[string]int64
}

// Inspect reads the format version of the database file at path and the
// number of documents of each collection (from the path counts: one
// lookup per collection, whatever their size).
func Inspect(ctx context.Context, path string) (*FileInfo, error) {
	c, err := openExisting(path, true)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	defer c.close()
	info := &FileInfo{Documents: map[string]int64{}}
	if _, err := c.queryRow(ctx, "PRAGMA user_version", nil, &info.Format); err != nil {
		return nil, fmt.Errorf("inspect %s: read the format version: %w", path, err)
	}
	var exists int64
	if _, err := c.queryRow(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", []any{strings.Trim(pathsTable, `"`)}, &exists); err != nil {
		return nil, fmt.Errorf("inspect %s: %w", path, err)
	}
	if exists == 0 {
		return info, nil
	}
	r, err := c.query(ctx, "SELECT c, n FROM "+pathsTable+" WHERE f = ? AND n > 0", []any{docsPath})
	if err != nil {
		return nil, fmt.Errorf("inspect %s: count documents: %w", path, err)
	}
	defer r.close()
	for r.next() {
		info.Documents[r.text(0)] = r.int64(1)
	}
	if r.err != nil {
		return nil, fmt.Errorf("inspect %s: count documents: %w", path, r.err)
	}
	return info, nil
}

// CurrentFormat is the newest format version of a database file: a file
// of a lower version is converted when an Engine opens it; a higher one
// was written by a newer release.
const CurrentFormat = rowFieldsVersion

// CheckOptions tune CheckFile.
type CheckOptions struct {
	// Full decodes every document; otherwise a sample of each collection.
	Full bool
	// Sample is how many documents of each collection are decoded when
	// not Full (default 500).
	Sample int
	// MaxProblems stops the check after that many problems (default 100).
	MaxProblems int
}

// Problem is one thing wrong in a database file: in the file's
// structure (Collection empty) or in one document.
type Problem struct {
	Collection string
	ID         string // the document's _id, when it is about one
	Err        error
}

// CheckResult is what CheckFile found in a file.
type CheckResult struct {
	Format   int64
	Decoded  int64 // documents decoded
	Problems []Problem
}

// CheckFile checks the database file at path: SQLite's integrity check
// of every page and index, the format version, and that the documents of
// every collection (a sample of each unless opts.Full) decode to the
// document that was stored and have their index entries. It returns an
// error only when the file cannot be checked at all; what is wrong in it
// is in the result's Problems.
func CheckFile(ctx context.Context, path string, opts CheckOptions) (*CheckResult, error) {
	if opts.Sample <= 0 {
		opts.Sample = 500
	}
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 100
	}
	c, err := openExisting(path, true)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	defer c.close()
	// One read transaction: a file a server keeps writing is checked at
	// one instant, at which its documents and index entries agree.
	if err := c.run(ctx, "BEGIN"); err != nil {
		return nil, fmt.Errorf("check %s: %w", path, err)
	}
	defer func() { _ = c.run(context.Background(), "ROLLBACK") }()
	res := &CheckResult{}
	full := func() bool { return len(res.Problems) >= opts.MaxProblems }
	if _, err := c.queryRow(ctx, "PRAGMA user_version", nil, &res.Format); err != nil {
		// Not even the header reads: nothing else will.
		res.Problems = append(res.Problems, Problem{Err: fmt.Errorf("%w: read the format version: %w", engine.ErrCorrupt, err)})
		return res, nil
	}
	if res.Format > CurrentFormat {
		res.Problems = append(res.Problems, Problem{Err: fmt.Errorf("format version %d is unknown (this release reads %d and older): written by a newer fhirstore", res.Format, CurrentFormat)})
		return res, nil
	}
	msgs, err := queryStrings(ctx, c, fmt.Sprintf("PRAGMA integrity_check(%d)", opts.MaxProblems))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("check %s: %w", path, ctx.Err())
		}
		res.Problems = append(res.Problems, Problem{Err: fmt.Errorf("%w: integrity check: %w", engine.ErrCorrupt, err)})
		return res, nil
	}
	if len(msgs) != 1 || msgs[0] != "ok" {
		for _, m := range msgs {
			res.Problems = append(res.Problems, Problem{Err: fmt.Errorf("%w: integrity check: %s", engine.ErrCorrupt, m)})
		}
	}
	// The documents of a file of format 1 are stored as inserted, those of
	// later formats in parts (codec.go); a table that has the b column
	// holds parts.
	r, err := c.query(ctx, "SELECT substr(name, 3), EXISTS (SELECT 1 FROM pragma_table_info(s.name) WHERE name = 'b') FROM sqlite_schema AS s WHERE type = 'table' AND name LIKE 'd\\_%' ESCAPE '\\' ORDER BY name", nil)
	if err != nil {
		res.Problems = append(res.Problems, Problem{Err: fmt.Errorf("%w: list the collections: %w", engine.ErrCorrupt, err)})
		return res, nil
	}
	type table struct {
		coll  string
		parts bool
	}
	var tables []table
	for r.next() {
		tables = append(tables, table{r.text(0), r.int64(1) != 0})
	}
	if r.err != nil {
		res.Problems = append(res.Problems, Problem{Err: fmt.Errorf("%w: list the collections: %w", engine.ErrCorrupt, r.err)})
		return res, nil
	}
	cd, err := newCodec()
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", path, err)
	}
	defer cd.close()
	// The index entries are checked in files of the current format only:
	// an older file's are rewritten when an engine opens it.
	var ix *entryCheck
	if res.Format == CurrentFormat {
		if ix, err = readEntryCheck(ctx, c); err != nil {
			res.Problems = append(res.Problems, Problem{Err: fmt.Errorf("%w: read the path numbers and word paths: %w", engine.ErrCorrupt, err)})
			return res, nil
		}
	}
	for _, t := range tables {
		if full() {
			break
		}
		if err := decodeDocs(ctx, c, cd, namesOf(t.coll), t.parts, ix, opts, res); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("check %s: %w", path, ctx.Err())
			}
			res.Problems = append(res.Problems, Problem{Collection: t.coll, Err: fmt.Errorf("%w: read the documents: %w", engine.ErrCorrupt, err)})
		}
	}
	return res, nil
}

// entryCheck is what checking a document's index entries needs of its
// file: the numbers of the paths and the word paths.
type entryCheck struct {
	codes map[string]int64
	words *wordPaths
}

// readEntryCheck reads the path numbers and word paths of the file.
func readEntryCheck(ctx context.Context, c *conn) (*entryCheck, error) {
	ix := &entryCheck{codes: map[string]int64{}}
	var paths []string
	for _, t := range []string{fieldsTable, wordsTable} {
		var exists int64
		if _, err := c.queryRow(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", []any{strings.Trim(t, `"`)}, &exists); err != nil {
			return nil, err
		}
		if exists == 0 {
			continue
		}
		if t == wordsTable {
			var err error
			if paths, err = queryStrings(ctx, c, "SELECT path FROM "+wordsTable+" ORDER BY path"); err != nil {
				return nil, err
			}
			continue
		}
		r, err := c.query(ctx, "SELECT id, path FROM "+fieldsTable, nil)
		if err != nil {
			return nil, err
		}
		for r.next() {
			ix.codes[r.text(1)] = r.int64(0)
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	ws, err := newWordPaths(paths)
	if err != nil {
		return nil, err
	}
	ix.words = ws
	return ix, nil
}

// missingEntry is the first of a document's index entries (those x_C
// holds) that x_C lacks, nil when none is missing; n counts the
// document's entries.
func (ix *entryCheck) missingEntry(ctx context.Context, c *conn, n names, cd *codec, rid int64, doc []byte) (missing error, count int64, err error) {
	rest, err := cd.restOf(doc, nil)
	if err != nil {
		return nil, 0, err
	}
	all, err := docEntries(rest)
	if err != nil {
		return fmt.Errorf("%w: %w", engine.ErrCorrupt, err), 0, nil
	}
	held, _ := ix.words.split(all)
	for _, e := range held {
		f, ok := ix.codes[e.f]
		if !ok {
			return fmt.Errorf("%w: the index has no entry at %s (the path has no number)", engine.ErrCorrupt, e.f), int64(len(held)), nil
		}
		var one int64
		found, err := c.queryRow(ctx, "SELECT 1 FROM "+n.x+" WHERE f = ? AND v = ? AND rid = ?", []any{f, e.v, rid}, &one)
		if err != nil {
			return nil, 0, err
		}
		if !found {
			return fmt.Errorf("%w: the index has no entry %s = %v", engine.ErrCorrupt, e.f, e.v), int64(len(held)), nil
		}
	}
	return nil, int64(len(held)), nil
}

// decodeDocs decodes the documents of collection n (all, or a sample),
// adding a Problem for each that does not decode; with ix, each
// document's index entries must be in x_C, and when every document is
// read, x_C must hold no others.
func decodeDocs(ctx context.Context, c *conn, cd *codec, n names, parts bool, ix *entryCheck, opts CheckOptions, res *CheckResult) error {
	cols := "d.id, d.doc, NULL, NULL, d.rid"
	from := n.d + " AS d"
	if !parts {
		ix = nil
	}
	var entries int64
	counted := opts.Full // every document's entries are counted
	if parts {
		cols = "d.id, d.doc, d.b, z.z, d.rid"
		from += " LEFT JOIN " + blobsTable + " AS z ON z.id = d.b"
	}
	q := "SELECT " + cols + " FROM " + from
	if !opts.Full {
		q += " WHERE d.rid IN (SELECT rid FROM " + n.d + " ORDER BY random() LIMIT " + itoa(int64(opts.Sample)) + ")"
	}
	r, err := c.query(ctx, q+" ORDER BY d.rid", nil)
	if err != nil {
		return err
	}
	defer r.close()
	var buf []byte
	for r.next() {
		id, doc := r.text(0), r.bytes(1)
		var derr error
		switch {
		case !parts:
			if err := bsoncore.Document(doc).Validate(); err != nil {
				derr = fmt.Errorf("%w: %w", engine.ErrCorrupt, err)
			}
		case !r.null(2) && r.null(3):
			derr = fmt.Errorf("shared value %d: %w: no such value", r.int64(2), engine.ErrCorrupt)
		default:
			var value []byte
			if !r.null(2) {
				value = r.bytes(3)
			}
			var out []byte
			out, derr = cd.decode(storedParts{id: id, doc: doc, value: value}, "shared", false, buf)
			if errors.Is(derr, errNoShared) {
				derr = fmt.Errorf("%w: the shared value is missing", engine.ErrCorrupt)
			}
			if derr == nil {
				buf = out[:0]
			}
		}
		if derr == nil && ix != nil {
			var m int64
			var err error
			if derr, m, err = ix.missingEntry(ctx, c, n, cd, r.int64(4), doc); err != nil {
				return err
			}
			entries += m
		}
		res.Decoded++
		if derr != nil {
			counted = false // the count of entries no longer adds up
			res.Problems = append(res.Problems, Problem{Collection: n.coll, ID: id, Err: derr})
			if len(res.Problems) >= opts.MaxProblems {
				return nil
			}
		}
	}
	if r.err != nil || ix == nil || !counted {
		return r.err
	}
	var held int64
	if _, err := c.queryRow(ctx, "SELECT count(*) FROM "+n.x, nil, &held); err != nil {
		if noTable(err) {
			return nil
		}
		return err
	}
	if held != entries {
		res.Problems = append(res.Problems, Problem{Collection: n.coll, Err: fmt.Errorf("%w: the index holds %d entries, the documents call for %d", engine.ErrCorrupt, held, entries)})
	}
	return nil
}
