package store

import (
	"context"
	"sync"
	"time"
)

// inflight holds the writes under way in this process, each with a lower
// bound of the instant it will be stamped with, so that a reader of a point
// in time (an export's transactionTime) can wait until every write stamped
// up to that point is visible.
type inflight struct {
	mu     sync.Mutex
	next   uint64
	writes map[uint64]time.Time
}

// begin registers a write that is about to take its timestamp (which is
// never earlier than now) and returns the call that ends it.
func (f *inflight) begin(now time.Time) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writes == nil {
		f.writes = map[uint64]time.Time{}
	}
	f.next++
	key := f.next
	f.writes[key] = now
	return func() {
		f.mu.Lock()
		delete(f.writes, key)
		f.mu.Unlock()
	}
}

// pending tells whether a write that may be stamped at or before t is
// still under way.
func (f *inflight) pending(t time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, at := range f.writes {
		if !at.After(t) {
			return true
		}
	}
	return false
}

// oldest is the earliest instant a write under way may be stamped with
// (ok false when none is under way).
func (f *inflight) oldest() (at time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.writes {
		if !ok || w.Before(at) {
			at, ok = w, true
		}
	}
	return at, ok
}

// awaitWritesUpTo waits until the writes of this process that may be
// stamped at or before t have finished (stored or failed).
func (s *Store) awaitWritesUpTo(ctx context.Context, t time.Time) error {
	for s.writes.pending(t) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// beginWrite registers a write of this process before it takes its
// timestamp; call what it returns when the write has finished.
func (s *Store) beginWrite() func() { return s.writes.begin(s.now()) }
