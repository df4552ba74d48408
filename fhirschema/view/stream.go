package view

import (
	"context"
	"errors"
	"runtime"
	"sync"
)

// Stream evaluates a view over resources given as JSON, decoding and
// evaluating them on several goroutines, and hands the rows to its emit
// function in the order the resources were added, from one goroutine at a
// time. Memory stays bounded: Add blocks while the workers are behind.
type Stream struct {
	v       *View
	ctx     context.Context
	cancel  context.CancelFunc
	emit    func(row []any) error
	batch   *streamBatch
	work    chan *streamBatch
	order   chan *streamBatch
	workers sync.WaitGroup
	written chan struct{}
	errOnce sync.Once
	err     error
}

// streamBatch is resources evaluated together (their JSON one after the
// other in buf, each ending at its ends), and their rows.
type streamBatch struct {
	buf   []byte
	ends  []int
	cells []any
	rows  [][]any
	err   error
	done  chan struct{}
}

// batches are spent batches, their buffers kept for the next ones.
var batches = sync.Pool{New: func() any { return &streamBatch{} }}

func newBatch() *streamBatch {
	b := batches.Get().(*streamBatch)
	b.buf, b.ends, b.cells, b.rows, b.err, b.done = b.buf[:0], b.ends[:0], b.cells[:0], b.rows[:0], nil, make(chan struct{})
	return b
}

// streamBatchSize is how many resources a worker evaluates at once.
const streamBatchSize = 64

// ErrStopped is what Add returns once the stream has stopped: emit or an
// evaluation failed (Close returns why), or the context ended.
var ErrStopped = errors.New("view stream stopped")

// NewStream starts a stream of v's rows to emit over workers goroutines
// (0: one per CPU).
func (v *View) NewStream(ctx context.Context, workers int, emit func(row []any) error) *Stream {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Stream{v: v, ctx: ctx, cancel: cancel, emit: emit, work: make(chan *streamBatch, workers),
		order: make(chan *streamBatch, 2*workers), written: make(chan struct{})}
	s.workers.Add(workers)
	for range workers {
		go s.worker()
	}
	go s.writer()
	return s
}

// Add queues one resource's JSON, which it copies.
func (s *Stream) Add(resourceJSON []byte) error {
	if s.batch == nil {
		s.batch = newBatch()
	}
	s.batch.buf = append(s.batch.buf, resourceJSON...)
	s.batch.ends = append(s.batch.ends, len(s.batch.buf))
	if len(s.batch.ends) < streamBatchSize {
		return nil
	}
	return s.flush()
}

// flush hands the current batch to the workers and the writer.
func (s *Stream) flush() error {
	b := s.batch
	s.batch = nil
	if b == nil {
		return nil
	}
	select {
	case s.order <- b:
	case <-s.ctx.Done():
		return ErrStopped
	}
	select {
	case s.work <- b:
		return nil
	case <-s.ctx.Done():
		close(b.done)
		return ErrStopped
	}
}

// Close evaluates what is queued, waits for every row to be emitted and
// returns the first error of an evaluation or of emit.
func (s *Stream) Close() error {
	err := s.flush()
	close(s.order)
	close(s.work)
	<-s.written
	s.workers.Wait()
	s.cancel()
	if s.err != nil {
		return s.err
	}
	if errors.Is(err, ErrStopped) {
		return s.ctx.Err()
	}
	return err
}

// fail records the stream's first error and stops it.
func (s *Stream) fail(err error) {
	s.errOnce.Do(func() { s.err = err })
	s.cancel()
}

func (s *Stream) worker() {
	defer s.workers.Done()
	ev, values := s.v.newEvaluator(s.ctx), newValueTable()
	for b := range s.work {
		if s.ctx.Err() == nil {
			b.err = s.evalBatch(ev, values, b)
		}
		close(b.done)
	}
}

// evalBatch decodes and evaluates the resources of b into b.rows, their
// cells one after the other in b.cells.
func (s *Stream) evalBatch(ev *evaluator, values *valueTable, b *streamBatch) error {
	width := len(s.v.columns)
	collect := func(row []any) error {
		b.cells = append(b.cells, row...)
		return nil
	}
	start := 0
	for _, end := range b.ends {
		res, err := s.v.decode(b.buf[start:end], values)
		start = end
		if err != nil {
			return err
		}
		if err := ev.run(res, collect); err != nil {
			return err
		}
	}
	for i := 0; width > 0 && i+width <= len(b.cells); i += width {
		b.rows = append(b.rows, b.cells[i:i+width:i+width])
	}
	return nil
}

// writer emits the rows of the batches in order.
func (s *Stream) writer() {
	defer close(s.written)
	for b := range s.order {
		<-b.done
		if s.ctx.Err() != nil {
			continue
		}
		if b.err != nil {
			s.fail(b.err)
			continue
		}
		for _, row := range b.rows {
			if err := s.emit(row); err != nil {
				s.fail(err)
				break
			}
		}
		clear(b.rows)
		clear(b.cells)
		batches.Put(b)
	}
}
