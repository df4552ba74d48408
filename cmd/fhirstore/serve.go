package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"fhirstore/fhirschema"
	"fhirstore/restadapter"
	"fhirstore/search"
	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/server/subscription"
	"fhirstore/server/wshost"
	"fhirstore/store"
	"fhirstore/store/schemacheck"
	"fhirstore/store/viewcheck"
)

// specTypes are the resource types of the service contract: their search
// indexes exist from the moment a tenant is created.
var specTypes = []string{"Patient", "QuestionnaireResponse", "Practitioner", "EpisodeOfCare", "DiagnosticReport", "CarePlan", "List", "Questionnaire"}

var serveFlags = []string{"addr", "data-dir", "base-domain", "default-tenant", "mongodb-uri", "max-body-bytes", "max-bundle-entries", "txn-recovery-age", "txn-recovery-attempts", "export-dir", "export-expiry", "export-max-jobs", "export-file-bytes", "export-workers", "sql-timeout", "sql-max-rows", "sql-max-bytes", "sql-cache-bytes", "db-cache-bytes", "db-mmap-bytes", "memory-limit-bytes", "unknown-profiles", "required-profiles", "subscription-endpoints", "subscription-attempts", "subscription-timeout", "subscription-backoff", "log-level", "shutdown-timeout", "read-header-timeout", "read-timeout", "metrics", "audit", "audit-backlog", "audit-retention", "backup-dir", "backup-every", "backup-keep", "dev", "issuer", "issuer-jwks-url", "issuer-jwks-file", "issuer-tenants", "audience", "issuer-config", "token-issuer", "token-ttl", "clock-skew"}

// serve runs the server until ctx is cancelled (SIGINT or SIGTERM).
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("serve", serveFlags...)
	if _, err := cfg.parse(boolFlagArgs(boolFlagArgs(boolFlagArgs(args, "metrics"), "dev"), "audit")); err != nil {
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
	auditBacklog, err := cfg.int64("audit-backlog")
	if err != nil {
		return err
	}
	auditRetention, err := time.ParseDuration(cfg.str("audit-retention"))
	if err != nil || auditRetention < 0 {
		return fmt.Errorf("--audit-retention: %q is not a duration such as 8760h, or 0 to keep every record", cfg.str("audit-retention"))
	}

	recoveryAge, err := cfg.duration("txn-recovery-age")
	if err != nil {
		return err
	}
	recoveryAttempts, err := cfg.int64("txn-recovery-attempts")
	if err != nil {
		return err
	}
	withMetrics, err := strconv.ParseBool(cfg.str("metrics"))
	if err != nil {
		return fmt.Errorf("--metrics: %q is not true or false", cfg.str("metrics"))
	}
	withAudit, err := strconv.ParseBool(cfg.str("audit"))
	if err != nil {
		return fmt.Errorf("--audit: %q is not true or false", cfg.str("audit"))
	}
	mem, err := applyMemory(cfg)
	if err != nil {
		return err
	}
	var metrics *server.Metrics
	if withMetrics {
		metrics = server.NewMetrics()
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

	backups, err := backupSchedule(cfg, logger)
	if err != nil {
		return err
	}
	dataDir := cfg.str("data-dir")
	key, err := auth.LoadOrCreateDevKey(dataDir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	verifier, err := newVerifier(cfg, key)
	if err != nil {
		return err
	}
	validator, err := fhirschema.NewValidator()
	if err != nil {
		return err
	}
	registry, err := search.NewRegistry(fhirschema.StoredTypes())
	if err != nil {
		return err
	}
	subCfg, err := subscriptionConfig(cfg, registry, logger)
	if err != nil {
		return err
	}
	policy, err := profilePolicy(cfg)
	if err != nil {
		return err
	}
	validate := viewcheck.Validator(subscription.TopicValidator(registry, subCfg.Endpoints, subCfg.Topics, schemacheck.Validator(validator, policy)))
	db, err := openDatabase(ctx, cfg.str("mongodb-uri"), dataDir, false, storeOptions{validate: validate, registry: registry, eagerIndexTypes: specTypes, monitor: metrics.CommandMonitor(),
		recoveryAttempts: int(recoveryAttempts), recoveryBackoff: recoveryAge, memory: mem}, logger)
	if err != nil {
		return err
	}
	defer db.close()
	if err := recoverTransactions(ctx, db, recoveryAge, logger); err != nil {
		return err
	}
	if n, err := db.store.Reindex(ctx); err != nil {
		return fmt.Errorf("update the search index: %w", err)
	} else if n > 0 {
		logger.Info("search index updated to the current format", zap.Int("resources", n), zap.Int("version", store.IndexVersion))
	}
	if n, err := db.store.ResumeSearchIndex(ctx); err != nil {
		return fmt.Errorf("resume the re-indexing of search parameters: %w", err)
	} else if n > 0 {
		logger.Info("search parameters: re-indexing resumed in the background", zap.Int("tenants", n))
	}
	startBackups(ctx, backups, metrics, logger)
	subCfg.Store, subCfg.Exclusive = db.store, db.owned
	subs, err := subscription.Start(ctx, subCfg)
	if err != nil {
		return err
	}
	defer subs.Close()
	if metrics != nil {
		metrics.Registry().MustRegister(subs.Collector())
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
	}, Store: db.store, Registry: registry, Logger: logger, Allows: server.Allows})
	srvCfg := server.Config{BaseDomain: cfg.str("base-domain"), DefaultTenant: cfg.str("default-tenant"), MaxBodyBytes: maxBody,
		MaxBundleEntries: int(maxEntries), Version: version, REST: rest, Registry: registry, Metrics: metrics, Audit: withAudit, AuditBacklog: int(auditBacklog), AuditSpoolDir: dataDir, AuditRetention: auditRetention,
		SubscriptionChannels: []string{subscription.RestHook, subscription.Websocket}, Topics: subs}
	if verifier.Local, err = localIssuer(ctx, cfg, db.store); err != nil {
		return err
	}
	exports, err := startExports(ctx, cfg, db, registry, logger)
	if err != nil {
		return err
	}
	defer exports.Close()
	srvCfg.Export = exports
	if srvCfg.SQL, err = sqlLimits(cfg); err != nil {
		return err
	}
	h := server.New(srvCfg, db.store, verifier, logger)
	httpSrv := &http.Server{
		Handler:           newTrimmer(h),
		ReadHeaderTimeout: readHeaderTimeout, // slow clients must not hold connections open
		ReadTimeout:       readTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          zap.NewStdLog(logger.Named("http")),
	}
	errc := make(chan error, 1)
	// Websocket clients that send two Host headers reach the websocket channel.
	go func() { errc <- httpSrv.Serve(wshost.Listener(ln, server.SubscriptionSocketPath)) }()
	go sweepTransactions(ctx, db.store, recoveryAge, logger)
	lifecycle.Info("listening", zap.String("addr", ln.Addr().String()), zap.String("engine", engineOf(db)))
	if err := printBanner(stdout, ln.Addr(), srvCfg, verifier.Dev); err != nil {
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
	// The audit records of the requests just finished: a deadline of their own.
	actx, cancelAudit := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancelAudit()
	if err := h.Close(actx); err != nil {
		logger.Error("audit trail", zap.Error(err))
	}
	lifecycle.Info("stopped")
	return nil
}

// printBanner tells a new user where the server is and how to call it.
func printBanner(w io.Writer, addr net.Addr, cfg server.Config, dev *auth.HS256) error {
	_, port, _ := net.SplitHostPort(addr.String())
	if cfg.DefaultTenant == "" {
		_, err := fmt.Fprintf(w, "fhirstore is listening on %s (no default tenant; create one with: fhirstore tenant create NAME)\n", addr)
		return err
	}
	if dev == nil { // tokens come from the configured issuers or /oauth2/token
		origin := fmt.Sprintf("http://%s.%s:%s", cfg.DefaultTenant, cfg.BaseDomain, port)
		_, err := fmt.Fprintf(w, `fhirstore is running (tokens from the configured issuers or the token endpoint).

  FHIR base URL:   %s/fhir/r4
  Token endpoint:  %s/oauth2/token
  Web console:     %s/console/

  Get a token (create a client first with: fhirstore client create --tenant %s --scope 'system/*.read'):
  curl -u CLIENT_ID:CLIENT_SECRET -d grant_type=client_credentials %s/oauth2/token

`, origin, origin, origin, cfg.DefaultTenant, origin)
		return err
	}
	tok, err := auth.SignHS256(dev.Key, auth.TokenRequest{Tenant: cfg.DefaultTenant, Scope: "system/*.*", TTL: 24 * time.Hour})
	if err != nil {
		return err
	}
	origin := fmt.Sprintf("http://%s.%s:%s", cfg.DefaultTenant, cfg.BaseDomain, port)
	base := origin + "/fhir/r4"
	_, err = fmt.Fprintf(w, `fhirstore is running.

  FHIR base URL:  %s
  Web console:    %s/console/ (sign in with the token below)
  Bearer token (tenant %s, valid 24h; more with: fhirstore token --tenant %s):

%s

  Try it:
  curl -H "Authorization: Bearer %s" -H "Content-Type: application/fhir+json" -d '{"resourceType":"Patient","name":[{"family":"Demo"}]}' %s/Patient

`, base, origin, cfg.DefaultTenant, cfg.DefaultTenant, tok, tok, base)
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
	if db.owned {
		age = 0
	}
	r, err := db.store.Recover(ctx, age)
	if err != nil {
		return fmt.Errorf("recover unfinished transactions: %w", err)
	}
	if r.RolledForward+r.RolledBack > 0 {
		logger.Info("recovered unfinished transactions", zap.Int("rolled_forward", r.RolledForward), zap.Int("rolled_back", r.RolledBack))
	}
	if retrying, quarantined := db.store.HeldTransactions(); retrying+quarantined > 0 {
		// The server starts all the same: only their resources answer 5xx.
		logger.Error("committed transactions could not be applied; see fhirstore recover --list",
			zap.Int("retrying", retrying), zap.Int("quarantined", quarantined))
	}
	return nil
}

// sweepTransactions recovers transactions abandoned by other processes (or
// by database errors) every age until ctx ends; committed ones the
// database refuses are retried after their backoff, then quarantined.
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

// newVerifier builds the Authenticator from the auth settings: trusted
// issuers from --issuer and --issuer-config, and the dev key in dev mode.
func newVerifier(cfg *config, devKey []byte) (*auth.Verifier, error) {
	skew, err := cfg.duration("clock-skew")
	if err != nil {
		return nil, err
	}
	if _, err := cfg.duration("token-ttl"); err != nil { // used once the database is open; checked before
		return nil, err
	}
	var entries []auth.IssuerEntry
	if path := cfg.str("issuer-config"); path != "" {
		if entries, err = auth.LoadIssuerConfig(path); err != nil {
			return nil, fmt.Errorf("--issuer-config: %w", err)
		}
	}
	if iss := cfg.str("issuer"); iss != "" {
		entries = append(entries, auth.IssuerEntry{Issuer: iss, JWKSURL: cfg.str("issuer-jwks-url"), JWKSFile: cfg.str("issuer-jwks-file"),
			Tenants: splitList(cfg.str("issuer-tenants")), Audiences: splitList(cfg.str("audience"))})
	} else {
		for _, name := range []string{"issuer-jwks-url", "issuer-jwks-file", "issuer-tenants", "audience"} {
			if cfg.str(name) != "" {
				return nil, fmt.Errorf("--%s needs --issuer", name)
			}
		}
	}
	v := &auth.Verifier{Leeway: skew}
	for _, e := range entries {
		for _, t := range e.Tenants {
			if t == auth.AnyTenant {
				continue
			}
			if err := store.ValidateTenantName(t); err != nil {
				return nil, fmt.Errorf("issuer %s: %w", e.Issuer, err)
			}
		}
		t, err := e.Trusted()
		if err != nil {
			return nil, err
		}
		v.Issuers = append(v.Issuers, t)
	}
	var dev bool
	switch d := cfg.str("dev"); d {
	case "auto":
		dev = len(v.Issuers) == 0
	default:
		if dev, err = strconv.ParseBool(d); err != nil {
			return nil, fmt.Errorf("--dev: %q is not true, false or auto", d)
		}
	}
	if dev {
		v.Dev = &auth.HS256{Key: devKey, Issuer: auth.DevIssuer, Leeway: skew}
	}
	return v, nil
}

// localIssuer is the server's own token endpoint, signing with the key
// all instances on the database share.
func localIssuer(ctx context.Context, cfg *config, st *store.Store) (*auth.LocalIssuer, error) {
	ttl, err := cfg.duration("token-ttl")
	if err != nil {
		return nil, err
	}
	key, err := st.SigningKey(ctx, auth.GenerateLocalKey)
	if err != nil {
		return nil, fmt.Errorf("token signing key: %w", err)
	}
	return auth.NewLocalIssuer(key, cfg.str("token-issuer"), ttl)
}

// splitList splits a comma- or space-separated list.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// subscriptionConfig reads the subscription settings.
func subscriptionConfig(cfg *config, registry *search.Registry, logger *zap.Logger) (subscription.Config, error) {
	allow, err := subscription.ParseAllowList(cfg.str("subscription-endpoints"))
	if err != nil {
		return subscription.Config{}, err
	}
	attempts, err := cfg.int64("subscription-attempts")
	if err != nil {
		return subscription.Config{}, err
	}
	if attempts < 1 {
		return subscription.Config{}, fmt.Errorf("--subscription-attempts: %d is not a positive number", attempts)
	}
	timeout, err := cfg.duration("subscription-timeout")
	if err != nil {
		return subscription.Config{}, err
	}
	backoff, err := cfg.duration("subscription-backoff")
	if err != nil {
		return subscription.Config{}, err
	}
	topics, err := subscription.NewTopics(registry)
	if err != nil {
		return subscription.Config{}, err
	}
	return subscription.Config{Registry: registry, Endpoints: allow, Attempts: int(attempts), Timeout: timeout, Backoff: backoff,
		Logger: logger.Named("subscription"), Topics: topics}, nil
}
