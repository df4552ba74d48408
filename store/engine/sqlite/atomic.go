package sqlite

import (
	"context"
	"errors"
	"fmt"

	"fhirstore/store/engine"
)

// atomicWrite is a RunAtomic in progress: the writer's transaction its
// writes run in, the collections whose tables they created, and the
// failure that ended it, if one did.
type atomicWrite struct {
	f       *file
	w       *conn
	created []string
	failed  error
	wrote   bool // a write succeeded
}

// partialError is the failure of an atomic write that may have written
// (one of its writes succeeded, or one failed midway): the transaction
// must be rolled back, whatever err says.
type partialError struct{ err error }

func (e *partialError) Error() string { return e.err.Error() }
func (e *partialError) Unwrap() error { return e.err }

// atomicKey is the context key of the atomicWrite in progress.
type atomicKey struct{}

// atomicOf is the atomic write in progress on f that ctx carries, if any.
func atomicOf(ctx context.Context, f *file) *atomicWrite {
	a, _ := ctx.Value(atomicKey{}).(*atomicWrite)
	if a == nil || a.f != f {
		return nil
	}
	return a
}

// RunAtomic runs fn in one write transaction of the database's file: the
// collections' writes fn makes with its context commit together, or not
// at all when fn fails (engine.Atomic). A write inside it that fails for
// a duplicate _id has written nothing; any other failure ends the atomic
// write, which fails whatever fn returns. A RunAtomic inside fn runs in
// the same transaction.
func (d *database) RunAtomic(ctx context.Context, fn func(ctx context.Context) error) error {
	f, err := d.e.file(ctx, d.name)
	if err != nil {
		return classify("write to "+d.name, err)
	}
	if a := atomicOf(ctx, f); a != nil {
		return fn(ctx)
	}
	var created []string
	err = f.write(ctx, func(ctx context.Context, w *conn) error {
		a := &atomicWrite{f: f, w: w}
		err := fn(context.WithValue(ctx, atomicKey{}, a))
		created = a.created
		switch {
		case a.failed != nil: // a write may have written part of itself
			if err == nil {
				err = a.failed
			}
			return &partialError{err}
		case err != nil && a.wrote:
			return &partialError{err}
		}
		return err
	})
	var pe *partialError
	if errors.As(err, &pe) {
		return pe.err
	}
	if err != nil {
		return err
	}
	for _, coll := range created {
		f.remember(coll)
	}
	return nil
}

// Prepare encodes and indexes doc ahead of its write (engine.Atomic): the
// collections' writes take the result as it is.
func (d *database) Prepare(doc any) (any, error) { return prepare(doc, d.e) }

// write runs one collection's write inside the atomic write, without a
// savepoint of its own (a savepoint copies each page it changes aside): a
// duplicate _id is found before anything is written; after any other
// failure the atomic write is over.
func (a *atomicWrite) write(ctx context.Context, c *collection, create bool, fn func(ctx context.Context, w *conn) error) error {
	if a.failed != nil {
		return a.failed
	}
	if create && !a.f.known(c.n.coll) {
		if err := createTables(ctx, a.w, c.n, c.e.words); err != nil {
			a.failed = fmt.Errorf("an earlier write of the transaction failed: %w", err)
			return err
		}
		a.created = append(a.created, c.n.coll)
	}
	err := fn(ctx, a.w)
	switch {
	case err == nil:
		a.wrote = true
	case errors.Is(err, engine.ErrDuplicateKey):
	case !create && noTable(err):
		return nil
	default:
		a.failed = fmt.Errorf("an earlier write of the transaction failed: %w", err)
	}
	return err
}
