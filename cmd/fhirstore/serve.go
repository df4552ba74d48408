package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"fhirstore/fhirschema"
	"fhirstore/restadapter"
	"fhirstore/search"
	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// specTypes are the resource types of the service contract: their search
// indexes exist from the moment a tenant is created.
var specTypes = []string{"Patient", "QuestionnaireResponse", "Practitioner", "EpisodeOfCare", "DiagnosticReport", "CarePlan", "List", "Questionnaire"}

var serveFlags = []string{"addr", "data-dir", "base-domain", "default-tenant", "mongodb-uri", "max-body-bytes", "max-bundle-entries", "txn-recovery-age", "log-level", "shutdown-timeout", "read-header-timeout", "read-timeout"}

// serve runs the server until ctx is cancelled (SIGINT or SIGTERM).
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("serve", serveFlags...)
	if _, err := cfg.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, "fhirstore serve [flags]")
		}
		return err
	}
	maxBody, err := cfg.int64("max-body-bytes")
	if err != nil {
		return err
	}
	shutdownTimeout, err := cfg.duration("shutdown-timeout")
	if err != nil {
		return err
	}
	readHeaderTimeout, err := cfg.duration("read-header-timeout")
	if err != nil {
		return err
	}
	readTimeout, err := cfg.duration("read-timeout")
	if err != nil {
		return err
	}
	maxEntries, err := cfg.int64("max-bundle-entries")
	if err != nil {
		return err
	}
	recoveryAge, err := cfg.duration("txn-recovery-age")
	if err != nil {
		return err
	}
	if t := cfg.str("default-tenant"); t != "" {
		if err := store.ValidateTenantName(t); err != nil {
			return fmt.Errorf("--default-tenant: %w", err)
		}
	}
	logger, err := newLogger(cfg.str("log-level"), stderr)
	if err != nil {
		return err
	}
	// Scripts wait for the lifecycle lines, so they are written at any level.
	lifecycle, _ := newLogger("info", stderr)
	defer func() { _ = logger.Sync() }()

	dataDir := cfg.str("data-dir")
	key, err := auth.LoadOrCreateDevKey(dataDir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	validator, err := fhirschema.NewValidator()
	if err != nil {
		return err
	}
	registry, err := search.NewRegistry(fhirschema.ResourceTypes())
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, cfg.str("mongodb-uri"), dataDir, false, storeOptions{validate: server.StoreValidator(validator), registry: registry, eagerIndexTypes: specTypes}, logger)
	if err != nil {
		return err
	}
	defer db.close()
	if err := recoverTransactions(ctx, db, recoveryAge, logger); err != nil {
		return err
	}
	if t := cfg.str("default-tenant"); t != "" {
		if err := db.store.EnsureTenant(ctx, t); err != nil {
			return fmt.Errorf("create default tenant %s: %w", t, err)
		}
	}
	ln, err := net.Listen("tcp", cfg.str("addr"))
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.str("addr"), err)
	}
	rest := restadapter.New(restadapter.Config{TenantOf: func(ctx context.Context) (string, bool) {
		c, ok := server.CallerFrom(ctx)
		if !ok {
			return "", false
		}
		return c.Tenant, true
	}, Store: db.store, Registry: registry, Logger: logger})
	srvCfg := server.Config{BaseDomain: cfg.str("base-domain"), DefaultTenant: cfg.str("default-tenant"), MaxBodyBytes: maxBody,
		MaxBundleEntries: int(maxEntries), Version: version, REST: rest, Registry: registry}
	h := server.New(srvCfg, db.store, auth.HS256{Key: key, Issuer: auth.DevIssuer, Leeway: time.Minute}, logger)
	httpSrv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout, // slow clients must not hold connections open
		ReadTimeout:       readTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          zap.NewStdLog(logger.Named("http")),
	}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	go sweepTransactions(ctx, db.store, recoveryAge, logger)
	lifecycle.Info("listening", zap.String("addr", ln.Addr().String()), zap.Bool("embedded_db", db.embedded != nil))
	if err := printBanner(stdout, ln.Addr(), srvCfg, key); err != nil {
		logger.Warn("print start-up banner", zap.Error(err))
	}

	select {
	case err := <-errc:
		return fmt.Errorf("serve HTTP: %w", err)
	case <-ctx.Done():
	}
	lifecycle.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil {
		logger.Warn("graceful shutdown cut short", zap.Error(err))
	}
	lifecycle.Info("stopped")
	return nil
}

// printBanner tells a new user where the server is and how to call it.
func printBanner(w io.Writer, addr net.Addr, cfg server.Config, key []byte) error {
	_, port, _ := net.SplitHostPort(addr.String())
	if cfg.DefaultTenant == "" {
		_, err := fmt.Fprintf(w, "fhirstore is listening on %s (no default tenant; create one with: fhirstore tenant create NAME)\n", addr)
		return err
	}
	tok, err := auth.SignHS256(key, auth.TokenRequest{Tenant: cfg.DefaultTenant, Scope: "system/*.*", TTL: 24 * time.Hour})
	if err != nil {
		return err
	}
	base := fmt.Sprintf("http://%s.%s:%s/fhir/r4", cfg.DefaultTenant, cfg.BaseDomain, port)
	_, err = fmt.Fprintf(w, `fhirstore is running.

  FHIR base URL:  %s
  Bearer token (tenant %s, valid 24h; more with: fhirstore token --tenant %s):

%s

  Try it:
  curl -H "Authorization: Bearer %s" -H "Content-Type: application/fhir+json" -d '{"resourceType":"Patient","name":[{"family":"Demo"}]}' %s/Patient

`, base, cfg.DefaultTenant, cfg.DefaultTenant, tok, tok, base)
	return err
}

// newLogger builds the structured JSON logger.
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey, enc.EncodeTime = "time", zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), lvl)
	return zap.New(core, zap.ErrorOutput(zapcore.AddSync(w))), nil
}

// recoverTransactions finishes transactions a crash interrupted. The
// embedded database belongs to this process alone, so every unfinished
// transaction in it is an orphan; on a shared MongoDB only those older than
// age are, the others may belong to a live server.
func recoverTransactions(ctx context.Context, db *database, age time.Duration, logger *zap.Logger) error {
	if db.embedded != nil {
		age = 0
	}
	r, err := db.store.Recover(ctx, age)
	if err != nil {
		return fmt.Errorf("recover unfinished transactions: %w", err)
	}
	if r.RolledForward+r.RolledBack > 0 {
		logger.Info("recovered unfinished transactions", zap.Int("rolled_forward", r.RolledForward), zap.Int("rolled_back", r.RolledBack))
	}
	return nil
}

// sweepTransactions recovers transactions abandoned by other processes (or
// by database errors) every age until ctx ends.
func sweepTransactions(ctx context.Context, st *store.Store, age time.Duration, logger *zap.Logger) {
	tick := time.NewTicker(age)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := st.Recover(ctx, age); err != nil && ctx.Err() == nil {
				logger.Warn("recover unfinished transactions", zap.Error(err))
			}
		}
	}
}
