package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
	"fhirstore/store/schemacheck"
	"fhirstore/store/viewcheck"
)

// loadFlags are the settings of the load command.
var loadFlags = []string{"url", "token", "tenant", "workers", "batch-size", "direct", "examples", "data-dir", "mongodb-uri", "unknown-profiles", "required-profiles"}

// loadSynopsis is the usage text of the load command, before its flags.
const loadSynopsis = `fhirstore load [flags] PATH...

Loads FHIR data into a server: each PATH is a FHIR package (.tgz), a file
or a directory searched for *.json and *.ndjson files (in name order).
A package (an implementation guide's NPM package, package/package.json) is
installed first: it is read and checked whole, then its conformance
resources are written by their ids in one transaction (what the server
already holds unchanged is left alone, so a second install changes
nothing), and its examples too with --examples; a malformed package is
refused with the file and reason and nothing of it is written.
A .json file is a Bundle of type batch or transaction and is posted as it
is. A .ndjson file holds one
resource per line; its lines are posted in transaction Bundles of
--batch-size entries, as PUT Type/id (keeping the ids) or POST Type when a
line has no id; a Bundle that fails leaves its lines out and the others in.
All batch Bundles are loaded before any transaction Bundle or ndjson file,
so that conditional references (Synthea's Organization?identifier=...) find
the resources the batches create. --direct writes into the database of
--data-dir (or --mongodb-uri) in-process, next to a running server or alone.
Every Bundle entry the server did not store, and every file that failed
as a whole, is listed after the summary and makes the command fail.
The server serves the tenant the host of --url names (acme.localhost:8080
for acme: any *.localhost host is reached on loopback, without DNS);
--tenant is the tenant of the token signed when --token is empty.

examples:
  fhirstore load --data-dir ./data synthea/output/fhir
      posts to the server at http://localhost:8080/fhir/r4 with a dev token
      for tenant demo signed with the key in ./data
  fhirstore load --url https://acme.fhir.example/fhir/r4 --token "$TOKEN" --workers 8 bundles/
  fhirstore load --direct --data-dir ./data --tenant acme export/Patient.ndjson export/Observation.ndjson
  fhirstore load --data-dir ./data hl7.fhir.us.core-6.1.0.tgz
      installs US Core 6.1.0: its profiles check the writes that claim them`

// loadTokenTTL is the lifetime of a token the command signs for itself.
const loadTokenTTL = 24 * time.Hour

// directBase is the base URL of the in-process server of --direct; its
// host names no tenant, so the server's default tenant (--tenant) serves it.
const directBase = "http://localhost/fhir/r4"

// load posts bundles and ndjson files to a FHIR server and prints a summary.
func load(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("load", loadFlags...)
	paths, err := cfg.parse(boolFlagArgs(boolFlagArgs(args, "direct"), "examples"))
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, loadSynopsis)
		}
		return err
	}
	l, files, err := prepareLoad(cfg, paths)
	if err != nil {
		return err
	}
	direct, _ := strconv.ParseBool(cfg.str("direct")) // checked by prepareLoad
	if direct {
		closeDB, err := l.connectDirect(ctx, cfg, stderr)
		if err != nil {
			return err
		}
		defer closeDB()
	} else if err := l.connectHTTP(cfg); err != nil {
		return err
	}
	if err := l.installPackages(ctx, cfg, stdout); err != nil {
		return err
	}
	if len(files) == 0 {
		return nil
	}
	t := &tally{files: files, start: time.Now()}
	stopProgress := startProgress(ctx, stderr, t)
	l.run(ctx, files, t)
	stopProgress()
	return summarize(ctx, stdout, t)
}

// boolFlagArgs lets a string setting be given as a bare boolean flag:
// "--name" alone means "--name=true", as for the flag package's own bools.
func boolFlagArgs(args []string, name string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "-"+name || a == "--"+name {
			a += "=true"
		}
		out = append(out, a)
	}
	return out
}

// loader sends Bundles to one FHIR base URL with a bearer token.
type loader struct {
	client    *http.Client
	base      string
	token     string
	workers   int
	batchSize int
	// packages are the FHIR packages to install before the files.
	packages []string
}

// prepareLoad checks the flags and lists the files to load.
func prepareLoad(cfg *config, paths []string) (*loader, []*fileState, error) {
	if len(paths) == 0 {
		return nil, nil, errors.New("load: no PATH given (see fhirstore load -h)")
	}
	for _, name := range []string{"direct", "examples"} {
		if _, err := strconv.ParseBool(cfg.str(name)); err != nil {
			return nil, nil, fmt.Errorf("--%s: %q is not true or false", name, cfg.str(name))
		}
	}
	workers, err := cfg.int64("workers")
	if err != nil {
		return nil, nil, err
	}
	batchSize, err := cfg.int64("batch-size")
	if err != nil {
		return nil, nil, err
	}
	if err := store.ValidateTenantName(cfg.str("tenant")); err != nil {
		return nil, nil, fmt.Errorf("--tenant: %w", err)
	}
	pkgs, rest := splitPackages(paths)
	var names []string
	if len(rest) > 0 {
		if names, err = collectFiles(rest); err != nil {
			return nil, nil, err
		}
	}
	files := make([]*fileState, len(names))
	for i, name := range names {
		files[i] = planFile(name)
	}
	return &loader{workers: int(workers), batchSize: int(batchSize), packages: pkgs}, files, nil
}

// connectHTTP points the loader at --url with --token, or a dev token
// signed with the key of --data-dir when --token is empty.
func (l *loader) connectHTTP(cfg *config) error {
	base := strings.TrimRight(cfg.str("url"), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url: %q is not an http(s) FHIR base URL such as http://localhost:8080/fhir/r4", cfg.str("url"))
	}
	l.base, l.token = base, cfg.str("token")
	if l.token == "" {
		dataDir := cfg.str("data-dir")
		if _, err := os.Stat(filepath.Join(dataDir, auth.DevKeyFile)); err != nil {
			return fmt.Errorf("no --token given and no dev signing key in data dir %s to sign one: pass --token or the server's --data-dir", dataDir)
		}
		key, err := auth.LoadOrCreateDevKey(dataDir)
		if err != nil {
			return fmt.Errorf("data dir %s: %w", dataDir, err)
		}
		if l.token, err = devToken(key, cfg.str("tenant")); err != nil {
			return err
		}
	}
	l.client = &http.Client{Transport: localTransport(l.workers)}
	return nil
}

// connectDirect opens the database and serves the loader's requests with an
// in-process FHIR handler built as serve builds it: the same validation,
// indexing and bundle processing, but no network. It returns what closes
// the database.
func (l *loader) connectDirect(ctx context.Context, cfg *config, stderr io.Writer) (func(), error) {
	logger, err := newLogger("warn", stderr)
	if err != nil {
		return nil, err
	}
	dataDir, tenant := cfg.str("data-dir"), cfg.str("tenant")
	key, err := auth.LoadOrCreateDevKey(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	validator, err := fhirschema.NewValidator()
	if err != nil {
		return nil, err
	}
	registry, err := search.NewRegistry(fhirschema.StoredTypes())
	if err != nil {
		return nil, err
	}
	policy, err := profilePolicy(cfg)
	if err != nil {
		return nil, err
	}
	so := storeOptions{validate: viewcheck.Validator(schemacheck.Validator(validator, policy)), registry: registry, eagerIndexTypes: specTypes}
	// The server keeps state about its database that writes behind its back
	// would make stale: a direct load must be the data dir's only writer.
	db, err := openDatabase(ctx, cfg.str("mongodb-uri"), dataDir, false, so, logger)
	if errors.Is(err, errInUse) {
		return nil, fmt.Errorf("a fhirstore server is running on data dir %s; load through it without --direct, or stop it first", dataDir)
	}
	if err != nil {
		return nil, err
	}
	if err := db.store.EnsureTenant(ctx, tenant); err != nil {
		db.close()
		return nil, fmt.Errorf("create tenant %s: %w", tenant, err)
	}
	// The loader is the only client, so the limits that protect a server
	// from strangers would only refuse the user's own large files.
	srvCfg := server.Config{DefaultTenant: tenant, MaxBodyBytes: 1 << 30, MaxBundleEntries: 1 << 20, Version: version, Registry: registry}
	h := server.New(srvCfg, db.store, auth.HS256{Key: key, Issuer: auth.DevIssuer, Leeway: time.Minute}, logger)
	if l.token, err = devToken(key, tenant); err != nil {
		db.close()
		return nil, err
	}
	l.base, l.client = directBase, &http.Client{Transport: handlerTransport{h}}
	return db.close, nil
}

// devToken signs a token for tenant with a data dir's dev key.
func devToken(key []byte, tenant string) (string, error) {
	return auth.SignHS256(key, auth.TokenRequest{Tenant: tenant, Scope: "system/*.*", Subject: "fhirstore-load", TTL: loadTokenTTL})
}

// handlerTransport answers HTTP requests with an in-process handler.
type handlerTransport struct{ h http.Handler }

// RoundTrip implements http.RoundTripper.
func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	in := req.Clone(req.Context())
	in.Host, in.RequestURI = req.URL.Host, req.URL.RequestURI()
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, in)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// collectFiles expands the PATH arguments: files as given, directories
// walked for *.json and *.ndjson in name order. Each file is listed once.
func collectFiles(paths []string) ([]string, error) {
	var files []string
	seen := map[string]bool{}
	for _, p := range paths {
		found, err := filesUnder(p)
		if err != nil {
			return nil, err
		}
		for _, f := range found {
			if !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	return files, nil
}

// filesUnder lists the loadable files a PATH names.
func filesUnder(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if !info.IsDir() {
		if !loadable(p) {
			return nil, fmt.Errorf("load: %s is neither a .json Bundle nor an .ndjson file", p)
		}
		return []string{filepath.Clean(p)}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && loadable(path) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("load: no .json or .ndjson files under %s", p)
	}
	sort.Strings(files)
	return files, nil
}

// loadable reports whether a file found in a directory is one to load.
func loadable(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".json" || ext == ".ndjson"
}

// fileState is one file of a load: what it is and what became of it.
type fileState struct {
	path string
	// kind is batch, transaction or ndjson.
	kind string
	// bad is why the file cannot be loaded at all.
	bad error

	pending     int
	produced    bool
	resources   int
	failures    []string
	interrupted bool
}

// planFile reads enough of a file to know how to load it.
func planFile(path string) *fileState {
	f := &fileState{path: path, kind: "ndjson"}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		f.kind, f.bad = bundleType(path)
	}
	return f
}

// bundleType returns the type of the Bundle in a .json file, reading no
// further than its top-level "resourceType" and "type".
func bundleType(path string) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	dec := json.NewDecoder(bufio.NewReader(file))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", errors.New("not a JSON object")
	}
	var resourceType, typ string
	for dec.More() && (resourceType == "" || typ == "") {
		key, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("not JSON: %w", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", fmt.Errorf("not JSON: %w", err)
		}
		switch key {
		case "resourceType":
			_ = json.Unmarshal(v, &resourceType)
		case "type":
			_ = json.Unmarshal(v, &typ)
		}
	}
	if resourceType != "Bundle" {
		return "", fmt.Errorf("a .json file must be a Bundle, not %q", resourceType)
	}
	if typ != "batch" && typ != "transaction" {
		return "", fmt.Errorf("the Bundle is of type %q; want batch or transaction", typ)
	}
	return typ, nil
}

// loadJob is one Bundle to send: a whole .json file or a chunk of ndjson.
type loadJob struct {
	file *fileState
	// where names the chunk ("lines 1-500"); empty for a whole file.
	where string
	// body is the Bundle; nil means the file itself.
	body []byte
	// err is why the job cannot be sent.
	err  error
	done func()
}

// run loads the files with l.workers goroutines, batch Bundles first.
func (l *loader) run(ctx context.Context, files []*fileState, t *tally) {
	var first, then []*fileState
	for _, f := range files {
		if f.kind == "batch" && f.bad == nil {
			first = append(first, f)
		} else {
			then = append(then, f)
		}
	}
	jobs := make(chan loadJob)
	var wg sync.WaitGroup
	for range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.work(ctx, jobs, t)
		}()
	}
	l.produce(ctx, [][]*fileState{first, then}, jobs, t)
	wg.Wait()
}

// work sends jobs until the queue closes.
func (l *loader) work(ctx context.Context, jobs <-chan loadJob, t *tally) {
	for j := range jobs {
		n, failed, err := l.send(ctx, j)
		t.finish(j, n, failed, err, ctx.Err() != nil)
		j.done()
	}
}

// send posts one job's Bundle and returns the resources it loaded and
// the entries the server did not store.
func (l *loader) send(ctx context.Context, j loadJob) (int, []string, error) {
	if j.err != nil {
		return 0, nil, j.err
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	body := j.body
	if body == nil {
		var err error
		if body, err = os.ReadFile(j.file.path); err != nil {
			return 0, nil, err
		}
	}
	return l.post(ctx, body)
}

// produce queues the jobs of each phase and waits for them before the next.
func (l *loader) produce(ctx context.Context, phases [][]*fileState, jobs chan<- loadJob, t *tally) {
	defer close(jobs)
	for _, phase := range phases {
		var wg sync.WaitGroup
		send := func(j loadJob) bool {
			t.queued(j.file)
			wg.Add(1)
			j.done = wg.Done
			select {
			case jobs <- j:
				return true
			case <-ctx.Done():
				t.finish(j, 0, nil, ctx.Err(), true)
				wg.Done()
				return false
			}
		}
		for _, f := range phase {
			if ctx.Err() != nil {
				break
			}
			switch {
			case f.bad != nil:
				send(loadJob{file: f, err: f.bad})
			case f.kind == "ndjson":
				l.produceNDJSON(f, send)
			default:
				send(loadJob{file: f})
			}
			t.produced(f)
		}
		wg.Wait()
	}
}

// produceNDJSON queues an ndjson file in transaction Bundles of
// l.batchSize lines; blank lines are skipped.
func (l *loader) produceNDJSON(f *fileState, send func(loadJob) bool) {
	file, err := os.Open(f.path)
	if err != nil {
		send(loadJob{file: f, err: err})
		return
	}
	defer file.Close()
	r := bufio.NewReaderSize(file, 1<<20)
	c := &chunk{}
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			c.add(n, line)
		}
		if c.size == l.batchSize || (err != nil && c.size > 0) {
			if !send(c.job(f)) {
				return
			}
			c = &chunk{}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			send(loadJob{file: f, where: fmt.Sprintf("line %d", n), err: fmt.Errorf("read: %w", err)})
			return
		}
	}
}

// chunk gathers ndjson lines into the entries of a transaction Bundle.
type chunk struct {
	first, last, size int
	entries           [][]byte
	// err is the first line that cannot be an entry; the chunk is not sent.
	err error
}

// add turns line n into an entry.
func (c *chunk) add(n int, line []byte) {
	if c.size == 0 {
		c.first = n
	}
	c.last, c.size = n, c.size+1
	if c.err != nil {
		return
	}
	e, err := ndjsonEntry(bytes.TrimSpace(line))
	if err != nil {
		c.err = fmt.Errorf("line %d: %w", n, err)
		return
	}
	c.entries = append(c.entries, e)
}

// job is the chunk as a transaction Bundle.
func (c *chunk) job(f *fileState) loadJob {
	where := fmt.Sprintf("lines %d-%d", c.first, c.last)
	if c.first == c.last {
		where = fmt.Sprintf("line %d", c.first)
	}
	if c.err != nil {
		return loadJob{file: f, where: where, err: c.err}
	}
	var b bytes.Buffer
	b.WriteString(`{"resourceType":"Bundle","type":"transaction","entry":[`)
	b.Write(bytes.Join(c.entries, []byte(",")))
	b.WriteString("]}")
	return loadJob{file: f, where: where, body: b.Bytes()}
}

// ndjsonEntry makes a transaction entry of one resource: PUT Type/id when
// it has an id, POST Type otherwise. The resource is kept byte for byte so
// that decimals keep their precision.
func ndjsonEntry(line []byte) ([]byte, error) {
	var head struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("not a JSON resource: %w", err)
	}
	if !fhirschema.IsStoredType(head.ResourceType) {
		return nil, fmt.Errorf("resourceType %q is not an R4 resource type", head.ResourceType)
	}
	type request struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	}
	req := request{Method: http.MethodPost, URL: head.ResourceType}
	if head.ID != "" {
		if err := store.ValidateID(head.ID); err != nil {
			return nil, err
		}
		req = request{Method: http.MethodPut, URL: head.ResourceType + "/" + head.ID}
	}
	e, err := json.Marshal(struct {
		Resource json.RawMessage `json:"resource"`
		Request  request         `json:"request"`
	}{line, req})
	if err != nil {
		return nil, fmt.Errorf("not a JSON resource: %w", err)
	}
	return e, nil
}

// post sends a Bundle to the base URL and returns the resources the
// response reports as written or read (2xx entries) and a line for each
// entry the server did not store. An answer that is not a response Bundle
// (the whole Bundle refused) is an error.
func (l *loader) post(ctx context.Context, body []byte) (int, []string, error) {
	// The server serves POST [base] at the base path with its slash.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.base+"/", bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("post: %w", err)
	}
	req.Header.Set("Content-Type", server.FHIRJSON)
	req.Header.Set("Accept", server.FHIRJSON)
	req.Header.Set("Prefer", "return=minimal")
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("read response: %w", err)
	}
	return countReply(resp.StatusCode, reply, sentEntries(body))
}

// sentEntry is what the loader reads of an entry it sends, to name it.
type sentEntry struct {
	FullURL string `json:"fullUrl"`
	Request struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"request"`
}

// sentEntries reads the entries of a Bundle to send (nil if unreadable).
func sentEntries(body []byte) []sentEntry {
	var b struct {
		Entry []sentEntry `json:"entry"`
	}
	if json.Unmarshal(body, &b) != nil {
		return nil
	}
	return b.Entry
}

// name is "entry I (METHOD url, fullUrl)" as far as it is known.
func entryName(i int, sent []sentEntry) string {
	if i >= len(sent) {
		return fmt.Sprintf("entry %d", i)
	}
	var parts []string
	if r := sent[i].Request; r.Method != "" || r.URL != "" {
		parts = append(parts, strings.TrimSpace(r.Method+" "+r.URL))
	}
	if sent[i].FullURL != "" {
		parts = append(parts, sent[i].FullURL)
	}
	if len(parts) == 0 {
		return fmt.Sprintf("entry %d", i)
	}
	return fmt.Sprintf("entry %d (%s)", i, strings.Join(parts, ", "))
}

// fhirReply is what the loader reads of a response: a batch or transaction
// response Bundle, or an OperationOutcome.
type fhirReply struct {
	ResourceType string `json:"resourceType"`
	Entry        []struct {
		Response *struct {
			Status  string     `json:"status"`
			Outcome *fhirReply `json:"outcome"`
		} `json:"response"`
	} `json:"entry"`
	Issue []struct {
		Code        string   `json:"code"`
		Diagnostics string   `json:"diagnostics"`
		Expression  []string `json:"expression"`
		Details     struct {
			Text string `json:"text"`
		} `json:"details"`
	} `json:"issue"`
}

// diagnostics is the first issue's message and where it points, or ""
// when there is none.
func (r *fhirReply) diagnostics() string {
	if r == nil || len(r.Issue) == 0 {
		return ""
	}
	is := r.Issue[0]
	msg := is.Code
	for _, s := range []string{is.Details.Text, is.Diagnostics} {
		if s != "" {
			msg = s
		}
	}
	if len(is.Expression) > 0 {
		msg += " (at " + strings.Join(is.Expression, ", ") + ")"
	}
	return oneLine(msg)
}

// countReply counts the 2xx entries of a response Bundle and describes
// every other one, and every entry of sent the response leaves out, as
// not stored; any answer but a response Bundle is an error with the status
// and the OperationOutcome's diagnostics.
func countReply(status int, body []byte, sent []sentEntry) (int, []string, error) {
	var r fhirReply
	jsonErr := json.Unmarshal(body, &r)
	if status/100 != 2 {
		msg := r.diagnostics()
		if jsonErr != nil || msg == "" {
			msg = oneLine(string(body))
		}
		if len(sent) > 0 {
			msg += fmt.Sprintf(" (none of its %d entries stored)", len(sent))
		}
		return 0, nil, fmt.Errorf("%d %s: %s", status, http.StatusText(status), msg)
	}
	if jsonErr != nil || r.ResourceType != "Bundle" {
		return 0, nil, fmt.Errorf("%d %s: the answer is not a response Bundle: %s", status, http.StatusText(status), oneLine(string(body)))
	}
	n := 0
	var failed []string
	for i, e := range r.Entry {
		code := 0
		if e.Response != nil {
			code, _ = strconv.Atoi(strings.Fields(e.Response.Status + " 0")[0])
		}
		if code/100 == 2 {
			n++
			continue
		}
		why := fmt.Sprintf("%s: %d %s", entryName(i, sent), code, http.StatusText(code))
		if e.Response != nil {
			if d := e.Response.Outcome.diagnostics(); d != "" {
				why += ": " + d
			}
		}
		failed = append(failed, why+"; not stored")
	}
	for i := len(r.Entry); i < len(sent); i++ {
		failed = append(failed, entryName(i, sent)+": the response has no entry for it; not stored")
	}
	return n, failed, nil
}

// oneLine flattens and shortens text for a summary line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// tally is the shared account of a load, read by the progress line and
// the summary.
type tally struct {
	mu        sync.Mutex
	files     []*fileState
	done      int
	resources int
	// entriesFailed counts the entries of response Bundles not stored.
	entriesFailed int
	start         time.Time
}

// queued notes a job of f on its way.
func (t *tally) queued(f *fileState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f.pending++
}

// produced notes that every job of f is queued.
func (t *tally) produced(f *fileState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f.produced = true
	t.complete(f)
}

// finish records the outcome of a job: resources stored, entries not
// stored, or an error; an error after cancellation means the job was cut
// short rather than refused.
func (t *tally) finish(j loadJob, n int, failed []string, err error, cancelled bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := j.file
	f.pending--
	f.resources += n
	t.resources += n
	t.entriesFailed += len(failed)
	for _, why := range failed {
		if j.where != "" {
			why = j.where + ": " + why
		}
		f.failures = append(f.failures, why)
	}
	switch {
	case err != nil && cancelled:
		f.interrupted = true
	case err != nil && j.where != "":
		f.failures = append(f.failures, j.where+": "+err.Error())
	case err != nil:
		f.failures = append(f.failures, err.Error())
	}
	t.complete(f)
}

// complete counts f as done once all its jobs are queued and finished.
func (t *tally) complete(f *fileState) {
	if f.produced && f.pending == 0 {
		t.done++
	}
}

// snapshot returns files done, resources loaded and the rate so far.
func (t *tally) snapshot() (done, resources int, perSecond float64, elapsed time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	elapsed = time.Since(t.start)
	return t.done, t.resources, float64(t.resources) / max(elapsed.Seconds(), 1e-3), elapsed
}

// startProgress reports on w until the returned function is called: a line
// redrawn in place on a terminal, a plain line every few seconds otherwise.
func startProgress(ctx context.Context, w io.Writer, t *tally) (stop func()) {
	tty := isTerminal(w)
	every := 5 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		width := 0
		for {
			select {
			case <-ctx.Done():
				if tty {
					drawProgress(w, t, &width)
					fmt.Fprintln(w)
				}
				return
			case <-tick.C:
				if tty {
					drawProgress(w, t, &width)
				} else {
					fmt.Fprintf(w, "load: %s\n", progressText(t))
				}
			}
		}
	}()
	return func() {
		cancel()
		<-finished
	}
}

// drawProgress redraws the progress line, blanking what a longer one left.
func drawProgress(w io.Writer, t *tally, width *int) {
	s := progressText(t)
	pad := max(*width-len(s), 0)
	*width = len(s)
	fmt.Fprintf(w, "\r%s%s", s, strings.Repeat(" ", pad))
}

// progressText is the progress so far in one line.
func progressText(t *tally) string {
	done, resources, rate, _ := t.snapshot()
	return fmt.Sprintf("files %d/%d  resources %d  %.0f resources/s", done, len(t.files), resources, rate)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// summarize prints the summary and each failed file; it fails when a file
// failed or the load was interrupted.
func summarize(ctx context.Context, w io.Writer, t *tally) error {
	_, resources, rate, elapsed := t.snapshot()
	var ok, failed, incomplete []*fileState
	for _, f := range t.files {
		switch {
		case len(f.failures) > 0:
			failed = append(failed, f)
		case f.interrupted || !f.produced || f.pending > 0:
			incomplete = append(incomplete, f)
		default:
			ok = append(ok, f)
		}
	}
	var b strings.Builder
	line := func(label string, v any) { fmt.Fprintf(&b, "%-16s%v\n", label+":", v) }
	line("files ok", len(ok))
	line("files failed", len(failed))
	if len(incomplete) > 0 {
		line("files not done", fmt.Sprintf("%d (interrupted)", len(incomplete)))
	}
	line("resources", resources)
	line("entries failed", t.entriesFailed)
	line("elapsed", elapsed.Round(time.Millisecond))
	line("resources/s", fmt.Sprintf("%.1f", rate))
	for _, f := range failed {
		for _, why := range f.failures {
			fmt.Fprintf(&b, "FAILED %s: %s\n", f.path, why)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("load interrupted: %d of %d files loaded", len(ok), len(t.files))
	case len(failed) > 0 && t.entriesFailed > 0:
		return fmt.Errorf("load: %d of %d files failed, %d entries not stored (listed above)", len(failed), len(t.files), t.entriesFailed)
	case len(failed) > 0:
		return fmt.Errorf("load: %d of %d files failed (listed above)", len(failed), len(t.files))
	}
	return nil
}
