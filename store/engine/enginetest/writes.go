package enginetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// row is a document shaped like the store's rows, as a struct.
type row struct {
	ID          string    `bson:"_id"`
	VID         int       `bson:"vid"`
	LastUpdated time.Time `bson:"lastUpdated"`
	Deleted     bool      `bson:"deleted"`
	Idx         bson.D    `bson:"idx,omitempty"`
}

func testInsertFind(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("Observation")
	doc := bson.D{
		{Key: "_id", Value: "o1"}, {Key: "s", Value: "text"}, {Key: "n", Value: int32(7)},
		{Key: "f", Value: 2.5}, {Key: "l", Value: int64(1) << 40}, {Key: "b", Value: true},
		{Key: "t", Value: bson.DateTime(1700000000123)}, {Key: "nul", Value: nil},
		{Key: "a", Value: bson.A{"x", int32(1), bson.D{{Key: "k", Value: "v"}}}},
		{Key: "sub", Value: bson.D{{Key: "deep", Value: bson.D{{Key: "er", Value: "est"}}}}},
		{Key: "bin", Value: bson.Binary{Subtype: 0, Data: []byte{1, 2, 3}}},
		{Key: "resource", Value: bson.D{{Key: "resourceType", Value: "Observation"}}},
	}
	insert(t, c, doc)
	want, _ := bson.Marshal(doc)
	got, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: "o1"}}, nil)
	if err != nil {
		t.Fatalf("find one: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("document not returned as inserted:\n got %v\nwant %v", got, bson.Raw(want))
	}

	// Structs go in as bson.Marshal makes them, and decode back.
	in := row{ID: "o2", VID: 3, LastUpdated: date(2024, 5, 6).Add(123 * time.Millisecond), Idx: bson.D{{Key: "code", Value: bson.A{"a|b"}}}}
	if err := c.InsertOne(ctx, &in); err != nil {
		t.Fatalf("insert struct: %v", err)
	}
	if got := find(t, c, bson.D{{Key: "idx.code", Value: "a|b"}}, nil); !equal(got, []string{"o2"}) {
		t.Errorf("idx.code of the struct: %v", got)
	}
	var out row
	raw, err := c.FindOne(ctx, bson.D{{Key: "vid", Value: 3}}, nil)
	if err := engine.Decode(raw, err, &out); err != nil {
		t.Fatalf("find struct: %v", err)
	}
	if out.ID != in.ID || out.VID != in.VID || !out.LastUpdated.Equal(in.LastUpdated) {
		t.Errorf("struct round trip: got %+v, want %+v", out, in)
	}

	_, err = c.FindOne(ctx, bson.D{{Key: "_id", Value: "nope"}}, nil)
	if !errors.Is(err, engine.ErrNoDocuments) {
		t.Errorf("find one of nothing: %v, want ErrNoDocuments", err)
	}
}

func testDuplicateKey(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("Patient")
	insert(t, c, bson.D{{Key: "_id", Value: "p"}, {Key: "v", Value: 1}})
	err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}, {Key: "v", Value: 2}})
	if !errors.Is(err, engine.ErrDuplicateKey) || !engine.IsDuplicateKey(err) {
		t.Fatalf("second insert: %v, want ErrDuplicateKey", err)
	}
	if got := find(t, c, bson.D{{Key: "v", Value: 1}}, nil); !equal(got, []string{"p"}) {
		t.Errorf("the first document changed: v=1 finds %v", got)
	}
	if n := count(t, c, bson.D{{Key: "v", Value: 2}}); n != 0 {
		t.Errorf("the duplicate left index entries: v=2 counts %d", n)
	}
}

func testInsertMany(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("history")
	insert(t, c, bson.D{{Key: "_id", Value: "old"}, {Key: "k", Value: "old"}})
	docs := []any{
		bson.D{{Key: "_id", Value: "x1"}, {Key: "k", Value: "new"}},
		bson.D{{Key: "_id", Value: "old"}, {Key: "k", Value: "dup"}},
		&row{ID: "x2", VID: 1},
		bson.D{{Key: "_id", Value: "x1"}, {Key: "k", Value: "dup"}},
		bson.D{{Key: "_id", Value: "x3"}, {Key: "k", Value: "new"}},
	}
	err := c.InsertMany(ctx, docs)
	var be *engine.BulkError
	if !errors.As(err, &be) {
		t.Fatalf("insert many: %v, want a *BulkError", err)
	}
	var at []int
	for _, we := range be.Errors {
		at = append(at, we.Index)
		if !errors.Is(we.Err, engine.ErrDuplicateKey) {
			t.Errorf("write error %d: %v, want ErrDuplicateKey", we.Index, we.Err)
		}
	}
	if !slices.Equal(at, []int{1, 3}) || !engine.IsDuplicateKey(err) {
		t.Errorf("failed documents %v, want [1 3]", at)
	}
	if got := find(t, c, bson.D{}, byID); !equal(got, []string{"old", "x1", "x2", "x3"}) {
		t.Errorf("after insert many: %v", got)
	}
	if got := find(t, c, bson.D{{Key: "k", Value: "dup"}}, byID); len(got) != 0 {
		t.Errorf("duplicates were written: %v", got)
	}
	if got := find(t, c, bson.D{{Key: "k", Value: "new"}}, byID); !equal(got, []string{"x1", "x3"}) {
		t.Errorf("k=new: %v", got)
	}

	var many []any
	for i := range 1200 {
		many = append(many, bson.D{{Key: "_id", Value: fmt.Sprintf("m%04d", i)}, {Key: "i", Value: i}, {Key: "even", Value: i%2 == 0}})
	}
	if err := c.InsertMany(ctx, many); err != nil {
		t.Fatalf("insert 1200: %v", err)
	}
	if n := count(t, c, bson.D{{Key: "even", Value: true}}); n != 600 {
		t.Errorf("even: %d, want 600", n)
	}
}

func testReplaceOne(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("Observation")
	insert(t, c, bson.D{{Key: "_id", Value: "a"}, {Key: "vid", Value: 1}, {Key: "code", Value: bson.A{"x", "y"}}, {Key: "gone", Value: "soon"}})
	next := bson.D{{Key: "_id", Value: "a"}, {Key: "vid", Value: 2}, {Key: "code", Value: bson.A{"y", "z"}}}
	older := bson.D{{Key: "_id", Value: "a"}, {Key: "vid", Value: bson.D{{Key: "$lt", Value: 2}}}}
	matched, err := c.ReplaceOne(ctx, older, next, false)
	if err != nil || !matched {
		t.Fatalf("replace: %v %v, want a match", matched, err)
	}
	raw, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}, nil)
	want, _ := bson.Marshal(next)
	if err != nil || !bytes.Equal(raw, want) {
		t.Errorf("after replace: %v %v, want %v", raw, err, bson.Raw(want))
	}
	for _, tc := range []struct {
		filter bson.D
		want   []string
	}{
		{bson.D{{Key: "vid", Value: 2}}, []string{"a"}},
		{bson.D{{Key: "vid", Value: 1}}, []string{}},
		{bson.D{{Key: "code", Value: "x"}}, []string{}},
		{bson.D{{Key: "code", Value: "y"}}, []string{"a"}},
		{bson.D{{Key: "code", Value: "z"}}, []string{"a"}},
		{bson.D{{Key: "gone", Value: bson.D{{Key: "$exists", Value: true}}}}, []string{}},
	} {
		if got := find(t, c, tc.filter, nil); !equal(got, tc.want) {
			t.Errorf("after replace, %v finds %v, want %v", tc.filter, got, tc.want)
		}
	}
	// The same version again: no longer older, nothing matches.
	if matched, err := c.ReplaceOne(ctx, older, next, false); err != nil || matched {
		t.Errorf("replace by an equal version: %v %v, want no match", matched, err)
	}
	// Upsert inserts when nothing matches...
	fresh := bson.D{{Key: "_id", Value: "b"}, {Key: "vid", Value: 1}}
	if matched, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "b"}}, fresh, true); err != nil || matched {
		t.Errorf("upsert: %v %v, want an insert", matched, err)
	}
	if got := find(t, c, bson.D{{Key: "vid", Value: 1}}, nil); !equal(got, []string{"b"}) {
		t.Errorf("after upsert: vid=1 finds %v", got)
	}
	// ...and collides when the _id exists but the filter did not match it.
	_, err = c.ReplaceOne(ctx, older, next, true)
	if !engine.IsDuplicateKey(err) {
		t.Errorf("upsert over an existing _id: %v, want a duplicate key", err)
	}
	if matched, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "none"}}, bson.D{{Key: "_id", Value: "none"}}, false); err != nil || matched {
		t.Errorf("replace of nothing: %v %v", matched, err)
	}
	if got := find(t, c, bson.D{}, byID); !equal(got, []string{"a", "b"}) {
		t.Errorf("documents: %v", got)
	}
}

func testDelete(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("locks")
	for i := range 10 {
		insert(t, c, bson.D{{Key: "_id", Value: fmt.Sprintf("l%d", i)}, {Key: "owner", Value: fmt.Sprintf("o%d", i%3)}, {Key: "n", Value: i}})
	}
	n, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "l1"}, {Key: "owner", Value: "o2"}})
	if err != nil || n != 0 {
		t.Errorf("delete one not matching: %d %v", n, err)
	}
	n, err = c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "l1"}, {Key: "owner", Value: "o1"}})
	if err != nil || n != 1 {
		t.Errorf("delete one: %d %v", n, err)
	}
	n, err = c.DeleteOne(ctx, bson.D{{Key: "owner", Value: "o0"}})
	if err != nil || n != 1 {
		t.Errorf("delete one of several: %d %v", n, err)
	}
	n, err = c.DeleteMany(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 5}}}})
	if err != nil || n != 5 {
		t.Errorf("delete many: %d %v, want 5", n, err)
	}
	if got := count(t, c, bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 5}}}}); got != 0 {
		t.Errorf("deleted documents still counted: %d", got)
	}
	if got := find(t, c, bson.D{}, byID); len(got) != 3 || slices.Contains(got, "l1") {
		t.Errorf("left: %v", got)
	}
	n, err = c.DeleteMany(ctx, bson.D{})
	if err != nil || n != 3 {
		t.Errorf("delete all: %d %v", n, err)
	}
	if got := count(t, c, bson.D{}); got != 0 {
		t.Errorf("count after deleting all: %d", got)
	}
	insert(t, c, bson.D{{Key: "_id", Value: "l1"}, {Key: "owner", Value: "again"}})
	if got := find(t, c, bson.D{{Key: "owner", Value: "again"}}, nil); !equal(got, []string{"l1"}) {
		t.Errorf("reinserted: %v", got)
	}
}

func testCount(t *testing.T, db engine.Database) {
	c := db.Collection("fixture")
	insert(t, c, fixture()...)
	for _, tc := range filterCases() {
		if got := count(t, c, tc.filter); got != int64(len(tc.want)) {
			t.Errorf("%s: count %v = %d, want %d", tc.name, tc.filter, got, len(tc.want))
		}
	}
}

func testCountDistinct(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("history")
	t0 := date(2024, 1, 1)
	for i, k := range []struct {
		typ, id string
		at      int
	}{{"Patient", "1", 1}, {"Patient", "1", 2}, {"Patient", "2", 3}, {"Observation", "1", 4}, {"Observation", "1", 5}, {"Observation", "2", 6}, {"Observation", "3", 9}} {
		insert(t, c, bson.D{{Key: "_id", Value: fmt.Sprintf("%s/%s/%d", k.typ, k.id, i)}, {Key: "type", Value: k.typ}, {Key: "id", Value: k.id}, {Key: "lastUpdated", Value: t0.Add(time.Duration(k.at) * time.Hour)}})
	}
	for _, tc := range []struct {
		filter bson.D
		fields []string
		want   int64
	}{
		{bson.D{}, []string{"type", "id"}, 5},
		{bson.D{}, []string{"type"}, 2},
		{bson.D{}, []string{"id"}, 3},
		{bson.D{{Key: "type", Value: "Observation"}}, []string{"type", "id"}, 3},
		{bson.D{{Key: "lastUpdated", Value: bson.D{{Key: "$lte", Value: t0.Add(5 * time.Hour)}}}}, []string{"type", "id"}, 3},
		{bson.D{{Key: "type", Value: "Nothing"}}, []string{"type", "id"}, 0},
	} {
		got, err := c.CountDistinct(ctx, tc.filter, tc.fields...)
		if err != nil || got != tc.want {
			t.Errorf("count distinct %v of %v: %d %v, want %d", tc.fields, tc.filter, got, err, tc.want)
		}
	}
}

func testIndexes(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("Observation")
	ixs := []engine.Index{
		{Name: "idx.code_1", Keys: bson.D{{Key: "idx.code", Value: 1}}},
		{Name: "lastUpdated_-1__id_-1", Keys: bson.D{{Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}}},
	}
	for range 2 {
		if err := c.CreateIndexes(ctx, ixs); err != nil {
			t.Fatalf("create indexes: %v", err)
		}
	}
	names, err := c.IndexNames(ctx)
	slices.Sort(names)
	if err != nil || !equal(names, []string{"_id_", "idx.code_1", "lastUpdated_-1__id_-1"}) {
		t.Errorf("index names: %v %v", names, err)
	}
	insert(t, c, bson.D{{Key: "_id", Value: "o"}, {Key: "idx", Value: bson.D{{Key: "code", Value: bson.A{"c"}}}}})
	if got := find(t, c, bson.D{{Key: "idx.code", Value: "c"}}, nil); !equal(got, []string{"o"}) {
		t.Errorf("find after creating indexes: %v", got)
	}
}

func testMissingCollection(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("Nothing")
	if got := find(t, c, bson.D{{Key: "a", Value: 1}}, &engine.FindOptions{Sort: bson.D{{Key: "lastUpdated", Value: -1}}, Limit: 5}); len(got) != 0 {
		t.Errorf("find: %v", got)
	}
	if got := count(t, c, bson.D{}); got != 0 {
		t.Errorf("count: %d", got)
	}
	if n, err := c.CountDistinct(ctx, bson.D{}, "a"); err != nil || n != 0 {
		t.Errorf("count distinct: %d %v", n, err)
	}
	if _, err := c.FindOne(ctx, bson.D{}, nil); !errors.Is(err, engine.ErrNoDocuments) {
		t.Errorf("find one: %v", err)
	}
	if n, err := c.DeleteMany(ctx, bson.D{}); err != nil || n != 0 {
		t.Errorf("delete: %d %v", n, err)
	}
	if m, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "x"}}, bson.D{{Key: "_id", Value: "x"}}, false); err != nil || m {
		t.Errorf("replace: %v %v", m, err)
	}
	if names, err := c.IndexNames(ctx); err != nil || len(names) != 0 {
		t.Errorf("index names: %v %v", names, err)
	}
}

func testDrop(t *testing.T, db engine.Database) {
	ctx := context.Background()
	a, b := db.Collection("A"), db.Collection("B")
	insert(t, a, bson.D{{Key: "_id", Value: "1"}, {Key: "k", Value: "v"}})
	insert(t, b, bson.D{{Key: "_id", Value: "2"}, {Key: "k", Value: "v"}})
	if err := a.CreateIndexes(ctx, []engine.Index{{Name: "k_1", Keys: bson.D{{Key: "k", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Drop(ctx); err != nil {
		t.Fatalf("drop: %v", err)
	}
	for _, c := range []engine.Collection{a, b} {
		if got := find(t, c, bson.D{{Key: "k", Value: "v"}}, nil); len(got) != 0 {
			t.Errorf("after drop: %v", got)
		}
		if names, err := c.IndexNames(ctx); err != nil || len(names) != 0 {
			t.Errorf("index names after drop: %v %v", names, err)
		}
	}
	insert(t, a, bson.D{{Key: "_id", Value: "1"}, {Key: "k", Value: "w"}})
	if got := find(t, a, bson.D{{Key: "k", Value: "w"}}, nil); !equal(got, []string{"1"}) {
		t.Errorf("insert after drop: %v", got)
	}
}

func testCursor(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("fixture")
	insert(t, c, fixture()...)
	cur, err := c.Find(ctx, bson.D{}, &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}, Skip: 1, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID string `bson:"_id"`
		S  string `bson:"s"`
	}
	if err := engine.All(ctx, cur, &docs); err != nil {
		t.Fatalf("all: %v", err)
	}
	if len(docs) != 3 || docs[0].ID != "b" || docs[0].S != "Apple" || docs[2].ID != "d" {
		t.Errorf("all: %+v", docs)
	}
	// A cursor closed before its end releases what it holds.
	for range 20 {
		cur, err := c.Find(ctx, bson.D{}, byID)
		if err != nil {
			t.Fatal(err)
		}
		if !cur.Next(ctx) {
			t.Fatalf("no first document: %v", cur.Err())
		}
		if err := cur.Close(ctx); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	if n := count(t, c, bson.D{}); n != int64(len(fixture())) {
		t.Errorf("count after closed cursors: %d", n)
	}
}

func testConcurrent(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("Concurrent")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				id := fmt.Sprintf("w%d-%02d", w, i)
				if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "w", Value: w}, {Key: "i", Value: i}}); err != nil {
					errs <- err
					return
				}
				if _, err := c.Count(ctx, bson.D{{Key: "w", Value: w}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent: %v", err)
	}
	if n := count(t, c, bson.D{}); n != 320 {
		t.Errorf("count: %d, want 320", n)
	}
	if n := count(t, c, bson.D{{Key: "w", Value: 3}, {Key: "i", Value: bson.D{{Key: "$lt", Value: 10}}}}); n != 10 {
		t.Errorf("count w=3 i<10: %d, want 10", n)
	}
}

// testCollectionNames: every collection holding a document is listed; one
// never written is not.
func testCollectionNames(t *testing.T, db engine.Database) {
	ctx := context.Background()
	if names, err := db.CollectionNames(ctx); err != nil || len(names) != 0 {
		t.Fatalf("a new database lists %v %v", names, err)
	}
	insert(t, db.Collection("Alpha"), bson.D{{Key: "_id", Value: "1"}})
	insert(t, db.Collection("Beta"), bson.D{{Key: "_id", Value: "1"}}, bson.D{{Key: "_id", Value: "2"}})
	count(t, db.Collection("Never"), bson.D{})
	names, err := db.CollectionNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !equal(names, []string{"Alpha", "Beta"}) {
		t.Fatalf("collections %v, want Alpha and Beta", names)
	}
}
