package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// TestSnapshotWhileWritingIsConsistentAndChecksClean: a snapshot taken
// while another goroutine keeps inserting holds a prefix of the inserts
// (the copy is one instant), counts them, and checks clean.
func TestSnapshotWhileWritingIsConsistentAndChecksClean(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openAt(t, dir, Options{SharedField: "resource"})
	c := e.Database("db").Collection("C")
	insert := func(i int) error {
		return c.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("d%05d", i)}, {Key: "n", Value: i}, {Key: "resource", Value: bson.D{{Key: "text", Value: strings.Repeat("x", i%50)}}}})
	}
	for i := range 200 {
		if err := insert(i); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 200; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := insert(i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	out := filepath.Join(t.TempDir(), "db.db")
	err := Snapshot(ctx, filepath.Join(dir, "db.db"), out)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := Snapshot(ctx, filepath.Join(dir, "db.db"), out); err == nil {
		t.Fatal("a snapshot over an existing file succeeded")
	}
	info, err := Inspect(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	n := info.Documents["C"]
	if info.Format != CurrentFormat || n < 200 {
		t.Fatalf("format %d, %d documents; want %d, at least 200", info.Format, n, CurrentFormat)
	}
	res, err := CheckFile(ctx, out, CheckOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) > 0 || res.Decoded != n {
		t.Fatalf("check: %d decoded (want %d), problems %v", res.Decoded, n, res.Problems)
	}
	// The copy is a prefix: documents d00000 … d(n-1), none missing.
	snap := openAt(t, filepath.Dir(out), Options{SharedField: "resource"})
	got, err := snap.Database("db").Collection("C").Count(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$lt", Value: n}}}})
	if err != nil || got != n {
		t.Fatalf("the snapshot holds %d of the first %d documents (%v)", got, n, err)
	}
}

// TestCheckNamesTheDamagedDocument: a document whose stored bytes are
// damaged is reported with its collection and id; a sample check finds
// it too when the collection is small.
func TestCheckNamesTheDamagedDocument(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openAt(t, dir, Options{SharedField: "resource"})
	c := e.Database("db").Collection("history")
	for i := range 20 {
		if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("Patient/p%d/1", i)}, {Key: "resource", Value: bson.D{{Key: "id", Value: fmt.Sprintf("p%d", i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "db.db")
	w, err := openConn(path, pragmas)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.exec(ctx, `UPDATE "d_history" SET doc = substr(doc, 1, length(doc) - 3) || x'000000' WHERE id = 'Patient/p7/1'`); err != nil {
		t.Fatal(err)
	}
	w.close()
	for _, full := range []bool{true, false} {
		res, err := CheckFile(ctx, path, CheckOptions{Full: full})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Problems) != 1 || res.Problems[0].Collection != "history" || res.Problems[0].ID != "Patient/p7/1" || !errors.Is(res.Problems[0].Err, engine.ErrCorrupt) {
			t.Fatalf("full %v: problems %v, want one naming history Patient/p7/1", full, res.Problems)
		}
	}
}

// TestCheckFindsIndexEntriesThatDisagree: a document whose index entry
// is gone is named; an entry no document calls for is counted by a full
// check.
func TestCheckFindsIndexEntriesThatDisagree(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openAt(t, dir, Options{SharedField: "resource", WordPaths: []string{"words"}})
	c := e.Database("db").Collection("Patient")
	for i := range 10 {
		doc := bson.D{{Key: "_id", Value: fmt.Sprintf("p%d", i)}, {Key: "family", Value: fmt.Sprintf("F%d", i)}, {Key: "words", Value: bson.A{"alpha", "beta"}},
			{Key: "vid", Value: i}, {Key: "resource", Value: bson.D{{Key: "id", Value: fmt.Sprintf("p%d", i)}}}}
		if err := c.InsertOne(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "db.db")
	if res, err := CheckFile(ctx, path, CheckOptions{Full: true}); err != nil || len(res.Problems) > 0 || res.Decoded != 10 {
		t.Fatalf("check of a clean file: %v, %+v", err, res)
	}
	w, err := openConn(path, pragmas)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if _, err := w.exec(ctx, `DELETE FROM "x_Patient" WHERE v = 'F4'`); err != nil {
		t.Fatal(err)
	}
	for _, full := range []bool{false, true} {
		res, err := CheckFile(ctx, path, CheckOptions{Full: full})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Problems) != 1 || res.Problems[0].ID != "p4" || !strings.Contains(res.Problems[0].Err.Error(), "family = F4") {
			t.Fatalf("full %v: problems %v, want one naming p4's family", full, res.Problems)
		}
	}
	if _, err := w.exec(ctx, `INSERT INTO "x_Patient" (f, v, rid) SELECT f, 'F4', (SELECT rid FROM "d_Patient" WHERE id = 'p4') FROM "x_Patient" WHERE v = 'F5'`); err != nil {
		t.Fatal(err)
	}
	if _, err := w.exec(ctx, `INSERT INTO "x_Patient" (f, v, rid) SELECT f, 'stale', rid FROM "x_Patient" WHERE v = 'F5'`); err != nil {
		t.Fatal(err)
	}
	res, err := CheckFile(ctx, path, CheckOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 1 || res.Problems[0].ID != "" || !strings.Contains(res.Problems[0].Err.Error(), "the documents call for") {
		t.Fatalf("problems %v, want one counting the entries of Patient", res.Problems)
	}
}

// TestASnapshotOfAnOlderFormatChecksAndConverts: a file of the previous
// format snapshots as it is, checks clean (its documents stored whole),
// and converts when an engine opens the copy, as the original would.
func TestASnapshotOfAnOlderFormatChecksAndConverts(t *testing.T) {
	ctx := context.Background()
	dir, want := format1Dir(t)
	out := t.TempDir()
	if err := Snapshot(ctx, filepath.Join(dir, "db.db"), filepath.Join(out, "db.db")); err != nil {
		t.Fatal(err)
	}
	res, err := CheckFile(ctx, filepath.Join(out, "db.db"), CheckOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Format != 1 || len(res.Problems) > 0 || res.Decoded == 0 {
		t.Fatalf("check of a format 1 snapshot: %+v", res)
	}
	e := openAt(t, out, Options{SharedField: "resource"})
	checkDocs(t, e, "db", want)
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := Inspect(ctx, filepath.Join(out, "db.db")); err != nil || info.Format != CurrentFormat {
		t.Fatalf("the opened snapshot: %+v, %v; want format %d", info, err, CurrentFormat)
	}
}
