package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/server/bulkexport"
	"fhirstore/store"
)

// startExports builds the bulk export job manager of serve and resumes the
// jobs a previous run left unfinished.
func startExports(ctx context.Context, cfg *config, db *database, reg *search.Registry, logger *zap.Logger) (*bulkexport.Manager, error) {
	expiry, err := cfg.duration("export-expiry")
	if err != nil {
		return nil, err
	}
	maxJobs, err := cfg.int64("export-max-jobs")
	if err != nil {
		return nil, err
	}
	fileBytes, err := cfg.int64("export-file-bytes")
	if err != nil {
		return nil, err
	}
	workers, err := cfg.int64("export-workers")
	if err != nil {
		return nil, err
	}
	dir := cfg.str("export-dir")
	if dir == "" {
		dir = filepath.Join(cfg.str("data-dir"), "exports")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("--export-dir: %w", err)
	}
	m := bulkexport.New(db.store, bulkexport.Config{Dir: dir, Expiry: expiry, MaxJobs: int(maxJobs), MaxFileBytes: fileBytes, Workers: int(workers),
		Exclusive: db.owned, Registry: reg, Logger: logger.Named("export")})
	if err := m.Start(ctx); err != nil {
		m.Close()
		return nil, fmt.Errorf("resume bulk exports: %w", err)
	}
	return m, nil
}

// exportFlags are the settings of the export command.
var exportFlags = []string{"url", "token", "tenant", "data-dir", "out", "type", "since", "type-filter", "level", "group"}

// exportSynopsis is the usage text of the export command, before its flags.
const exportSynopsis = `fhirstore export [flags]

Exports resources from a FHIR server with Bulk Data $export: kicks the
export off, polls its status (a progress line on a terminal, plain lines
otherwise), downloads the ndjson files into --out and prints a summary.
Interrupted (Ctrl-C), it cancels the export on the server. It fails with
the server's OperationOutcome when the server refuses or fails the export.
The files load back with: fhirstore load DIR

examples:
  fhirstore export --data-dir ./data --out ./export
      everything of tenant demo at http://localhost:8080/fhir/r4, with a dev token
  fhirstore export --url https://acme.fhir.example/fhir/r4 --token "$TOKEN" --type Patient,Observation --since 2024-01-01T00:00:00Z --out ./acme
  fhirstore export --level patient --type-filter 'Observation?category=vital-signs' --out ./vitals
  fhirstore export --group 42 --out ./cohort`

// exportClient talks to one server's $export.
type exportClient struct {
	client *http.Client
	base   string
	token  string
	out    string
	log    io.Writer
	tty    bool
}

// exportCmd runs the export command.
func exportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("export", exportFlags...)
	pos, err := cfg.parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, exportSynopsis)
		}
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("export: unexpected argument %q (see fhirstore export -h)", pos[0])
	}
	kick, err := kickoffURL(cfg)
	if err != nil {
		return err
	}
	base, token, err := targetOf(cfg)
	if err != nil {
		return err
	}
	x := &exportClient{client: &http.Client{Timeout: 10 * time.Minute}, base: base, token: token, out: cfg.str("out"), log: stderr, tty: isTerminal(stderr)}
	manifest, err := x.run(ctx, base+kick)
	if err != nil {
		return err
	}
	files, resources, err := x.download(ctx, manifest)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "exported %d resources in %d files to %s (as of %s)\n", resources, files, x.out, manifest.TransactionTime)
	return err
}

// kickoffURL is the kick-off path and query the flags ask for.
func kickoffURL(cfg *config) (string, error) {
	p := "/$export"
	switch level, group := cfg.str("level"), cfg.str("group"); {
	case group != "":
		if store.ValidateID(group) != nil {
			return "", fmt.Errorf("--group: %q is not a resource id", group)
		}
		p = "/Group/" + group + "/$export"
	case level == "patient":
		p = "/Patient/$export"
	case level != "system":
		return "", fmt.Errorf("--level: %q is not system or patient", level)
	}
	q := url.Values{}
	if t := cfg.str("type"); t != "" {
		q.Set("_type", t)
	}
	if s := cfg.str("since"); s != "" {
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return "", fmt.Errorf("--since: %q is not an instant such as 2024-01-02T00:00:00Z", s)
		}
		q.Set("_since", s)
	}
	for _, f := range strings.Fields(cfg.str("type-filter")) {
		q.Add("_typeFilter", f)
	}
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p, nil
}

// targetOf is --url and the bearer token: --token, or a dev token signed
// with the key of --data-dir.
func targetOf(cfg *config) (base, token string, err error) {
	base = strings.TrimRight(cfg.str("url"), "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", fmt.Errorf("--url: %q is not an http(s) FHIR base URL such as http://localhost:8080/fhir/r4", cfg.str("url"))
	}
	if token = cfg.str("token"); token != "" {
		return base, token, nil
	}
	dataDir := cfg.str("data-dir")
	if _, err := os.Stat(filepath.Join(dataDir, auth.DevKeyFile)); err != nil {
		return "", "", fmt.Errorf("no --token given and no dev signing key in data dir %s to sign one: pass --token or the server's --data-dir", dataDir)
	}
	key, err := auth.LoadOrCreateDevKey(dataDir)
	if err != nil {
		return "", "", fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	token, err = devToken(key, cfg.str("tenant"))
	return base, token, err
}

// exportManifest is what the client reads of a completion manifest.
type exportManifest struct {
	TransactionTime     string `json:"transactionTime"`
	RequiresAccessToken bool   `json:"requiresAccessToken"`
	Output              []struct {
		Type  string `json:"type"`
		URL   string `json:"url"`
		Count int64  `json:"count"`
	} `json:"output"`
	Error []struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	} `json:"error"`
}

// request sends one request with the token.
func (x *exportClient) request(ctx context.Context, method, u, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+x.token)
	req.Header.Set("Accept", accept)
	if method == http.MethodGet && strings.Contains(u, "/$export") && !strings.Contains(u, "/$export-") {
		req.Header.Set("Prefer", "respond-async")
	}
	resp, err := x.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return resp, nil
}

// run kicks the export off and polls it to its end; interrupted, it
// cancels the job on the server.
func (x *exportClient) run(ctx context.Context, kickoff string) (*exportManifest, error) {
	resp, err := x.request(ctx, http.MethodGet, kickoff, "application/fhir+json")
	if err != nil {
		return nil, err
	}
	status := resp.Header.Get("Content-Location")
	if err := answerError(resp, http.StatusAccepted, "kick-off"); err != nil {
		return nil, err
	}
	if status == "" {
		return nil, errors.New("export: the server accepted the export but sent no Content-Location to poll")
	}
	m, err := x.poll(ctx, status)
	if ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if resp, err := x.request(cctx, http.MethodDelete, status, "application/fhir+json"); err == nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("export interrupted; the export on the server was cancelled")
	}
	return m, err
}

// poll waits for the export at status to complete, as often as the
// server's Retry-After allows.
func (x *exportClient) poll(ctx context.Context, status string) (*exportManifest, error) {
	last := ""
	defer func() {
		if x.tty && last != "" {
			fmt.Fprintln(x.log)
		}
	}()
	for {
		resp, err := x.request(ctx, http.MethodGet, status, "application/json")
		if err != nil {
			return nil, err
		}
		wait := retryAfter(resp.Header.Get("Retry-After"))
		switch resp.StatusCode {
		case http.StatusOK:
			var m exportManifest
			err := json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if err != nil {
				return nil, fmt.Errorf("export: the completion manifest is not JSON: %w", err)
			}
			return &m, nil
		case http.StatusAccepted, http.StatusTooManyRequests:
			resp.Body.Close()
			if p := resp.Header.Get("X-Progress"); p != "" && p != last {
				x.progress(p, len(last))
				last = p
			}
		default:
			return nil, answerError(resp, http.StatusOK, "export")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// progress shows the server's X-Progress: redrawn in place on a terminal.
func (x *exportClient) progress(p string, prev int) {
	if x.tty {
		fmt.Fprintf(x.log, "\rexport: %s%s", p, strings.Repeat(" ", max(prev-len(p), 0)))
		return
	}
	fmt.Fprintf(x.log, "export: %s\n", p)
}

// retryAfter reads a Retry-After in seconds (1s when absent or odd).
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return time.Second
	}
	return time.Duration(n) * time.Second
}

// answerError is nil when resp has status want; otherwise the server's
// OperationOutcome (or status) as an error. It closes the body on error.
func answerError(resp *http.Response, want int, what string) error {
	if resp.StatusCode == want {
		resp.Body.Close()
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var oo struct {
		Issue []struct {
			Severity    string   `json:"severity"`
			Code        string   `json:"code"`
			Diagnostics string   `json:"diagnostics"`
			Expression  []string `json:"expression"`
		} `json:"issue"`
	}
	if json.Unmarshal(body, &oo) == nil && len(oo.Issue) > 0 {
		var msgs []string
		for _, is := range oo.Issue {
			m := is.Severity + " " + is.Code + ": " + is.Diagnostics
			if len(is.Expression) > 0 {
				m += " (at " + strings.Join(is.Expression, ", ") + ")"
			}
			msgs = append(msgs, m)
		}
		return fmt.Errorf("%s failed with HTTP %d: OperationOutcome: %s", what, resp.StatusCode, strings.Join(msgs, "; "))
	}
	return fmt.Errorf("%s failed with HTTP %d: %s", what, resp.StatusCode, oneLine(string(body)))
}

// download fetches every output file into the out directory (each file
// complete or not at all) and reports the error files' issues.
func (x *exportClient) download(ctx context.Context, m *exportManifest) (files int, resources int64, err error) {
	if err := os.MkdirAll(x.out, 0o750); err != nil {
		return 0, 0, fmt.Errorf("--out: %w", err)
	}
	for _, o := range m.Output {
		n, err := x.fetch(ctx, o.URL, filepath.Join(x.out, path.Base(o.URL)))
		if err != nil {
			return files, resources, err
		}
		if n != o.Count {
			return files, resources, fmt.Errorf("export: %s has %d resources, the manifest says %d", path.Base(o.URL), n, o.Count)
		}
		files++
		resources += n
	}
	for _, e := range m.Error {
		if err := x.reportErrors(ctx, e.URL); err != nil {
			return files, resources, err
		}
	}
	return files, resources, nil
}

// fetch downloads one file to dest through a temporary name, counting its lines.
func (x *exportClient) fetch(ctx context.Context, u, dest string) (int64, error) {
	resp, err := x.request(ctx, http.MethodGet, u, "application/fhir+ndjson")
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, answerError(resp, http.StatusOK, "download "+path.Base(u))
	}
	defer resp.Body.Close()
	tmp := dest + ".part"
	f, err := os.Create(tmp)
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	n, err := copyLines(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, fmt.Errorf("export: download %s: %w", path.Base(u), err)
	}
	return n, nil
}

// copyLines copies r to w and counts its non-empty lines.
func copyLines(w io.Writer, r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	bw := bufio.NewWriterSize(w, 1<<20)
	var n int64
	for sc.Scan() {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		n++
		if _, err := bw.Write(line); err != nil {
			return n, err
		}
		if err := bw.WriteByte('\n'); err != nil {
			return n, err
		}
	}
	if err := sc.Err(); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// reportErrors prints the issues of an error file on the log.
func (x *exportClient) reportErrors(ctx context.Context, u string) error {
	resp, err := x.request(ctx, http.MethodGet, u, "application/fhir+ndjson")
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return answerError(resp, http.StatusOK, "download "+path.Base(u))
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for sc.Scan() {
		var oo struct {
			Issue []struct {
				Severity    string `json:"severity"`
				Diagnostics string `json:"diagnostics"`
			} `json:"issue"`
		}
		if json.Unmarshal(sc.Bytes(), &oo) != nil {
			continue
		}
		for _, is := range oo.Issue {
			fmt.Fprintf(x.log, "export %s: %s\n", is.Severity, is.Diagnostics)
		}
	}
	return sc.Err()
}
