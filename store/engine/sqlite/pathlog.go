package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// pathLog holds the writer's changes of the path counts (pathsTable)
// until its transaction commits: the writes of a group commit then update
// the counts of the paths they share once, in one statement, rather than
// each in its own. A read of the counts in the transaction (a plan's
// statistics) applies what is held first, so that the transaction always
// sees counts that describe its documents; readers only ever see committed
// counts, which include every change.
type pathLog struct {
	deltas  []pathDelta
	applied int // deltas[:applied] are in pathsTable already
}

// pathDelta is a change of one collection's counts at one path.
type pathDelta struct {
	c, f string
	n, e int64
}

// add holds the non-zero changes d of collection coll.
func (l *pathLog) add(coll string, d pathDeltas) {
	for f, ps := range d {
		if ps.n != 0 || ps.e != 0 {
			l.deltas = append(l.deltas, pathDelta{c: coll, f: f, n: ps.n, e: ps.e})
		}
	}
}

// end follows the transaction's end, committed or not.
func (l *pathLog) end() {
	l.deltas = l.deltas[:0]
	l.applied = 0
}

// apply writes the changes held and not yet applied into pathsTable, the
// changes of one collection and path summed, in the writer's transaction.
func (l *pathLog) apply(ctx context.Context, w *conn) error {
	todo := l.deltas[l.applied:]
	if len(todo) == 0 {
		return nil
	}
	sums := make(map[[2]string]*pathStat, len(todo))
	for _, d := range todo {
		k := [2]string{d.c, d.f}
		ps := sums[k]
		if ps == nil {
			ps = &pathStat{}
			sums[k] = ps
		}
		ps.n, ps.e = ps.n+d.n, ps.e+d.e
	}
	keys := make([][2]string, 0, len(sums))
	for k, ps := range sums {
		if ps.n != 0 || ps.e != 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	for len(keys) > 0 {
		n := min(len(keys), entriesPerInsert)
		var b strings.Builder
		b.WriteString("INSERT INTO " + pathsTable + " (c, f, n, e) VALUES ")
		args := make([]any, 0, 4*n)
		for i, k := range keys[:n] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?,?)")
			args = append(args, k[0], k[1], sums[k].n, sums[k].e)
		}
		b.WriteString(" ON CONFLICT (c, f) DO UPDATE SET n = n + excluded.n, e = e + excluded.e")
		if _, err := w.exec(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("count paths: %w", err)
		}
		keys = keys[n:]
	}
	l.applied = len(l.deltas)
	return nil
}

// settlePaths applies the writer's held changes of the path counts before
// a read of them in its transaction; on a reader it does nothing.
func (c *conn) settlePaths(ctx context.Context) error {
	if c.paths == nil {
		return nil
	}
	return c.paths.apply(ctx, c)
}
