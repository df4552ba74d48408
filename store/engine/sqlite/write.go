package sqlite

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"fhirstore/store/engine"
)

// prepared is a document ready to be written: its bytes (until it has
// an _id and its stored parts), _id and entries (all of them; rest are
// x_C's, text the word table's row of the others), and its stored parts
// (nil until it has an _id).
type prepared struct {
	raw     bson.Raw
	id      string // "" when the document has no _id
	entries []entry
	rest    []entry
	text    string
	enc     *encoded
}

// prepare marshals doc, extracts its index entries and, when it has an
// _id, compresses its stored parts.
func prepare(doc any, e *Engine) (*prepared, error) {
	ws := e.words
	var raw bson.Raw
	switch d := doc.(type) {
	case *prepared: // by database.Prepare
		return d, nil
	case bson.Raw:
		raw = d
	case []byte:
		raw = d
	case bson.Marshaler: // without the encoder's reflection
		b, err := d.MarshalBSON()
		if err != nil {
			return nil, fmt.Errorf("marshal document: %w", err)
		}
		raw = b
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
	var words []entry
	p.rest, words = ws.split(entries)
	if p.text, err = ws.text(words); err != nil {
		return nil, fmt.Errorf("index document %s: %w", p.id, err)
	}
	if p.id != "" {
		if p.enc, err = e.codec.encode(p.raw, e.opts.SharedField); err != nil {
			return nil, fmt.Errorf("store document %s: %w", p.id, err)
		}
		p.raw = nil // its stored parts and entries are what a write needs
	}
	return p, nil
}

// prepareAll prepares documents to insert, on several goroutines for
// many (marshalling and indexing take a tenth of a bulk insert's time,
// outside the write lock).
func prepareAll(docs []any, e *Engine) ([]*prepared, error) {
	ps := make([]*prepared, len(docs))
	errs := make([]error, len(docs))
	work := func(from, to int) {
		for i := from; i < to; i++ {
			p, err := prepare(docs[i], e)
			if err == nil && p.id == "" {
				err = fmt.Errorf("document without a string _id: %w", engine.ErrUnsupported)
			}
			ps[i], errs[i] = p, err
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(docs)/64+1)
	var wg sync.WaitGroup
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(k*len(docs)/workers, (k+1)*len(docs)/workers)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
	}
	return ps, nil
}

// withID puts _id first in the document, for replacements and upserts
// written without one.
func (p *prepared) withID(id string, e *Engine) error {
	idx, out := bsoncore.AppendDocumentStart(nil)
	out = bsoncore.AppendStringElement(out, "_id", id)
	out = append(out, p.raw[4:len(p.raw)-1]...)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	p.raw, p.id = out, id
	var err error
	if p.enc, err = e.codec.encode(p.raw, e.opts.SharedField); err != nil {
		return fmt.Errorf("store document %s: %w", id, err)
	}
	return nil
}

// pathDeltas accumulates changes of the per-path counts: documents with
// a scalar at the path, and scalar entries.
type pathDeltas map[string]*pathStat

// add counts a document's entries in (sign 1) or out (-1).
func (d pathDeltas) add(entries []entry, sign int64) {
	d.at(docsPath).n += sign
	d.at(docsPath).e += sign
	last := docsPath // no path is: the path of the last scalar counted
	for _, e := range entries {
		if isMarker(e.v) {
			continue
		}
		ps := d.at(e.f)
		ps.e += sign
		if e.f != last { // entries are sorted: the path's first scalar
			ps.n += sign
			last = e.f
		}
	}
}

func (d pathDeltas) at(f string) *pathStat {
	ps, ok := d[f]
	if !ok {
		ps = &pathStat{}
		d[f] = ps
	}
	return ps
}

// insertDoc inserts p, reporting a duplicate _id rather than failing;
// its entries are added to pending.
func (c *collection) insertDoc(ctx context.Context, w *conn, p *prepared, pending *entryRows) (bool, error) {
	var exists int64
	if found, err := w.queryRow(ctx, "SELECT 1 FROM "+c.n.d+" WHERE id = ?", []any{p.id}, &exists); err != nil || found {
		return found, err
	}
	b, err := holdShared(ctx, w, p.enc)
	if err != nil {
		return false, err
	}
	k, err := rowKeys(ctx, w, p.entries)
	if err != nil {
		return false, err
	}
	if _, err := w.exec(ctx, "INSERT INTO "+c.n.d+" (id, doc, b, k) VALUES (?, ?, ?, ?)", p.id, p.enc.doc, b, k); err != nil {
		return false, err
	}
	rid := w.lastID()
	if err := pending.add(ctx, w, rid, p.rest); err != nil {
		return false, err
	}
	return false, putWords(ctx, w, c.n, rid, p.text)
}

// holdShared stores the shared value of enc (if any), returning its id
// (nil without one).
func holdShared(ctx context.Context, w *conn, enc *encoded) (any, error) {
	if enc.shared == nil {
		return nil, nil
	}
	return holdBlob(ctx, w, enc.shared)
}

// rowKeys encodes the entries of a document its row keeps (rowkeys.go),
// numbering their paths.
func rowKeys(ctx context.Context, w *conn, entries []entry) ([]byte, error) {
	var kept []codedEntry
	for _, e := range entries {
		f, err := w.codes.code(ctx, w, e.f)
		if err != nil {
			return nil, err
		}
		if keptInRow(e) {
			kept = append(kept, codedEntry{f: f, v: e.v})
		} else {
			kept = append(kept, codedEntry{f: f, text: true})
		}
	}
	sortCoded(kept)
	return encodeRowKeys(kept), nil
}

// sortCoded sorts entries by (path number, value).
func sortCoded(es []codedEntry) {
	slices.SortFunc(es, func(a, b codedEntry) int {
		if c := cmp.Compare(a.f, b.f); c != 0 {
			return c
		}
		return compareValues(a.v, b.v)
	})
}

// entriesPerInsert is how many entries one INSERT statement writes.
const entriesPerInsert = 100

// entriesPerFlush is how many entries entryRows holds before it sorts and
// inserts them.
const entriesPerFlush = 1 << 16

// entryRows collects index entries (of one or several documents) and
// inserts them in the order of their key.
type entryRows struct {
	n    names
	rows []rowEntry
	args []any // f, v, rid of each entry of one statement
}

// codedEntry is an entry with its path's number.
type codedEntry struct {
	f    int64
	v    any
	text bool // for row keys: a text value the row does not keep (v nil)
}

// rowEntry is an index entry of document rid, as x_C keys it.
type rowEntry struct {
	f   int64
	v   any
	rid int64
}

// add adds the entries of document rid, inserting what it holds when it
// reaches entriesPerFlush.
func (r *entryRows) add(ctx context.Context, w *conn, rid int64, entries []entry) error {
	for _, e := range entries {
		f, err := w.codes.code(ctx, w, e.f)
		if err != nil {
			return err
		}
		r.rows = append(r.rows, rowEntry{f: f, v: e.v, rid: rid})
	}
	if len(r.rows) >= entriesPerFlush {
		return r.flush(ctx, w)
	}
	return nil
}

// flush inserts the entries collected, sorted by key.
func (r *entryRows) flush(ctx context.Context, w *conn) error {
	slices.SortFunc(r.rows, func(a, b rowEntry) int {
		if c := cmp.Compare(a.f, b.f); c != 0 {
			return c
		}
		if c := compareValues(a.v, b.v); c != 0 {
			return c
		}
		return cmp.Compare(a.rid, b.rid)
	})
	for chunk := range slices.Chunk(r.rows, entriesPerInsert) {
		for _, e := range chunk {
			r.args = append(r.args, e.f, e.v, e.rid)
		}
		if err := r.insert(ctx, w); err != nil {
			return err
		}
	}
	clear(r.rows)
	r.rows = r.rows[:0]
	return nil
}

// insert runs one INSERT of the entries in args.
func (r *entryRows) insert(ctx context.Context, w *conn) error {
	var b strings.Builder
	b.WriteString("INSERT OR IGNORE INTO " + r.n.x + " (f, v, rid) VALUES ")
	for i := 0; i < len(r.args)/3; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?)")
	}
	if _, err := w.exec(ctx, b.String(), r.args...); err != nil {
		return fmt.Errorf("insert index entries: %w", err)
	}
	clear(r.args)
	r.args = r.args[:0]
	return nil
}

func (c *collection) deleteEntries(ctx context.Context, w *conn, rid int64, entries []entry) error {
	for _, e := range entries {
		f, err := w.codes.code(ctx, w, e.f)
		if err != nil {
			return err
		}
		if _, err := w.exec(ctx, "DELETE FROM "+c.n.x+" WHERE f = ? AND v = ? AND rid = ?", f, e.v, rid); err != nil {
			return fmt.Errorf("delete index entries: %w", err)
		}
	}
	return nil
}

// addPaths holds the changes of the document counts, applied when the
// writer's transaction commits (pathLog).
func (c *collection) addPaths(w *conn, d pathDeltas) {
	w.paths.add(c.n.coll, d)
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
