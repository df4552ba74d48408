// Package enginetest is the conformance suite of package engine's
// engines: table tests of every filter, sort, projection and write of the
// grammar, and differential tests comparing an engine's answers with a
// reference evaluator on generated documents. It asserts MongoDB's
// semantics within the grammar only, so that every engine (the MongoDB
// driver's included) passes it; what an engine refuses outside the
// grammar is for its own tests.
package enginetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// Run runs the suite; open returns a fresh engine for each test (closed
// by the test).
func Run(t *testing.T, open func(t *testing.T) engine.Engine) {
	tests := []struct {
		name string
		run  func(t *testing.T, db engine.Database)
	}{
		{"InsertFind", testInsertFind},
		{"DuplicateKey", testDuplicateKey},
		{"InsertMany", testInsertMany},
		{"ReplaceOne", testReplaceOne},
		{"Delete", testDelete},
		{"Filters", testFilters},
		{"Sorts", testSorts},
		{"Projections", testProjections},
		{"Count", testCount},
		{"CountDistinct", testCountDistinct},
		{"Indexes", testIndexes},
		{"Missing", testMissingCollection},
		{"Drop", testDrop},
		{"CollectionNames", testCollectionNames},
		{"Cursor", testCursor},
		{"Concurrent", testConcurrent},
		{"Differential", testDifferential},
		{"KeysetPaging", testKeysetPaging},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newDatabase(t, open))
		})
	}
}

// newDatabase opens an engine and a database of a name of its own,
// dropped and closed when the test ends.
func newDatabase(t *testing.T, open func(t *testing.T) engine.Engine) engine.Database {
	t.Helper()
	e := open(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := e.Database("enginetest_" + hex.EncodeToString(b[:]))
	t.Cleanup(func() {
		ctx := context.Background()
		if err := db.Drop(ctx); err != nil {
			t.Errorf("drop: %v", err)
		}
		if err := e.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

// insert inserts docs one by one.
func insert(t *testing.T, c engine.Collection, docs ...bson.D) {
	t.Helper()
	for _, d := range docs {
		if err := c.InsertOne(context.Background(), d); err != nil {
			t.Fatalf("insert %v: %v", d, err)
		}
	}
}

// find returns the _ids of a Find's documents, in order.
func find(t *testing.T, c engine.Collection, filter bson.D, opts *engine.FindOptions) []string {
	t.Helper()
	ctx := context.Background()
	cur, err := c.Find(ctx, filter, opts)
	if err != nil {
		t.Fatalf("find %v: %v", filter, err)
	}
	defer cur.Close(ctx)
	ids := []string{}
	for cur.Next(ctx) {
		id, ok := cur.Current().Lookup("_id").StringValueOK()
		if !ok {
			t.Fatalf("find %v: a document without a string _id: %v", filter, cur.Current())
		}
		ids = append(ids, id)
	}
	if err := cur.Err(); err != nil {
		t.Fatalf("find %v: %v", filter, err)
	}
	return ids
}

// byID sorts by _id, for filters whose order the test does not fix.
var byID = &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}}

func count(t *testing.T, c engine.Collection, filter bson.D) int64 {
	t.Helper()
	n, err := c.Count(context.Background(), filter)
	if err != nil {
		t.Fatalf("count %v: %v", filter, err)
	}
	return n
}

func date(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

func equal(a, b []string) bool { return slices.Equal(a, b) }
