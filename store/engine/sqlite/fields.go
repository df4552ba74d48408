package sqlite

import (
	"context"
	"fmt"
)

// fieldsTable numbers the paths of index entries: an x table stores an
// entry's path as its number, which makes its keys about a third shorter
// (fewer pages to write and to search) and quicker to compare than the
// dotted path. Numbers are shared by the collections of a file and never
// change once committed.
const fieldsTable = `"_fields"`

// pathsVersion is the file's user_version once its x tables number
// their paths; files of version 0 store the paths as text and are
// converted when opened (upgrade).
const pathsVersion = 1

// fieldCodes is the writer's copy of fieldsTable, used under the file's
// write lock only.
type fieldCodes struct {
	codes  map[string]int64
	schema int64    // the schema_version codes were read at
	added  []string // the paths the transaction in progress numbered
}

// begin readies the codes for a write transaction: when the schema
// changed since they were read (another process dropped the tables, or
// this one created some) they are read again.
func (fc *fieldCodes) begin(ctx context.Context, w *conn) error {
	var v int64
	if _, err := w.queryRow(ctx, "PRAGMA schema_version", nil, &v); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	if fc.codes != nil && v == fc.schema {
		return nil
	}
	fc.codes, fc.schema, fc.added = map[string]int64{}, v, nil
	r, err := w.query(ctx, "SELECT path, id FROM "+fieldsTable, nil)
	if noTable(err) {
		return nil // created with the first collection's tables
	}
	if err != nil {
		return fmt.Errorf("read the path numbers: %w", err)
	}
	defer r.close()
	for r.next() {
		fc.codes[r.text(0)] = r.int64(1)
	}
	if r.err != nil && !noTable(r.err) { // a statement prepared before a drop fails as it runs
		return fmt.Errorf("read the path numbers: %w", r.err)
	}
	return nil
}

// code returns path's number, numbering it if it has none.
func (fc *fieldCodes) code(ctx context.Context, w *conn, path string) (int64, error) {
	if c, ok := fc.codes[path]; ok {
		return c, nil
	}
	if _, err := w.exec(ctx, "INSERT INTO "+fieldsTable+" (path) VALUES (?) ON CONFLICT (path) DO NOTHING", path); err != nil {
		return 0, fmt.Errorf("number path %q: %w", path, err)
	}
	var c int64
	if _, err := w.queryRow(ctx, "SELECT id FROM "+fieldsTable+" WHERE path = ?", []any{path}, &c); err != nil {
		return 0, fmt.Errorf("number path %q: %w", path, err)
	}
	fc.codes[path] = c
	fc.added = append(fc.added, path)
	return c, nil
}

// end follows the transaction's end: the numbers it added are forgotten
// when it rolled back.
func (fc *fieldCodes) end(committed bool) {
	if !committed {
		fc.rollbackTo(0)
	}
	fc.added = fc.added[:0]
}

// rollbackTo forgets the numbers added since mark.
func (fc *fieldCodes) rollbackTo(mark int) {
	for _, p := range fc.added[mark:] {
		delete(fc.codes, p)
	}
	fc.added = fc.added[:mark]
}

// field writes the number of path, read in the statement's snapshot (NULL,
// which equals nothing, when no entry ever had the path).
func (b *builder) field(path string) {
	b.WriteString("(SELECT id FROM " + fieldsTable + " WHERE path = ")
	b.arg(path)
	b.WriteString(")")
}

// createFieldsTable is the statement creating fieldsTable.
const createFieldsTable = "CREATE TABLE IF NOT EXISTS " + fieldsTable + " (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE)"

// upgrade converts a file whose x tables store paths as text (version 0)
// to numbered paths, in one write transaction, and marks it
// pathsVersion; it returns how many collections it converted.
func (f *file) upgrade(ctx context.Context) (int, error) {
	var v int64
	if _, err := f.w.queryRow(ctx, "PRAGMA user_version", nil, &v); err != nil {
		return 0, fmt.Errorf("read the file's version: %w", err)
	}
	if v >= pathsVersion {
		return 0, nil
	}
	var n int
	err := f.write(ctx, func(ctx context.Context, w *conn) (err error) {
		n, err = convertTables(ctx, w)
		return err
	})
	return n, err
}

// convertTables numbers the paths of every x table storing them as text.
func convertTables(ctx context.Context, w *conn) (int, error) {
	if err := w.run(ctx, createFieldsTable); err != nil {
		return 0, fmt.Errorf("create %s: %w", fieldsTable, err)
	}
	colls, err := queryStrings(ctx, w, "SELECT substr(name, 3) FROM sqlite_schema AS s WHERE type = 'table' AND name LIKE 'x\\_%' ESCAPE '\\' AND (SELECT type FROM pragma_table_info(s.name) WHERE name = 'f') = 'TEXT'")
	if err != nil {
		return 0, fmt.Errorf("list the tables to convert: %w", err)
	}
	for _, coll := range colls {
		if err := convertTable(ctx, w, namesOf(coll)); err != nil {
			return 0, fmt.Errorf("convert the index entries of %s: %w", coll, err)
		}
	}
	return len(colls), w.run(ctx, fmt.Sprintf("PRAGMA user_version = %d", pathsVersion))
}

// convertTable rewrites one x table with numbered paths.
func convertTable(ctx context.Context, w *conn, n names) error {
	tmp := quote("x_" + n.coll + ".new")
	stmts := []string{
		"INSERT INTO " + fieldsTable + " (path) SELECT DISTINCT f FROM " + n.x + " WHERE true ON CONFLICT (path) DO NOTHING",
		"CREATE TABLE " + tmp + " (f INTEGER NOT NULL, v ANY NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (f, v, rid)) STRICT, WITHOUT ROWID",
		"INSERT INTO " + tmp + " SELECT p.id, x.v, x.rid FROM " + n.x + " AS x CROSS JOIN " + fieldsTable + " AS p ON p.path = x.f ORDER BY 1, 2, 3",
		"DROP TABLE " + n.x,
		"ALTER TABLE " + tmp + " RENAME TO " + n.x,
		"CREATE INDEX " + n.r + " ON " + n.x + " (rid, f, v)",
	}
	for _, s := range stmts {
		if err := w.run(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
