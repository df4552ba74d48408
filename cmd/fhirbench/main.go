// Command fhirbench puts a FHIR server under a mixed load for a bounded time
// and reports what it saw: throughput, p50/p99 latency per operation, errors
// by status and, afterwards, whether every version it wrote is in history
// exactly once.
//
//	fhirbench --data-dir ./data --clients 8 --duration 30s
//	fhirbench --url http://127.0.0.1:18080/fhir/r4 --token "$TOKEN" --json
//
// It exits with status 1 when a request failed or the check found a lost or
// duplicated version, so scripts can run it as a test.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"fhirstore/server/auth"
	"fhirstore/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fhirbench:", err)
		os.Exit(1)
	}
}

// options are the settings of one run.
type options struct {
	base        string
	token       string
	tenant      string
	dataDir     string
	clients     int
	duration    time.Duration
	seed        int
	mix         mix
	json        bool
	check       bool
	allowRemote bool
	timeout     time.Duration
	// Sampling of the server's /metrics; sampleEvery 0 turns it off.
	metricsURL         string
	sampleEvery        time.Duration
	warmup             time.Duration
	maxRSSGrowth       float64 // percent; 0: no check
	maxGoroutineGrowth int     // -1: no check
}

const synopsis = `fhirbench [flags]

Runs a mixed workload against a FHIR server for --duration with --clients
concurrent clients and prints throughput, p50/p99 latency per operation and
the requests by status. It first creates --seed Patients; then each client
picks operations by the --mix weights:

  read         GET Patient/{id} of a seeded Patient
  search       GET Patient?family=...&_count=10, or an Observation search by subject
  create       POST Patient
  update       GET Patient/{id} of a seeded Patient, then PUT it with If-Match: W/"n"
               (412 is an expected outcome under contention, counted apart)
  transaction  POST a transaction Bundle: a Patient and two Observations
               referring to it by urn:uuid
  crud         one cycle of the shape of Health Samurai's benchmark "crud":
               POST a Patient, Location, Organization, Practitioner,
               Encounter, Observation, MedicationRequest, Claim and
               ExplanationOfBenefit referring to each other, GET each, PUT
               each (If-Match), DELETE each; its requests are also reported
               as crud.create, crud.read, crud.update and crud.delete

--mix crud runs crud cycles only (crud=1).

Afterwards --check reads the history of every resource the run created or
updated: versions must be 1..n without gaps or duplicates, include every
version the server acknowledged, and the current version must be n.

During the workload it samples the server's /metrics every --sample-every:
resident memory, heap in use and goroutines. It reports each at the start,
after --warmup, at the end and at most, and the growth from the warm-up to
the end; a server that answers 404 there is not sampled. It also reports
the audit trail's backlog (records not yet stored) at the start and at the
end of the workload, and says when the run ended with work still owed. The exit status is
1 when a request failed, the check found a problem, or RSS or goroutines
grew past --max-rss-growth or --max-goroutine-growth. Only loopback URLs are
accepted unless --allow-remote is given.`

// parseOptions reads the command line.
func parseOptions(args []string, stdout io.Writer) (*options, error) {
	fs := flag.NewFlagSet("fhirbench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &options{}
	var mixText string
	fs.StringVar(&o.base, "url", "http://localhost:8080/fhir/r4", "FHIR base URL of the server")
	fs.StringVar(&o.token, "token", "", "bearer token; empty signs a dev token with the key of --data-dir")
	fs.StringVar(&o.tenant, "tenant", "demo", "tenant of the dev token signed when --token is empty")
	fs.StringVar(&o.dataDir, "data-dir", "", "the server's data dir, whose dev signing key signs a token when --token is empty")
	fs.IntVar(&o.clients, "clients", 8, "concurrent clients")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "how long the workload runs")
	fs.IntVar(&o.seed, "seed", 50, "Patients created before the workload starts")
	fs.StringVar(&mixText, "mix", defaultMix, "operation weights")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.BoolVar(&o.check, "check", true, "check the history of every resource written")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "allow a --url that is not on loopback")
	fs.DurationVar(&o.timeout, "request-timeout", time.Minute, "limit of one HTTP request")
	fs.StringVar(&o.metricsURL, "metrics-url", "", "the server's Prometheus metrics; empty is /metrics on the host of --url")
	fs.DurationVar(&o.sampleEvery, "sample-every", 10*time.Second, "how often to sample the server's memory and goroutines; 0 turns sampling off")
	fs.DurationVar(&o.warmup, "warmup", 0, "time after which memory and goroutine growth is measured (default 1m or 20% of --duration, whichever is smaller)")
	fs.Float64Var(&o.maxRSSGrowth, "max-rss-growth", 0, "fail when RSS grows more than this many percent after the warm-up; 0 is no check")
	fs.IntVar(&o.maxGoroutineGrowth, "max-goroutine-growth", -1, "fail when goroutines grow by more than this many after the warm-up; -1 is no check")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "usage: %s\n\nflags:\n", synopsis)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.mix, err = parseMix(mixText); err != nil {
		return nil, fmt.Errorf("--mix: %w", err)
	}
	switch {
	case o.clients < 1:
		return nil, fmt.Errorf("--clients: %d is not a positive number", o.clients)
	case o.duration <= 0:
		return nil, fmt.Errorf("--duration: %s is not positive", o.duration)
	case o.seed < 1:
		return nil, fmt.Errorf("--seed: %d Patients; reads and updates need at least 1", o.seed)
	case o.timeout <= 0:
		return nil, fmt.Errorf("--request-timeout: %s is not positive", o.timeout)
	case o.sampleEvery < 0:
		return nil, fmt.Errorf("--sample-every: %s is negative", o.sampleEvery)
	case o.maxRSSGrowth < 0:
		return nil, fmt.Errorf("--max-rss-growth: %g%% is negative", o.maxRSSGrowth)
	case o.maxGoroutineGrowth < -1:
		return nil, fmt.Errorf("--max-goroutine-growth: %d; want a count ≥ 0, or -1 for no check", o.maxGoroutineGrowth)
	case o.sampleEvery == 0 && (o.maxRSSGrowth > 0 || o.maxGoroutineGrowth >= 0):
		return nil, errors.New("--max-rss-growth and --max-goroutine-growth need sampling: --sample-every must not be 0")
	}
	warmupGiven := false
	fs.Visit(func(f *flag.Flag) { warmupGiven = warmupGiven || f.Name == "warmup" })
	if !warmupGiven {
		o.warmup = min(time.Minute, o.duration/5)
	}
	if o.warmup < 0 || o.warmup >= o.duration {
		return nil, fmt.Errorf("--warmup: %s is not between 0 and --duration %s", o.warmup, o.duration)
	}
	o.base = strings.TrimRight(o.base, "/")
	u, err := url.Parse(o.base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url: %q is not an http(s) FHIR base URL such as http://localhost:8080/fhir/r4", o.base)
	}
	if !o.allowRemote && !loopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("--url: %s is not a loopback host (localhost, 127.0.0.1, ::1); pass --allow-remote to load another machine", u.Hostname())
	}
	if o.metricsURL == "" {
		o.metricsURL = u.Scheme + "://" + u.Host + "/metrics"
	} else if m, err := url.Parse(o.metricsURL); err != nil || (m.Scheme != "http" && m.Scheme != "https") || m.Host == "" {
		return nil, fmt.Errorf("--metrics-url: %q is not an http(s) URL such as http://localhost:8080/metrics", o.metricsURL)
	} else if !o.allowRemote && !loopbackHost(m.Hostname()) {
		return nil, fmt.Errorf("--metrics-url: %s is not a loopback host; pass --allow-remote to sample another machine", m.Hostname())
	}
	if o.token == "" {
		if o.token, err = devToken(o.dataDir, o.tenant); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// devTokenTTL covers the longest sensible run and its check.
const devTokenTTL = 24 * time.Hour

// devToken signs a token for tenant with the dev key of a server's data dir.
// It never creates a key: a new key would sign tokens no server accepts.
func devToken(dataDir, tenant string) (string, error) {
	if dataDir == "" {
		return "", errors.New("no --token given: pass --token, or --data-dir of the server to sign a dev token with its key")
	}
	if err := store.ValidateTenantName(tenant); err != nil {
		return "", fmt.Errorf("--tenant: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, auth.DevKeyFile)); err != nil {
		return "", fmt.Errorf("no --token given and no dev signing key %s in data dir %s: pass --token or the server's --data-dir", auth.DevKeyFile, dataDir)
	}
	key, err := auth.LoadOrCreateDevKey(dataDir)
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	return auth.SignHS256(key, auth.TokenRequest{Tenant: tenant, Scope: "system/*.*", Subject: "fhirbench", TTL: devTokenTTL})
}

// loopbackHost reports whether a URL host names this machine's loopback.
func loopbackHost(host string) bool {
	h := strings.ToLower(host)
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// errFailed is returned after the report when the run saw errors or the
// check found a problem.
var errFailed = errors.New("run failed")

// run executes one command line; stdout carries the report only.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stdout)
	if err != nil {
		return err
	}
	b := newBench(o, stderr)
	defer b.close()
	if err := b.ping(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "fhirbench: seeding %d Patients at %s\n", o.seed, o.base)
	if err := b.seedPatients(ctx); err != nil {
		return err
	}
	backlog := &backlogReport{}
	b.measureBacklog(ctx, backlog, true)
	fmt.Fprintf(stderr, "fhirbench: %d clients for %s (mix %s)\n", o.clients, o.duration, o.mix)
	rep := b.runWorkload(ctx, b.newSampler(ctx))
	b.measureBacklog(ctx, backlog, false)
	rep.AuditBacklog = backlog
	if backlog.Owed {
		fmt.Fprintf(stderr, "fhirbench: the run ended with work still owed: %.0f audit records not yet stored\n", *backlog.End)
	}
	switch {
	case ctx.Err() != nil:
		rep.Interrupted = true
	case o.check:
		fmt.Fprintf(stderr, "fhirbench: checking the history of %d resources\n", b.track.len())
		c := b.check(ctx)
		rep.Check = &c
	}
	if o.json {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeText(stdout)
	}
	if err != nil {
		return err
	}
	if why := rep.failures(); why != "" {
		return fmt.Errorf("%w: %s", errFailed, why)
	}
	return nil
}
