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
)

// testURI is the MongoDB the conformance suite runs against: the one named
// by FHIRSTORE_TEST_MONGODB_URI, or an in-process FerretDB when
// FHIRSTORE_TEST_ENGINE=ferretdb; "" skips the suite (the default run
// covers the embedded engine).
func testURI(t *testing.T) string {
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
