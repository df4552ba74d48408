package sqlite

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"fhirstore/store/engine"
)

// TestMonitor checks that every operation is reported as the MongoDB
// command it stands for, started and then succeeded or failed.
func TestMonitor(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var log []string
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	m := &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			note("start " + e.CommandName + " " + e.DatabaseName)
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			if e.Duration < 0 {
				t.Errorf("%s: duration %v", e.CommandName, e.Duration)
			}
			note("ok " + e.CommandName + " " + e.DatabaseName)
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			note("fail " + e.CommandName + " " + e.DatabaseName)
		},
	}
	e := openTest(t, Options{Monitor: m})
	db := e.Database("tenant")
	c := db.Collection("C")
	doc := bson.D{{Key: "_id", Value: "a"}, {Key: "k", Value: 1}}
	steps := []struct {
		run  func() error
		want string
	}{
		{func() error { return e.Ping(ctx) }, "ping admin"},
		{func() error { return c.InsertOne(ctx, doc) }, "insert tenant"},
		{func() error { return c.InsertOne(ctx, doc) }, "insert tenant"}, // a duplicate is an answer
		{func() error { return c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "b"}}}) }, "insert tenant"},
		{func() error { _, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "a"}}, doc, false); return err }, "update tenant"},
		{func() error { _, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}, nil); return err }, "find tenant"},
		{func() error { _, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: "z"}}, nil); return err }, "find tenant"},
		{func() error {
			cur, err := c.Find(ctx, bson.D{}, nil)
			if err == nil {
				cur.Close(ctx)
			}
			return err
		}, "find tenant"},
		{func() error { _, err := c.Count(ctx, bson.D{}); return err }, "count tenant"},
		{func() error { _, err := c.CountDistinct(ctx, bson.D{}, "k"); return err }, "aggregate tenant"},
		{func() error {
			return c.CreateIndexes(ctx, []engine.Index{{Name: "k_1", Keys: bson.D{{Key: "k", Value: 1}}}})
		}, "createIndexes tenant"},
		{func() error { _, err := c.IndexNames(ctx); return err }, "listIndexes tenant"},
		{func() error { _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "b"}}); return err }, "delete tenant"},
		{func() error { _, err := c.DeleteMany(ctx, bson.D{}); return err }, "delete tenant"},
		{func() error { return db.Drop(ctx) }, "dropDatabase tenant"},
	}
	for _, s := range steps {
		log = nil
		s.run()
		if want := []string{"start " + s.want, "ok " + s.want}; !slices.Equal(log, want) {
			t.Errorf("events %q, want %q", log, want)
		}
	}
	log = nil
	_, err := c.Find(ctx, bson.D{{Key: "$where", Value: "1"}}, nil)
	if want := []string{"start find tenant", "fail find tenant"}; err == nil || !slices.Equal(log, want) {
		t.Errorf("a failing find: %v, events %q, want %q", err, log, want)
	}
}
