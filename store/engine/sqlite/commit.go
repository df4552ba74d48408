package sqlite

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"go.uber.org/zap"
	sqlite3 "modernc.org/sqlite/lib"

	"fhirstore/store/engine"
)

// Group commit: the writes of a file queue up, and whichever writer holds
// the write lock runs every write queued at that moment in one
// transaction. A write that fails before writing anything (a duplicate
// _id) fails alone; one that fails after it may have written rolls the
// transaction back, fails, and the others run again in a new one; the
// writes that succeed commit together, in one WAL append. Under
// concurrent single writes most of a write's cost is the transaction
// around it, so this is where the writer's throughput comes from.

// maxBatch bounds the writes of one transaction, so that one transaction
// never holds the write lock for long.
const maxBatch = 256

// writeReq is one write waiting for its turn.
type writeReq struct {
	ctx  context.Context
	fn   func(ctx context.Context, w *conn) error
	err  error
	pan  any // fn panicked: the value, panicked again in the writer's goroutine
	done chan struct{}
}

// finish records the outcome of r.
func (r *writeReq) finish(err error) {
	r.err = err
	close(r.done)
}

// write runs fn in a write transaction (BEGIN IMMEDIATE: it waits for
// other processes' writers rather than failing at its first write),
// together with the other writes queued meanwhile. fn's context does not
// end during fn (a cancelled statement would roll back every write of the
// transaction); a write whose ctx ended before its turn does not run.
// fn may run twice when a failure of another write ended the transaction.
func (f *file) write(ctx context.Context, fn func(ctx context.Context, w *conn) error) error {
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan struct{})}
	f.qmu.Lock()
	f.queue = append(f.queue, r)
	f.qmu.Unlock()
	f.wmu.Lock()
	select {
	case <-r.done: // a writer before us ran it
	default:
		f.runQueued()
	}
	f.wmu.Unlock()
	<-r.done
	if r.pan != nil {
		panic(r.pan)
	}
	return r.err
}

// runQueued runs the writes queued now (up to maxBatch, oldest first) in
// transactions until each has its outcome; the caller holds wmu.
func (f *file) runQueued() {
	f.qmu.Lock()
	n := min(len(f.queue), maxBatch)
	batch := f.queue[:n:n]
	f.queue = append([]*writeReq(nil), f.queue[n:]...)
	f.qmu.Unlock()
	for len(batch) > 0 {
		batch = f.commit(batch)
	}
}

// commit runs batch in one transaction and returns the writes to run
// again: those that had succeeded before a failure that ended the
// transaction, and those not run yet.
func (f *file) commit(batch []*writeReq) (again []*writeReq) {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	bg := context.Background()
	if closed {
		finishAll(batch, errClosed)
		return nil
	}
	if _, err := f.w.exec(bg, "BEGIN IMMEDIATE"); err != nil {
		finishAll(batch, fmt.Errorf("begin: %w", err))
		return nil
	}
	if err := f.w.codes.begin(bg, f.w); err != nil {
		f.rollback()
		finishAll(batch, err)
		return nil
	}
	var ok []*writeReq
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.finish(err)
			continue
		}
		err := f.run(r)
		if err == nil {
			ok = append(ok, r)
			continue
		}
		if wroteNothing(r, err) && f.inTransaction() {
			r.finish(err)
			continue
		}
		// What the write did before it failed is not known: the
		// transaction is rolled back, this write fails, the others run
		// again in a new one. (A savepoint per write would undo it alone,
		// but a savepoint copies aside every page it changes: it cost
		// writes a tenth of their time, for failures that are rare.)
		f.rollback()
		r.finish(err)
		return append(ok, batch[i+1:]...)
	}
	f.finishCommit(ok)
	return nil
}

// finishCommit commits the transaction of the writes ok, which succeeded,
// and gives them their outcome.
func (f *file) finishCommit(ok []*writeReq) {
	if err := f.w.paths.apply(context.Background(), f.w); err != nil {
		f.rollback()
		finishAll(ok, err)
		return
	}
	if _, err := f.w.exec(context.Background(), "COMMIT"); err != nil {
		f.rollback()
		finishAll(ok, fmt.Errorf("commit: %w", err))
		return
	}
	f.w.codes.end(true)
	f.w.paths.end()
	f.stats.transactions.Add(1)
	f.stats.writes.Add(int64(len(ok)))
	finishAll(ok, nil)
	select {
	case f.wake <- struct{}{}:
	default: // the checkpointer will see this write too
	}
}

// run runs r's fn, turning a panic into an error (the panic is kept for
// r's own goroutine).
func (f *file) run(r *writeReq) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.pan = fmt.Sprintf("%v\n%s", p, debug.Stack())
			err = fmt.Errorf("write panicked: %v", p)
		}
	}()
	return r.fn(context.WithoutCancel(r.ctx), f.w)
}

// wroteNothing tells whether write r failed with err before it wrote
// anything: a duplicate _id is found before a document is written (unless
// an atomic write had written before it: partialError).
func wroteNothing(r *writeReq, err error) bool {
	var pe *partialError
	return r.pan == nil && errors.Is(err, engine.ErrDuplicateKey) && !errors.As(err, &pe)
}

// inTransaction tells whether the writer's transaction is still open.
func (f *file) inTransaction() bool {
	return sqlite3.Xsqlite3_get_autocommit(f.w.tls, f.w.db) == 0
}

// rollback ends the writer's transaction, forgetting what it numbered.
func (f *file) rollback() {
	f.w.codes.end(false)
	f.w.paths.end()
	if _, err := f.w.exec(context.Background(), "ROLLBACK"); err != nil && !strings.Contains(err.Error(), "no transaction") {
		f.log.Warn("roll back a failed commit", zap.String("file", f.path), zap.Error(err))
	}
}

// finishAll gives every write of rs the outcome err.
func finishAll(rs []*writeReq, err error) {
	for _, r := range rs {
		r.finish(err)
	}
}
