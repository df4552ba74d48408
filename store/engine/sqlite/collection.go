package sqlite

import (
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// collection is one collection of a database file.
type collection struct {
	e  *Engine
	db string
	n  names
}

var _ engine.Collection = (*collection)(nil)

func (c *collection) op(verb string) string { return verb + " " + c.db + "." + c.n.coll }

// write runs fn in a write transaction on the collection's tables,
// creating them first (with create) if this process has not; it retries
// once when another process dropped them meanwhile. Without create, a
// collection without tables is left alone: fn's error is ignored.
func (c *collection) write(ctx context.Context, create bool, fn func(ctx context.Context, w *conn) error) error {
	f, err := c.e.file(ctx, c.db)
	if err != nil {
		return err
	}
	if a := atomicOf(ctx, f); a != nil {
		return a.write(ctx, c, create, fn)
	}
	for attempt := 0; ; attempt++ {
		err = f.write(ctx, func(ctx context.Context, w *conn) error {
			if create && !f.known(c.n.coll) {
				if err := createTables(ctx, w, c.n, c.e.words); err != nil {
					return err
				}
			}
			return fn(ctx, w)
		})
		if err == nil {
			f.remember(c.n.coll)
			return nil
		}
		if !create && noTable(err) {
			return nil
		}
		if attempt > 0 || !noTable(err) {
			return err
		}
		f.forget()
	}
}

// InsertOne adds doc; an existing _id is engine.ErrDuplicateKey.
func (c *collection) InsertOne(ctx context.Context, doc any) error {
	return c.e.observe(ctx, c.db, "insert", func() error {
		p, err := prepare(doc, c.e)
		if err == nil && p.id == "" {
			err = fmt.Errorf("document without a string _id: %w", engine.ErrUnsupported)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.op("insert into"), err)
		}
		err = c.write(ctx, true, func(ctx context.Context, w *conn) error { return c.insertOne(ctx, w, p) })
		return classify(c.op("insert into"), err)
	})
}

func duplicate(id string, err error, dup bool) error {
	if dup {
		return fmt.Errorf("_id %q: %w", id, engine.ErrDuplicateKey)
	}
	return err
}

// InsertMany adds docs in one transaction, each on its own: those whose
// _id exists are reported in a *engine.BulkError, the others inserted.
func (c *collection) InsertMany(ctx context.Context, docs []any) error {
	return c.e.observe(ctx, c.db, "insert", func() error {
		ps, err := prepareAll(docs, c.e)
		if err != nil {
			return fmt.Errorf("%s: %w", c.op("insert into"), err)
		}
		var failed []engine.WriteError
		err = c.write(ctx, true, func(ctx context.Context, w *conn) error {
			failed = failed[:0]
			d := pathDeltas{}
			pending := &entryRows{n: c.n}
			for i, p := range ps {
				dup, err := c.insertDoc(ctx, w, p, pending)
				if err != nil {
					return err
				}
				if dup {
					failed = append(failed, engine.WriteError{Index: i, Err: fmt.Errorf("%s: %w", c.op("insert into"), duplicate(p.id, nil, true))})
					continue
				}
				d.add(p.entries, 1)
			}
			if err := pending.flush(ctx, w); err != nil {
				return err
			}
			c.addPaths(w, d)
			return nil
		})
		if err != nil {
			return classify(c.op("insert into"), err)
		}
		if len(failed) > 0 {
			return &engine.BulkError{Errors: failed}
		}
		return nil
	})
}

// ReplaceOne replaces the first document matching filter (or inserts doc
// when none does and upsert is set), reporting whether one matched.
func (c *collection) ReplaceOne(ctx context.Context, filter bson.D, doc any, upsert bool) (bool, error) {
	matched := false
	err := c.e.observe(ctx, c.db, "update", func() error {
		x, err := c.compile(filter)
		if err != nil {
			return fmt.Errorf("%s: %w", c.op("replace in"), err)
		}
		p, err := prepare(doc, c.e)
		if err != nil {
			return fmt.Errorf("%s: %w", c.op("replace in"), err)
		}
		err = c.write(ctx, upsert, func(ctx context.Context, w *conn) error {
			matched = false
			old, err := c.matches(ctx, w, x, 1)
			if err != nil {
				return err
			}
			if len(old) == 0 {
				return c.upsert(ctx, w, x, p, upsert)
			}
			matched = true
			return c.replace(ctx, w, old[0], p)
		})
		return classify(c.op("replace in"), err)
	})
	return matched, err
}

// replace writes p over the document old.
func (c *collection) replace(ctx context.Context, w *conn, old *stored, p *prepared) error {
	if p.id == "" {
		if err := p.withID(old.id, c.e); err != nil {
			return err
		}
	}
	if p.id != old.id {
		return fmt.Errorf("the replacement's _id %q is not the document's %q: %w", p.id, old.id, engine.ErrUnsupported)
	}
	b, err := holdShared(ctx, w, p.enc)
	if err != nil {
		return err
	}
	k, err := rowKeys(ctx, w, p.entries)
	if err != nil {
		return err
	}
	if _, err := w.exec(ctx, "UPDATE "+c.n.d+" SET doc = ?, b = ?, k = ? WHERE rid = ?", p.enc.doc, b, k, old.rid); err != nil {
		return fmt.Errorf("update document: %w", err)
	}
	if err := releaseBlob(ctx, w, old.blob); err != nil {
		return err
	}
	oldEntries, err := docEntries(old.doc)
	if err != nil {
		return fmt.Errorf("index document %s: %w", old.id, err)
	}
	gone, added := diffEntries(oldEntries, p.entries)
	gone, goneWords := c.e.words.split(gone)
	added, addedWords := c.e.words.split(added)
	if err := c.deleteEntries(ctx, w, old.rid, gone); err != nil {
		return err
	}
	pending := &entryRows{n: c.n}
	if err := pending.add(ctx, w, old.rid, added); err != nil {
		return err
	}
	if err := pending.flush(ctx, w); err != nil {
		return err
	}
	if len(goneWords) > 0 || len(addedWords) > 0 { // the word row is rewritten whole
		_, oldWords := c.e.words.split(oldEntries)
		if err := dropWords(ctx, w, c.n, old.rid, oldWords); err != nil {
			return err
		}
		if err := putWords(ctx, w, c.n, old.rid, p.text); err != nil {
			return err
		}
	}
	d := pathDeltas{}
	d.add(oldEntries, -1)
	d.add(p.entries, 1)
	c.addPaths(w, d)
	return nil
}

// upsert inserts p when nothing matched and upsert is set, taking its _id
// from the filter's equality on _id when it has none.
func (c *collection) upsert(ctx context.Context, w *conn, x expr, p *prepared, upsert bool) error {
	if !upsert {
		return nil
	}
	if p.id == "" {
		for _, cj := range conjuncts(x) {
			if ie, ok := cj.(*idExpr); ok && ie.op == opEq {
				if err := p.withID(ie.vals[0].(string), c.e); err != nil {
					return err
				}
			}
		}
		if p.id == "" {
			return fmt.Errorf("upsert of a document without _id: %w", engine.ErrUnsupported)
		}
	}
	return c.insertOne(ctx, w, p)
}

// insertOne inserts one prepared document with its index entries and path
// counts, inside the writer's transaction.
func (c *collection) insertOne(ctx context.Context, w *conn, p *prepared) error {
	pending := &entryRows{n: c.n}
	dup, err := c.insertDoc(ctx, w, p, pending)
	if err == nil && !dup {
		err = pending.flush(ctx, w)
	}
	if err != nil || dup {
		return duplicate(p.id, err, dup)
	}
	d := pathDeltas{}
	d.add(p.entries, 1)
	c.addPaths(w, d)
	return nil
}

// DeleteOne removes the first document matching filter.
func (c *collection) DeleteOne(ctx context.Context, filter bson.D) (int64, error) {
	return c.delete(ctx, filter, 1)
}

// DeleteMany removes every document matching filter.
func (c *collection) DeleteMany(ctx context.Context, filter bson.D) (int64, error) {
	return c.delete(ctx, filter, 0)
}

func (c *collection) delete(ctx context.Context, filter bson.D, limit int64) (int64, error) {
	var n int64
	err := c.e.observe(ctx, c.db, "delete", func() error {
		x, err := c.compile(filter)
		if err != nil {
			return fmt.Errorf("%s: %w", c.op("delete from"), err)
		}
		err = c.write(ctx, false, func(ctx context.Context, w *conn) error {
			n = 0
			old, err := c.matches(ctx, w, x, limit)
			if err != nil {
				return err
			}
			d := pathDeltas{}
			for _, o := range old {
				entries, err := docEntries(o.doc)
				if err != nil {
					return fmt.Errorf("index document %s: %w", o.id, err)
				}
				rest, words := c.e.words.split(entries)
				if err := c.deleteEntries(ctx, w, o.rid, rest); err != nil {
					return err
				}
				if err := dropWords(ctx, w, c.n, o.rid, words); err != nil {
					return err
				}
				if _, err := w.exec(ctx, "DELETE FROM "+c.n.d+" WHERE rid = ?", o.rid); err != nil {
					return fmt.Errorf("delete document: %w", err)
				}
				if err := releaseBlob(ctx, w, o.blob); err != nil {
					return err
				}
				d.add(entries, -1)
			}
			n = int64(len(old))
			c.addPaths(w, d)
			return nil
		})
		return classify(c.op("delete from"), err)
	})
	return n, err
}

// stored is a document read for a write: doc without its shared field,
// blob the id of that field's value.
type stored struct {
	rid  int64
	id   string
	doc  []byte
	blob nullInt64
}

// matches reads (up to limit, 0: all) documents matching x in the write
// transaction.
func (c *collection) matches(ctx context.Context, w *conn, x expr, limit int64) ([]*stored, error) {
	p := &planner{n: c.n, q: w, cols: "d.rid, d.id, d.doc, d.b", db: c.db, counts: c.e.counts}
	steps, err := p.find(ctx, x, nil, limit)
	if err != nil {
		return nil, err
	}
	var out []*stored
	for _, sf := range steps {
		s, err := sf(ctx)
		if err != nil {
			return nil, err
		}
		if s == nil {
			continue
		}
		lim := int64(-1)
		if limit > 0 {
			lim = limit - int64(len(out))
		}
		r, err := w.query(ctx, s.sql+" LIMIT ?", append(slices.Clip(s.args), lim))
		if err != nil {
			return nil, err
		}
		for r.next() {
			s := &stored{rid: r.int64(0), id: r.text(1), blob: nullInt64{v: r.int64(3), ok: !r.null(3)}}
			if s.doc, err = c.e.codec.decode(storedParts{id: s.id, doc: r.view(2)}, c.e.opts.SharedField, true, nil); err != nil {
				r.close()
				return nil, docError(c.db, c.n.coll, s.id, err)
			}
			out = append(out, s)
		}
		if r.err != nil {
			return nil, r.err
		}
		if limit > 0 && int64(len(out)) >= limit {
			break
		}
	}
	return out, nil
}

// CreateIndexes records the names of indexes not there yet: every path
// is indexed already.
func (c *collection) CreateIndexes(ctx context.Context, indexes []engine.Index) error {
	return c.e.observe(ctx, c.db, "createIndexes", func() error {
		for _, ix := range indexes {
			if ix.Name == "" {
				return fmt.Errorf("%s: an index without a name: %w", c.op("create indexes of"), engine.ErrUnsupported)
			}
		}
		err := c.write(ctx, true, func(ctx context.Context, w *conn) error {
			for _, ix := range indexes {
				keys, err := bson.Marshal(ix.Keys)
				if err != nil {
					return fmt.Errorf("index %s: %w", ix.Name, err)
				}
				if _, err := w.exec(ctx, "INSERT INTO "+indexesTable+" (c, name, keys) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", c.n.coll, ix.Name, keys); err != nil {
					return fmt.Errorf("record index %s: %w", ix.Name, err)
				}
			}
			return nil
		})
		return classify(c.op("create indexes of"), err)
	})
}

// IndexNames lists "_id_" and the names CreateIndexes recorded (nothing
// for a collection that does not exist).
func (c *collection) IndexNames(ctx context.Context) ([]string, error) {
	var names []string
	err := c.e.observe(ctx, c.db, "listIndexes", func() error {
		f, err := c.e.file(ctx, c.db)
		if err != nil {
			return classify(c.op("list indexes of"), err)
		}
		q, err := f.reader(ctx)
		if err != nil {
			return classify(c.op("list indexes of"), err)
		}
		defer f.release(q)
		var exists int64
		_, err = q.queryRow(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", []any{"d_" + c.n.coll}, &exists)
		if err != nil || exists == 0 {
			return classify(c.op("list indexes of"), err)
		}
		names = []string{"_id_"}
		r, err := q.query(ctx, "SELECT name FROM "+indexesTable+" WHERE c = ? ORDER BY name", []any{c.n.coll})
		if err != nil {
			return classify(c.op("list indexes of"), err)
		}
		for r.next() {
			if n := r.text(0); n != "_id_" {
				names = append(names, n)
			}
		}
		return classify(c.op("list indexes of"), r.err)
	})
	return names, err
}
