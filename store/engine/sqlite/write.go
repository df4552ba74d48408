package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"fhirstore/store/engine"
)

// prepared is a document ready to be written: its bytes, _id and entries.
type prepared struct {
	raw     bson.Raw
	id      string // "" when the document has no _id
	entries []entry
}

// prepare marshals doc and extracts its index entries.
func prepare(doc any) (*prepared, error) {
	var raw bson.Raw
	switch d := doc.(type) {
	case bson.Raw:
		raw = d
	case []byte:
		raw = d
	default:
		b, err := bson.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("marshal document: %w", err)
		}
		raw = b
	}
	if err := raw.Validate(); err != nil {
		return nil, fmt.Errorf("document: %w", err)
	}
	p := &prepared{raw: raw}
	if v, err := raw.LookupErr("_id"); err == nil {
		id, ok := v.StringValueOK()
		if !ok {
			return nil, fmt.Errorf("document _id %v is not a string: %w", v, engine.ErrUnsupported)
		}
		p.id = id
	}
	entries, err := docEntries(raw)
	if err != nil {
		return nil, fmt.Errorf("index document %s: %w", p.id, err)
	}
	p.entries = entries
	return p, nil
}

// withID returns the document with _id first, for replacements and upserts
// written without one.
func (p *prepared) withID(id string) {
	idx, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendStringElement(out, "_id", id)
	out = append(out, p.raw[4:len(p.raw)-1]...)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	p.raw, p.id = out, id
}

// pathDeltas accumulates changes of the per-path document counts.
type pathDeltas map[string]int64

func (d pathDeltas) add(entries []entry, n int64) {
	d[docsPath] += n
	for _, f := range scalarPaths(entries) {
		d[f] += n
	}
}

// insertDoc inserts p, reporting a duplicate _id rather than failing.
func (c *collection) insertDoc(ctx context.Context, w writer, p *prepared) (bool, error) {
	res, err := w.exec(ctx, "INSERT INTO "+c.n.d+" (id, doc) VALUES (?, ?) ON CONFLICT (id) DO NOTHING", p.id, []byte(p.raw))
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return true, err
	}
	rid, err := res.LastInsertId()
	if err != nil {
		return false, err
	}
	return false, c.insertEntries(ctx, w, rid, p.entries)
}

// entriesPerInsert is how many entries one INSERT statement writes.
const entriesPerInsert = 100

func (c *collection) insertEntries(ctx context.Context, w writer, rid int64, entries []entry) error {
	for len(entries) > 0 {
		n := min(len(entries), entriesPerInsert)
		var b strings.Builder
		b.WriteString("INSERT OR IGNORE INTO " + c.n.x + " (f, v, rid) VALUES ")
		args := make([]any, 0, 3*n)
		for i, e := range entries[:n] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?)")
			args = append(args, e.f, e.v, rid)
		}
		if _, err := w.exec(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("insert index entries: %w", err)
		}
		entries = entries[n:]
	}
	return nil
}

func (c *collection) deleteEntries(ctx context.Context, w writer, rid int64, entries []entry) error {
	for _, e := range entries {
		if _, err := w.exec(ctx, "DELETE FROM "+c.n.x+" WHERE f = ? AND v = ? AND rid = ?", e.f, e.v, rid); err != nil {
			return fmt.Errorf("delete index entries: %w", err)
		}
	}
	return nil
}

// addPaths applies the changes of the document counts.
func (c *collection) addPaths(ctx context.Context, w writer, d pathDeltas) error {
	keys := make([]string, 0, len(d))
	for f, n := range d {
		if n != 0 {
			keys = append(keys, f)
		}
	}
	slices.Sort(keys)
	for len(keys) > 0 {
		n := min(len(keys), entriesPerInsert)
		var b strings.Builder
		b.WriteString("INSERT INTO " + pathsTable + " (c, f, n) VALUES ")
		args := make([]any, 0, 3*n)
		for i, f := range keys[:n] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?)")
			args = append(args, c.n.coll, f, d[f])
		}
		b.WriteString(" ON CONFLICT (c, f) DO UPDATE SET n = n + excluded.n")
		if _, err := w.exec(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("count paths: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}

// diffEntries lists the entries only in a and those only in b (both sorted).
func diffEntries(a, b []entry) (onlyA, onlyB []entry) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b):
			onlyA = append(onlyA, a[i])
			i++
		case i == len(a):
			onlyB = append(onlyB, b[j])
			j++
		default:
			switch c := compareEntries(a[i], b[j]); {
			case c < 0:
				onlyA = append(onlyA, a[i])
				i++
			case c > 0:
				onlyB = append(onlyB, b[j])
				j++
			default:
				if !sameValue(a[i].v, b[j].v) {
					// equal to SQLite (1 and 1.0) but not the same value
					onlyA, onlyB = append(onlyA, a[i]), append(onlyB, b[j])
				}
				i++
				j++
			}
		}
	}
	return onlyA, onlyB
}

// sameValue tells whether two entry values are the same value of the same type.
func sameValue(a, b any) bool {
	x, aBytes := a.([]byte)
	y, bBytes := b.([]byte)
	if aBytes || bBytes {
		return aBytes && bBytes && bytes.Equal(x, y)
	}
	return a == b
}
