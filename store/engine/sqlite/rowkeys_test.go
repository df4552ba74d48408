package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"fhirstore/store/engine"
)

// rowKeyQueries ask what the row keys answer: conditions a document is
// checked on after another one found it (ranges, prefixes on text,
// existence, null) and sort values (dates, sort keys, text outside them).
var rowKeyQueries = []struct {
	filter bson.D
	sort   bson.D
}{
	{bson.D{{Key: "tag", Value: "all"}, {Key: "n", Value: bson.D{{Key: "$gte", Value: 7}}}}, bson.D{{Key: "n", Value: -1}, {Key: "_id", Value: 1}}},
	{bson.D{{Key: "tag", Value: "t1"}, {Key: "name", Value: bson.Regex{Pattern: "^be"}}}, nil},
	{bson.D{{Key: "tag", Value: "t2"}, {Key: "name", Value: bson.Regex{Pattern: "ta"}}}, nil},
	{bson.D{{Key: "tag", Value: "all"}, {Key: "opt", Value: bson.D{{Key: "$exists", Value: true}}}}, nil},
	{bson.D{{Key: "tag", Value: "all"}, {Key: "opt", Value: nil}}, nil},
	{bson.D{{Key: "tag", Value: "all"}, {Key: "mixed", Value: bson.D{{Key: "$gt", Value: 4}}}}, nil},
	{bson.D{{Key: "tag", Value: "all"}, {Key: "mixed", Value: bson.D{{Key: "$gt", Value: "b"}}}}, nil},
	{bson.D{{Key: "tag", Value: "all"}}, bson.D{{Key: "sort.name.a", Value: 1}, {Key: "_id", Value: 1}}},
	{bson.D{{Key: "tag", Value: "all"}}, bson.D{{Key: "name", Value: -1}, {Key: "_id", Value: 1}}},
	{bson.D{{Key: "tag", Value: "t0"}}, bson.D{{Key: "at", Value: -1}, {Key: "_id", Value: -1}}},
}

// rowKeyDocs are documents with text, numbers, dates, sort keys, nulls
// and paths holding both text and numbers.
func rowKeyDocs() []any {
	names := []string{"alpha", "beta", "gamma", "delta", "zeta"}
	var docs []any
	for i := range 30 {
		name := names[i%len(names)]
		d := bson.D{{Key: "_id", Value: fmt.Sprintf("%02d", i)}, {Key: "n", Value: i % 11},
			{Key: "tag", Value: bson.A{fmt.Sprint("t", i%3), "all"}}, {Key: "name", Value: name},
			{Key: "at", Value: bson.DateTime(1_700_000_000_000 + int64(i%7)*86_400_000)},
			{Key: "sort", Value: bson.D{{Key: "name", Value: bson.D{{Key: "a", Value: name}, {Key: "d", Value: name}}}}}}
		switch i % 4 {
		case 0:
			d = append(d, bson.E{Key: "opt", Value: nil})
		case 1:
			d = append(d, bson.E{Key: "opt", Value: "x"})
		}
		switch i % 3 {
		case 0:
			d = append(d, bson.E{Key: "mixed", Value: name})
		case 1:
			d = append(d, bson.E{Key: "mixed", Value: i})
		}
		docs = append(docs, d)
	}
	return docs
}

// TestAFileOfFormat2GetsItsRowKeys opens a file whose rows have no row
// keys and whose entries have their second index (format 2), and finds it
// converted: the index dropped, every row with its keys, every query
// answering as before, writes going on.
func TestAFileOfFormat2GetsItsRowKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openAt(t, dir, Options{})
	c := e.Database("t").Collection("C")
	if err := c.InsertMany(ctx, rowKeyDocs()); err != nil {
		t.Fatal(err)
	}
	before := make([]string, len(rowKeyQueries))
	for i, q := range rowKeyQueries {
		before[i] = fmt.Sprint(findIDs(t, c, q.filter, q.sort))
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "t.db")
	w, err := openConn(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`UPDATE "d_C" SET k = NULL`, `CREATE INDEX "r_C" ON "x_C" (rid, f, v)`, `PRAGMA user_version = 2`} {
		if err := w.run(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	w.close()

	core, logs := observer.New(zap.InfoLevel)
	e = openAt(t, dir, Options{Logger: zap.New(core)})
	c = e.Database("t").Collection("C")
	for i, q := range rowKeyQueries {
		if got := fmt.Sprint(findIDs(t, c, q.filter, q.sort)); got != before[i] {
			t.Errorf("%v sorted %v: %s after the conversion, %s before", q.filter, q.sort, got, before[i])
		}
	}
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "new"}, {Key: "tag", Value: "all"}, {Key: "n", Value: 99}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(findIDs(t, c, bson.D{{Key: "tag", Value: "all"}, {Key: "n", Value: bson.D{{Key: "$gt", Value: 50}}}}, nil)); got != "[new]" {
		t.Errorf("a document written after the conversion: %s", got)
	}
	r, err := openConn(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	var version, indexes, keyless int64
	if _, err := r.queryRow(ctx, `SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema WHERE name = 'r_C'), (SELECT count(*) FROM "d_C" WHERE k IS NULL)`, nil, &version, &indexes, &keyless); err != nil {
		t.Fatal(err)
	}
	if version != rowFieldsVersion || indexes != 0 || keyless != 0 {
		t.Errorf("after the conversion: user_version %d, %d (rid, f, v) indexes, %d rows without keys", version, indexes, keyless)
	}
	if got := logs.FilterMessageSnippet("converted the rows").Len(); got != 1 {
		t.Errorf("%d log lines about the conversion, want 1: %v", got, logs.All())
	}
}

// TestDamagedRowKeysFailTheRead checks that row keys that do not decode
// fail the query that reads them rather than answering from garbage.
func TestDamagedRowKeysFailTheRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openAt(t, dir, Options{})
	c := e.Database("t").Collection("C")
	if err := c.InsertMany(ctx, rowKeyDocs()); err != nil {
		t.Fatal(err)
	}
	w, err := openConn(filepath.Join(dir, "t.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.run(ctx, `UPDATE "d_C" SET k = x'05ff' WHERE id = '07'`); err != nil {
		t.Fatal(err)
	}
	w.close()
	cur, err := c.Find(ctx, bson.D{{Key: "tag", Value: "all"}, {Key: "n", Value: bson.D{{Key: "$gte", Value: 0}}}}, &engine.FindOptions{})
	if err == nil {
		for cur.Next(ctx) {
		}
		err = cur.Err()
		cur.Close(ctx)
	}
	if err == nil {
		t.Fatal("a query reading damaged row keys succeeded")
	}
}

// TestManyValuesOfASortKey checks an $in of more values than a function
// call takes on a path kept in rows only (no index entries to look up).
func TestManyValuesOfASortKey(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("t").Collection("C")
	if err := c.InsertMany(ctx, rowKeyDocs()); err != nil {
		t.Fatal(err)
	}
	vals := bson.A{"gamma"}
	for i := range 2 * maxFuncValues {
		vals = append(vals, fmt.Sprint("v", i))
	}
	vals = append(vals, "zeta")
	got := findIDs(t, c, bson.D{{Key: "tag", Value: "all"}, {Key: "sort.name.a", Value: bson.D{{Key: "$in", Value: vals}}}}, bson.D{{Key: "_id", Value: 1}})
	if fmt.Sprint(got) != "[02 04 07 09 12 14 17 19 22 24 27 29]" {
		t.Errorf("sort.name.a in %d values: %v", len(vals), got)
	}
}

// toFormat3RowFields rewrites the file at path as format 3 kept the
// fields rows keep alone since format 4 (versions' numbers, methods,
// transactions): their entries in x_C too, and a row's keys with only a
// flag for their text.
func toFormat3RowFields(t *testing.T, path, coll string) {
	t.Helper()
	withRaw(t, path, nil, func(cd *codec, w *conn) { rewriteFormat3RowFields(t, cd, w, coll) })
}

// rewriteFormat3RowFields is toFormat3RowFields on an open file.
func rewriteFormat3RowFields(t *testing.T, cd *codec, w *conn, coll string) {
	t.Helper()
	ctx := context.Background()
	w.codes = &fieldCodes{}
	if err := w.codes.begin(ctx, w); err != nil {
		t.Fatal(err)
	}
	n := namesOf(coll)
	docs, err := readRaw(ctx, w, n, -1<<63, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rest, err := cd.restOf(d.doc, nil)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := docEntries(rest)
		if err != nil {
			t.Fatal(err)
		}
		var kept []codedEntry
		for _, e := range entries {
			f, err := w.codes.code(ctx, w, e.f)
			if err != nil {
				t.Fatal(err)
			}
			_, text := e.v.(string)
			top, _, _ := strings.Cut(e.f, ".")
			switch {
			case text && top != "sort":
				kept = append(kept, codedEntry{f: f, text: true})
			default:
				kept = append(kept, codedEntry{f: f, v: e.v})
			}
			if rowOnly(e.f) && top != "sort" {
				if _, err := w.exec(ctx, "INSERT INTO "+n.x+" (f, v, rid) VALUES (?, ?, ?)", f, e.v, d.rid); err != nil {
					t.Fatal(err)
				}
			}
		}
		sortCoded(kept)
		if _, err := w.exec(ctx, "UPDATE "+n.d+" SET k = ? WHERE rid = ?", encodeRowKeys(kept), d.rid); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.run(ctx, "PRAGMA user_version = 3"); err != nil {
		t.Fatal(err)
	}
}

// TestAFileOfFormat3LosesTheEntriesRowsKeep opens a file of format 3,
// whose x table holds entries of versions' numbers, methods and
// transactions and whose rows hold only a flag for their text, and finds
// those entries deleted, queries on the fields answering as before (from
// the documents, for the rows written before), writes going on.
func TestAFileOfFormat3LosesTheEntriesRowsKeep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openAt(t, dir, Options{})
	c := e.Database("t").Collection("history")
	var docs []any
	for i := range 12 {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("P/%d/1", i)}, {Key: "id", Value: fmt.Sprint(i)},
			{Key: "vid", Value: int32(1 + i%3)}, {Key: "method", Value: []string{"POST", "PUT", "DELETE"}[i%3]},
			{Key: "txn", Value: fmt.Sprintf("txn-%d", i%2)}})
	}
	if err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	queries := []bson.D{
		{{Key: "txn", Value: "txn-1"}},
		{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"P/1/1", "P/2/1", "P/3/1"}}}}, {Key: "txn", Value: "txn-1"}},
		{{Key: "method", Value: "PUT"}, {Key: "vid", Value: bson.D{{Key: "$gte", Value: 2}}}},
		{{Key: "vid", Value: 3}},
	}
	before := make([]string, len(queries))
	for i, q := range queries {
		before[i] = fmt.Sprint(findIDs(t, c, q, bson.D{{Key: "vid", Value: -1}, {Key: "_id", Value: 1}}))
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "t.db")
	toFormat3RowFields(t, path, "history")

	core, logs := observer.New(zap.InfoLevel)
	e = openAt(t, dir, Options{Logger: zap.New(core)})
	c = e.Database("t").Collection("history")
	for i, q := range queries {
		if got := fmt.Sprint(findIDs(t, c, q, bson.D{{Key: "vid", Value: -1}, {Key: "_id", Value: 1}})); got != before[i] {
			t.Errorf("%v: %s after the conversion, %s before", q, got, before[i])
		}
	}
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "P/new/1"}, {Key: "vid", Value: int32(1)}, {Key: "txn", Value: "txn-new"}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(findIDs(t, c, bson.D{{Key: "txn", Value: "txn-new"}}, nil)); got != "[P/new/1]" {
		t.Errorf("a document written after the conversion: %s", got)
	}
	r, err := openConn(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	var version, left int64
	if _, err := r.queryRow(ctx, `SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM "x_history" x JOIN "_fields" p ON p.id = x.f WHERE p.path IN ('vid', 'method', 'txn'))`, nil, &version, &left); err != nil {
		t.Fatal(err)
	}
	if version != rowFieldsVersion || left != 0 {
		t.Errorf("after the conversion: user_version %d, %d entries of fields rows keep", version, left)
	}
	if got := logs.FilterMessageSnippet("those of fields rows keep alone deleted").Len(); got != 1 {
		t.Errorf("%d log lines about the conversion, want 1: %v", got, logs.All())
	}
}
