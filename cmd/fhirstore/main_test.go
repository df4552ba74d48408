package main

// Contract tests of the command line: scripts rely on the sub-commands, their
// flags and environment variables, the "listening" log line, the start-up
// banner, the bare token on stdout and one-line errors with a non-zero exit.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and readers in other goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// listeningAddr returns the addr field of the "listening" log line, if any.
func listeningAddr(log string) string {
	for _, line := range strings.Split(log, "\n") {
		var entry struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "listening" {
			return entry.Addr
		}
	}
	return ""
}

// testServer is a `fhirstore serve` running in-process (startServer) or in
// a process of its own (startServerProcess).
type testServer struct {
	addr, port     string
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan error
	stopOnce       sync.Once
	stopErr        error
}

// startServer runs `fhirstore args...` in-process and waits until it logs
// "listening" and has printed its banner. It is stopped when the test ends.
func startServer(t *testing.T, args ...string) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &testServer{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, args, s.stdout, s.stderr) }()
	s.await(t, args)
	return s
}

// await registers the server's stop at the end of the test and waits
// until it logs "listening" and has printed its banner.
func (s *testServer) await(t *testing.T, args []string) {
	t.Helper()
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("serve %q ended with %v", args, err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s.addr == "" {
			s.addr = listeningAddr(s.stderr.String())
		}
		if out := s.stdout.String(); s.addr != "" && (strings.Contains(out, "curl ") || strings.Contains(out, "no default tenant")) {
			break
		}
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve %q ended before listening: %v\nstderr:\n%s", args, err, s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve %q: no listening line and banner within 30s\nstdout:\n%s\nstderr:\n%s", args, s.stdout, s.stderr)
		}
	}
	if s.addr == "" {
		s.addr = listeningAddr(s.stderr.String())
	}
	var err error
	if _, s.port, err = net.SplitHostPort(s.addr); err != nil {
		t.Fatalf("listening addr %q: %v", s.addr, err)
	}
	if n := strings.Count(s.stderr.String(), `"listening"`); n != 1 {
		t.Fatalf("%d listening lines, want 1:\n%s", n, s.stderr)
	}
}

// stop cancels the server's context (as SIGTERM does) and waits for run to return.
func (s *testServer) stop() error {
	s.stopOnce.Do(func() {
		s.cancel()
		select {
		case s.stopErr = <-s.done:
		case <-time.After(40 * time.Second):
			s.stopErr = errors.New("run did not return within 40s of cancellation")
		}
	})
	return s.stopErr
}

// url is an address on the server (always dialled at its listening address).
func (s *testServer) url(path string) string { return "http://" + s.addr + path }

// result is a finished HTTP exchange.
type result struct {
	status int
	header http.Header
	body   []byte
}

func (r result) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not JSON (%d): %v\n%s", r.status, err, r.body)
	}
	return m
}

var httpClient = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// call sends one request to url with the given Host header and bearer token.
func call(t *testing.T, method, url, host, token, body string) result {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, url, host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// createPatient posts a Patient with the given family name and returns its id.
func createPatient(t *testing.T, s *testServer, host, token, family string) string {
	t.Helper()
	r := call(t, http.MethodPost, s.url("/fhir/r4/Patient"), host, token, `{"resourceType":"Patient","name":[{"family":"`+family+`"}]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create Patient via Host %s: %d %s", host, r.status, r.body)
	}
	id, _ := r.json(t)["id"].(string)
	if id == "" {
		t.Fatalf("created Patient has no id: %s", r.body)
	}
	if loc := r.header.Get("Location"); !strings.Contains(loc, "/fhir/r4/Patient/"+id+"/_history/1") {
		t.Fatalf("Location %q", loc)
	}
	return id
}

// readFamily reads a Patient and returns its family name, failing unless 200.
func readFamily(t *testing.T, s *testServer, host, token, id string) string {
	t.Helper()
	r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/"+id), host, token, "")
	if r.status != http.StatusOK {
		t.Fatalf("read Patient/%s via Host %s: %d %s", id, host, r.status, r.body)
	}
	names, _ := r.json(t)["name"].([]any)
	if len(names) == 0 {
		t.Fatalf("Patient without name: %s", r.body)
	}
	family, _ := names[0].(map[string]any)["family"].(string)
	return family
}

// runCmd runs one command line in-process and returns its stdout and stderr.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err = run(ctx, args, &out, &errb)
	return out.String(), errb.String(), err
}

// mustRun runs a command line that must succeed and returns its stdout.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := runCmd(t, args...)
	if err != nil {
		t.Fatalf("fhirstore %q: %v", args, err)
	}
	return out
}

// wantFail runs a command line that must fail with a one-line message
// containing want (when not empty).
func wantFail(t *testing.T, want string, args ...string) {
	t.Helper()
	out, _, err := runCmd(t, args...)
	if err == nil {
		t.Fatalf("fhirstore %q succeeded (stdout %q), want an error", args, out)
	}
	checkOneLine(t, args, err.Error())
	if want != "" && !strings.Contains(err.Error(), want) {
		t.Fatalf("fhirstore %q: error %q does not mention %q", args, err, want)
	}
}

func checkOneLine(t *testing.T, args []string, msg string) {
	t.Helper()
	if msg == "" || strings.ContainsAny(msg, "\r\n") {
		t.Fatalf("fhirstore %q: error is not one non-empty line: %q", args, msg)
	}
}

// tokenFor prints a token with `fhirstore token` for dataDir.
func tokenFor(t *testing.T, dataDir, tenant string) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, "token", "--data-dir", dataDir, "--tenant", tenant))
}

// jwtClaims decodes the payload of a JWT (without checking its signature).
func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("token payload: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("token payload: %v", err)
	}
	return m
}

// unwritableDataDir is a path under a regular file: not even root can create it.
func unwritableDataDir(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(file, "data")
}

var jwtPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)

func TestServeCreatesReadsAndKeepsDataAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir) // no sub-command: serve

	// The banner: base URL, a token of its own, a curl line.
	base := "http://demo.localhost:" + s.port + "/fhir/r4"
	banner := s.stdout.String()
	if !strings.Contains(banner, base) {
		t.Fatalf("banner lacks the base URL %s:\n%s", base, banner)
	}
	var bannerToken string
	for _, line := range strings.Split(banner, "\n") {
		if jwtPattern.MatchString(strings.TrimSpace(line)) {
			bannerToken = strings.TrimSpace(line)
		}
	}
	if bannerToken == "" {
		t.Fatalf("banner has no line with a token alone:\n%s", banner)
	}
	if !regexp.MustCompile(`(?m)^\s*curl .*` + regexp.QuoteMeta(bannerToken) + `.*` + regexp.QuoteMeta(base+"/Patient")).MatchString(banner) {
		t.Fatalf("banner has no curl line with the token and %s/Patient:\n%s", base, banner)
	}

	tok := tokenFor(t, dir, "demo")
	tenantHost := "demo.localhost:" + s.port
	id := createPatient(t, s, tenantHost, tok, "Restart")
	if got := readFamily(t, s, tenantHost, tok, id); got != "Restart" {
		t.Fatalf("read via %s: family %q", tenantHost, got)
	}
	bareHost := "127.0.0.1:" + s.port
	if got := readFamily(t, s, bareHost, tok, id); got != "Restart" {
		t.Fatalf("read via %s: family %q", bareHost, got)
	}
	if got := readFamily(t, s, tenantHost, bannerToken, id); got != "Restart" {
		t.Fatalf("read with the banner's token: family %q", got)
	}
	if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/"+id), tenantHost, "", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("read without token: %d, want 401", r.status)
	}
	if !dataDirLocked(t, dir) {
		t.Fatal("a running server does not hold its data dir's lock")
	}

	// Graceful shutdown: run returns nil, the log says so, the data dir's
	// lock is given up and the port is closed.
	if err := s.stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if log := s.stderr.String(); !strings.Contains(log, `"stopped"`) {
		t.Fatalf("no stopped line after shutdown:\n%s", log)
	}
	if dataDirLocked(t, dir) {
		t.Fatal("the data dir is still locked after shutdown")
	}
	if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after shutdown", s.addr)
	}

	// Restart on the same data dir: the Patient and the signing key survive.
	s2 := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	if got := readFamily(t, s2, "demo.localhost:"+s2.port, tok, id); got != "Restart" {
		t.Fatalf("read after restart: family %q", got)
	}
	if got := readFamily(t, s2, "127.0.0.1:"+s2.port, bannerToken, id); got != "Restart" {
		t.Fatalf("read after restart with the first banner's token: family %q", got)
	}
}

func TestServeBaseDomainAndDefaultTenantFlags(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--base-domain", "example.test", "--default-tenant", "clinic")
	if base := "http://clinic.example.test:" + s.port + "/fhir/r4"; !strings.Contains(s.stdout.String(), base) {
		t.Fatalf("banner lacks %s:\n%s", base, s.stdout)
	}
	tok := tokenFor(t, dir, "clinic")
	id := createPatient(t, s, "clinic.example.test:"+s.port, tok, "Flags")
	if got := readFamily(t, s, "127.0.0.1:"+s.port, tok, id); got != "Flags" {
		t.Fatalf("bare host: family %q", got)
	}
	// Under another base domain the first label names no tenant: the default one serves.
	if got := readFamily(t, s, "clinic.localhost:"+s.port, tok, id); got != "Flags" {
		t.Fatalf("host outside the base domain: family %q", got)
	}
}

func TestTokenPrintsOneJWTLine(t *testing.T) {
	dir := t.TempDir()
	out, errOut, err := runCmd(t, "token", "--data-dir", dir, "--tenant", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if errOut != "" {
		t.Fatalf("token wrote to stderr: %q", errOut)
	}
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || !jwtPattern.MatchString(strings.TrimSuffix(out, "\n")) {
		t.Fatalf("token stdout is not exactly one JWT line: %q", out)
	}
	c := jwtClaims(t, strings.TrimSpace(out))
	if c["tenant"] != "demo" || c["scope"] != "system/*.*" || c["iss"] == nil {
		t.Fatalf("claims %v", c)
	}
	if ttl := c["exp"].(float64) - c["iat"].(float64); ttl != 3600 {
		t.Fatalf("default ttl %vs, want 3600s", ttl)
	}
	if _, err := os.Stat(filepath.Join(dir, "dev-signing.key")); err != nil {
		t.Fatalf("no signing key in the data dir: %v", err)
	}

	// Flags in another order, explicit scope and ttl.
	out = mustRun(t, "token", "--ttl", "5m", "--scope", "patient/*.read user/Patient.read", "--tenant", "acme", "--data-dir", dir)
	if strings.Count(out, "\n") != 1 || !jwtPattern.MatchString(strings.TrimSpace(out)) {
		t.Fatalf("token stdout is not exactly one JWT line: %q", out)
	}
	c = jwtClaims(t, strings.TrimSpace(out))
	if c["tenant"] != "acme" || c["scope"] != "patient/*.read user/Patient.read" {
		t.Fatalf("claims %v", c)
	}
	if ttl := c["exp"].(float64) - c["iat"].(float64); ttl != 300 {
		t.Fatalf("ttl %vs, want 300s", ttl)
	}
}

// tenantList returns the names `fhirstore tenant list` prints.
func tenantList(t *testing.T, dir string) []string {
	t.Helper()
	return strings.Fields(mustRun(t, "tenant", "list", "--data-dir", dir))
}

func TestTenantCommandsWithoutServer(t *testing.T) {
	dir := t.TempDir()
	if got := mustRun(t, "tenant", "create", "acme", "--data-dir", dir); got != "created tenant acme\n" {
		t.Fatalf("create: %q", got)
	}
	mustRun(t, "tenant", "--data-dir", dir, "create", "clinic") // flags before the positional args too
	if got := tenantList(t, dir); strings.Join(got, ",") != "acme,clinic" {
		t.Fatalf("list: %q, want acme, clinic", got)
	}
	wantFail(t, "exists", "tenant", "create", "acme", "--data-dir", dir)
	wantFail(t, "Bad_Name", "tenant", "create", "Bad_Name", "--data-dir", dir)
	wantFail(t, "reserved", "tenant", "create", "system", "--data-dir", dir)
	wantFail(t, "nope", "tenant", "delete", "nope", "--data-dir", dir)
	if got := mustRun(t, "tenant", "delete", "acme", "--data-dir", dir); !strings.HasPrefix(got, "deleted tenant acme") {
		t.Fatalf("delete: %q", got)
	}
	if got := tenantList(t, dir); strings.Join(got, ",") != "clinic" {
		t.Fatalf("list after delete: %q, want clinic", got)
	}
	// One-shot commands keep their data in the indexed engine's files and
	// leave no lock or announcement behind.
	wantPresent(t, dir, sqliteDir)
	wantAbsent(t, dir, "server.lock", embeddedURIFile, legacyDir)

	// A server started later on the data dir serves the tenant created offline.
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	createPatient(t, s, "clinic.localhost:"+s.port, tokenFor(t, dir, "clinic"), "Offline")
	if got := tenantList(t, dir); strings.Join(got, ",") != "clinic,demo" {
		t.Fatalf("list while serving: %q, want clinic, demo", got)
	}
}

func TestTenantCommandsWhileServing(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	if !dataDirLocked(t, dir) {
		t.Fatal("a serving data dir is not locked")
	}

	if got := mustRun(t, "tenant", "create", "acme", "--data-dir", dir); got != "created tenant acme\n" {
		t.Fatalf("create: %q", got)
	}
	// The running server sees the new tenant at once.
	acmeHost, acmeTok := "acme.localhost:"+s.port, tokenFor(t, dir, "acme")
	id := createPatient(t, s, acmeHost, acmeTok, "Acme")
	if got := tenantList(t, dir); strings.Join(got, ",") != "acme,demo" {
		t.Fatalf("list: %q, want acme, demo", got)
	}
	wantFail(t, "exists", "tenant", "create", "demo", "--data-dir", dir)
	wantFail(t, "Bad_Name", "tenant", "create", "Bad_Name", "--data-dir", dir)
	wantFail(t, "reserved", "tenant", "create", "system", "--data-dir", dir)
	wantFail(t, "nope", "tenant", "delete", "nope", "--data-dir", dir)

	if got := mustRun(t, "tenant", "delete", "acme", "--data-dir", dir); !strings.HasPrefix(got, "deleted tenant acme") {
		t.Fatalf("delete: %q", got)
	}
	if got := tenantList(t, dir); strings.Join(got, ",") != "demo" {
		t.Fatalf("list after delete: %q, want demo", got)
	}
	// Deleting dropped the data: a tenant of the same name starts empty.
	mustRun(t, "tenant", "create", "acme", "--data-dir", dir)
	if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/"+id), acmeHost, acmeTok, ""); r.status != http.StatusNotFound {
		t.Fatalf("read of a Patient of a deleted tenant: %d %s, want 404", r.status, r.body)
	}

	// The commands wrote into the server's files, next to it: the server
	// still holds the data dir, and no other database was made.
	if !dataDirLocked(t, dir) {
		t.Fatal("the server lost its data dir's lock to tenant commands")
	}
	wantPresent(t, dir, sqliteDir)
	wantAbsent(t, dir, embeddedURIFile, legacyDir)
	if r := call(t, http.MethodGet, s.url("/readyz"), "", "", ""); r.status != http.StatusOK {
		t.Fatalf("readyz after tenant commands: %d %s", r.status, r.body)
	}
}

// TestRecreatedTenantStartsEmpty: a tenant deleted with `fhirstore tenant
// delete` while a server runs must not come back with data written after the
// deletion. The server remembers that a tenant exists for TenantCacheTTL (5s),
// so a write right after the deletion is accepted and lands in a database
// that `tenant create` later adopts as the new tenant's.
func TestRecreatedTenantStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	mustRun(t, "tenant", "create", "acme", "--data-dir", dir)
	host, tok := "acme.localhost:"+s.port, tokenFor(t, dir, "acme")
	createPatient(t, s, host, tok, "Before")
	mustRun(t, "tenant", "delete", "acme", "--data-dir", dir)
	late := call(t, http.MethodPost, s.url("/fhir/r4/Patient"), host, tok, `{"resourceType":"Patient","name":[{"family":"Ghost"}]}`)
	if late.status == http.StatusCreated {
		t.Errorf("write to a deleted tenant accepted: %d %s", late.status, late.body)
	}
	mustRun(t, "tenant", "create", "acme", "--data-dir", dir)
	r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/_history"), host, tok, "")
	if r.status != http.StatusOK {
		t.Fatalf("history: %d %s", r.status, r.body)
	}
	if total := r.json(t)["total"]; total != float64(0) {
		t.Fatalf("re-created tenant has %v resources, want 0: %s", total, r.body)
	}
}

// TestStaleAnnouncementIsIgnored: a server of a legacy data dir (FerretDB,
// announced in embedded-db.uri) killed with SIGKILL leaves its announcement
// behind; nothing answers there. (A data dir of the indexed engine has no
// announcement: see TestServerKilledWithSIGKILLLeavesTheDataDirUsable.)
func TestStaleAnnouncementIsIgnored(t *testing.T) {
	dir := legacyDataDir(t, nil)
	if err := os.WriteFile(filepath.Join(dir, embeddedURIFile), []byte("mongodb://127.0.0.1:1/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "tenant", "create", "acme", "--data-dir", dir)
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	createPatient(t, s, "acme.localhost:"+s.port, tokenFor(t, dir, "acme"), "Crash")
	if got := tenantList(t, dir); strings.Join(got, ",") != "acme,demo" {
		t.Fatalf("list: %q, want acme, demo", got)
	}
}

func TestSecondServeOnSameDataDirFails(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb syncBuffer
	err := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir}, &out, &errb)
	if err == nil {
		t.Fatalf("second serve on %s returned nil; stderr:\n%s", dir, errb.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("second serve only returned when its context ended: %v", err)
	}
	checkOneLine(t, []string{"serve"}, err.Error())
	if !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not say the data dir %s is in use", err, dir)
	}
	if strings.Contains(errb.String(), "listening") || out.String() != "" {
		t.Fatalf("second serve announced itself:\nstdout %q\nstderr %q", out.String(), errb.String())
	}
	// The first one is unharmed and still holds the data dir.
	if r := call(t, http.MethodGet, s.url("/readyz"), "", "", ""); r.status != http.StatusOK {
		t.Fatalf("first server after the second failed: %d %s", r.status, r.body)
	}
	if !dataDirLocked(t, dir) {
		t.Fatal("the first server lost its data dir's lock to the second")
	}
	mustRun(t, "tenant", "create", "acme", "--data-dir", dir)
	tok := tokenFor(t, dir, "acme")
	id := createPatient(t, s, "acme.localhost:"+s.port, tok, "Still")

	// Once the first one stopped, a server starts on the data dir.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	if got := readFamily(t, s2, "acme.localhost:"+s2.port, tok, id); got != "Still" {
		t.Fatalf("family %q on the server started after the first stopped", got)
	}
}

func TestBadInvocationsFailWithOneLine(t *testing.T) {
	dir := t.TempDir()
	bad := unwritableDataDir(t)
	cases := []struct {
		name, want string
		args       []string
	}{
		{"bad flag", "-bogus", []string{"--bogus"}},
		{"bad serve flag", "-bogus", []string{"serve", "--bogus", "--data-dir", dir}},
		{"bad token flag", "-bogus", []string{"token", "--bogus"}},
		{"bad tenant flag", "-bogus", []string{"tenant", "list", "--bogus"}},
		{"flag without value", "", []string{"serve", "--addr"}},
		{"unknown command", "frobnicate", []string{"frobnicate"}},
		{"bad ttl", "--ttl", []string{"token", "--data-dir", dir, "--ttl", "soon"}},
		{"negative ttl", "--ttl", []string{"token", "--data-dir", dir, "--ttl", "-1h"}},
		{"zero ttl", "--ttl", []string{"token", "--data-dir", dir, "--ttl", "0s"}},
		{"bad token tenant", "Bad_Name", []string{"token", "--data-dir", dir, "--tenant", "Bad_Name"}},
		{"token extra argument", "extra", []string{"token", "--data-dir", dir, "extra"}},
		{"tenant without verb", "", []string{"tenant", "--data-dir", dir}},
		{"tenant create without name", "", []string{"tenant", "create", "--data-dir", dir}},
		{"tenant unknown verb", "", []string{"tenant", "rename", "a", "--data-dir", dir}},
		{"bad max body", "--max-body-bytes", []string{"serve", "--data-dir", dir, "--max-body-bytes", "lots"}},
		{"bad shutdown timeout", "--shutdown-timeout", []string{"serve", "--data-dir", dir, "--shutdown-timeout", "never"}},
		{"bad log level", "--log-level", []string{"serve", "--data-dir", dir, "--log-level", "loud"}},
		{"bad default tenant", "--default-tenant", []string{"serve", "--data-dir", dir, "--default-tenant", "Bad_Name"}},
		{"bad addr", "", []string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:99999"}},
		{"unwritable data dir (serve)", bad, []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", bad}},
		{"unwritable data dir (token)", bad, []string{"token", "--data-dir", bad}},
		{"unwritable data dir (tenant)", "", []string{"tenant", "list", "--data-dir", bad}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantFail(t, c.want, c.args...) })
	}
	// "bad addr" opened the database before it failed: it gave the lock up.
	if dataDirLocked(t, dir) {
		t.Fatal("a failed serve left the data dir locked")
	}
	wantAbsent(t, dir, embeddedURIFile)
}

func TestUnreachableMongoDBFails(t *testing.T) {
	t.Parallel()
	const uri = "mongodb://127.0.0.1:1/"
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--mongodb-uri", uri},
		{"tenant", "list", "--mongodb-uri", uri},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			args := append(args, "--data-dir", t.TempDir())
			start := time.Now()
			wantFail(t, "127.0.0.1:1", args...)
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("took %v to give up on %s", d, uri)
			}
		})
	}
}

func TestEnvironmentVariables(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FHIRSTORE_DATA_DIR", dir)
	t.Setenv("FHIRSTORE_DEFAULT_TENANT", "clinic")
	t.Setenv("FHIRSTORE_ADDR", "127.0.0.1:0")
	t.Setenv("FHIRSTORE_BASE_DOMAIN", "example.test")

	s := startServer(t) // no arguments at all
	if !strings.HasPrefix(s.addr, "127.0.0.1:") {
		t.Fatalf("listening on %s, want FHIRSTORE_ADDR's 127.0.0.1:0", s.addr)
	}
	if base := "http://clinic.example.test:" + s.port + "/fhir/r4"; !strings.Contains(s.stdout.String(), base) {
		t.Fatalf("banner lacks %s:\n%s", base, s.stdout)
	}
	for _, f := range []string{"dev-signing.key", sqliteDir, "server.lock"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("FHIRSTORE_DATA_DIR not used: %v", err)
		}
	}
	wantAbsent(t, dir, legacyDir, embeddedURIFile) // a new data dir gets the indexed engine only
	// token and tenant honour FHIRSTORE_DATA_DIR as well.
	tok := strings.TrimSpace(mustRun(t, "token", "--tenant", "clinic"))
	if got := strings.Join(strings.Fields(mustRun(t, "tenant", "list")), ","); got != "clinic" {
		t.Fatalf("tenant list with FHIRSTORE_DATA_DIR: %q, want clinic (the default tenant only)", got)
	}
	// A bare host goes to FHIRSTORE_DEFAULT_TENANT.
	id := createPatient(t, s, "127.0.0.1:"+s.port, tok, "Env")
	if got := readFamily(t, s, "clinic.example.test:"+s.port, tok, id); got != "Env" {
		t.Fatalf("family %q", got)
	}
	// demo was not created.
	demoTok := strings.TrimSpace(mustRun(t, "token", "--tenant", "demo"))
	if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/"+id), "demo.example.test:"+s.port, demoTok, ""); r.status != http.StatusNotFound {
		t.Fatalf("demo tenant with FHIRSTORE_DEFAULT_TENANT=clinic: %d, want 404", r.status)
	}

	// The flag wins over the environment.
	other := t.TempDir()
	mustRun(t, "token", "--data-dir", other)
	if _, err := os.Stat(filepath.Join(other, "dev-signing.key")); err != nil {
		t.Fatalf("--data-dir did not win over FHIRSTORE_DATA_DIR: %v", err)
	}
}

func TestEmptyDefaultTenantDisablesIt(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FHIRSTORE_DEFAULT_TENANT", "")
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	if !strings.Contains(s.stdout.String(), "no default tenant") {
		t.Fatalf("banner without default tenant:\n%s", s.stdout)
	}
	if got := tenantList(t, dir); len(got) != 0 {
		t.Fatalf("tenants %q, want none", got)
	}
	tok := tokenFor(t, dir, "demo")
	if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/x"), "127.0.0.1:"+s.port, tok, ""); r.status != http.StatusNotFound {
		t.Fatalf("bare host without default tenant: %d %s, want 404", r.status, r.body)
	}
}

// TestBinary checks what only the real process shows: exit status, the one
// line on stderr, and shutdown on SIGTERM.
func TestBinary(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the binary")
	}
	bin := filepath.Join(t.TempDir(), "fhirstore")
	build := exec.Command(gobin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The variables of the test process must not leak into the binary's.
	var baseEnv []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FHIRSTORE_") {
			baseEnv = append(baseEnv, kv)
		}
	}

	for _, c := range []struct {
		name string
		args []string
		env  []string
	}{
		{"bad flag", []string{"--bogus"}, nil},
		{"bad ttl", []string{"token", "--data-dir", t.TempDir(), "--ttl", "soon"}, nil},
		{"unknown command", []string{"frobnicate"}, nil},
		{"unwritable data dir", []string{"--addr", "127.0.0.1:0", "--data-dir", unwritableDataDir(t)}, nil},
		{"unreachable MongoDB from the environment", []string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, []string{"FHIRSTORE_MONGODB_URI=mongodb://127.0.0.1:1/"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, c.args...)
			cmd.Env = append(append([]string{}, baseEnv...), c.env...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("%q: %v, want a non-zero exit status", c.args, err)
			}
			if ctx.Err() != nil {
				t.Fatalf("%q was killed after 30s", c.args)
			}
			e := errb.String()
			if strings.Count(e, "\n") != 1 || !strings.HasSuffix(e, "\n") || !strings.HasPrefix(e, "fhirstore: ") {
				t.Fatalf("%q: stderr is not exactly one line: %q", c.args, e)
			}
			if out.Len() != 0 {
				t.Fatalf("%q: stdout %q, want nothing", c.args, out.String())
			}
		})
	}

	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", dir)
		cmd.Env = baseEnv
		var out syncBuffer
		cmd.Stdout = &out
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := false
		defer func() {
			if !exited {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}()
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var log []string
		addr := ""
		for timeout := time.After(30 * time.Second); addr == ""; {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("binary ended before listening:\n%s", strings.Join(log, "\n"))
				}
				log = append(log, l)
				addr = listeningAddr(l)
			case <-timeout:
				t.Fatalf("no listening line within 30s:\n%s", strings.Join(log, "\n"))
			}
		}
		if r := call(t, http.MethodGet, "http://"+addr+"/healthz", "", "", ""); r.status != http.StatusOK {
			t.Fatalf("healthz: %d", r.status)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for l := range lines {
			log = append(log, l)
		}
		err = cmd.Wait()
		exited = true
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, strings.Join(log, "\n"))
		}
		if !strings.Contains(strings.Join(log, "\n"), `"stopped"`) {
			t.Fatalf("no stopped line:\n%s", strings.Join(log, "\n"))
		}
		_, port, _ := net.SplitHostPort(addr)
		if !strings.Contains(out.String(), "http://demo.localhost:"+port+"/fhir/r4") {
			t.Fatalf("banner:\n%s", out.String())
		}
	})
}

// TestAnnouncementOfAnotherDataDirIsIgnored: an embedded-db.uri copied from
// a legacy data dir whose server runs names a database that is not this
// dir's.
func TestAnnouncementOfAnotherDataDirIsIgnored(t *testing.T) {
	a, b := legacyDataDir(t, nil), legacyDataDir(t, nil)
	startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", a)
	mustRun(t, "tenant", "create", "only-in-a", "--data-dir", a)
	announcement, err := os.ReadFile(filepath.Join(a, embeddedURIFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, embeddedURIFile), announcement, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range tenantList(t, b) {
		if name == "only-in-a" {
			t.Fatalf("tenant list of %s shows the tenants of %s", b, a)
		}
	}
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", b)
	createPatient(t, s, "demo.localhost:"+s.port, tokenFor(t, b, "demo"), "OwnDir")
}

// TestListeningIsLoggedAtAnyLevel: scripts wait for the listening line even
// when the log level hides informational messages.
func TestListeningIsLoggedAtAnyLevel(t *testing.T) {
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "error")
	if r := call(t, http.MethodGet, s.url("/healthz"), "", "", ""); r.status != http.StatusOK {
		t.Fatalf("healthz: %d", r.status)
	}
}
