package sqlite

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// unbounded stands for "at least as many as the cap" in estimates.
const unbounded = math.MaxInt64

// sortFloor is the number of matches the planner always sorts rather than
// walk a sort path for: sorting a thousand rows takes about a millisecond,
// while a walk's cost, estimated as if matches were spread evenly, has no
// bound when they are not (a patient's Observations, written last, sit at
// the far end of a walk of lastUpdated).
const sortFloor = 1000

// probeCap is how far conditions are counted when the plan only needs
// the most selective one (no sort and limit to weigh them against).
const probeCap = 4096

// glance is how far every condition is counted first: when one matches
// fewer entries, it drives and the others need no further counting.
const glance = 16

// maxProbes bounds the conditions counted for one plan.
const maxProbes = 16

// pathStat counts, at a path, the documents holding a scalar (n) and the
// scalar entries (e): e == n when no document holds several.
type pathStat struct{ n, e int64 }

// stats are what a plan is chosen by. They are read in one statement, in
// the read transaction of the query they plan, so they describe exactly
// the documents it reads.
type stats struct {
	known     bool // read (else: nothing known, every count unbounded)
	docs      int64
	paths     map[string]pathStat
	est       map[any]int64 // leaf condition: matching entries (unbounded: the cap or more)
	comp      map[any]int64 // equality on a boolean: entries of its path with another value, when few
	threshold int64         // a driver matching more is slower than a walk
}

// single tells whether every document holds at most one scalar at path,
// so that a condition on it matches at most one entry per document.
func (st *stats) single(path string) bool {
	if !st.known {
		return false
	}
	ps := st.paths[path]
	return ps.e == ps.n
}

// rareLimit is how many documents may hold another value than an
// equality's for it to be checked as "not one of those".
const rareLimit = 1024

// rare tells an equality that every document but few satisfies, and how
// many do not: every document holds one scalar at its path, and few hold
// another than its value.
func (st *stats) rare(fe *fieldExpr) (int64, bool) {
	if fe == nil {
		return 0, false
	}
	few, ok := st.comp[fe]
	if !ok || rowOnly(fe.path) || few > rareLimit || !st.single(fe.path) || st.paths[fe.path].n != st.docs {
		return 0, false
	}
	return few, true
}

// canDrive tells whether x's matches can be listed from the index (a
// positive condition), rather than only checked document by document.
func canDrive(x expr) bool {
	switch y := x.(type) {
	case *fieldExpr:
		return !rowOnly(y.path)
	case *idExpr, *wordExpr:
		return true
	case constExpr:
		return !bool(y)
	case orExpr:
		for _, k := range y {
			if !canDrive(k) {
				return false
			}
		}
		return true
	case andExpr:
		return slices.ContainsFunc(y, canDrive)
	}
	return false
}

// rank orders leaf conditions by how selective they usually are: probed
// in this order, each is counted only as far as the best before it, and
// ties go to the first.
func rank(x expr) int {
	switch y := x.(type) {
	case *idExpr:
		return 0
	case *wordExpr:
		if y.op == opPrefix {
			return 2
		}
		return 1
	case *fieldExpr:
		switch {
		case y.op == opExists:
			return 8
		case y.kind == kindBool:
			return 7
		case y.op == opSubstr:
			return 6
		case y.op == opEq || y.op == opIn:
			if y.kind == kindString {
				return 1
			}
			return 3
		case y.op == opPrefix:
			return 2
		}
		return 4
	}
	return 9
}

// static is the number of matches of an _id condition known without
// counting (-1: it needs counting).
func static(x expr) int64 {
	if ie, ok := x.(*idExpr); ok {
		switch ie.op {
		case opEq:
			return 1
		case opIn:
			return int64(len(ie.vals))
		}
	}
	return -1
}

// leaves appends the leaf conditions a driver for x could list from.
func leaves(x expr, out []any) []any {
	switch y := x.(type) {
	case *fieldExpr, *wordExpr:
		return append(out, y)
	case *idExpr:
		if static(y) < 0 {
			return append(out, y)
		}
	case orExpr:
		for _, k := range y {
			out = leaves(k, out)
		}
	case andExpr:
		for _, k := range y {
			if canDrive(k) {
				out = leaves(k, out)
			}
		}
	}
	return out
}

// estimate is how many rows listing x's matches reads (unbounded when x
// cannot be listed, or when its count reached the cap).
func (st *stats) estimate(x expr) int64 {
	if n := static(x); n >= 0 {
		return n
	}
	switch y := x.(type) {
	case *fieldExpr, *idExpr, *wordExpr:
		if n, ok := st.est[y]; ok {
			return n
		}
	case constExpr:
		if !y {
			return 0
		}
	case orExpr:
		var sum int64
		for _, k := range y {
			n := st.estimate(k)
			if n == unbounded || sum > unbounded-n {
				return unbounded
			}
			sum += n
		}
		return sum
	case andExpr:
		return st.estimate(y[st.best(y)])
	}
	return unbounded
}

// best picks the conjunct to drive from: the one listing the fewest rows,
// the better ranked on ties (-1 when none can drive).
func (st *stats) best(cs []expr) int {
	at, least, r := -1, int64(0), 0
	for i, c := range cs {
		if !canDrive(c) {
			continue
		}
		n, cr := st.estimate(c), rank(c)
		if at < 0 || n < least || n == least && cr < r {
			at, least, r = i, n, cr
		}
	}
	return at
}

// readStats reads the document counts of the collection and of paths,
// and counts the entries of the leaf conditions of cs up to a cap: with
// a sort and want rows, max(2 want, sqrt(want × documents)), the size
// from which driving is slower than walking; else probeCap. One
// statement reads the counts and glances at every leaf (up to glance
// entries; for an equality on a boolean, it counts the other value's
// entries instead, usually few). When no leaf is below the glance, the
// top-level leaves are counted in rank order, each only up to one more
// than the least counted before it, one statement each, then the others.
func (p *planner) readStats(ctx context.Context, cs []expr, paths []string, want int64, sorted, counting bool) (*stats, error) {
	if err := p.q.settlePaths(ctx); err != nil {
		return nil, err
	}
	var chained, plain []any
	for _, c := range cs {
		switch {
		case !canDrive(c) || static(c) >= 0:
		case rank(c) < 9:
			chained = append(chained, c)
		default:
			plain = leaves(c, plain)
		}
	}
	slices.SortStableFunc(chained, func(a, b any) int { return rank(a) - rank(b) })
	// Beyond maxProbes, conditions are not counted (they cannot drive).
	chained = chained[:min(len(chained), maxProbes)]
	plain = plain[:min(len(plain), maxProbes-len(chained))]
	all := append(slices.Clone(chained), plain...)
	for _, x := range cs {
		paths = appendPaths(x, paths)
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)

	var b builder
	b.WriteString("SELECT ")
	for i, f := range append([]string{docsPath}, paths...) {
		for j, col := range []string{"n", "e"} {
			if i+j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(SELECT " + col + " FROM " + pathsTable + " WHERE c = ")
			b.arg(p.n.coll)
			b.WriteString(" AND f = ")
			b.arg(f)
			b.WriteString(")")
		}
	}
	for _, l := range all {
		b.WriteString(", ")
		p.countLeaf(&b, l, glance)
		b.WriteString(", ")
		if fe, ok := l.(*fieldExpr); ok && twoValued(fe) {
			p.countOthers(&b, fe, probeCap)
		} else {
			b.WriteString("NULL")
		}
	}
	vals := make([]nullInt64, 2*(1+len(paths))+2*len(all))
	dest := make([]any, len(vals))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if _, err := p.q.queryRow(ctx, b.String(), b.args, dest...); err != nil {
		return nil, fmt.Errorf("read statistics: %w", err)
	}
	st := &stats{known: true, docs: vals[0].v, paths: map[string]pathStat{}, est: map[any]int64{}, comp: map[any]int64{}, threshold: unbounded}
	for i, f := range paths {
		st.paths[f] = pathStat{n: vals[2+2*i].v, e: vals[3+2*i].v}
	}
	limit := int64(probeCap)
	if sorted && want > 0 {
		limit = max(2*want, sortFloor, int64(math.Sqrt(float64(want)*float64(max(st.docs, 0)))))
		st.threshold = limit
	}
	limit++ // counting to the threshold plus one tells "above it"
	least := limit
	var rest []any // leaves to count further
	at := 2 * (1 + len(paths))
	for i, l := range all {
		g, o := vals[at+2*i].v, vals[at+2*i+1]
		switch {
		case g < glance:
			st.est[l] = g
			least = min(least, g+1)
		case o.ok && o.v < probeCap:
			fe := l.(*fieldExpr)
			n := st.paths[fe.path].e - o.v // the path's entries less the others
			st.est[l], st.comp[l] = n, o.v
			if i < len(chained) {
				least = min(least, n+1)
			}
		default:
			st.est[l] = unbounded
			rest = append(rest, l)
		}
	}
	if least <= glance {
		return st, nil // a leaf below the glance drives
	}
	if counting && countsWithout(cs, st) {
		return st, nil // nothing to choose between
	}
	for _, l := range rest {
		var cond builder
		p.countLeaf(&cond, l, 0)
		key := countKey(p.db, p.n.coll, cond.String(), cond.args)
		n, ok := p.counts.get(key, least, st.docs)
		if !ok {
			var b builder
			b.WriteString("SELECT ")
			p.countLeaf(&b, l, least)
			if _, err := p.q.queryRow(ctx, b.String(), b.args, &n); err != nil {
				return nil, fmt.Errorf("read statistics: %w", err)
			}
			p.counts.put(key, cachedCount{n: n, limit: least, docs: st.docs})
		}
		if n < least {
			st.est[l] = n
			if slices.Contains(chained, l) {
				least = n + 1
			}
		}
	}
	return st, nil
}

// countsWithout tells whether a Count of cs is the count without a rare
// equality less the few documents without it, the rest having at most one
// condition to drive from: nothing to choose.
func countsWithout(cs []expr, st *stats) bool {
	for i, c := range cs {
		if fe, ok := c.(*fieldExpr); ok {
			if _, rare := st.rare(fe); rare {
				drivers := 0
				for _, o := range without(cs, i) {
					if canDrive(o) {
						drivers++
					}
				}
				return drivers <= 1
			}
		}
	}
	return false
}

// countLeaf writes a count of the entries (or ids) matching leaf l, up
// to limit.
func (p *planner) countLeaf(b *builder, l any, limit int64) {
	b.WriteString("(SELECT count(*) FROM (SELECT 1 FROM ")
	switch y := l.(type) {
	case *fieldExpr:
		b.WriteString(p.n.x + " WHERE ")
		b.entryCond("", y)
	case *idExpr:
		b.WriteString(p.n.d + " AS d WHERE ")
		b.idCond("d.id", y)
	case *wordExpr:
		b.WriteString(p.n.w + " WHERE " + p.n.w + " MATCH ")
		b.arg(y.match)
	}
	b.WriteString(" LIMIT ")
	b.arg(limit)
	b.WriteString("))")
}

// countOthers writes a count of the scalar entries at fe's path that do
// not equal its value, up to limit (twice: below and above it).
func (p *planner) countOthers(b *builder, fe *fieldExpr, limit int64) {
	b.WriteString("(SELECT count(*) FROM (SELECT 1 FROM " + p.n.x + " WHERE f = ")
	b.field(fe.path)
	b.WriteString(" AND v < ")
	b.arg(fe.vals[0])
	b.WriteString(" LIMIT ")
	b.arg(limit)
	b.WriteString(")) + (SELECT count(*) FROM (SELECT 1 FROM " + p.n.x + " WHERE f = ")
	b.field(fe.path)
	b.WriteString(" AND v > ")
	b.arg(fe.vals[0])
	b.WriteString(" AND v < " + minMark + " LIMIT ")
	b.arg(limit)
	b.WriteString("))")
}

// twoValued tells an equality on a boolean: the other value is counted.
func twoValued(l expr) bool {
	fe, ok := l.(*fieldExpr)
	return ok && fe.op == opEq && fe.kind == kindBool
}

// appendPaths appends the paths x has conditions on.
func appendPaths(x expr, out []string) []string {
	switch y := x.(type) {
	case *fieldExpr:
		return append(out, y.path)
	case *wordExpr:
		return append(out, y.path)
	case notExpr:
		return appendPaths(y.x, out)
	case andExpr:
		for _, k := range y {
			out = appendPaths(k, out)
		}
	case orExpr:
		for _, k := range y {
			out = appendPaths(k, out)
		}
	}
	return out
}
