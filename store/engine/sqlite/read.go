package sqlite

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// reader is the planner of a read on one of the file's reader
// connections; release gives the connection back.
func (c *collection) reader(ctx context.Context) (p *planner, release func(), err error) {
	f, err := c.e.file(ctx, c.db)
	if err != nil {
		return nil, nil, err
	}
	q, err := f.reader(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &planner{n: c.n, q: q, cols: "d.id, d.doc, d.b", db: c.db, counts: c.e.counts}, func() { f.release(q) }, nil
}

// Find returns the documents matching filter, in opts.Sort order.
func (c *collection) Find(ctx context.Context, filter bson.D, opts *engine.FindOptions) (engine.Cursor, error) {
	var cur engine.Cursor
	err := c.e.observe(ctx, c.db, "find", func() error {
		var err error
		cur, err = c.find(ctx, filter, opts, 0)
		return err
	})
	return cur, err
}

// FindOne returns the first document matching filter (in opts.Sort order).
func (c *collection) FindOne(ctx context.Context, filter bson.D, opts *engine.FindOptions) (bson.Raw, error) {
	var doc bson.Raw
	err := c.e.observe(ctx, c.db, "find", func() error {
		cur, err := c.find(ctx, filter, opts, 1)
		if err != nil {
			return err
		}
		defer cur.Close(ctx)
		if !cur.Next(ctx) {
			if err := cur.Err(); err != nil {
				return err
			}
			return fmt.Errorf("%s: %w", c.op("find one in"), engine.ErrNoDocuments)
		}
		doc = cur.Current()
		return nil
	})
	return doc, err
}

// find plans a Find (limit, when not 0, overrides opts.Limit).
func (c *collection) find(ctx context.Context, filter bson.D, opts *engine.FindOptions, limit int64) (*cursor, error) {
	op := c.op("find in")
	if opts == nil {
		opts = &engine.FindOptions{}
	}
	if limit == 0 {
		limit = opts.Limit
	}
	if limit < 0 { // MongoDB: a negative limit is a single batch of that size
		limit = -limit
	}
	x, err := c.compile(filter)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	keys, err := parseSort(opts.Sort)
	if err == nil {
		err = c.e.words.checkSort(keys)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	proj, err := parseProjection(opts.Projection)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	skip := max(opts.Skip, 0)
	p, release, err := c.reader(ctx)
	if err != nil {
		return nil, classify(op, err)
	}
	want := int64(0)
	if limit > 0 {
		want = skip + limit
	}
	steps, err := p.find(ctx, x, keys, want)
	if noTable(err) {
		steps, err = nil, nil
	}
	if err != nil {
		release()
		return nil, classify(op, err)
	}
	return &cursor{q: p.q, release: release, op: op, steps: steps, skip: skip, limit: limit, proj: proj, codec: c.e.codec, shared: c.e.opts.SharedField, db: c.db, coll: c.n.coll}, nil
}

// Count counts the documents matching filter.
func (c *collection) Count(ctx context.Context, filter bson.D) (int64, error) {
	var n int64
	err := c.e.observe(ctx, c.db, "count", func() error {
		var err error
		n, err = c.count(ctx, filter, func(p *planner, x expr) (*step, error) { return p.count(ctx, x) })
		return err
	})
	return n, err
}

// CountDistinct counts the distinct combinations of the values of fields
// (top-level scalars) among the documents matching filter.
func (c *collection) CountDistinct(ctx context.Context, filter bson.D, fields ...string) (int64, error) {
	var n int64
	err := c.e.observe(ctx, c.db, "aggregate", func() error {
		for _, f := range fields {
			if err := checkPath(f); err != nil {
				return fmt.Errorf("%s: %w", c.op("count distinct in"), err)
			}
		}
		var err error
		n, err = c.count(ctx, filter, func(p *planner, x expr) (*step, error) { return p.distinct(ctx, x, fields) })
		return err
	})
	return n, err
}

// count runs the counting statement plan writes.
func (c *collection) count(ctx context.Context, filter bson.D, plan func(*planner, expr) (*step, error)) (int64, error) {
	op := c.op("count in")
	x, err := c.compile(filter)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	p, release, err := c.reader(ctx)
	if err != nil {
		return 0, classify(op, err)
	}
	defer release()
	s, err := plan(p, x)
	if err == nil && s == nil {
		return 0, nil
	}
	if err == nil {
		var n int64
		if _, err = p.q.queryRow(ctx, s.sql, s.args, &n); err == nil {
			return n, nil
		}
	}
	if noTable(err) {
		return 0, nil
	}
	return 0, classify(op, err)
}
