package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCacheSize bounds the prepared statements kept per connection pool:
// a query's SQL depends on its filter's shape, not on its values.
const stmtCacheSize = 256

// stmtCache keeps prepared statements by SQL text.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}}
}

// get returns the statement for query, preparing it the first time.
func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	s, ok := c.m[query]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[query]; ok {
		s.Close()
		return old, nil
	}
	if len(c.m) >= stmtCacheSize {
		for k, old := range c.m { // evict one, any
			old.Close()
			delete(c.m, k)
			break
		}
	}
	c.m[query] = s
	return s, nil
}

// close closes every statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.m {
		s.Close()
		delete(c.m, k)
	}
}

// querier runs statements: on the reader pool, or in the writer's transaction.
type querier interface {
	query(ctx context.Context, q string, args []any) (*sql.Rows, error)
	queryRow(ctx context.Context, q string, args []any, dest ...any) error
}

// readers runs statements on a file's reader connections.
type readers struct{ f *file }

func (r readers) query(ctx context.Context, q string, args []any) (*sql.Rows, error) {
	s, err := r.f.rstmts.get(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

func (r readers) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	s, err := r.f.rstmts.get(ctx, q)
	if err != nil {
		return err
	}
	return s.QueryRowContext(ctx, args...).Scan(dest...)
}

// writer runs statements in a write transaction, on the file's writer
// connection (held by the caller through file.write).
type writer struct{ f *file }

// stmt returns the writer connection's statement for q, preparing it the
// first time.
func (w writer) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := w.f.wstmts[q]; ok {
		return s, nil
	}
	s, err := w.f.wc.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if len(w.f.wstmts) >= stmtCacheSize {
		for k, old := range w.f.wstmts { // evict one, any
			old.Close()
			delete(w.f.wstmts, k)
			break
		}
	}
	w.f.wstmts[q] = s
	return s, nil
}

func (w writer) query(ctx context.Context, q string, args []any) (*sql.Rows, error) {
	s, err := w.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

func (w writer) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	s, err := w.stmt(ctx, q)
	if err != nil {
		return err
	}
	return s.QueryRowContext(ctx, args...).Scan(dest...)
}

func (w writer) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	s, err := w.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}
