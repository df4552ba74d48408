package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// TestAtomicWritesCommitTogetherOrNotAtAll writes to two collections in a
// RunAtomic: they commit together in one transaction; a RunAtomic whose
// function fails leaves neither collection changed, even after one of its
// writes succeeded; a duplicate _id inside one fails alone.
func TestAtomicWritesCommitTogetherOrNotAtAll(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	db := e.Database("db")
	a, b := db.Collection("A"), db.Collection("B")
	if err := a.InsertOne(ctx, bson.D{{Key: "_id", Value: "seed"}}); err != nil {
		t.Fatal(err)
	}
	atomic := db.(engine.Atomic)
	before := e.WriteStats()
	var dup error
	err := atomic.RunAtomic(ctx, func(ctx context.Context) error {
		if err := a.InsertOne(ctx, bson.D{{Key: "_id", Value: "a1"}, {Key: "n", Value: 1}}); err != nil {
			return err
		}
		dup = a.InsertOne(ctx, bson.D{{Key: "_id", Value: "seed"}})
		if _, err := a.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "seed"}}, bson.D{{Key: "_id", Value: "seed"}, {Key: "n", Value: 2}}, false); err != nil {
			return err
		}
		return b.InsertOne(ctx, bson.D{{Key: "_id", Value: "b1"}, {Key: "n", Value: 1}})
	})
	if err != nil || !engine.IsDuplicateKey(dup) {
		t.Fatalf("atomic write: %v (the duplicate inside it: %v)", err, dup)
	}
	if tx := e.WriteStats().Transactions - before.Transactions; tx != 1 {
		t.Fatalf("%d transactions, want 1", tx)
	}
	if got := findIDs(t, a, bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 1}}}}, bson.D{{Key: "_id", Value: 1}}); fmt.Sprint(got) != "[a1 seed]" {
		t.Fatalf("A after the atomic write: %v", got)
	}
	if n, err := b.Count(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("B after the atomic write: %d %v", n, err)
	}

	refused := errors.New("refused")
	err = atomic.RunAtomic(ctx, func(ctx context.Context) error {
		if err := a.InsertOne(ctx, bson.D{{Key: "_id", Value: "a2"}}); err != nil {
			return err
		}
		if err := b.InsertOne(ctx, bson.D{{Key: "_id", Value: "b2"}}); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("a failed atomic write returned %v", err)
	}
	if got := findIDs(t, a, bson.D{}, bson.D{{Key: "_id", Value: 1}}); fmt.Sprint(got) != "[a1 seed]" {
		t.Fatalf("A after a failed atomic write: %v", got)
	}
	if got := findIDs(t, b, bson.D{}, nil); fmt.Sprint(got) != "[b1]" {
		t.Fatalf("B after a failed atomic write: %v", got)
	}
	if n, err := db.Collection("A").Count(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("count of A (its path counts): %d %v", n, err)
	}
}

// TestAFailedAtomicWriteInABatchFailsAlone queues, in one batch, plain
// inserts and an atomic write that fails after one of its writes: the
// transaction is rolled back and run again without it, so the inserts
// commit and nothing of the atomic write does.
func TestAFailedAtomicWriteInABatchFailsAlone(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	db := e.Database("db")
	c := db.Collection("C")
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "seed"}}); err != nil {
		t.Fatal(err)
	}
	const n = 6
	errs := make([]error, n)
	var atomicErr error
	var wg sync.WaitGroup
	queued(t, e, "db", n+1, func() {
		for i := range n / 2 {
			wg.Go(func() { errs[i] = c.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprint("before", i)}}) })
		}
		wg.Go(func() {
			atomicErr = db.(engine.Atomic).RunAtomic(ctx, func(ctx context.Context) error {
				if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "atomic"}}); err != nil {
					return err
				}
				return c.InsertOne(ctx, bson.D{{Key: "_id", Value: "seed"}}) // a duplicate, after a write
			})
		})
		for i := n / 2; i < n; i++ {
			wg.Go(func() { errs[i] = c.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprint("after", i)}}) })
		}
	})
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("insert %d: %v", i, err)
		}
	}
	if !engine.IsDuplicateKey(atomicErr) {
		t.Fatalf("the atomic write: %v, want its duplicate", atomicErr)
	}
	if got, err := c.Count(ctx, bson.D{}); err != nil || got != n+1 {
		t.Fatalf("count: %d %v, want %d (the inserts and seed, nothing of the atomic write)", got, err, n+1)
	}
	if got := findIDs(t, c, bson.D{{Key: "_id", Value: "atomic"}}, nil); len(got) != 0 {
		t.Fatalf("the failed atomic write's first insert is there: %v", got)
	}
}
