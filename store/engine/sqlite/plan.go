package sqlite

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// planner writes the SQL of one collection's reads.
type planner struct {
	n    names
	q    querier
	cols string // what Find steps select ("d.doc", or "d.rid, d.doc" for writes)
}

// step is one query of a Find: "SELECT <cols> ..." without LIMIT/OFFSET.
type step struct {
	sql  string
	args []any
}

// stepFunc plans a step when the cursor gets to it (nil: nothing to read).
type stepFunc func(ctx context.Context) (*step, error)

// probeCap is how far conditions are counted when the plan only needs the
// most selective one.
const probeCap = 4096

// find plans a Find: the steps whose rows, in order, are its answer.
// want is skip+limit (0: every match).
func (p *planner) find(ctx context.Context, x expr, keys []sortKey, want int64) ([]stepFunc, error) {
	if c, ok := x.(constExpr); ok && !bool(c) {
		return nil, nil
	}
	cs := conjuncts(x)
	var walk string
	if len(keys) > 0 {
		walk = keys[0].path
	}
	var paths []string
	if walk != "" && walk != "_id" {
		paths = []string{walk}
	}
	docs, has, err := p.counts(ctx, paths...)
	if err != nil {
		return nil, err
	}
	// A walk of the first sort path reads about want×docs/matches entries;
	// driving from a condition reads (and sorts) its matches.
	threshold := int64(probeCap)
	if len(keys) > 0 && want > 0 && docs > 0 {
		threshold = max(int64(math.Sqrt(float64(want)*float64(docs))), 2*want)
	}
	e := estimates{}
	candidates := 0
	for _, c := range cs {
		if canDrive(c) {
			candidates++
		}
	}
	if candidates > 1 || (candidates == 1 && len(keys) > 0 && want > 0) {
		var ls []any
		for _, c := range cs {
			if canDrive(c) {
				ls = leaves(c, ls)
			}
		}
		if err := p.probe(ctx, e, ls, threshold+1); err != nil {
			return nil, err
		}
	}
	drive := e.best(cs)
	useWalk := len(keys) > 0 && (drive < 0 || want > 0 && e.estimate(cs[drive]) > threshold)
	if !useWalk {
		s := p.driven(cs, drive, keys, want)
		return []stepFunc{func(context.Context) (*step, error) { return s, nil }}, nil
	}
	if walk == "_id" {
		s := p.walkID(cs, keys[0].desc)
		return []stepFunc{func(context.Context) (*step, error) { return s, nil }}, nil
	}
	keyed := p.walkPath(cs, keys)
	steps := []stepFunc{func(context.Context) (*step, error) { return keyed, nil }}
	if docs >= 0 && has[0] >= 0 && docs == has[0] {
		return steps, nil // every document has a value to walk
	}
	// Documents without a value at the path sort as null: first ascending,
	// last descending.
	missing := func(ctx context.Context) (*step, error) {
		lacking := append(slices.Clone(cs), notExpr{&fieldExpr{path: walk, op: opScalar}})
		sub, err := p.find(ctx, simplify(andExpr(lacking)), keys[1:], want)
		if err != nil || len(sub) == 0 {
			return nil, err
		}
		if len(sub) > 1 {
			return nil, fmt.Errorf("plan documents without %s: %d steps", walk, len(sub))
		}
		return sub[0](ctx)
	}
	if keys[0].desc {
		return append(steps, missing), nil
	}
	return append([]stepFunc{missing}, steps...), nil
}

// driven reads the matches of the conjunct cs[drive] (every document when
// drive < 0), checks the others on each, and sorts what passes.
func (p *planner) driven(cs []expr, drive int, keys []sortKey, want int64) *step {
	var b builder
	others := without(cs, drive)
	if len(keys) == 0 {
		b.WriteString("SELECT " + p.cols + " FROM ")
		rid := p.source(&b, cs, drive, true)
		b.WriteString(" WHERE 1")
		b.preds(p, others, rid)
		return &step{sql: b.String(), args: b.args}
	}
	// Sort rids and keys first, then read the page's documents only.
	var from builder
	rid := p.source(&from, cs, drive, usesID(andExpr(others)) || slices.ContainsFunc(keys, func(k sortKey) bool { return k.path == "_id" }))
	b.WriteString("SELECT " + p.cols + " FROM (SELECT " + rid + " AS rid")
	for i, k := range keys {
		b.WriteString(", ")
		p.sortValue(&b, k, rid)
		b.WriteString(" AS k" + itoa(int64(i)))
	}
	b.WriteString(" FROM ")
	b.append(&from)
	b.WriteString(" WHERE 1")
	b.preds(p, others, rid)
	order := func(prefix string) {
		b.WriteString(" ORDER BY ")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(prefix + "k" + itoa(int64(i)) + k.dir())
		}
	}
	order("")
	if want > 0 {
		b.WriteString(" LIMIT ")
		b.arg(want)
	}
	b.WriteString(") AS t CROSS JOIN " + p.n.d + " AS d ON d.rid = t.rid")
	order("t.")
	return &step{sql: b.String(), args: b.args}
}

// source writes the FROM items listing the documents of cs[drive] (all
// documents, as d, when drive < 0) and returns the expression of their
// rid; withDoc joins their row as d.
func (p *planner) source(b *builder, cs []expr, drive int, withDoc bool) string {
	if drive < 0 {
		b.WriteString(p.n.d + " AS d")
		return "d.rid"
	}
	b.WriteString("(")
	p.genOnce(b, cs[drive])
	b.WriteString(") AS g")
	if withDoc {
		b.WriteString(" CROSS JOIN " + p.n.d + " AS d ON d.rid = g.rid")
	}
	return "g.rid"
}

// genOnce is gen listing each rid once.
func (p *planner) genOnce(b *builder, x expr) {
	if unique(x) {
		p.gen(b, x)
		return
	}
	b.WriteString("SELECT DISTINCT rid FROM (")
	p.gen(b, x)
	b.WriteString(")")
}

// walkID walks the documents in _id order.
func (p *planner) walkID(cs []expr, desc bool) *step {
	var b builder
	b.WriteString("SELECT " + p.cols + " FROM " + p.n.d + " AS d WHERE 1")
	sp := spanAll(cs, "_id")
	if sp.lo.set {
		b.WriteString(" AND d.id " + sp.lo.cmp(false) + " ")
		b.arg(sp.lo.v)
	}
	if sp.hi.set {
		b.WriteString(" AND d.id " + sp.hi.cmp(true) + " ")
		b.arg(sp.hi.v)
	}
	b.preds(p, cs, "d.rid")
	b.WriteString(" ORDER BY d.id" + sortKey{desc: desc}.dir())
	return &step{sql: b.String(), args: b.args}
}

// walkPath walks the entries of the first sort path in order, one per
// document (its least value ascending, greatest descending, as MongoDB
// sorts arrays), checking the conditions on each; ties are sorted by the
// other keys as the walk goes.
func (p *planner) walkPath(cs []expr, keys []sortKey) *step {
	k := keys[0]
	var b builder
	b.WriteString("SELECT " + p.cols + " FROM " + p.n.x + " AS s CROSS JOIN " + p.n.d + " AS d ON d.rid = s.rid WHERE s.f = ")
	b.arg(k.path)
	b.WriteString(" AND s.v < x''")
	sp := spanAll(cs, k.path)
	if sp.lo.set {
		b.WriteString(" AND s.v " + sp.lo.cmp(false) + " ")
		b.arg(sp.lo.v)
	}
	if sp.hi.set {
		b.WriteString(" AND s.v " + sp.hi.cmp(true) + " ")
		b.arg(sp.hi.v)
	}
	b.WriteString(" AND s.v = ")
	p.sortValue(&b, k, "s.rid")
	b.preds(p, cs, "s.rid")
	b.WriteString(" ORDER BY s.v" + k.dir())
	for _, o := range keys[1:] {
		b.WriteString(", ")
		p.sortValue(&b, o, "d.rid")
		b.WriteString(o.dir())
	}
	return &step{sql: b.String(), args: b.args}
}

// sortValue writes the value a document sorts by on key k.
func (p *planner) sortValue(b *builder, k sortKey, rid string) {
	if k.path == "_id" {
		b.WriteString("d.id")
		return
	}
	agg := "min"
	if k.desc {
		agg = "max"
	}
	b.WriteString("(SELECT " + agg + "(v) FROM " + p.n.x + " INDEXED BY " + p.n.r + " WHERE rid = " + rid + " AND f = ")
	b.arg(k.path)
	b.WriteString(" AND v < x'')")
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
	drive, err := p.pick(ctx, cs)
	if err != nil {
		return nil, err
	}
	var b builder
	others := without(cs, drive)
	b.WriteString("SELECT count(*) FROM ")
	rid := p.source(&b, cs, drive, usesID(andExpr(others)))
	b.WriteString(" WHERE 1")
	b.preds(p, others, rid)
	return &step{sql: b.String(), args: b.args}, nil
}

// pick chooses the conjunct to drive a full read from (-1: none can).
func (p *planner) pick(ctx context.Context, cs []expr) (int, error) {
	var ls []any
	n := 0
	for _, c := range cs {
		if canDrive(c) {
			ls = leaves(c, ls)
			n++
		}
	}
	e := estimates{}
	if n > 1 {
		// Count up to a small cap first, then further only if needed.
		for _, limit := range []int64{probeCap, 64 * probeCap} {
			if err := p.probe(ctx, e, ls, limit); err != nil {
				return 0, err
			}
			if d := e.best(cs); d >= 0 && e.estimate(cs[d]) != unbounded {
				return d, nil
			}
		}
	}
	return e.best(cs), nil
}

// distinct plans a CountDistinct over the values of top-level fields.
func (p *planner) distinct(ctx context.Context, x expr, fields []string) (*step, error) {
	if c, ok := x.(constExpr); ok && !bool(c) {
		return nil, nil
	}
	cs := conjuncts(x)
	drive, err := p.pick(ctx, cs)
	if err != nil {
		return nil, err
	}
	var b builder
	b.WriteString("SELECT count(*) FROM (SELECT DISTINCT ")
	var from builder
	others := without(cs, drive)
	rid := p.source(&from, cs, drive, usesID(andExpr(others)) || slices.Contains(fields, "_id"))
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		if f == "_id" {
			b.WriteString("d.id")
			continue
		}
		for j, expr := range []string{"v", "typeof(v)"} {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(SELECT min(" + expr + ") FROM " + p.n.x + " INDEXED BY " + p.n.r + " WHERE rid = " + rid + " AND f = ")
			b.arg(f)
			b.WriteString(")")
		}
	}
	b.WriteString(" FROM ")
	b.append(&from)
	b.WriteString(" WHERE 1")
	b.preds(p, others, rid)
	b.WriteString(")")
	return &step{sql: b.String(), args: b.args}, nil
}

// gen writes a SELECT listing the rid of every document holding x (which
// canDrive), reporting whether each is listed once.
func (p *planner) gen(b *builder, x expr) bool {
	switch y := x.(type) {
	case *fieldExpr:
		b.WriteString("SELECT rid FROM " + p.n.x + " WHERE ")
		b.entryCond("", y)
		return y.op == opEq
	case *idExpr:
		b.WriteString("SELECT rid FROM " + p.n.d + " AS d WHERE ")
		b.idCond("d.id", y)
		return true
	case constExpr:
		b.WriteString("SELECT rid FROM " + p.n.d + " WHERE 0")
		return true
	case orExpr:
		for i, k := range y {
			if i > 0 {
				b.WriteString(" UNION ")
			}
			b.WriteString("SELECT rid FROM (")
			p.gen(b, k)
			b.WriteString(")")
		}
		return true
	case andExpr:
		drive := estimates{}.best(y) // no estimates nested: the first that can
		b.WriteString("SELECT g.rid FROM (")
		once := p.gen(b, y[drive])
		b.WriteString(") AS g")
		others := without(y, drive)
		for _, c := range others {
			if usesID(c) {
				b.WriteString(" CROSS JOIN " + p.n.d + " AS d ON d.rid = g.rid")
				break
			}
		}
		b.WriteString(" WHERE 1")
		b.preds(p, others, "g.rid")
		return once
	}
	panic(fmt.Sprintf("sqlite: no generator for %T", x))
}

// preds writes " AND c" for each condition, checked on the document rid.
func (b *builder) preds(p *planner, cs []expr, rid string) {
	for _, c := range cs {
		b.WriteString(" AND ")
		p.pred(b, c, rid)
	}
}

// unique tells whether gen lists each document of x once.
func unique(x expr) bool {
	switch y := x.(type) {
	case *fieldExpr:
		return y.op == opEq
	case andExpr:
		return unique(y[estimates{}.best(y)])
	}
	return true
}

// pred writes a boolean SQL expression that holds when the document rid
// satisfies x (d is its row, for conditions on _id).
func (p *planner) pred(b *builder, x expr, rid string) {
	switch y := x.(type) {
	case *fieldExpr:
		b.WriteString("EXISTS (SELECT 1 FROM " + p.n.x + " INDEXED BY " + p.n.r + " WHERE rid = " + rid + " AND ")
		b.entryCond("", y)
		b.WriteString(")")
	case *idExpr:
		b.WriteString("(")
		b.idCond("d.id", y)
		b.WriteString(")")
	case constExpr:
		if y {
			b.WriteString("1")
		} else {
			b.WriteString("0")
		}
	case notExpr:
		b.WriteString("NOT ")
		p.pred(b, y.x, rid)
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
			p.pred(b, k, rid)
		}
		b.WriteString(")")
	default:
		panic(fmt.Sprintf("sqlite: no predicate for %T", x))
	}
}

// usesID tells whether x has a condition on _id (which needs the d row).
func usesID(x expr) bool {
	switch y := x.(type) {
	case *idExpr:
		return true
	case notExpr:
		return usesID(y.x)
	case andExpr:
		return slices.ContainsFunc(y, usesID)
	case orExpr:
		return slices.ContainsFunc(y, usesID)
	}
	return false
}

func without(cs []expr, i int) []expr {
	if i < 0 {
		return cs
	}
	out := make([]expr, 0, len(cs)-1)
	out = append(out, cs[:i]...)
	return append(out, cs[i+1:]...)
}
