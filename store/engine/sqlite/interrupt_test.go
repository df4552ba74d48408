package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// TestCanceledReadsDoNotInterruptOthers cancels reads as they finish,
// on one reader connection shared with reads that are not canceled: the
// interrupt of a canceled read must land on its own statement or on none,
// never on the next read of the connection.
func TestCanceledReadsDoNotInterruptOthers(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{ReadConns: 1})
	c := e.Database("interrupt").Collection("Observation")
	var docs []any
	for i := range 300 {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("o%03d", i)}, {Key: "code", Value: fmt.Sprintf("c%d", i%7)}})
	}
	if err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	const rounds = 2000
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // counts abandoned as soon as they are asked
		defer wg.Done()
		for i := range rounds {
			cctx, cancel := context.WithCancel(ctx)
			go func() { // at some point of the count, or after it
				time.Sleep(time.Duration(i%50) * time.Microsecond)
				cancel()
			}()
			cur, err := c.Find(cctx, bson.D{{Key: "code", Value: "c3"}}, nil)
			if err == nil {
				var got []bson.M
				_ = engine.All(cctx, cur, &got)
			}
		}
	}()
	errs := make(chan error, rounds)
	go func() { // reads nobody cancels
		defer wg.Done()
		for range rounds {
			cur, err := c.Find(ctx, bson.D{{Key: "code", Value: bson.D{{Key: "$in", Value: bson.A{"c1", "c2"}}}}}, &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}})
			if err == nil {
				var got []bson.M
				err = engine.All(ctx, cur, &got)
				if err == nil && len(got) != 86 {
					err = fmt.Errorf("%d documents, want 86", len(got))
				}
			}
			if err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a read nobody canceled failed: %v", err)
	}
}
