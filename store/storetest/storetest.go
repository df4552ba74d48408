// Package storetest gives tests a database: the MongoDB named by
// FHIRSTORE_TEST_MONGODB_URI, or an embedded one on a temporary directory.
package storetest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/server"
	"fhirstore/store"
	"fhirstore/store/embedded"
)

// EnvURI names the variable that points the tests at an external MongoDB.
const EnvURI = "FHIRSTORE_TEST_MONGODB_URI"

// DB is a database for one test binary.
type DB struct {
	URI       string
	stop      func()
	seq       atomic.Int64
	run       string
	validator *fhirschema.Validator
	registry  *search.Registry
}

// Start returns the external database when EnvURI is set, otherwise starts an
// embedded one in a temporary directory. Call Close when the tests are done.
func Start(ctx context.Context) (*DB, error) {
	run := fmt.Sprintf("t%d", time.Now().UnixNano()%1_000_000_000)
	if os.Getenv(EnvURI) != "" {
		return StartAt(ctx, "", run)
	}
	dir, err := os.MkdirTemp("", "fhirstore-test-db-*")
	if err != nil {
		return nil, fmt.Errorf("temp dir for test database: %w", err)
	}
	d, err := StartAt(ctx, dir, run)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	stop := d.stop
	d.stop = func() { stop(); _ = os.RemoveAll(dir) }
	return d, nil
}

// StartAt is Start on the embedded database files in dir, which are kept
// on Close, with database names prefixed by run: a later process (or the
// same one after a crash) finds the same data with the same arguments.
func StartAt(ctx context.Context, dir, run string) (*DB, error) {
	v, err := fhirschema.NewValidator()
	if err != nil {
		return nil, err
	}
	reg, err := search.NewRegistry(fhirschema.ResourceTypes())
	if err != nil {
		return nil, err
	}
	if uri := os.Getenv(EnvURI); uri != "" {
		return &DB{URI: uri, stop: func() {}, run: run, validator: v, registry: reg}, nil
	}
	srv, err := embedded.Start(ctx, dir, nil)
	if err != nil {
		return nil, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), embedded.StopTimeout)
		defer cancel()
		_ = srv.Stop(sctx)
	}
	return &DB{URI: srv.URI(), stop: stop, run: run, validator: v, registry: reg}, nil
}

// Close stops an embedded database (removing the files Start created).
func (d *DB) Close() { d.stop() }

// Options are the store options the product uses, schema validation
// included, with a per-run database prefix so parallel runs against one
// external MongoDB never meet.
func (d *DB) Options() store.Options {
	return store.Options{
		DatabasePrefix: "fhirstore_test_" + d.run + "_",
		ResourceTypes:  fhirschema.IsResourceType,
		Validate:       server.StoreValidator(d.validator),
		Registry:       d.registry,
		Logger:         zap.NewNop(),
	}
}

// Registry is the search parameter registry the store indexes with.
func (d *DB) Registry() *search.Registry { return d.registry }

// Open opens a store on the database and closes it when the test ends.
func (d *DB) Open(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), d.URI, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	return st
}

// Tenant creates a fresh tenant for one test and drops it afterwards.
func (d *DB) Tenant(t testing.TB, st *store.Store) string {
	t.Helper()
	name := fmt.Sprintf("t%d", d.seq.Add(1))
	if err := st.CreateTenant(context.Background(), name); err != nil {
		t.Fatalf("create tenant %s: %v", name, err)
	}
	t.Cleanup(func() { _ = st.DeleteTenant(context.Background(), name) })
	return name
}

// Run is a TestMain: it starts the test database into *db, runs the tests
// and stops it, exiting with the tests' status.
func Run(m *testing.M, db **DB) {
	d, err := Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "start test database:", err)
		os.Exit(1)
	}
	*db = d
	code := m.Run()
	d.Close()
	os.Exit(code)
}
