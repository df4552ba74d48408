package sqlite

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
)

// formatVersion is the user_version of a file whose documents are stored
// in parts (codec.go). A file of an older version stores each document as
// inserted: it is converted when opened, one collection per transaction,
// so that a conversion cut short (a crash, kill -9) leaves collections
// either converted or not, and the next open converts the rest. Until the
// whole file is converted, opening it converts; nothing reads it before.
const formatVersion = 2

// rowsVersion is the user_version of a file whose documents' rows hold
// their row keys (rowkeys.go) and whose index entries are in one B-tree.
// An older file is converted when opened, one collection per
// transaction: its rows get their keys, its (rid, f, v) indexes are
// dropped.
const rowsVersion = 3

// rowFieldsVersion is the user_version of a file whose x tables hold no
// entries of the fields rows keep alone (rowFields: since this format,
// versions' numbers, methods and transactions too). An older file's
// entries of those fields are deleted when it is opened; its rows read
// as they are (a row keeps which of those fields hold text, and a
// condition on them reads the document then).
const rowFieldsVersion = 4

// convertBatch is how many documents a conversion reads at a time.
const convertBatch = 500

// conversion is one change of a file's format: the collections it
// converts (listed by list), each in a transaction of its own (convert,
// which returns how many documents), then the file marked version and
// done logged with what it did.
type conversion struct {
	version int64
	list    string
	convert func(ctx context.Context, w *conn, coll string) (int64, error)
	what    string // "documents" or "rows", for errors
	done    string // the log line
	// inPlace: the conversion frees too little to rewrite the file for
	// (VACUUM); later writes reuse its free pages.
	inPlace bool
}

// upgradeTo runs c on the file unless it is at c.version already;
// committed is told of each collection committed, mark run before the
// version is set.
func (f *file) upgradeTo(ctx context.Context, c conversion, committed func(coll string), mark ...string) error {
	var v int64
	if _, err := f.w.queryRow(ctx, "PRAGMA user_version", nil, &v); err != nil {
		return fmt.Errorf("read the file's version: %w", err)
	}
	if v >= c.version {
		return nil
	}
	colls, err := queryStrings(ctx, f.w, c.list)
	if err != nil {
		return fmt.Errorf("list the collections to convert: %w", err)
	}
	start := time.Now()
	var docs int64
	for _, coll := range colls {
		var n int64
		err := f.write(ctx, func(ctx context.Context, w *conn) (err error) {
			n, err = c.convert(ctx, w, coll)
			return err
		})
		if err != nil {
			return fmt.Errorf("convert the %s of %s: %w", c.what, coll, err)
		}
		docs += n
		committed(coll)
	}
	err = f.write(ctx, func(ctx context.Context, w *conn) error {
		for _, s := range append(mark, fmt.Sprintf("PRAGMA user_version = %d", c.version)) {
			if err := w.run(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark the file converted: %w", err)
	}
	if len(colls) > 0 && (docs > 0 || !c.inPlace) {
		f.log.Info(c.done, zap.String("file", f.path), zap.Int("collections", len(colls)), zap.Int64(c.what, docs), zap.Duration("took", time.Since(start)))
		f.compact = f.compact || !c.inPlace
	}
	return nil
}

// upgradeDocs converts the documents of a file older than formatVersion;
// converting, when set, is told of its progress.
func (f *file) upgradeDocs(ctx context.Context, converting func(coll string, committed bool)) error {
	if converting == nil {
		converting = func(string, bool) {}
	}
	return f.upgradeTo(ctx, conversion{
		version: formatVersion,
		list:    "SELECT substr(name, 3) FROM sqlite_schema AS s WHERE type = 'table' AND name LIKE 'd\\_%' ESCAPE '\\' AND NOT EXISTS (SELECT 1 FROM pragma_table_info(s.name) WHERE name = 'b') ORDER BY name",
		convert: func(ctx context.Context, w *conn, coll string) (int64, error) {
			return convertDocs(ctx, w, f.codec, f.shared, namesOf(coll), func() { converting(coll, false) })
		},
		what: "documents",
		done: "converted the documents of an older file: compressed, shared values kept once",
	}, func(coll string) { converting(coll, true) }, createBlobsTable)
}

// upgradeRows gives the rows of a file older than rowsVersion their row
// keys and drops its (rid, f, v) indexes.
func (f *file) upgradeRows(ctx context.Context, converting func(coll string, committed bool)) error {
	if converting == nil {
		converting = func(string, bool) {}
	}
	return f.upgradeTo(ctx, conversion{
		version: rowsVersion,
		list:    "SELECT substr(name, 3) FROM sqlite_schema AS s WHERE type = 'table' AND name LIKE 'd\\_%' ESCAPE '\\' ORDER BY name",
		convert: func(ctx context.Context, w *conn, coll string) (int64, error) {
			n, err := convertRows(ctx, w, f.codec, f.name, namesOf(coll))
			if err == nil {
				converting(rowsStep+coll, false)
			}
			return n, err
		},
		what: "rows",
		done: "converted the rows of an older file: row keys written, the second index of each collection's entries dropped",
	}, func(coll string) { converting(rowsStep+coll, true) })
}

// upgradeRowFields deletes the index entries of rowFields from the x
// tables of a file older than rowFieldsVersion.
func (f *file) upgradeRowFields(ctx context.Context) error {
	return f.upgradeTo(ctx, conversion{
		version: rowFieldsVersion,
		list:    "SELECT substr(name, 3) FROM sqlite_schema WHERE type = 'table' AND name LIKE 'x\\_%' ESCAPE '\\' ORDER BY name",
		convert: func(ctx context.Context, w *conn, coll string) (int64, error) {
			return dropRowFieldEntries(ctx, w, namesOf(coll))
		},
		what:    "entries",
		done:    "converted the index entries of an older file: those of fields rows keep alone deleted",
		inPlace: true,
	}, func(string) {})
}

// dropRowFieldEntries deletes a collection's index entries of the paths
// under rowFields, returning how many.
func dropRowFieldEntries(ctx context.Context, w *conn, n names) (int64, error) {
	paths, err := queryStrings(ctx, w, "SELECT path FROM "+fieldsTable+" ORDER BY id")
	if err != nil {
		return 0, fmt.Errorf("list the numbered paths: %w", err)
	}
	var all int64
	for _, p := range paths {
		if !rowOnly(p) {
			continue
		}
		deleted, err := w.exec(ctx, "DELETE FROM "+n.x+" WHERE f = (SELECT id FROM "+fieldsTable+" WHERE path = ?)", p)
		if err != nil {
			return all, fmt.Errorf("drop the entries of %s: %w", p, err)
		}
		all += deleted
	}
	return all, nil
}

// rowsStep prefixes the collection names upgradeRows tells converting of.
const rowsStep = "rows of "

// convertRows writes the row keys of one collection's documents that lack
// them, drops the index entries only rows keep now (the sort keys) and
// the (rid, f, v) index; it returns how many documents.
func convertRows(ctx context.Context, w *conn, cd *codec, db string, n names) (int64, error) {
	var has int64
	if _, err := w.queryRow(ctx, "SELECT count(*) FROM pragma_table_info(?) WHERE name = 'k'", []any{"d_" + n.coll}, &has); err != nil {
		return 0, err
	}
	if has == 0 {
		if err := w.run(ctx, "ALTER TABLE "+n.d+" ADD COLUMN k BLOB"); err != nil {
			return 0, err
		}
	}
	var count int64
	for after := int64(-1 << 63); ; {
		batch, err := readRaw(ctx, w, n, after, " AND k IS NULL")
		if err != nil {
			return count, err
		}
		if len(batch) == 0 {
			break
		}
		for _, d := range batch {
			rest, err := cd.restOf(d.doc, nil)
			if err != nil {
				return count, docError(db, n.coll, d.id, err)
			}
			entries, err := docEntries(rest)
			if err != nil {
				return count, fmt.Errorf("document %q: %w", d.id, err)
			}
			k, err := rowKeys(ctx, w, entries)
			if err != nil {
				return count, err
			}
			if _, err := w.exec(ctx, "UPDATE "+n.d+" SET k = ? WHERE rid = ?", k, d.rid); err != nil {
				return count, fmt.Errorf("document %q: %w", d.id, err)
			}
		}
		count += int64(len(batch))
		after = batch[len(batch)-1].rid
	}
	if _, err := dropRowFieldEntries(ctx, w, n); err != nil {
		return count, err
	}
	return count, w.run(ctx, "DROP INDEX IF EXISTS "+n.r)
}

// convertDocs rewrites the documents of one collection (stored as
// inserted) in parts, adding d_C's blob column, calling batchDone after
// each batch; it returns how many.
func convertDocs(ctx context.Context, w *conn, cd *codec, shared string, n names, batchDone func()) (int64, error) {
	for _, s := range []string{createBlobsTable, "ALTER TABLE " + n.d + " ADD COLUMN b INTEGER"} {
		if err := w.run(ctx, s); err != nil {
			return 0, err
		}
	}
	var count int64
	for after := int64(-1 << 63); ; {
		batch, err := readRaw(ctx, w, n, after, "")
		if err != nil || len(batch) == 0 {
			return count, err
		}
		for _, d := range batch {
			if err := bson.Raw(d.doc).Validate(); err != nil {
				return count, fmt.Errorf("document %q: %w", d.id, err)
			}
			enc, err := cd.encode(d.doc, shared)
			if err != nil {
				return count, fmt.Errorf("document %q: %w", d.id, err)
			}
			var b any
			if enc.shared != nil {
				if b, err = holdBlob(ctx, w, enc.shared); err != nil {
					return count, err
				}
			}
			if _, err := w.exec(ctx, "UPDATE "+n.d+" SET doc = ?, b = ? WHERE rid = ?", enc.doc, b, d.rid); err != nil {
				return count, fmt.Errorf("document %q: %w", d.id, err)
			}
		}
		count += int64(len(batch))
		after = batch[len(batch)-1].rid
		batchDone()
	}
}

// readRaw reads the next convertBatch documents after rid after (and
// satisfying the SQL condition and, when not empty), as stored.
func readRaw(ctx context.Context, w *conn, n names, after int64, and string) ([]*stored, error) {
	r, err := w.query(ctx, "SELECT rid, id, doc FROM "+n.d+" WHERE rid > ?"+and+" ORDER BY rid LIMIT ?", []any{after, convertBatch})
	if err != nil {
		return nil, err
	}
	defer r.close()
	var out []*stored
	for r.next() {
		out = append(out, &stored{rid: r.int64(0), id: r.text(1), doc: r.bytes(2)})
	}
	return out, r.err
}
