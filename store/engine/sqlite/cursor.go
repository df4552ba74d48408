package sqlite

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// cursor runs a Find's steps one after the other, as they are reached, on
// the reader connection it holds until its end or Close.
type cursor struct {
	q       *conn
	release func()
	op      string
	steps   []stepFunc
	skip    int64 // rows to pass over, across steps
	limit   int64 // rows to return (0: all)
	proj    *projection
	codec   *codec
	shared  string // the engine's Options.SharedField
	db      string
	coll    string

	rows     *rows
	step     *step
	offset   int64 // the current step's OFFSET
	stepRows int64 // rows the current step returned
	returned int64
	cur      bson.Raw
	err      error
	done     bool
}

// Next advances to the next document.
func (c *cursor) Next(ctx context.Context) bool {
	for !c.done {
		if c.limit > 0 && c.returned >= c.limit {
			c.finish()
			return false
		}
		if c.rows == nil && !c.start(ctx) {
			continue
		}
		if c.rows.next() {
			c.stepRows++
			c.skip = 0 // a row past the OFFSET: the step skipped all of it
			out, err := c.document(ctx)
			if err != nil {
				c.fail(err)
				return false
			}
			c.cur = out
			c.returned++
			return true
		}
		if err := c.rows.err; err != nil {
			if !noTable(err) {
				c.fail(err)
			}
			c.finish()
			return false
		}
		c.rows = nil
		if c.stepRows == 0 && c.offset > 0 && len(c.steps) > 0 {
			// The step held at most offset rows: skip the rest later.
			var n int64
			if _, err := c.q.queryRow(ctx, "SELECT count(*) FROM ("+c.step.sql+")", c.step.args, &n); err != nil && !noTable(err) {
				c.fail(err)
				return false
			}
			c.skip -= min(n, c.skip)
		}
	}
	return false
}

// document is the current row's document (columns id, doc, b), its
// shared value read only when the projection keeps it.
func (c *cursor) document(ctx context.Context) (bson.Raw, error) {
	p := storedParts{id: c.rows.text(0), doc: c.rows.view(1)}
	keep := c.shared != "" && !c.rows.null(2) && c.proj.keeps(c.shared)
	if keep {
		z, err := readBlob(ctx, c.q, c.rows.int64(2))
		if err != nil {
			return nil, docError(c.db, c.coll, p.id, err)
		}
		p.value = z
	}
	doc, err := c.codec.decode(p, c.shared, !keep, nil)
	if err != nil {
		return nil, docError(c.db, c.coll, p.id, err)
	}
	return c.proj.apply(doc)
}

// start runs the next step, reporting whether it has one open.
func (c *cursor) start(ctx context.Context) bool {
	if len(c.steps) == 0 {
		c.finish()
		return false
	}
	sf := c.steps[0]
	c.steps = c.steps[1:]
	s, err := sf(ctx)
	switch {
	case noTable(err):
		c.finish()
		return false
	case err != nil:
		c.fail(err)
		return false
	case s == nil:
		return false
	}
	lim := int64(-1)
	if c.limit > 0 {
		lim = c.limit - c.returned
	}
	r, err := c.q.query(ctx, s.sql+" LIMIT ? OFFSET ?", append(slices.Clip(s.args), lim, c.skip))
	switch {
	case noTable(err):
		c.finish()
		return false
	case err != nil:
		c.fail(err)
		return false
	}
	c.rows, c.step, c.offset, c.stepRows = r, s, c.skip, 0
	return true
}

func (c *cursor) fail(err error) {
	c.err = classify(c.op, err)
	c.finish()
}

// finish closes the statement and gives the connection back.
func (c *cursor) finish() {
	c.done = true
	if c.rows != nil {
		c.rows.close()
		c.rows = nil
	}
	if c.release != nil {
		c.release()
		c.release = nil
	}
}

// Current is the document Next moved to.
func (c *cursor) Current() bson.Raw { return c.cur }

// Err is the error that stopped the iteration, if any.
func (c *cursor) Err() error { return c.err }

// Close releases the cursor's connection.
func (c *cursor) Close(context.Context) error {
	c.finish()
	return nil
}
