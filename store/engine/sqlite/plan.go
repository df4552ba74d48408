package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// planner writes the SQL of one collection's reads, on one connection.
type planner struct {
	n      names
	q      *conn
	cols   string      // what Find steps select ("d.id, d.doc, d.b", or "d.rid, d.id, d.doc, d.b" for writes)
	db     string      // the database's name
	counts *countCache // the engine's
}

// step is one query of a Find: "SELECT <cols> ..." without LIMIT/OFFSET.
type step struct {
	sql  string
	args []any
}

// stepFunc plans a step when the cursor gets to it (nil: nothing to read).
type stepFunc func(ctx context.Context) (*step, error)

func ready(s *step) stepFunc { return func(context.Context) (*step, error) { return s, nil } }

// query is an SQL SELECT under construction.
type query struct {
	sel, from, where, order builder
}

func (q *query) step() *step {
	var b builder
	b.WriteString("SELECT ")
	b.append(&q.sel)
	b.WriteString(" FROM ")
	b.append(&q.from)
	b.WriteString(" WHERE 1")
	b.append(&q.where)
	if q.order.Len() > 0 {
		b.WriteString(" ORDER BY ")
		b.append(&q.order)
	}
	return &step{sql: b.String(), args: b.args}
}

// walked is the sort path a walk reads in order and the column holding
// its value: conditions on the path are checked on it.
type walked struct{ path, col string }

// stats reads the plan's statistics unless nothing depends on them.
func (p *planner) stats(ctx context.Context, cs []expr, keys []sortKey, want int64) (*stats, error) {
	drivers, simple := 0, true
	for _, c := range cs {
		if canDrive(c) {
			drivers++
		}
		if fe, ok := c.(*fieldExpr); !ok || fe.op != opEq {
			simple = simple && static(c) >= 0
		}
	}
	if len(keys) == 0 && drivers <= 1 && simple {
		return &stats{est: map[any]int64{}, threshold: unbounded}, nil
	}
	var paths []string
	for _, k := range keys {
		if k.path != "_id" {
			paths = append(paths, k.path)
		}
	}
	return p.readStats(ctx, cs, paths, want, len(keys) > 0, false)
}

// find plans a Find: the steps whose rows, in order, are its answer.
// want is skip+limit (0: every match).
func (p *planner) find(ctx context.Context, x expr, keys []sortKey, want int64) ([]stepFunc, error) {
	if c, ok := x.(constExpr); ok && !bool(c) {
		return nil, nil
	}
	cs := conjuncts(x)
	st, err := p.stats(ctx, cs, keys, want)
	if err != nil {
		return nil, err
	}
	drive := st.best(cs)
	useWalk := len(keys) > 0 && !rowOnly(keys[0].path) && (drive < 0 || want > 0 && st.estimate(cs[drive]) > st.threshold)
	switch {
	case !useWalk:
		return []stepFunc{ready(p.driven(cs, drive, keys, want, st))}, nil
	case keys[0].path == "_id":
		return []stepFunc{ready(p.walkID(cs, keys[0].desc, st))}, nil
	}
	walk := keys[0]
	steps := []stepFunc{ready(p.walkPath(cs, keys, st))}
	if all := st.paths[walk.path].n; st.docs == all || needsScalar(cs, walk.path) {
		return steps, nil // every document (that can match) has a value to walk
	}
	// Documents without a value at the path sort as null: first ascending,
	// last descending. They are read by a plan of their own.
	missing := func(ctx context.Context) (*step, error) {
		lacking := append(slices.Clone(cs), notExpr{&fieldExpr{path: walk.path, op: opScalar}})
		sub, err := p.find(ctx, simplify(andExpr(lacking)), keys[1:], want)
		if err != nil || len(sub) == 0 {
			return nil, err
		}
		if len(sub) > 1 {
			return nil, fmt.Errorf("plan documents without %s: %d steps", walk.path, len(sub))
		}
		return sub[0](ctx)
	}
	if walk.desc {
		return append(steps, missing), nil
	}
	return append([]stepFunc{missing}, steps...), nil
}

// needsScalar tells whether one of the conjuncts cs holds only for
// documents with a scalar at path: a comparison with a value there.
func needsScalar(cs []expr, path string) bool {
	for _, c := range cs {
		if f, ok := c.(*fieldExpr); ok && f.path == path && f.op != opExists && f.op != opNull {
			return true
		}
	}
	return false
}

// driven reads the matches of the conjunct cs[drive] (every document when
// drive < 0), checks the others on each, and sorts what passes: rids and
// sort values first, then the documents of the page only.
func (p *planner) driven(cs []expr, drive int, keys []sortKey, want int64, st *stats) *step {
	others := without(cs, drive)
	if len(keys) == 0 {
		var q query
		q.sel.WriteString(p.cols)
		rid := p.source(&q.from, cs, drive, true, st)
		p.filter(&q, others, rid, st, nil)
		return q.step()
	}
	// Reading the _id of few candidates costs less than the ties' query.
	last := len(keys) - 1
	if want > 0 && last > 0 && keys[last].path == "_id" && drive >= 0 && st.estimate(cs[drive]) > 4*want {
		return p.drivenTies(cs, drive, keys, want, st)
	}
	var q query
	rid := p.source(&q.from, cs, drive, true, st)
	q.sel.WriteString(rid + " AS rid")
	p.filter(&q, others, rid, st, nil)
	for i, k := range keys {
		q.sel.WriteString(", ")
		p.sortValue(&q.sel, k)
		q.sel.WriteString(" AS k" + itoa(int64(i)))
		if i > 0 {
			q.order.WriteString(", ")
		}
		q.order.WriteString("k" + itoa(int64(i)) + k.dir())
	}
	inner := q.step()
	var b builder
	b.WriteString("SELECT " + p.cols + " FROM (" + inner.sql)
	b.args = append(b.args, inner.args...)
	if want > 0 {
		b.WriteString(" LIMIT ")
		b.arg(want)
	}
	b.WriteString(") AS t CROSS JOIN " + p.n.d + " AS d ON d.rid = t.rid ORDER BY ")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("t.k" + itoa(int64(i)) + k.dir())
	}
	return &step{sql: b.String(), args: b.args}
}

// drivenTies is driven for an order ending with _id (the store's: ...,
// lastUpdated, _id), reading the _id (a document row) of the page's
// candidates only: the first want matches by the other keys, and those
// tied with the last of them; they are then sorted by all keys.
func (p *planner) drivenTies(cs []expr, drive int, keys []sortKey, want int64, st *stats) *step {
	others := without(cs, drive)
	front := keys[:len(keys)-1]
	var q query
	rid := p.source(&q.from, cs, drive, true, st)
	q.sel.WriteString(rid + " AS rid")
	p.filter(&q, others, rid, st, nil)
	var cols, order, tied builder
	cols.WriteString("rid")
	for i, k := range front {
		name := "k" + itoa(int64(i))
		q.sel.WriteString(", ")
		p.sortValue(&q.sel, k)
		q.sel.WriteString(" AS " + name)
		cols.WriteString(", " + name)
		if i > 0 {
			order.WriteString(", ")
			tied.WriteString(" AND ")
		}
		order.WriteString(name + k.dir())
		tied.WriteString("c." + name + " IS last." + name)
	}
	c := q.step()
	var b builder
	b.WriteString("WITH c AS MATERIALIZED (" + c.sql + "), top AS MATERIALIZED (SELECT " + cols.String() + " FROM c ORDER BY " + order.String() + " LIMIT ")
	b.args = append(b.args, c.args...)
	b.arg(want)
	b.WriteString("), last AS (SELECT " + cols.String() + " FROM top ORDER BY " + order.String() + " LIMIT 1 OFFSET ")
	b.arg(want - 1)
	// The page is cut by _id before any document is read: a large tie (a
	// transaction's resources share their lastUpdated) costs its ids only.
	var byID builder
	for i, k := range front {
		byID.WriteString("t.k" + itoa(int64(i)) + k.dir() + ", ")
	}
	byID.WriteString("i.id" + keys[len(keys)-1].dir())
	order2 := strings.NewReplacer("t.", "u.", "i.", "u.").Replace(byID.String())
	b.WriteString(") SELECT " + p.cols + " FROM (SELECT t.*, i.id AS id FROM (SELECT " + cols.String() + " FROM top UNION SELECT c." + strings.ReplaceAll(cols.String(), ", ", ", c.") + " FROM c, last WHERE " + tied.String() + ") AS t CROSS JOIN " + p.n.d + " AS i ON i.rid = t.rid ORDER BY " + byID.String() + " LIMIT ")
	b.arg(want)
	b.WriteString(") AS u CROSS JOIN " + p.n.d + " AS d ON d.rid = u.rid ORDER BY " + order2)
	return &step{sql: b.String(), args: b.args}
}

// source writes the FROM items listing the documents of cs[drive] (all
// documents, as d, when drive < 0) and returns the expression of their
// rid; withDoc joins their row as d.
func (p *planner) source(from *builder, cs []expr, drive int, withDoc bool, st *stats) string {
	if drive < 0 {
		from.WriteString(p.n.d + " AS d")
		return "d.rid"
	}
	from.WriteString("(")
	if p.unique(cs[drive], st) {
		p.gen(from, cs[drive], st)
	} else {
		from.WriteString("SELECT DISTINCT rid FROM (")
		p.gen(from, cs[drive], st)
		from.WriteString(")")
	}
	from.WriteString(") AS g")
	if withDoc {
		from.WriteString(" CROSS JOIN " + p.n.d + " AS d ON d.rid = g.rid")
	}
	return "g.rid"
}

// filter adds the conditions cs on the document rid (its row joined as d)
// to q. Conditions on a walked path are checked on its column.
func (p *planner) filter(q *query, cs []expr, rid string, st *stats, w *walked) {
	for _, c := range cs {
		fe, ok := c.(*fieldExpr)
		if few, rare := st.rare(fe); ok && rare {
			// Every document but few holds the value: exclude those few.
			if few > 0 {
				q.where.WriteString(" AND " + rid + " NOT IN (")
				p.others(&q.where, fe)
				q.where.WriteString(")")
			}
			continue
		}
		switch {
		case ok && w != nil && fe.path == w.path && fe.op != opExists && fe.op != opNull:
			q.where.WriteString(" AND (")
			q.where.valueCond(w.col, fe.op, fe.kind, fe.vals)
			q.where.WriteString(")")
		default:
			q.where.WriteString(" AND ")
			p.pred(&q.where, c, rid, w)
		}
	}
}

// walkID walks the documents in _id order.
func (p *planner) walkID(cs []expr, desc bool, st *stats) *step {
	var q query
	q.sel.WriteString(p.cols)
	q.from.WriteString(p.n.d + " AS d")
	sp := spanAll(cs, "_id")
	if sp.lo.set {
		q.where.WriteString(" AND d.id " + sp.lo.cmp(false) + " ")
		q.where.arg(sp.lo.v)
	}
	if sp.hi.set {
		q.where.WriteString(" AND d.id " + sp.hi.cmp(true) + " ")
		q.where.arg(sp.hi.v)
	}
	p.filter(&q, cs, "d.rid", st, nil)
	q.order.WriteString("d.id" + sortKey{desc: desc}.dir())
	return q.step()
}

// walkPath walks the entries of the first sort path in order, one per
// document (its least value ascending, greatest descending, as MongoDB
// sorts arrays), checking the conditions on each; ties are sorted by the
// other keys as the walk goes, and the walk starts and stops where the
// conditions on the path allow.
func (p *planner) walkPath(cs []expr, keys []sortKey, st *stats) *step {
	k := keys[0]
	var q query
	q.sel.WriteString(p.cols)
	q.from.WriteString(p.n.x + " AS s")
	var w *walked
	if st.single(k.path) {
		w = &walked{path: k.path, col: "s.v"}
	}
	p.filter(&q, cs, "s.rid", st, w)
	q.from.WriteString(" CROSS JOIN " + p.n.d + " AS d ON d.rid = s.rid")
	where := q.where
	q.where = builder{}
	q.where.WriteString(" AND s.f = ")
	q.where.field(k.path)
	sp := spanAll(cs, k.path)
	if sp.lo.set {
		q.where.WriteString(" AND s.v " + sp.lo.cmp(false) + " ")
		q.where.arg(sp.lo.v)
	}
	if sp.hi.set { // a value of the filter: below the markers
		q.where.WriteString(" AND s.v " + sp.hi.cmp(true) + " ")
		q.where.arg(sp.hi.v)
	} else {
		q.where.WriteString(" AND s.v < " + minMark)
	}
	if w == nil {
		q.where.WriteString(" AND s.v = ")
		p.sortValue(&q.where, k)
	}
	q.where.append(&where)
	q.order.WriteString("s.v" + k.dir())
	for _, o := range keys[1:] {
		q.order.WriteString(", ")
		p.sortValue(&q.order, o)
		q.order.WriteString(o.dir())
	}
	return q.step()
}

// sortValue writes into b the value a document (its row joined as d)
// sorts by on key k: its least (ascending) or greatest (descending)
// scalar at the path, or NULL.
func (p *planner) sortValue(b *builder, k sortKey) {
	if k.path == "_id" {
		b.WriteString("d.id")
		return
	}
	b.WriteString("fs_sort(d.k, d.doc, ")
	b.field(k.path)
	b.WriteString(", ")
	b.arg(k.path)
	b.WriteString(", " + itoa(int64(boolInt(k.desc))) + ")")
}

// count plans a Count.
func (p *planner) count(ctx context.Context, x expr) (*step, error) {
	if c, ok := x.(constExpr); ok && !bool(c) {
		return nil, nil
	}
	cs := conjuncts(x)
	if len(cs) == 0 {
		return &step{sql: "SELECT coalesce((SELECT n FROM " + pathsTable + " WHERE c = ? AND f = ?), 0)", args: []any{p.n.coll, docsPath}}, nil
	}
	var st *stats
	var err error
	if slices.ContainsFunc(cs, twoValued) {
		st, err = p.readStats(ctx, cs, nil, 0, false, true)
	} else {
		st, err = p.stats(ctx, cs, nil, 0)
	}
	if err != nil {
		return nil, err
	}
	return p.countOf(cs, st), nil
}

// countOf writes the count of the documents satisfying every condition of
// cs. An equality on a boolean whose other value few documents hold (and
// that every document holds one value of) is counted as the count
// without it less the count of those few documents that satisfy the rest.
func (p *planner) countOf(cs []expr, st *stats) *step {
	for i, c := range cs {
		fe, ok := c.(*fieldExpr)
		if !ok {
			continue
		}
		if _, rare := st.rare(fe); !rare {
			continue
		}
		rest := without(cs, i)
		all := &step{sql: "SELECT coalesce((SELECT n FROM " + pathsTable + " WHERE c = ? AND f = ?), 0)", args: []any{p.n.coll, docsPath}}
		if len(rest) > 0 {
			all = p.countOf(rest, st)
		}
		var q query
		q.sel.WriteString("count(*)")
		q.from.WriteString("(")
		p.others(&q.from, fe)
		q.from.WriteString(") AS g")
		if len(rest) > 0 {
			q.from.WriteString(" CROSS JOIN " + p.n.d + " AS d ON d.rid = g.rid")
		}
		p.filter(&q, rest, "g.rid", st, nil)
		other := q.step()
		return &step{sql: "SELECT (" + all.sql + ") - (" + other.sql + ")", args: append(slices.Clone(all.args), other.args...)}
	}
	drive := st.best(cs)
	others := without(cs, drive)
	var q query
	q.sel.WriteString("count(*)")
	rid := p.source(&q.from, cs, drive, len(others) > 0, st)
	p.filter(&q, others, rid, st, nil)
	return q.step()
}

// distinct plans a CountDistinct over the values of top-level fields.
func (p *planner) distinct(ctx context.Context, x expr, fields []string) (*step, error) {
	if c, ok := x.(constExpr); ok && !bool(c) {
		return nil, nil
	}
	cs := conjuncts(x)
	var keys []sortKey
	for _, f := range fields {
		keys = append(keys, sortKey{path: f})
	}
	st, err := p.stats(ctx, cs, keys, 0)
	if err != nil {
		return nil, err
	}
	drive := st.best(cs)
	others := without(cs, drive)
	var q query
	q.sel.WriteString("DISTINCT ")
	rid := p.source(&q.from, cs, drive, true, st)
	p.filter(&q, others, rid, st, nil)
	for i, k := range keys {
		if i > 0 {
			q.sel.WriteString(", ")
		}
		p.sortValue(&q.sel, k)
	}
	inner := q.step()
	return &step{sql: "SELECT count(*) FROM (" + inner.sql + ")", args: inner.args}, nil
}

// others writes a SELECT of the rids holding another scalar than fe's
// value at its path.
func (p *planner) others(b *builder, fe *fieldExpr) {
	b.WriteString("SELECT rid FROM " + p.n.x + " WHERE f = ")
	b.field(fe.path)
	b.WriteString(" AND v < ")
	b.arg(fe.vals[0])
	b.WriteString(" UNION ALL SELECT rid FROM " + p.n.x + " WHERE f = ")
	b.field(fe.path)
	b.WriteString(" AND v > ")
	b.arg(fe.vals[0])
	b.WriteString(" AND v < " + minMark)
}

// unique tells whether gen lists each document of x once.
func (p *planner) unique(x expr, st *stats) bool {
	switch y := x.(type) {
	case *fieldExpr:
		return y.op == opEq || y.op != opExists && st.single(y.path)
	case andExpr:
		return p.unique(y[st.best(y)], st)
	}
	return true
}

// gen writes a SELECT listing the rid of every document holding x (which
// canDrive).
func (p *planner) gen(b *builder, x expr, st *stats) {
	switch y := x.(type) {
	case *fieldExpr:
		b.WriteString("SELECT rid FROM " + p.n.x + " WHERE ")
		b.entryCond("", y)
	case *idExpr:
		b.WriteString("SELECT rid FROM " + p.n.d + " AS d WHERE ")
		b.idCond("d.id", y)
	case *wordExpr:
		p.wordRids(b, y)
	case constExpr:
		b.WriteString("SELECT rid FROM " + p.n.d + " WHERE 0")
	case orExpr:
		for i, k := range y {
			if i > 0 {
				b.WriteString(" UNION ")
			}
			b.WriteString("SELECT rid FROM (")
			p.gen(b, k, st)
			b.WriteString(")")
		}
	case andExpr:
		drive := st.best(y)
		b.WriteString("SELECT g.rid FROM (")
		p.gen(b, y[drive], st)
		b.WriteString(") AS g")
		others := without(y, drive)
		if len(others) > 0 {
			b.WriteString(" CROSS JOIN " + p.n.d + " AS d ON d.rid = g.rid")
		}
		b.WriteString(" WHERE 1")
		for _, c := range others {
			b.WriteString(" AND ")
			p.pred(b, c, "g.rid", nil)
		}
	default:
		panic(fmt.Sprintf("sqlite: no generator for %T", x))
	}
}

// pred writes a boolean SQL expression that holds when the document rid
// satisfies x (d is its row; w, when set, holds its value at the walked
// path).
func (p *planner) pred(b *builder, x expr, rid string, w *walked) {
	switch y := x.(type) {
	case *fieldExpr:
		if w != nil && y.path == w.path && y.op != opExists && y.op != opNull {
			b.WriteString("(")
			b.valueCond(w.col, y.op, y.kind, y.vals)
			b.WriteString(")")
			return
		}
		p.fieldPred(b, y, rid)
	case *idExpr:
		b.WriteString("(")
		b.idCond("d.id", y)
		b.WriteString(")")
	case *wordExpr:
		b.WriteString(rid + " IN (")
		p.wordRids(b, y)
		b.WriteString(")")
	case constExpr:
		if y {
			b.WriteString("1")
		} else {
			b.WriteString("0")
		}
	case notExpr:
		b.WriteString("NOT ")
		p.pred(b, y.x, rid, w)
	case andExpr, orExpr:
		kids, sep := []expr(nil), " AND "
		if a, ok := y.(andExpr); ok {
			kids = a
		} else {
			kids, sep = y.(orExpr), " OR "
		}
		b.WriteString("(")
		for i, k := range kids {
			if i > 0 {
				b.WriteString(sep)
			}
			p.pred(b, k, rid, w)
		}
		b.WriteString(")")
	default:
		panic(fmt.Sprintf("sqlite: no predicate for %T", x))
	}
}

func without(cs []expr, i int) []expr {
	if i < 0 {
		return cs
	}
	out := make([]expr, 0, len(cs)-1)
	out = append(out, cs[:i]...)
	return append(out, cs[i+1:]...)
}

// fieldPred writes the check of fe on the document rid, whose row is d:
// an equality on text outside the row keys is a lookup of the entry's
// key; anything else is asked of the row keys (rowkeys.go).
func (p *planner) fieldPred(b *builder, fe *fieldExpr, rid string) {
	switch {
	case rowOnly(fe.path) && fe.op == opIn && len(fe.vals) > maxFuncValues:
		// no index entries to look up: the values a call at a time
		b.WriteString("(")
		for i := 0; i < len(fe.vals); i += maxFuncValues {
			if i > 0 {
				b.WriteString(" OR ")
			}
			part := *fe
			part.vals = fe.vals[i:min(i+maxFuncValues, len(fe.vals))]
			p.fieldPred(b, &part, rid)
		}
		b.WriteString(")")
		return
	case (fe.op == opEq || fe.op == opIn) && fe.kind == kindString && !rowHolds(fe.path), fe.op == opIn && len(fe.vals) > maxFuncValues:
		b.WriteString("EXISTS (SELECT 1 FROM " + p.n.x + " WHERE rid = " + rid + " AND ")
		b.entryCond("", fe)
		b.WriteString(")")
		return
	}
	b.WriteString("fs_row(d.k, d.doc, ")
	if fe.op == opExists {
		b.WriteString("(SELECT json_group_array(id) FROM " + fieldsTable + " WHERE path = ")
		b.arg(fe.path)
		b.WriteString(" OR path >= ")
		b.arg(fe.path + ".")
		b.WriteString(" AND path < ")
		b.arg(fe.path + "/")
		b.WriteString(")")
	} else {
		b.field(fe.path)
	}
	b.WriteString(", ")
	b.arg(fe.path)
	b.WriteString(", " + itoa(int64(fe.op)) + ", " + itoa(int64(fe.kind)))
	for _, v := range fe.vals {
		b.WriteString(", ")
		b.arg(v)
	}
	b.WriteString(")")
}

// maxFuncValues bounds the values of a condition passed to fs_row (SQLite
// takes at most 127 arguments).
const maxFuncValues = 100
