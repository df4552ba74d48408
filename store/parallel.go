package store

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// inParallel calls fn for 0..n-1, on up to GOMAXPROCS goroutines when n
// is large enough to pay for them.
func inParallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/appendChunk+1)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	onGoroutines(workers, func(k int) {
		for i := k * n / workers; i < (k+1)*n/workers; i++ {
			fn(i)
		}
	})
}

// onGoroutines calls fn(0..n-1) on n goroutines and waits for them. A
// panic on one of them is raised again in the caller once all have
// returned, where the server's recovery answers it, rather than ending
// the process.
func onGoroutines(n int, fn func(k int)) {
	var wg sync.WaitGroup
	var once sync.Once
	var panicked any
	for k := range n {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					once.Do(func() { panicked = fmt.Errorf("%v\n[on a worker goroutine]\n%s", p, debug.Stack()) })
				}
			}()
			fn(k)
		})
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
}

// yielding calls fn for 0..n-1 on GOMAXPROCS goroutines, all but one of
// which pause while a large transaction is being written: the database's
// single writer then has a core of its own, and the next transaction is
// prepared beside it rather than slowing it down.
func (s *Store) yielding(n int, fn func(i int)) {
	var next atomic.Int64
	onGoroutines(runtime.GOMAXPROCS(0), func(k int) {
		for {
			for k > 0 && s.bulkWriting.Load() > 0 && next.Load() < int64(n) {
				time.Sleep(yieldPause)
			}
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			fn(i)
		}
	})
}

// yieldPause is how long a paused goroutine of yielding waits before it
// looks again.
const yieldPause = 2 * time.Millisecond
