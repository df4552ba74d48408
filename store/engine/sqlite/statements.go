package sqlite

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// Statement is one SQL statement of a read, with its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Statements returns the SQL statements a Find of filter with opts (or,
// when count is set, a Count of filter) on coll of database would
// run now, planned as the engine plans them. With RunStatement they let
// benchmarks time the same queries with the same plans without the
// engine's cursor, decoding and projection around them.
func (e *Engine) Statements(ctx context.Context, database, coll string, filter bson.D, opts *engine.FindOptions, count bool) ([]Statement, error) {
	c := &collection{e: e, db: database, n: namesOf(coll)}
	x, err := c.compile(filter)
	if err != nil {
		return nil, err
	}
	p, release, err := c.reader(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if count {
		s, err := p.count(ctx, x)
		if err != nil || s == nil {
			return nil, err
		}
		return []Statement{{SQL: s.sql, Args: s.args}}, nil
	}
	if opts == nil {
		opts = &engine.FindOptions{}
	}
	keys, err := parseSort(opts.Sort)
	if err != nil {
		return nil, err
	}
	want := int64(0)
	if opts.Limit > 0 {
		want = max(opts.Skip, 0) + opts.Limit
	}
	steps, err := p.find(ctx, x, keys, want)
	if err != nil {
		return nil, err
	}
	var out []Statement
	for _, sf := range steps {
		s, err := sf(ctx)
		if err != nil {
			return nil, err
		}
		if s == nil {
			continue
		}
		st := Statement{SQL: s.sql, Args: s.args}
		if want > 0 {
			st.SQL += fmt.Sprintf(" LIMIT %d", want)
		}
		out = append(out, st)
	}
	return out, nil
}

// RunStatement runs st on a reader connection of database, stepping
// through every row it returns, and reports how many there were.
func (e *Engine) RunStatement(ctx context.Context, database string, st Statement) (int, error) {
	f, err := e.file(ctx, database)
	if err != nil {
		return 0, err
	}
	q, err := f.reader(ctx)
	if err != nil {
		return 0, err
	}
	defer f.release(q)
	r, err := q.query(ctx, st.SQL, st.Args)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", st.SQL, err)
	}
	defer r.close()
	n := 0
	for r.next() {
		n++
	}
	return n, r.err
}
