package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"fhirstore/store/engine"
)

// formatDocs are documents of two collections as the store writes them:
// a resource shared by a current row and a history row, numbers, nested
// arrays, a document without the shared field.
func formatDocs() map[string][]bson.D {
	resource := bson.D{{Key: "resourceType", Value: "Patient"}, {Key: "id", Value: "p1"},
		{Key: "name", Value: bson.A{bson.D{{Key: "family", Value: "Chalmers"}, {Key: "given", Value: bson.A{"Peter", "James"}}}}}}
	other := bson.D{{Key: "resourceType", Value: "Patient"}, {Key: "id", Value: "p2"}, {Key: "active", Value: true}}
	return map[string][]bson.D{
		"Patient": {
			{{Key: "_id", Value: "p1"}, {Key: "vid", Value: int32(2)}, {Key: "deleted", Value: false}, {Key: "resource", Value: resource},
				{Key: "idx", Value: bson.D{{Key: "family", Value: bson.A{"chalmers", "Chalmers"}}, {Key: "n", Value: 1.5}}}},
			{{Key: "vid", Value: int64(1)}, {Key: "_id", Value: "p2"}, {Key: "resource", Value: other}, {Key: "nested", Value: bson.A{bson.A{int32(1)}, bson.D{}}}},
			{{Key: "_id", Value: "gone"}, {Key: "deleted", Value: true}},
		},
		"history": {
			{{Key: "_id", Value: "Patient/p1/1"}, {Key: "id", Value: "p1"}, {Key: "vid", Value: int32(1)}, {Key: "resource", Value: other}},
			{{Key: "_id", Value: "Patient/p1/2"}, {Key: "id", Value: "p1"}, {Key: "vid", Value: int32(2)}, {Key: "resource", Value: resource}},
		},
	}
}

// writeFormatDocs inserts formatDocs into database db of e and returns
// their BSON by collection and _id.
func writeFormatDocs(t *testing.T, e *Engine, db string) map[string]map[string]bson.Raw {
	t.Helper()
	want := map[string]map[string]bson.Raw{}
	for coll, docs := range formatDocs() {
		want[coll] = map[string]bson.Raw{}
		for _, d := range docs {
			raw, err := bson.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Database(db).Collection(coll).InsertOne(context.Background(), bson.Raw(raw)); err != nil {
				t.Fatal(err)
			}
			want[coll][bson.Raw(raw).Lookup("_id").StringValue()] = raw
		}
	}
	return want
}

// checkDocs reads every document back, byte for byte, and a few filters.
func checkDocs(t *testing.T, e *Engine, db string, want map[string]map[string]bson.Raw) {
	t.Helper()
	ctx := context.Background()
	for coll, docs := range want {
		c := e.Database(db).Collection(coll)
		for id, raw := range docs {
			got, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, nil)
			if err != nil {
				t.Fatalf("%s/%s: %v", coll, id, err)
			}
			if !bytes.Equal(got, raw) {
				t.Fatalf("%s/%s reads back as\n%v\nwant\n%v", coll, id, got, raw)
			}
		}
	}
	c := e.Database(db).Collection("Patient")
	if got := findIDs(t, c, bson.D{{Key: "idx.family", Value: "chalmers"}}, nil); strings.Join(got, ",") != "p1" {
		t.Fatalf("idx.family = chalmers: %v", got)
	}
	if got := findIDs(t, c, bson.D{{Key: "deleted", Value: true}}, nil); strings.Join(got, ",") != "gone" {
		t.Fatalf("deleted: %v", got)
	}
}

// toFormat1 rewrites a file of format 2 as the previous format stored it:
// documents whole, as inserted, in d_C(rid, id, doc), no shared values.
func toFormat1(t *testing.T, path string) {
	t.Helper()
	withRaw(t, path, append(append([]string{}, pragmas...), writerPragmas...), func(cd *codec, c *conn) { rewriteFormat1(t, cd, c) })
}

// rewriteFormat1 is toFormat1 on an open file.
func rewriteFormat1(t *testing.T, cd *codec, c *conn) {
	t.Helper()
	ctx := context.Background()
	colls, err := queryStrings(ctx, c, "SELECT substr(name, 3) FROM sqlite_schema WHERE type = 'table' AND name LIKE 'd\\_%' ESCAPE '\\'")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	for _, coll := range colls {
		n := namesOf(coll)
		docs, err := readRawDocs(ctx, c, cd, n, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range docs {
			if _, err := c.exec(ctx, "UPDATE "+n.d+" SET doc = ? WHERE id = ?", raw, bson.Raw(raw).Lookup("_id").StringValue()); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []string{"ALTER TABLE " + n.d + " DROP COLUMN b", "ALTER TABLE " + n.d + " DROP COLUMN k", "CREATE INDEX " + n.r + " ON " + n.x + " (rid, f, v)"} {
			if err := c.run(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range []string{"DROP TABLE " + blobsTable, "PRAGMA user_version = 1", "COMMIT"} {
		if err := c.run(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

// withRaw runs fn with a codec and a connection to the file at path,
// outside any engine, and closes them.
func withRaw(t *testing.T, path string, pragmas []string, fn func(cd *codec, c *conn)) {
	t.Helper()
	cd, err := newCodec()
	if err != nil {
		t.Fatal(err)
	}
	defer cd.close()
	c, err := openConn(path, pragmas)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	fn(cd, c)
}

// format1Dir is a data dir holding database "db" in the previous format,
// and the documents it holds.
func format1Dir(t *testing.T) (string, map[string]map[string]bson.Raw) {
	t.Helper()
	dir := t.TempDir()
	e := openAt(t, dir, Options{SharedField: "resource"})
	want := writeFormatDocs(t, e, "db")
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	toFormat1(t, filepath.Join(dir, "db.db"))
	return dir, want
}

func TestAFileOfThePreviousFormatIsConvertedOnce(t *testing.T) {
	dir, want := format1Dir(t)
	core, logs := observer.New(zap.InfoLevel)
	e := openAt(t, dir, Options{SharedField: "resource", Logger: zap.New(core)})
	checkDocs(t, e, "db", want)
	lines := logs.FilterMessageSnippet("converted the documents").All()
	if len(lines) != 1 {
		t.Fatalf("%d conversion log lines, want 1: %v", len(lines), logs.All())
	}
	fields := lines[0].ContextMap()
	if fields["collections"] != int64(2) || fields["documents"] != int64(5) || fields["took"] == nil {
		t.Fatalf("conversion logged %v, want 2 collections, 5 documents and the time it took", fields)
	}
	// The resource of p1's current row and of its newest history row is kept once.
	f, _ := e.file(context.Background(), "db")
	var blobs, holders int64
	if _, err := f.w.queryRow(context.Background(), "SELECT count(*), sum(n) FROM "+blobsTable, nil, &blobs, &holders); err != nil {
		t.Fatal(err)
	}
	if blobs != 2 || holders != 4 {
		t.Fatalf("%d shared values held %d times, want 2 held 4 times", blobs, holders)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	core, logs = observer.New(zap.InfoLevel)
	again := openAt(t, dir, Options{SharedField: "resource", Logger: zap.New(core)})
	checkDocs(t, again, "db", want)
	if n := logs.FilterMessageSnippet("converted").Len(); n != 0 {
		t.Fatalf("a converted file was converted again: %v", logs.All())
	}
}

// TestAConversionKilledMidwayIsFinishedByTheNextOpen kills (SIGKILL) a
// process converting a file after it committed one collection and while
// it converts the other; the next open converts what is left.
func TestAConversionKilledMidwayIsFinishedByTheNextOpen(t *testing.T) {
	if dir := os.Getenv("FHIRSTORE_CONVERT_CHILD"); dir != "" {
		convertAndHang(dir, "history")
		return
	}
	dir, want := format1Dir(t)
	killConverting(t, dir, "TestAConversionKilledMidwayIsFinishedByTheNextOpen")
	// The child committed "Patient" (converted first, in name order) and
	// was converting "history".
	c, err := openConn(filepath.Join(dir, "db.db"), pragmas)
	if err != nil {
		t.Fatal(err)
	}
	converted, err := queryStrings(context.Background(), c, "SELECT substr(name, 3) FROM sqlite_schema AS s WHERE name LIKE 'd\\_%' ESCAPE '\\' AND EXISTS (SELECT 1 FROM pragma_table_info(s.name) WHERE name = 'b') ORDER BY 1")
	c.close()
	if err != nil || strings.Join(converted, ",") != "Patient" {
		t.Fatalf("after the kill, converted collections %v (%v), want Patient only", converted, err)
	}
	core, logs := observer.New(zap.InfoLevel)
	e := openAt(t, dir, Options{SharedField: "resource", Logger: zap.New(core)})
	checkDocs(t, e, "db", want)
	lines := logs.FilterMessageSnippet("converted the documents").All()
	if len(lines) != 1 || lines[0].ContextMap()["collections"] != int64(1) {
		t.Fatalf("the second open logged %v, want the conversion of the one collection left", logs.All())
	}
}

// TestARowsConversionKilledMidwayIsFinishedByTheNextOpen kills (SIGKILL) a
// process giving a file's rows their keys (format 3) after it committed
// one collection and while it converts the other; the next open converts
// what is left, and reads answer from the keys.
func TestARowsConversionKilledMidwayIsFinishedByTheNextOpen(t *testing.T) {
	if dir := os.Getenv("FHIRSTORE_CONVERT_CHILD"); dir != "" {
		convertAndHang(dir, rowsStep+"history")
		return
	}
	dir, want := format1Dir(t)
	killConverting(t, dir, "TestARowsConversionKilledMidwayIsFinishedByTheNextOpen")
	c, err := openConn(filepath.Join(dir, "db.db"), pragmas)
	if err != nil {
		t.Fatal(err)
	}
	var keyless, historyKeys int64
	var indexes string
	_, err = c.queryRow(context.Background(), `SELECT (SELECT count(*) FROM "d_Patient" WHERE k IS NULL), (SELECT count(*) FROM pragma_table_info('d_history') WHERE name = 'k'), (SELECT group_concat(name) FROM sqlite_schema WHERE type = 'index' AND name LIKE 'r\_%' ESCAPE '\')`, nil, &keyless, &historyKeys, &indexes)
	c.close()
	if err != nil || keyless != 0 || historyKeys != 0 || indexes != "r_history" {
		t.Fatalf("after the kill: %d Patient rows without keys, history's keys column %d, indexes %s (%v); want Patient converted, history not", keyless, historyKeys, indexes, err)
	}
	core, logs := observer.New(zap.InfoLevel)
	e := openAt(t, dir, Options{SharedField: "resource", Logger: zap.New(core)})
	checkDocs(t, e, "db", want)
	lines := logs.FilterMessageSnippet("converted the rows").All()
	if len(lines) != 1 || lines[0].ContextMap()["collections"] != int64(2) {
		t.Fatalf("the second open logged %v, want the rows of both collections looked at", logs.All())
	}
	f, _ := e.file(context.Background(), "db")
	if _, err := f.w.queryRow(context.Background(), `SELECT (SELECT count(*) FROM "d_history" WHERE k IS NULL) + (SELECT count(*) FROM sqlite_schema WHERE name LIKE 'r\_%' ESCAPE '\')`, nil, &keyless); err != nil || keyless != 0 {
		t.Fatalf("after the second open: %d rows without keys or indexes left (%v)", keyless, err)
	}
}

// convertAndHang opens dir, converting it, and stops in the middle of the
// transaction of step (a collection, or rowsStep and one), saying so on
// stdout.
func convertAndHang(dir, step string) {
	opts := Options{SharedField: "resource", converting: func(coll string, committed bool) {
		if coll == step && !committed {
			fmt.Println("ready")
			select {}
		}
	}}
	e, err := Open(context.Background(), dir, opts)
	if err == nil {
		_, err = e.file(context.Background(), "db")
	}
	fmt.Println("the conversion ended:", err)
	os.Exit(1)
}

// killConverting runs the conversion of dir in a child process and kills
// it with SIGKILL once it reports being in the middle.
func killConverting(t *testing.T, dir, test string) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	child.Env = append(os.Environ(), "FHIRSTORE_CONVERT_CHILD="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var seen []string
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- ""
				break
			}
			seen = append(seen, sc.Text())
		}
		ready <- strings.Join(seen, "\n")
		for sc.Scan() {
		}
	}()
	select {
	case why := <-ready:
		if why != "" {
			_ = child.Wait()
			t.Fatalf("the child did not stop midway:\n%s", why)
		}
	case <-time.After(2 * time.Minute):
		_ = child.Process.Kill()
		t.Fatal("the child did not get midway")
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
}

// TestADamagedDocumentIsReportedNotServed damages the stored parts of
// documents (a flipped byte, a torn end, a shared value gone) and checks
// that reading them fails naming the document, while others still read.
func TestADamagedDocumentIsReportedNotServed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, damage string
	}{
		{"a flipped byte", "UPDATE d_Patient SET doc = substr(doc, 1, 12) || iif(substr(doc, 13, 1) = x'5A', x'A5', x'5A') || substr(doc, 14) WHERE id = 'p1'"},
		{"a torn end", "UPDATE d_Patient SET doc = substr(doc, 1, length(doc) - 5) WHERE id = 'p1'"},
		{"a damaged shared value", "UPDATE _blobs SET z = substr(z, 1, 9) || iif(substr(z, 10, 1) = x'00', x'01', x'00') || substr(z, 11) WHERE id = (SELECT b FROM d_Patient WHERE id = 'p1')"},
		{"a missing shared value", "UPDATE d_Patient SET b = 999 WHERE id = 'p1'"},
		{"an empty document", "UPDATE d_Patient SET doc = x'' WHERE id = 'p1'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := openTest(t, Options{SharedField: "resource"})
			want := writeFormatDocs(t, e, "db")
			f, _ := e.file(ctx, "db")
			if err := f.write(ctx, func(ctx context.Context, w *conn) error { return w.run(ctx, tc.damage) }); err != nil {
				t.Fatal(err)
			}
			c := e.Database("db").Collection("Patient")
			got, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: "p1"}}, nil)
			var ce *engine.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, engine.ErrCorrupt) || ce.ID != "p1" || ce.Collection != "Patient" || ce.Database != "db" {
				t.Fatalf("reading the damaged document: %v, %v; want a CorruptError naming db.Patient p1", got, err)
			}
			if _, err := c.Find(ctx, bson.D{}, nil); err != nil {
				t.Fatal(err)
			}
			if got := findIDsErr(c, bson.D{{Key: "_id", Value: "p2"}}); !bytes.Equal(got, want["Patient"]["p2"]) {
				t.Fatalf("an undamaged document next to it: %v", got)
			}
		})
	}
}

// findIDsErr reads the one document filter matches (nil on any error).
func findIDsErr(c engine.Collection, filter bson.D) bson.Raw {
	got, err := c.FindOne(context.Background(), filter, nil)
	if err != nil {
		return nil
	}
	return got
}
