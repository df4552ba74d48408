package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"fhirstore/store/engine"
	"fhirstore/store/engine/enginetest"
)

// openTest opens an engine on a fresh directory, closed with the test.
func openTest(t testing.TB, opts Options) *Engine {
	t.Helper()
	return openAt(t, t.TempDir(), opts)
}

// openAt opens an engine on dir, closed with the test (if the test has not
// closed it).
func openAt(t testing.TB, dir string, opts Options) *Engine {
	t.Helper()
	e, err := Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func TestConformance(t *testing.T) {
	enginetest.Run(t, func(t *testing.T) engine.Engine { return openTest(t, Options{}) })
}

// TestUnsupported checks that what the grammar does not have fails with
// engine.ErrUnsupported on every operation taking a filter (and that the
// writes change nothing), rather than being answered some other way.
func TestUnsupported(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	doc := bson.D{{Key: "_id", Value: "a"}, {Key: "s", Value: "x"}, {Key: "a", Value: bson.A{1, 2}}}
	if err := c.InsertOne(ctx, doc); err != nil {
		t.Fatal(err)
	}
	op := func(o string, v any) bson.D { return bson.D{{Key: "s", Value: bson.D{{Key: o, Value: v}}}} }
	filters := []bson.D{
		{{Key: "$nor", Value: bson.A{bson.D{{Key: "s", Value: "x"}}}}},
		{{Key: "$where", Value: "true"}},
		{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$s", "x"}}}}},
		{{Key: "$text", Value: bson.D{{Key: "$search", Value: "x"}}}},
		{{Key: "$and", Value: bson.A{}}},
		{{Key: "$or", Value: "x"}},
		{{Key: "$or", Value: bson.A{"x"}}},
		op("$elemMatch", bson.D{{Key: "$gt", Value: 1}}),
		op("$size", 1),
		op("$type", "string"),
		op("$all", bson.A{"x"}),
		op("$regex", "x"),
		op("$not", bson.D{{Key: "$eq", Value: "x"}}),
		op("$mod", bson.A{2, 0}),
		op("$exists", "yes"),
		op("$in", "x"),
		op("$in", bson.A{bson.Regex{Pattern: "^x"}}),
		op("$eq", bson.D{{Key: "k", Value: 1}}),
		op("$gt", bson.A{1}),
		{{Key: "s", Value: bson.Regex{Pattern: "^x.*"}}},
		{{Key: "s", Value: bson.Regex{Pattern: "^x", Options: "i"}}},
		{{Key: "s", Value: bson.Regex{Pattern: "x$"}}},
		{{Key: "s", Value: bson.Regex{Pattern: `\d`}}},
		{{Key: "s", Value: bson.Regex{Pattern: "[x]"}}},
		{{Key: "s", Value: bson.D{{Key: "k", Value: 1}}}},
		{{Key: "s", Value: bson.D{}}},
		{{Key: "a", Value: bson.A{1, 2}}},
		{{Key: "s", Value: bson.NewObjectID()}},
		{{Key: "s", Value: math.NaN()}},
		{{Key: "s", Value: bson.Binary{Data: []byte{1}}}},
		{{Key: "resource.id", Value: "a"}},
		{{Key: "resource", Value: bson.D{{Key: "$exists", Value: true}}}},
		{{Key: "numText", Value: "1"}},
		{{Key: "_id.x", Value: "a"}},
		{{Key: "a.0", Value: 1}},
		{{Key: "", Value: 1}},
		{{Key: "s.", Value: 1}},
		{{Key: "s.$x", Value: 1}},
	}
	for _, f := range filters {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, engine.ErrUnsupported) {
					t.Errorf("%s: %v, want ErrUnsupported", what, err)
				}
			}
			_, err := c.Find(ctx, f, nil)
			check("find", err)
			_, err = c.FindOne(ctx, f, nil)
			check("find one", err)
			_, err = c.Count(ctx, f)
			check("count", err)
			_, err = c.CountDistinct(ctx, f, "s")
			check("count distinct", err)
			_, err = c.DeleteMany(ctx, f)
			check("delete many", err)
			_, err = c.DeleteOne(ctx, f)
			check("delete one", err)
			_, err = c.ReplaceOne(ctx, f, bson.D{{Key: "_id", Value: "a"}, {Key: "s", Value: "y"}}, true)
			check("replace", err)
		})
	}
	for _, opts := range []*engine.FindOptions{
		{Sort: bson.D{{Key: "s", Value: 2}}},
		{Sort: bson.D{{Key: "s", Value: "asc"}}},
		{Sort: bson.D{{Key: "s", Value: bson.D{{Key: "$meta", Value: "textScore"}}}}},
		{Sort: bson.D{{Key: "resource.id", Value: 1}}},
		{Projection: bson.D{{Key: "s", Value: 1}, {Key: "a", Value: 0}}},
		{Projection: bson.D{{Key: "_id", Value: 0}}},
		{Projection: bson.D{{Key: "a.b", Value: 0}}},
		{Projection: bson.D{{Key: "a", Value: bson.D{{Key: "$slice", Value: 1}}}}},
		{Projection: bson.D{{Key: "$s", Value: 1}}},
	} {
		if _, err := c.Find(ctx, bson.D{}, opts); !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("find with %+v: %v, want ErrUnsupported", opts, err)
		}
	}
	if _, err := c.CountDistinct(ctx, bson.D{}, "resource"); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("count distinct of resource: %v", err)
	}
	for _, d := range []any{bson.D{{Key: "s", Value: 1}}, bson.D{{Key: "_id", Value: 7}}} {
		if err := c.InsertOne(ctx, d); !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("insert %v: %v, want ErrUnsupported", d, err)
		}
	}
	raw, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}, nil)
	if want, _ := bson.Marshal(doc); err != nil || string(raw) != string(want) {
		t.Errorf("the document changed: %v %v", raw, err)
	}
	if n, err := c.Count(ctx, bson.D{}); err != nil || n != 1 {
		t.Errorf("count: %d %v", n, err)
	}
}

// TestUnavailable checks the errors of a closed engine and of a caller
// that gave up.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Find(cancelled, bson.D{}, nil); !errors.Is(err, engine.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("find with a cancelled context: %v", err)
	}
	if err := c.InsertOne(cancelled, bson.D{{Key: "_id", Value: "b"}}); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("insert with a cancelled context: %v", err)
	}
	if err := e.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := e.Ping(ctx); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("ping after close: %v", err)
	}
	if _, err := c.Count(ctx, bson.D{}); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("count after close: %v", err)
	}
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "c"}}); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("insert after close: %v", err)
	}
	if _, err := e.Database("../x").Collection("C").Count(ctx, bson.D{}); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("a database name that is a path: %v", err)
	}
}

// TestSharedFiles opens two engines on one directory, as the server and a
// command-line tool do: each sees the other's writes, drops included.
func TestSharedFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openAt(t, dir, Options{})
	b := openAt(t, dir, Options{ReadConns: 1})
	ca, cb := a.Database("t").Collection("Patient"), b.Database("t").Collection("Patient")
	if err := ca.InsertOne(ctx, bson.D{{Key: "_id", Value: "1"}, {Key: "k", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := cb.Count(ctx, bson.D{{Key: "k", Value: "a"}}); err != nil || n != 1 {
		t.Errorf("the other engine counts %d %v", n, err)
	}
	if err := cb.InsertOne(ctx, bson.D{{Key: "_id", Value: "1"}}); !engine.IsDuplicateKey(err) {
		t.Errorf("the other engine's duplicate: %v", err)
	}
	if err := b.Database("t").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := ca.Count(ctx, bson.D{}); err != nil || n != 0 {
		t.Errorf("after the other's drop: %d %v", n, err)
	}
	// The tables this engine created are gone: it creates them again.
	if err := ca.InsertOne(ctx, bson.D{{Key: "_id", Value: "2"}, {Key: "k", Value: "b"}}); err != nil {
		t.Fatalf("insert after the other's drop: %v", err)
	}
	if n, err := cb.Count(ctx, bson.D{{Key: "k", Value: "b"}}); err != nil || n != 1 {
		t.Errorf("the other engine counts %d %v", n, err)
	}
	// After another drop, the other engine numbers a path this one knew
	// by another number: each finds what was written under each path.
	if err := b.Database("t").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cb.InsertOne(ctx, bson.D{{Key: "_id", Value: "3"}, {Key: "m", Value: "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := ca.InsertOne(ctx, bson.D{{Key: "_id", Value: "4"}, {Key: "k", Value: "b"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []engine.Collection{ca, cb} {
		for path, want := range map[string]string{"k": "4", "m": "3"} {
			got := findIDs(t, c, bson.D{{Key: path, Value: "b"}}, nil)
			if fmt.Sprint(got) != "["+want+"]" {
				t.Errorf("%s = b: %v, want [%s]", path, got, want)
			}
		}
	}
}

// TestUpgradeFromTextPaths opens a file whose index entries hold their
// paths as text (the format before numbered paths) and finds it
// converted: every query answers as before, and writes go on.
func TestUpgradeFromTextPaths(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openAt(t, dir, Options{})
	c := e.Database("t").Collection("C")
	var docs []any
	for i := range 20 {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("%02d", i)}, {Key: "n", Value: i},
			{Key: "tag", Value: bson.A{fmt.Sprint("t", i%3), "all"}}, {Key: "sub", Value: bson.D{{Key: "odd", Value: i%2 == 1}}}})
	}
	if err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	queries := []struct {
		filter bson.D
		sort   bson.D
	}{
		{bson.D{{Key: "tag", Value: "t1"}}, nil},
		{bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: 15}}}}, bson.D{{Key: "n", Value: -1}}},
		{bson.D{{Key: "sub", Value: bson.D{{Key: "$exists", Value: true}}}, {Key: "sub.odd", Value: true}}, bson.D{{Key: "n", Value: 1}}},
		{bson.D{{Key: "tag", Value: "all"}}, bson.D{{Key: "tag", Value: 1}, {Key: "n", Value: -1}}},
	}
	before := make([]string, len(queries))
	for i, q := range queries {
		before[i] = fmt.Sprint(findIDs(t, c, q.filter, q.sort))
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := openConn(filepath.Join(dir, "t.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`CREATE TABLE "x_C.old" (f TEXT NOT NULL, v ANY NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (f, v, rid)) STRICT, WITHOUT ROWID`,
		`INSERT INTO "x_C.old" SELECT p.path, x.v, x.rid FROM "x_C" AS x JOIN "_fields" AS p ON p.id = x.f`,
		`DROP TABLE "x_C"`,
		`ALTER TABLE "x_C.old" RENAME TO "x_C"`,
		`CREATE INDEX "r_C" ON "x_C" (rid, f, v)`,
		`DROP TABLE "_fields"`,
		`PRAGMA user_version = 0`,
	} {
		if err := w.run(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	w.close()

	core, logs := observer.New(zap.InfoLevel)
	e = openAt(t, dir, Options{Logger: zap.New(core)})
	c = e.Database("t").Collection("C")
	for i, q := range queries {
		if got := fmt.Sprint(findIDs(t, c, q.filter, q.sort)); got != before[i] {
			t.Errorf("%v sorted %v: %s after the upgrade, %s before", q.filter, q.sort, got, before[i])
		}
	}
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "new"}, {Key: "tag", Value: "t1"}, {Key: "other", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(findIDs(t, c, bson.D{{Key: "tag", Value: "t1"}, {Key: "other", Value: 1}}, nil)); got != "[new]" {
		t.Errorf("a document written after the upgrade: %s", got)
	}
	r, err := openConn(filepath.Join(dir, "t.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	var version int64
	var typ string
	if _, err := r.queryRow(ctx, `SELECT (SELECT user_version FROM pragma_user_version), (SELECT type FROM pragma_table_info('x_C') WHERE name = 'f')`, nil, &version, &typ); err != nil {
		t.Fatal(err)
	}
	if version != rowFieldsVersion || typ != "INTEGER" {
		t.Errorf("after the upgrade: user_version %d, f %s", version, typ)
	}
	// the paths numbered, then the (rid, f, v) index the old file had dropped
	if got := logs.FilterMessageSnippet("converted").Len(); got != 2 {
		t.Errorf("%d log lines about the conversion, want 2: %v", got, logs.All())
	}
	var indexes int64
	if _, err := r.queryRow(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'r_C'`, nil, &indexes); err != nil || indexes != 0 {
		t.Errorf("the (rid, f, v) index after the upgrade: %d (%v)", indexes, err)
	}
}

// findIDs lists the _id of the documents matching filter, in sort's order.
func findIDs(t *testing.T, c engine.Collection, filter, sort bson.D) []string {
	t.Helper()
	return pageIDs(t, c, filter, &engine.FindOptions{Sort: sort})
}

// pageIDs lists the _id of the documents a Find with opts returns.
func pageIDs(t *testing.T, c engine.Collection, filter bson.D, opts *engine.FindOptions) []string {
	t.Helper()
	cur, err := c.Find(context.Background(), filter, opts)
	if err != nil {
		t.Fatalf("find %v: %v", filter, err)
	}
	defer cur.Close(context.Background())
	var ids []string
	for cur.Next(context.Background()) {
		id, _ := cur.Current().Lookup("_id").StringValueOK()
		ids = append(ids, id)
	}
	if err := cur.Err(); err != nil {
		t.Fatalf("find %v: %v", filter, err)
	}
	return ids
}

// TestManyValues checks long $in lists (sent as one JSON array) and
// values SQL text cannot hold literally.
func TestManyValues(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	var docs []any
	var ids, refs bson.A
	for i := range 300 {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("d%03d", i)}, {Key: "ref", Value: fmt.Sprintf("Patient/%d'\"", i)}})
		if i%3 == 0 {
			ids = append(ids, fmt.Sprintf("d%03d", i))
			refs = append(refs, fmt.Sprintf("Patient/%d'\"", i))
		}
	}
	docs = append(docs, bson.D{{Key: "_id", Value: "nul"}, {Key: "ref", Value: "a\x00b"}})
	if err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		filter bson.D
		want   int64
	}{
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, 100},
		{bson.D{{Key: "ref", Value: bson.D{{Key: "$in", Value: refs}}}}, 100},
		{bson.D{{Key: "ref", Value: bson.D{{Key: "$nin", Value: refs}}}}, 201},
		{bson.D{{Key: "ref", Value: bson.D{{Key: "$in", Value: append(refs, "a\x00b")}}}}, 101},
		{bson.D{{Key: "ref", Value: "a\x00b"}}, 1},
		{bson.D{{Key: "ref", Value: "a"}}, 0},
	} {
		if n, err := c.Count(ctx, tc.filter); err != nil || n != tc.want {
			t.Errorf("count: %d %v, want %d", n, err, tc.want)
		}
	}
}

// TestManyConditions checks that a filter of many conditions is planned
// in time: each condition is counted once, whatever their number.
func TestManyConditions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	var docs []any
	for i := range 200 {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprint(i)}, {Key: "a", Value: bson.A{i % 7, i % 11}}, {Key: "s", Value: fmt.Sprint(i % 13)}})
	}
	if err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	filter := bson.D{}
	for i := range 24 {
		filter = append(filter, bson.E{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{i % 7, 100 + i}}}})
		filter = append(filter, bson.E{Key: "s", Value: bson.D{{Key: "$gte", Value: ""}}})
	}
	cur, err := c.Find(ctx, filter, &engine.FindOptions{Sort: bson.D{{Key: "s", Value: 1}}, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := engine.All(ctx, cur, &got); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Count(ctx, filter); err != nil || n != 0 {
		t.Errorf("count: %d %v", n, err)
	}
}

// TestWritesReachTheFileInTheBackground: committed pages are copied from
// the WAL into the database file by the checkpointer shortly after the
// writes, long before the writer's own threshold (1 GiB of WAL), and the
// data reads back whole after the engine is opened again.
func TestWritesReachTheFileInTheBackground(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openAt(t, dir, Options{})
	coll := e.Database("t").Collection("Binary")
	docs := make([]any, 300)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range docs {
		data := make([]byte, 4096) // random: stored compressed, it keeps its size
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		docs[i] = bson.D{{Key: "_id", Value: fmt.Sprint(i)}, {Key: "data", Value: bson.Binary{Data: data}}}
	}
	if err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "t.db")
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() >= int64(len(docs)*4096) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database file holds %d bytes after the writes of %d", st.Size(), len(docs)*4096)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again := openAt(t, dir, Options{})
	if n, err := again.Database("t").Collection("Binary").Count(ctx, bson.D{}); err != nil || n != int64(len(docs)) {
		t.Fatalf("after opening again: %d documents, %v", n, err)
	}
}
