// Package ferretdb runs FerretDB v1 in-process on its
// SQLite backend, speaking the MongoDB wire protocol on a loopback port: the
// database of data dirs made before the indexed engine (read by "fhirstore
// migrate"), and the wire-compatible stand-in on which the tests exercise the
// mongodb engine.
package ferretdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"

	"fhirstore/store/engine"
)

// Limits are the limits of the embedded FerretDB: MongoDB's 16 MiB
// document limit, and no index key limit (SQLite keeps long keys in
// overflow pages; FerretDB's key limits come from PostgreSQL). Pass them
// as mongodb.Options.Limits: FerretDB does not say which backend it runs.
var Limits = engine.Limits{MaxDocumentBytes: 16 * engine.MiB, Source: "FerretDB on SQLite"}

// Server is a running embedded database.
type Server struct {
	uri    string
	cancel context.CancelFunc
	done   chan struct{}
}

// Start opens (or creates) the database files under dir and serves them on
// 127.0.0.1 at a free port until Stop is called. FerretDB's own log is routed
// through logger at error level only; at lower levels it dumps every reply.
func Start(ctx context.Context, dir string, logger *zap.Logger) (*Server, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded database dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("create embedded database dir: %w", err)
	}
	if err := checkWritable(abs); err != nil {
		return nil, err
	}
	dropped, err := Repair(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("embedded database: %w", err)
	}
	if len(dropped) > 0 && logger != nil {
		logger.Warn("embedded database: dropped what a crash left half-created", zap.Strings("statements", dropped))
	}
	core := zapcore.NewNopCore()
	if logger != nil {
		core = logger.Core()
	}
	handler := zapslog.NewHandler(levelFilter{Core: core, min: zapcore.ErrorLevel}, zapslog.WithName("ferretdb"))
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Logger:    slog.New(handler),
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/?_pragma=" + url.QueryEscape(pageCachePragma),
	})
	if err != nil {
		return nil, fmt.Errorf("start embedded database: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{uri: f.MongoDBURI(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = f.Run(runCtx)
	}()
	return s, nil
}

// URI is the MongoDB connection string of the running database.
func (s *Server) URI() string { return s.uri }

// Stop shuts the database down and waits (bounded by ctx) until its files are closed.
func (s *Server) Stop(ctx context.Context) error {
	s.cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop embedded database: %w", ctx.Err())
	}
}

func checkWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("data dir %s is not writable: %w", dir, errors.Unwrap(err))
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// levelFilter drops entries below min so FerretDB's debug chatter never reaches the log.
type levelFilter struct {
	zapcore.Core
	min zapcore.Level
}

func (l levelFilter) Enabled(lvl zapcore.Level) bool { return lvl >= l.min && l.Core.Enabled(lvl) }

func (l levelFilter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !l.Enabled(e.Level) {
		return ce
	}
	return l.Core.Check(e, ce)
}

func (l levelFilter) With(fields []zapcore.Field) zapcore.Core {
	return levelFilter{Core: l.Core.With(fields), min: l.min}
}

// pageCachePragma sets the page cache of each SQLite connection. FerretDB
// keeps up to 100 connections per database (one per tenant) open for good,
// and at SQLite's default of 2 MiB each the caches filled for minutes: in a
// 5-minute soak they took the process's memory outside the Go heap from 2
// to 29 MiB, and resident memory 20% past its size after warm-up. At
// 256 KiB they stopped at 12 MiB (7%), at the same throughput; the
// operating system caches the files anyway (docs/soak.md).
const pageCachePragma = "cache_size(-256)"

// StopTimeout bounds how long callers should wait for Stop on shutdown.
const StopTimeout = 10 * time.Second
