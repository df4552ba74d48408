package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
)

// unbounded stands for "as many as the collection holds" in estimates.
const unbounded = math.MaxInt64

// estimates are capped counts of the index entries (or ids) each leaf
// condition matches: exact below the cap they were counted with.
type estimates map[any]int64

// canDrive tells whether x's matches can be listed from the index (a
// positive condition), rather than only checked document by document.
func canDrive(x expr) bool {
	switch y := x.(type) {
	case *fieldExpr, *idExpr:
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
		for _, k := range y {
			if canDrive(k) {
				return true
			}
		}
	}
	return false
}

// leaves appends the leaf conditions a driver for x could list from.
func leaves(x expr, out []any) []any {
	switch y := x.(type) {
	case *fieldExpr:
		return append(out, y)
	case *idExpr:
		if y.op != opEq && y.op != opIn {
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
// cannot be listed).
func (e estimates) estimate(x expr) int64 {
	switch y := x.(type) {
	case *fieldExpr:
		return e.get(y)
	case *idExpr:
		switch y.op {
		case opEq:
			return 1
		case opIn:
			return int64(len(y.vals))
		}
		return e.get(y)
	case constExpr:
		if !y {
			return 0
		}
	case orExpr:
		var sum int64
		for _, k := range y {
			n := e.estimate(k)
			if n == unbounded || sum > unbounded-n {
				return unbounded
			}
			sum += n
		}
		return sum
	case andExpr:
		best := int64(unbounded)
		for _, k := range y {
			if canDrive(k) {
				best = min(best, e.estimate(k))
			}
		}
		return best
	}
	return unbounded
}

func (e estimates) get(leaf any) int64 {
	if n, ok := e[leaf]; ok {
		return n
	}
	return unbounded
}

// best picks the conjunct to drive from: the one listing the fewest rows
// (-1 when none can drive).
func (e estimates) best(cs []expr) int {
	at, least := -1, int64(0)
	for i, c := range cs {
		if !canDrive(c) {
			continue
		}
		if n := e.estimate(c); at < 0 || n < least {
			at, least = i, n
		}
	}
	return at
}

// probe counts, in one statement, the entries (or ids) of each leaf up to
// limit, adding them to e.
func (p *planner) probe(ctx context.Context, e estimates, ls []any, limit int64) error {
	if len(ls) == 0 {
		return nil
	}
	var b builder
	b.WriteString("SELECT ")
	for i, l := range ls {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(SELECT count(*) FROM (SELECT 1 FROM ")
		switch y := l.(type) {
		case *fieldExpr:
			b.WriteString(p.n.x + " WHERE ")
			b.entryCond("", y)
		case *idExpr:
			b.WriteString(p.n.d + " AS d WHERE ")
			b.idCond("d.id", y)
		}
		b.WriteString(" LIMIT ")
		b.arg(limit)
		b.WriteString("))")
	}
	counts := make([]int64, len(ls))
	dest := make([]any, len(ls))
	for i := range counts {
		dest[i] = &counts[i]
	}
	if err := p.q.queryRow(ctx, b.String(), b.args, dest...); err != nil {
		return fmt.Errorf("estimate conditions: %w", err)
	}
	for i, l := range ls {
		n := counts[i]
		if n >= limit {
			n = unbounded
		}
		if old, ok := e[l]; !ok || old == unbounded {
			e[l] = n
		}
	}
	return nil
}

// counts reads the number of documents of the collection and of those
// holding a scalar at each path (-1 when the counts are not there).
func (p *planner) counts(ctx context.Context, paths ...string) (int64, []int64, error) {
	var b builder
	b.WriteString("SELECT ")
	for i, f := range append([]string{docsPath}, paths...) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(SELECT n FROM " + pathsTable + " WHERE c = ")
		b.arg(p.n.coll)
		b.WriteString(" AND f = ")
		b.arg(f)
		b.WriteString(")")
	}
	vals := make([]sql.NullInt64, len(paths)+1)
	dest := make([]any, len(vals))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := p.q.queryRow(ctx, b.String(), b.args, dest...); err != nil {
		return 0, nil, fmt.Errorf("read path counts: %w", err)
	}
	out := make([]int64, len(paths))
	for i := range out {
		out[i] = -1
		if vals[i+1].Valid {
			out[i] = vals[i+1].Int64
		}
	}
	if !vals[0].Valid {
		return -1, out, nil
	}
	return vals[0].Int64, out, nil
}
