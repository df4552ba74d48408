package sqlite

import (
	"context"
	"fmt"
	"strings"

	"fhirstore/store/engine"
)

// database is one file's collections.
type database struct {
	e    *Engine
	name string
}

// Collection is the collection of that name (tables created on first write).
func (d *database) Collection(name string) engine.Collection {
	return &collection{e: d.e, db: d.name, n: namesOf(name)}
}

// CollectionNames lists the collections holding documents, from the path
// counts (one index lookup, whatever the number of collections).
func (d *database) CollectionNames(ctx context.Context) ([]string, error) {
	var names []string
	err := d.e.observe(ctx, d.name, "listCollections", func() error {
		f, err := d.e.file(ctx, d.name)
		if err != nil {
			return classify("list collections of "+d.name, err)
		}
		q, err := f.reader(ctx)
		if err != nil {
			return classify("list collections of "+d.name, err)
		}
		defer f.release(q)
		var exists int64
		_, err = q.queryRow(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", []any{strings.Trim(pathsTable, `"`)}, &exists)
		if err != nil || exists == 0 {
			return classify("list collections of "+d.name, err)
		}
		r, err := q.query(ctx, "SELECT c FROM "+pathsTable+" WHERE f = ? AND n > 0 ORDER BY c", []any{docsPath})
		if err != nil {
			return classify("list collections of "+d.name, err)
		}
		for r.next() {
			names = append(names, r.text(0))
		}
		return classify("list collections of "+d.name, r.err)
	})
	return names, err
}

// Drop drops every table of the file in one transaction (word tables
// first: dropping one drops its own tables); the file stays, as other
// processes may have it open.
func (d *database) Drop(ctx context.Context) error {
	return d.e.observe(ctx, d.name, "dropDatabase", func() error {
		f, err := d.e.file(ctx, d.name)
		if err != nil {
			return classify("drop database "+d.name, err)
		}
		err = f.write(ctx, func(ctx context.Context, w *conn) error {
			// The counts the batch's earlier writes hold go before their tables.
			if err := w.settlePaths(ctx); err != nil {
				return err
			}
			tables, err := queryStrings(ctx, w, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY sql LIKE 'CREATE VIRTUAL%' DESC")
			if err != nil {
				return err
			}
			for _, t := range tables {
				if err := w.run(ctx, "DROP TABLE IF EXISTS "+quote(t)); err != nil {
					return fmt.Errorf("drop %s: %w", t, err)
				}
			}
			return nil
		})
		f.forget()
		return classify("drop database "+d.name, err)
	})
}
