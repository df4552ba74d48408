// Package storetest gives tests a database engine: by default the embedded
// SQLite engine on a temporary directory; with FHIRSTORE_TEST_ENGINE=ferretdb
// the mongodb engine on an in-process FerretDB (the wire-compatible stand-in
// for MongoDB); with FHIRSTORE_TEST_MONGODB_URI the mongodb engine on that
// server.
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
	"fhirstore/store"
	"fhirstore/store/engine"
	"fhirstore/store/engine/mongodb"
	"fhirstore/store/engine/sqlite"
	"fhirstore/store/ferretdb"
	"fhirstore/store/schemacheck"
	"fhirstore/store/viewcheck"
)

// Environment variables that choose the engine under test.
const (
	// EnvURI points the tests at an external MongoDB.
	EnvURI = "FHIRSTORE_TEST_MONGODB_URI"
	// EnvEngine is "sqlite" (the default) or "ferretdb".
	EnvEngine = "FHIRSTORE_TEST_ENGINE"
)

// DB is a database for one test binary.
type DB struct {
	// Kind is the engine under test: "sqlite" or "mongodb".
	Kind string
	// URI is the MongoDB connection string when Kind is "mongodb".
	URI string
	// Dir holds the SQLite files when Kind is "sqlite".
	Dir       string
	shared    engine.Engine
	limits    *engine.Limits // of the mongodb engine's server, when known
	stop      func()
	seq       atomic.Int64
	run       string
	validator *fhirschema.Validator
	registry  *search.Registry
}

// Start returns the engine the environment asks for, on a temporary
// directory when it keeps files. Call Close when the tests are done.
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

// StartAt is Start on the database files in dir, which are kept on Close,
// with database names prefixed by run: a later process (or the same one
// after a crash) finds the same data with the same arguments.
func StartAt(ctx context.Context, dir, run string) (*DB, error) {
	v, err := fhirschema.NewValidator()
	if err != nil {
		return nil, err
	}
	reg, err := search.NewRegistry(fhirschema.StoredTypes())
	if err != nil {
		return nil, err
	}
	d := &DB{run: run, validator: v, registry: reg, stop: func() {}}
	switch kind := os.Getenv(EnvEngine); {
	case os.Getenv(EnvURI) != "":
		d.Kind, d.URI = "mongodb", os.Getenv(EnvURI)
	case kind == "ferretdb":
		srv, err := ferretdb.Start(ctx, dir, nil)
		if err != nil {
			return nil, err
		}
		d.Kind, d.URI, d.limits = "mongodb", srv.URI(), &ferretdb.Limits
		d.stop = func() {
			sctx, cancel := context.WithTimeout(context.Background(), ferretdb.StopTimeout)
			defer cancel()
			_ = srv.Stop(sctx)
		}
	case kind == "" || kind == "sqlite":
		eng, err := sqlite.Open(ctx, dir, sqlite.Options{WordPaths: search.WordListFields(), SharedField: store.SharedField})
		if err != nil {
			return nil, err
		}
		d.Kind, d.Dir, d.shared = "sqlite", dir, eng
		d.stop = func() { _ = eng.Close(context.Background()) }
	default:
		return nil, fmt.Errorf("%s=%q: use sqlite or ferretdb", EnvEngine, kind)
	}
	return d, nil
}

// Close stops the engine (removing the files Start created).
func (d *DB) Close() { d.stop() }

// Options are the store options the product uses, schema validation
// included, with a per-run database prefix so parallel runs against one
// external MongoDB never meet.
func (d *DB) Options() store.Options {
	return store.Options{
		DatabasePrefix: "fhirstore_test_" + d.run + "_",
		ResourceTypes:  fhirschema.IsStoredType,
		Validate:       viewcheck.Validator(schemacheck.Validator(d.validator)),
		Registry:       d.registry,
		Logger:         zap.NewNop(),
	}
}

// Validator is the base validator the store options check writes with.
func (d *DB) Validator() *fhirschema.Validator { return d.validator }

// Registry is the search parameter registry the store indexes with.
func (d *DB) Registry() *search.Registry { return d.registry }

// Engine returns an engine on the test database for one store. SQLite
// stores share the test binary's engine (one writer per file, as in the
// product); closing what Engine returns leaves it open.
func (d *DB) Engine(ctx context.Context, opts mongodb.Options) (engine.Engine, error) {
	if d.shared != nil {
		return keepOpen{d.shared}, nil
	}
	if opts.Limits == nil {
		opts.Limits = d.limits
	}
	return mongodb.Open(d.URI, opts)
}

// SQLite is the test binary's embedded engine, when the tests run on it.
func (d *DB) SQLite() (*sqlite.Engine, bool) {
	e, ok := d.shared.(*sqlite.Engine)
	return e, ok
}

// OpenStore opens a store on the test database.
func (d *DB) OpenStore(ctx context.Context, opts store.Options) (*store.Store, error) {
	eng, err := d.Engine(ctx, mongodb.Options{})
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, eng, opts)
}

// Open opens a store on the database and closes it when the test ends.
func (d *DB) Open(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	st, err := d.OpenStore(context.Background(), opts)
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

// keepOpen is a shared engine whose Close leaves it open.
type keepOpen struct{ engine.Engine }

func (keepOpen) Close(context.Context) error { return nil }

// SearchAll pages through every match of q in tenant.
func SearchAll(t testing.TB, st *store.Store, tenant string, q *search.Query) []*store.Resource {
	t.Helper()
	var out []*store.Resource
	for {
		page, err := st.Search(context.Background(), tenant, q)
		if err != nil {
			t.Fatalf("search %s: %v", q.Type, err)
		}
		out = append(out, page.Entries...)
		if page.Next == "" {
			return out
		}
		q.Cursor = page.Next
	}
}
