package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// setting is one configuration knob: a flag with an environment variable.
type setting struct {
	flag, env, def, help string
}

// settings lists every flag the commands accept; the README's configuration
// table is checked against it.
var settings = []setting{
	{"addr", "FHIRSTORE_ADDR", "127.0.0.1:8080", "address to listen on"},
	{"data-dir", "FHIRSTORE_DATA_DIR", "./data", "directory of the embedded database and the dev signing key"},
	{"base-domain", "FHIRSTORE_BASE_DOMAIN", "localhost", "domain under which the first host label names the tenant"},
	{"default-tenant", "FHIRSTORE_DEFAULT_TENANT", "demo", "tenant for hosts without a tenant label (empty disables it)"},
	{"mongodb-uri", "FHIRSTORE_MONGODB_URI", "", "MongoDB connection string; empty runs the embedded database in the data dir"},
	{"max-body-bytes", "FHIRSTORE_MAX_BODY_BYTES", "16777216", "largest accepted request body in bytes"},
	{"max-bundle-entries", "FHIRSTORE_MAX_BUNDLE_ENTRIES", "10000", "most entries a batch or transaction Bundle may have"},
	{"txn-recovery-age", "FHIRSTORE_TXN_RECOVERY_AGE", "30s", "age at which an unfinished transaction of another process is recovered"},
	{"unknown-profiles", "FHIRSTORE_UNKNOWN_PROFILES", "warning", "a write claiming a profile the tenant does not know: warning (stored) or error (refused); per tenant: warning,acme=error"},
	{"required-profiles", "FHIRSTORE_REQUIRED_PROFILES", "", "profiles every resource of a type must claim, comma-separated Type=URL, for one tenant TENANT/Type=URL"},
	{"subscription-endpoints", "FHIRSTORE_SUBSCRIPTION_ENDPOINTS", "", "comma-separated URL prefixes that Subscription endpoints must start with; empty allows loopback addresses only"},
	{"subscription-attempts", "FHIRSTORE_SUBSCRIPTION_ATTEMPTS", "5", "delivery attempts of a notification before its Subscription is set to error"},
	{"subscription-timeout", "FHIRSTORE_SUBSCRIPTION_TIMEOUT", "10s", "how long a Subscription endpoint may take to answer a notification"},
	{"subscription-backoff", "FHIRSTORE_SUBSCRIPTION_BACKOFF", "1s", "wait before the first retry of a failed notification; it doubles with each further one (at most 5m)"},
	{"txn-recovery-attempts", "FHIRSTORE_TXN_RECOVERY_ATTEMPTS", "5", "failed attempts to apply a committed transaction before it is quarantined (retried after --txn-recovery-age, doubling)"},
	{"export-dir", "FHIRSTORE_EXPORT_DIR", "", "directory of bulk export files; empty: exports/ in the data dir (share it between instances on MongoDB)"},
	{"export-expiry", "FHIRSTORE_EXPORT_EXPIRY", "24h", "how long a finished bulk export and its files are kept"},
	{"export-max-jobs", "FHIRSTORE_EXPORT_MAX_JOBS", "2", "most bulk exports of one tenant unfinished at once (429 beyond)"},
	{"export-file-bytes", "FHIRSTORE_EXPORT_FILE_BYTES", "67108864", "size in bytes at which a bulk export file is closed and the next of its type begun"},
	{"export-workers", "FHIRSTORE_EXPORT_WORKERS", "2", "how many resource types of one bulk export are written at once"},
	{"sql-timeout", "FHIRSTORE_SQL_TIMEOUT", "30s", "how long a $sqlquery-run may take, materializing its views included, before it is cancelled"},
	{"sql-max-rows", "FHIRSTORE_SQL_MAX_ROWS", "100000", "most rows the answer of a $sqlquery-run may have (400 beyond)"},
	{"sql-max-bytes", "FHIRSTORE_SQL_MAX_BYTES", "1073741824", "most bytes the views a $sqlquery-run materializes may take on disk (400 beyond)"},
	{"sql-cache-bytes", "FHIRSTORE_SQL_CACHE_BYTES", "67108864", "memory of the page cache of a $sqlquery-run's private database; beyond it, sorts and temporary results go to temporary files"},
	{"db-cache-bytes", "FHIRSTORE_DB_CACHE_BYTES", "8388608", "page cache of each file of the embedded database: half for its writer, half shared by its readers"},
	{"db-mmap-bytes", "FHIRSTORE_DB_MMAP_BYTES", "0", "bytes of each file of the embedded database mapped into memory (faster reads, but every page read counts in resident memory); 0 maps none"},
	{"memory-limit-bytes", "FHIRSTORE_MEMORY_LIMIT_BYTES", "0", "soft limit of the Go heap in bytes: the garbage collector works harder near it; 0 leaves the runtime's (GOMEMLIMIT, or none)"},
	{"log-level", "FHIRSTORE_LOG_LEVEL", "info", "log level: debug, info, warn or error"},
	{"shutdown-timeout", "FHIRSTORE_SHUTDOWN_TIMEOUT", "20s", "how long a graceful shutdown waits for requests in flight, then for the audit trail to store its logged records (those left are stored after the next start)"},
	{"read-header-timeout", "FHIRSTORE_READ_HEADER_TIMEOUT", "10s", "how long a client may take to send a request's headers before the connection is cut"},
	{"read-timeout", "FHIRSTORE_READ_TIMEOUT", "2m", "how long a client may take to send a whole request, body included, before the connection is cut"},
	{"metrics", "FHIRSTORE_METRICS", "true", "serve Prometheus metrics at /metrics (no token needed); false turns them off"},
	{"audit", "FHIRSTORE_AUDIT", "true", "record every FHIR and REST request as an AuditEvent in its tenant's database; false turns the trail off"},
	{"audit-backlog", "FHIRSTORE_AUDIT_BACKLOG", "250000", "audit records that may wait, durably logged, to be stored as audit rows; past them requests slow down until the trail catches up"},
	{"audit-retention", "FHIRSTORE_AUDIT_RETENTION", "0", "how long the audit trail's records are kept (e.g. 8760h); older ones are purged at the start and every hour; 0 keeps them all"},
	{"dev", "FHIRSTORE_DEV", "auto", "accept HS256 dev tokens signed with the data dir's key: true, false, or auto (true unless an external issuer is configured)"},
	{"issuer", "FHIRSTORE_ISSUER", "", "iss of an external authorization server whose RS256/ES256 tokens are accepted"},
	{"issuer-jwks-url", "FHIRSTORE_ISSUER_JWKS_URL", "", "JWKS URL of --issuer's signing keys (fetched, cached, refetched for an unknown kid)"},
	{"issuer-jwks-file", "FHIRSTORE_ISSUER_JWKS_FILE", "", "JWKS file of --issuer's signing keys, instead of --issuer-jwks-url"},
	{"issuer-tenants", "FHIRSTORE_ISSUER_TENANTS", "", "comma-separated tenants --issuer is trusted for; * for all (its tokens must then name their tenant)"},
	{"audience", "FHIRSTORE_AUDIENCE", "", "comma-separated audiences accepted from --issuer besides the tenant's FHIR base URL"},
	{"issuer-config", "FHIRSTORE_ISSUER_CONFIG", "", "JSON file of trusted issuers, instead of or besides --issuer (see docs/authentication.md)"},
	{"token-issuer", "FHIRSTORE_TOKEN_ISSUER", "", "iss of the tokens of /oauth2/token; empty uses the request's scheme://host"},
	{"token-ttl", "FHIRSTORE_ACCESS_TOKEN_TTL", "5m", "lifetime of the tokens of /oauth2/token"},
	{"clock-skew", "FHIRSTORE_CLOCK_SKEW", "60s", "clock skew allowed on nbf and iat of tokens and on client assertions; a token's exp is exact"},
	{"tenant", "FHIRSTORE_TENANT", "demo", "tenant the token or client is for"},
	{"scope", "FHIRSTORE_TOKEN_SCOPE", "system/*.*", "space-separated scopes of the token or client"},
	{"ttl", "FHIRSTORE_TOKEN_TTL", "1h", "lifetime of the token"},
	{"name", "FHIRSTORE_CLIENT_NAME", "", "display name of the client"},
	{"jwks-file", "FHIRSTORE_CLIENT_JWKS_FILE", "", "JWKS file of the client's public keys: it authenticates with signed JWTs instead of a secret"},
	{"jwks-url", "FHIRSTORE_CLIENT_JWKS_URL", "", "JWKS URL of the client's public keys: it authenticates with signed JWTs instead of a secret"},
	{"url", "FHIRSTORE_URL", "http://localhost:8080/fhir/r4", "FHIR base URL of the server to load into or export from"},
	{"token", "FHIRSTORE_TOKEN", "", "bearer token for --url; empty signs a dev token for --tenant with the data dir's key"},
	{"workers", "FHIRSTORE_LOAD_WORKERS", "4", "Bundles sent at the same time"},
	{"batch-size", "FHIRSTORE_LOAD_BATCH_SIZE", "500", "ndjson lines per transaction Bundle"},
	{"list", "FHIRSTORE_RECOVER_LIST", "false", "list the unfinished transactions of every tenant (what recover does without --retry or --abandon)"},
	{"retry", "FHIRSTORE_RECOVER_RETRY", "", "apply the committed transaction with this id now, quarantined or not; all: every one recovery could not apply"},
	{"abandon", "FHIRSTORE_RECOVER_ABANDON", "", "undo the committed transaction with this id: its versions leave history, its resources are back at the versions before it"},
	{"out", "FHIRSTORE_EXPORT_OUT", "export", "directory the exported ndjson files are written to"},
	{"type", "FHIRSTORE_EXPORT_TYPE", "", "comma-separated resource types to export (_type); empty: every type the token may read"},
	{"since", "FHIRSTORE_EXPORT_SINCE", "", "export only resources written at or after this instant (_since), e.g. 2024-01-02T00:00:00Z"},
	{"type-filter", "FHIRSTORE_EXPORT_TYPE_FILTER", "", "space-separated search queries limiting their type (_typeFilter), e.g. 'Observation?status=final'"},
	{"level", "FHIRSTORE_EXPORT_LEVEL", "system", "what to export: system (every resource) or patient (the Patient compartments)"},
	{"group", "FHIRSTORE_EXPORT_GROUP", "", "export the Patient compartments of this Group's members instead (Group/ID/$export)"},
	{"examples", "FHIRSTORE_LOAD_EXAMPLES", "false", "install a package's examples (package/example/) too"},
	{"ig", "FHIRSTORE_VALIDATE_IG", "", "FHIR package (.tgz) whose profiles, extensions and value sets validation knows; repeat for several"},
	{"profile", "FHIRSTORE_VALIDATE_PROFILE", "", "canonical URL of a profile every file is validated against, besides the profiles it claims"},
	{"direct", "FHIRSTORE_LOAD_DIRECT", "false", "work on the database of --data-dir or --mongodb-uri in-process instead of through --url (load writes into it, view reads it)"},
	{"format", "FHIRSTORE_VIEW_FORMAT", "csv", "format of a view's rows: csv, ndjson, json or parquet"},
	{"resource", "FHIRSTORE_FHIRPATH_RESOURCE", "", "FHIR resource file (JSON or XML) the expression is evaluated against; empty: no input"},
	{"lenient", "FHIRSTORE_FHIRPATH_LENIENT", "false", "evaluate leniently: an element the model does not know and a function input of the wrong type give empty instead of an error"},
	{"from", "FHIRSTORE_RESTORE_FROM", "", "the backup to restore: a directory written by fhirstore backup"},
	{"full", "FHIRSTORE_CHECK_FULL", "false", "decode every stored document and version and check every index entry, not a sample of each table"},
	{"backup-dir", "FHIRSTORE_BACKUP_DIR", "", "directory of scheduled backups of the embedded database, one sub-directory each; empty: no scheduled backups"},
	{"backup-every", "FHIRSTORE_BACKUP_EVERY", "24h", "interval between scheduled backups (the first is due an interval after the newest one in --backup-dir)"},
	{"backup-keep", "FHIRSTORE_BACKUP_KEEP", "7", "how many scheduled backups to keep; older ones are removed after each new backup"},
}

// config holds parsed settings by flag name.
type config struct {
	fs   *flag.FlagSet
	vals map[string]*string
}

// newConfig declares the named settings on a flag set whose defaults come
// from the environment when set there.
func newConfig(cmd string, names ...string) *config {
	c := &config{fs: flag.NewFlagSet("fhirstore "+cmd, flag.ContinueOnError), vals: map[string]*string{}}
	c.fs.SetOutput(io.Discard)
	for _, name := range names {
		s := lookupSetting(name)
		def := s.def
		if v, ok := os.LookupEnv(s.env); ok {
			def = v
		}
		c.vals[name] = c.fs.String(name, def, fmt.Sprintf("%s (env %s)", s.help, s.env))
	}
	return c
}

func lookupSetting(name string) setting {
	for _, s := range settings {
		if s.flag == name {
			return s
		}
	}
	panic("unknown setting " + name)
}

// parse reads flags anywhere among args and returns the positional arguments.
func (c *config) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError(c.fs.Name()[len("fhirstore "):], err)
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// usage prints the synopsis, the flags and the examples of the command.
func (c *config) usage(w io.Writer, synopsis string) {
	fmt.Fprintf(w, "usage: %s\n\nflags:\n", synopsis)
	c.fs.SetOutput(w)
	c.fs.PrintDefaults()
	c.fs.SetOutput(io.Discard)
	printExamples(w, c.fs.Name()[len("fhirstore "):])
}

func (c *config) str(name string) string { return *c.vals[name] }

func (c *config) duration(name string) (time.Duration, error) {
	d, err := time.ParseDuration(c.str(name))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--%s: %q is not a positive duration such as 30s or 1h", name, c.str(name))
	}
	return d, nil
}

func (c *config) int64(name string) (int64, error) {
	n, err := strconv.ParseInt(c.str(name), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--%s: %q is not a positive integer", name, c.str(name))
	}
	return n, nil
}
