package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/engine"
	"fhirstore/store/engine/sqlite"
	"fhirstore/store/ferretdb"
)

// migrateBatch is how many documents one insert into the new engine carries.
const migrateBatch = 500

// migrate copies a data dir of the previous embedded engine (FerretDB on
// SQLite, in <data-dir>/db) into the indexed engine (<data-dir>/sqlite),
// document for document: every database, collection, version and journal
// entry as it was. The old files are left in place; once the copy is
// complete the data dir opens on the new engine.
func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("migrate", "data-dir")
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, "fhirstore migrate [--data-dir DIR]")
		}
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("migrate takes no arguments, not %q (see fhirstore migrate -h)", strings.Join(pos, " "))
	}
	dataDir := cfg.str("data-dir")
	if !isLegacyDataDir(dataDir) {
		return fmt.Errorf("data dir %s holds no database of the previous embedded engine to migrate (no %s, or already migrated to %s)", dataDir, legacyDir, sqliteDir)
	}
	// The lock keeps servers (and one-shot commands) of this version off
	// the files while they are copied; the announcement tells a server of
	// an earlier version, which does not take the lock.
	lock, err := lockDataDir(dataDir)
	if errors.Is(err, errLocked) {
		return fmt.Errorf("data dir %s %w; stop it before migrating", dataDir, errInUse)
	}
	if err != nil {
		return err
	}
	defer lock.unlock()
	if live := liveEmbeddedURI(ctx, filepath.Join(dataDir, embeddedURIFile)); live != "" {
		return fmt.Errorf("data dir %s %w; stop it before migrating", dataDir, errInUse)
	}
	logger, err := newLogger("warn", stderr)
	if err != nil {
		return err
	}
	n, err := copyLegacy(ctx, dataDir, logger)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "migrated %d documents from %s to %s; the old files stay in %s until you remove them\n",
		n, filepath.Join(dataDir, legacyDir), filepath.Join(dataDir, sqliteDir), filepath.Join(dataDir, legacyDir))
	return err
}

// copyLegacy copies every document into a fresh engine directory and moves
// it into place only when the whole copy succeeded.
func copyLegacy(ctx context.Context, dataDir string, logger *zap.Logger) (int64, error) {
	srv, err := ferretdb.Start(ctx, filepath.Join(dataDir, legacyDir), logger)
	if err != nil {
		return 0, err
	}
	defer stopFerret(srv)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		return 0, fmt.Errorf("connect to the old database: %w", err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	tmp := filepath.Join(dataDir, sqliteDir+".migrating")
	if err := os.RemoveAll(tmp); err != nil {
		return 0, fmt.Errorf("clear %s: %w", tmp, err)
	}
	eng, err := sqlite.Open(ctx, tmp, sqlite.Options{Logger: logger, WordPaths: search.WordListFields(), SharedField: store.SharedField})
	if err != nil {
		return 0, err
	}
	n, err := copyDatabases(ctx, client, eng)
	if cerr := eng.Close(ctx); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("migrate %s: %w", dataDir, err)
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, sqliteDir)); err != nil {
		return n, fmt.Errorf("move the migrated database into place: %w", err)
	}
	return n, nil
}

// copyDatabases copies the fhirstore databases of client into eng.
func copyDatabases(ctx context.Context, client *mongo.Client, eng engine.Engine) (int64, error) {
	names, err := client.ListDatabaseNames(ctx, bson.D{})
	if err != nil {
		return 0, fmt.Errorf("list databases: %w", err)
	}
	var total int64
	for _, name := range names {
		if !strings.HasPrefix(name, "fhirstore_") {
			continue
		}
		colls, err := client.Database(name).ListCollectionNames(ctx, bson.D{})
		if err != nil {
			return total, fmt.Errorf("list collections of %s: %w", name, err)
		}
		for _, coll := range colls {
			n, err := copyCollection(ctx, client.Database(name).Collection(coll), eng.Database(name).Collection(coll))
			total += n
			if err != nil {
				return total, fmt.Errorf("copy %s.%s: %w", name, coll, err)
			}
		}
	}
	return total, nil
}

func copyCollection(ctx context.Context, from *mongo.Collection, to engine.Collection) (int64, error) {
	cur, err := from.Find(ctx, bson.D{})
	if err != nil {
		return 0, err
	}
	defer cur.Close(ctx)
	var n int64
	batch := make([]any, 0, migrateBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := to.InsertMany(ctx, batch)
		n += int64(len(batch))
		batch = batch[:0]
		return err
	}
	for cur.Next(ctx) {
		batch = append(batch, bson.Raw(append([]byte(nil), cur.Current...)))
		if len(batch) == migrateBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return n, err
	}
	return n, flush()
}
