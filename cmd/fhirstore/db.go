package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.uber.org/zap"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/embedded"
)

// embeddedURIFile records where a running server's embedded database
// listens, so that other commands on the same data dir use it instead of
// opening the files a second time.
const embeddedURIFile = "embedded-db.uri"

// database is an open store and whatever must be stopped with it.
type database struct {
	store    *store.Store
	embedded *embedded.Server
	uriFile  string
}

// storeOptions are what a server adds to the store: validation and indexing.
type storeOptions struct {
	validate        store.Validator
	registry        *search.Registry
	eagerIndexTypes []string
	// monitor observes every database command (metrics); nil for none.
	monitor *event.CommandMonitor
}

// openDatabase opens the external MongoDB when uri is set; otherwise the
// embedded database of dataDir (shared with a server already running on it
// when share is true, refused when it is false).
func openDatabase(ctx context.Context, uri, dataDir string, share bool, so storeOptions, logger *zap.Logger) (*database, error) {
	opts := store.Options{ResourceTypes: fhirschema.IsResourceType, Validate: so.validate, Registry: so.registry, EagerIndexTypes: so.eagerIndexTypes, Logger: logger, Monitor: so.monitor}
	if uri != "" {
		st, err := store.Open(ctx, uri, opts)
		if err != nil {
			return nil, fmt.Errorf("MongoDB at %s: %w", redact(uri), err)
		}
		return &database{store: st}, nil
	}
	uriFile := filepath.Join(dataDir, embeddedURIFile)
	if live := liveEmbeddedURI(ctx, uriFile); live != "" {
		if !share {
			return nil, fmt.Errorf("data dir %s is in use by a running fhirstore (database at %s)", dataDir, live)
		}
		st, err := store.Open(ctx, live, opts)
		if err != nil {
			return nil, fmt.Errorf("embedded database of the running server: %w", err)
		}
		return &database{store: st}, nil
	}
	srv, err := embedded.Start(ctx, filepath.Join(dataDir, "db"), logger)
	if err != nil {
		return nil, err
	}
	opts.Exclusive = true         // this process started the engine; the others reach it through the server
	opts.SkipSearchIndexes = true // the engine scans; indexes would only slow writes
	st, err := store.Open(ctx, srv.URI(), opts)
	if err != nil {
		stopEmbedded(srv)
		return nil, fmt.Errorf("embedded database: %w", err)
	}
	d := &database{store: st, embedded: srv}
	if !share { // a server announces its database; one-shot commands do not
		token := ownerPrefix(dataDir) + rand.Text()
		if err := st.SetOwner(ctx, token); err != nil {
			d.close()
			return nil, err
		}
		if err := os.WriteFile(uriFile, []byte(srv.URI()+"\n"+token+"\n"), 0o600); err != nil {
			d.close()
			return nil, fmt.Errorf("data dir %s is not writable: %w", dataDir, err)
		}
		d.uriFile = uriFile
	}
	return d, nil
}

// liveEmbeddedURI returns the URI in uriFile when the database answering
// there is the one that wrote the file (its owner token matches).
func liveEmbeddedURI(ctx context.Context, uriFile string) string {
	b, err := os.ReadFile(uriFile)
	if err != nil {
		return ""
	}
	uri, token, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	token = strings.TrimSpace(token)
	if !strings.HasPrefix(uri, "mongodb://127.0.0.1:") || !strings.HasPrefix(token, ownerPrefix(filepath.Dir(uriFile))) {
		return "" // a file copied from another data dir names that dir's database
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := store.Open(ctx, uri, store.Options{ResourceTypes: fhirschema.IsResourceType, ServerSelectionTimeout: time.Second})
	if err != nil {
		return ""
	}
	defer func() { _ = st.Close(context.WithoutCancel(ctx)) }()
	if owner, err := st.Owner(ctx); err != nil || owner != token {
		return ""
	}
	return uri
}

// ownerPrefix starts the owner token of a data dir's embedded database: the
// directory's canonical path, so an announcement only matches its own dir.
func ownerPrefix(dataDir string) string {
	dir, err := filepath.Abs(dataDir)
	if err == nil {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
	}
	return dir + "|"
}

func (d *database) close() {
	ctx, cancel := context.WithTimeout(context.Background(), embedded.StopTimeout)
	defer cancel()
	_ = d.store.Close(ctx)
	if d.uriFile != "" {
		_ = os.Remove(d.uriFile)
	}
	if d.embedded != nil {
		_ = d.embedded.Stop(ctx)
	}
}

func stopEmbedded(srv *embedded.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), embedded.StopTimeout)
	defer cancel()
	_ = srv.Stop(ctx)
}

// redact hides the password of a connection string.
func redact(uri string) string {
	if at := strings.LastIndex(uri, "@"); at > 0 {
		if scheme := strings.Index(uri, "://"); scheme >= 0 && scheme < at {
			return uri[:scheme+3] + "***" + uri[at:]
		}
	}
	return uri
}
