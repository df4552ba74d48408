package mongodb_test

import (
	"context"
	"os"
	"testing"
	"time"

	"fhirstore/store/engine"
	"fhirstore/store/engine/enginetest"
	"fhirstore/store/engine/mongodb"
	"fhirstore/store/ferretdb"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// testURI is the MongoDB the conformance suite runs against: the one named
// by FHIRSTORE_TEST_MONGODB_URI; without it the suite is skipped.
func testURI(t *testing.T) string {
	t.Helper()
	if uri := os.Getenv("FHIRSTORE_TEST_MONGODB_URI"); uri != "" {
		return uri
	}
	t.Skip("the conformance suite asserts MongoDB's own semantics: set FHIRSTORE_TEST_MONGODB_URI to a MongoDB. " +
		"FerretDB departs from them where the store never goes (several operators of one field on different " +
		"array elements, duplicate keys in a filter, indexes of a collection that does not exist); " +
		"FHIRSTORE_TEST_ENGINE=ferretdb runs the store's and the server's suites on the mongodb engine instead")
	return ""
}

// TestMongoDBEngineFindsWithoutAFilter: a nil filter is every document,
// as the empty one is (the driver cannot send a nil document).
func TestMongoDBEngineFindsWithoutAFilter(t *testing.T) {
	uri := ferretURI(t)
	eng, err := mongodb.Open(uri, mongodb.Options{ServerSelectionTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	ctx := context.Background()
	c := eng.Database("fhirstore_enginetest_nil").Collection("docs")
	defer eng.Database("fhirstore_enginetest_nil").Drop(ctx)
	if err := c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "_id", Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	cur, err := c.Find(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.D
	if err := engine.All(ctx, cur, &docs); err != nil || len(docs) != 2 {
		t.Fatalf("find with a nil filter: %v %v", docs, err)
	}
	if n, err := c.Count(ctx, nil); err != nil || n != 2 {
		t.Fatalf("count with a nil filter: %d %v", n, err)
	}
}

// ferretURI starts an in-process FerretDB when FHIRSTORE_TEST_ENGINE=ferretdb.
func ferretURI(t *testing.T) string {
	t.Helper()
	if uri := os.Getenv("FHIRSTORE_TEST_MONGODB_URI"); uri != "" {
		return uri
	}
	if os.Getenv("FHIRSTORE_TEST_ENGINE") != "ferretdb" {
		t.Skip("the mongodb engine needs FHIRSTORE_TEST_ENGINE=ferretdb or FHIRSTORE_TEST_MONGODB_URI")
	}
	srv, err := ferretdb.Start(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ferretdb.StopTimeout)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	return srv.URI()
}

func TestMongoDBEngineConformsToTheGrammar(t *testing.T) {
	uri := testURI(t)
	enginetest.Run(t, func(t *testing.T) engine.Engine {
		eng, err := mongodb.Open(uri, mongodb.Options{ServerSelectionTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = eng.Close(context.Background()) })
		return eng
	})
}

// TestMongoDBEngineStatesTheServersLimits: the engine asks the server
// which one it is and states that server's limits.
func TestMongoDBEngineStatesTheServersLimits(t *testing.T) {
	uri := ferretURI(t)
	eng, err := mongodb.Open(uri, mongodb.Options{ServerSelectionTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	l := eng.Limits(context.Background())
	if l.MaxDocumentBytes != 16*engine.MiB {
		t.Fatalf("document limit %d, want 16 MiB", l.MaxDocumentBytes)
	}
	ferret := os.Getenv("FHIRSTORE_TEST_MONGODB_URI") == ""
	if ferret && (!l.WholeArrayKeys || l.MaxIndexKeyBytes != 2400 || l.Source != "FerretDB 1.x (on PostgreSQL)") {
		t.Fatalf("FerretDB 1.x limits: %+v", l)
	}
	// Whoever started the server may know better: the embedded FerretDB
	// runs on SQLite.
	known, err := mongodb.Open(uri, mongodb.Options{ServerSelectionTimeout: 5 * time.Second, Limits: &ferretdb.Limits})
	if err != nil {
		t.Fatal(err)
	}
	defer known.Close(context.Background())
	if l := known.Limits(context.Background()); l != ferretdb.Limits {
		t.Fatalf("limits given at Open: %+v, want %+v", l, ferretdb.Limits)
	}
}
