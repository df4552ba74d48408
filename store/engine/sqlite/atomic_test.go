package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
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

// TestPreparedDocumentsAreWrittenAsTheDocuments: documents prepared ahead
// of an atomic write (Prepare) are inserted, replaced and found exactly as
// the documents themselves, and one prepared document can be written to
// two collections.
func TestPreparedDocumentsAreWrittenAsTheDocuments(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{SharedField: "resource"})
	db := e.Database("db")
	atomic := db.(engine.Atomic)
	docs := []bson.D{
		{{Key: "_id", Value: "p1"}, {Key: "vid", Value: 1}, {Key: "resource", Value: bson.D{{Key: "resourceType", Value: "Patient"}, {Key: "name", Value: "Ann"}}}, {Key: "idx", Value: bson.D{{Key: "family", Value: bson.A{"ann"}}}}},
		{{Key: "_id", Value: "p2"}, {Key: "vid", Value: 1}, {Key: "resource", Value: bson.D{{Key: "resourceType", Value: "Patient"}, {Key: "name", Value: "Bo"}}}, {Key: "idx", Value: bson.D{{Key: "family", Value: bson.A{"bo"}}}}},
	}
	replacement := bson.D{{Key: "_id", Value: "p1"}, {Key: "vid", Value: 2}, {Key: "resource", Value: bson.D{{Key: "resourceType", Value: "Patient"}, {Key: "name", Value: "Ann B"}}}, {Key: "idx", Value: bson.D{{Key: "family", Value: bson.A{"annb"}}}}}
	prep := func(d bson.D) any {
		p, err := atomic.Prepare(d)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1, p2, r1 := prep(docs[0]), prep(docs[1]), prep(replacement)
	err := atomic.RunAtomic(ctx, func(ctx context.Context) error {
		if err := db.Collection("cur").InsertMany(ctx, []any{p1, p2}); err != nil {
			return err
		}
		if err := db.Collection("hist").InsertOne(ctx, p1); err != nil {
			return err
		}
		_, err := db.Collection("cur").ReplaceOne(ctx, bson.D{{Key: "_id", Value: "p1"}}, r1, false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bson.D{"cur/p1": replacement, "cur/p2": docs[1], "hist/p1": docs[0]}
	for key, doc := range want {
		coll, id, _ := strings.Cut(key, "/")
		got, err := db.Collection(coll).FindOne(ctx, bson.D{{Key: "_id", Value: id}}, nil)
		wantRaw, _ := bson.Marshal(doc)
		if err != nil || !bytes.Equal(got, wantRaw) {
			t.Fatalf("%s: %v\n%v\nwant\n%v", key, err, got, bson.Raw(wantRaw))
		}
	}
	if got := findIDs(t, db.Collection("cur"), bson.D{{Key: "idx.family", Value: "annb"}}, nil); fmt.Sprint(got) != "[p1]" {
		t.Fatalf("found by the replacement's entries: %v", got)
	}
	if got := findIDs(t, db.Collection("cur"), bson.D{{Key: "idx.family", Value: "ann"}}, nil); len(got) != 0 {
		t.Fatalf("found by the replaced document's entries: %v", got)
	}
}
