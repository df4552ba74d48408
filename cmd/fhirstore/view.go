package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	viewdef "fhirstore/fhirschema/view"
	"fhirstore/server/viewsql"
	"fhirstore/store"
)

// viewFlags are the settings of the view command.
var viewFlags = []string{"url", "token", "tenant", "data-dir", "mongodb-uri", "direct", "format", "out", "since"}

// viewSynopsis is the usage text of the view command, before its flags.
const viewSynopsis = `fhirstore view [flags] VIEW.json...

Runs SQL on FHIR ViewDefinitions (JSON files) over a tenant's data and
writes their rows as csv, ndjson, json or parquet: into --out DIR, a file
per view named after it, or for one view without --out to standard output.
Over HTTP it calls the server's ViewDefinition/$viewdefinition-run; with
--direct it reads the database of --data-dir (or --mongodb-uri) in this
process, beside a server running on it or not. A progress line on standard
error tells how far a long run is; a summary ends it.`

// viewProgressEvery is how often the progress line is redrawn.
const viewProgressEvery = time.Second

// viewCmd runs the view command.
func viewCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := newConfig("view", viewFlags...)
	files, err := cfg.parse(boolFlagArgs(args, "direct"))
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cfg.usage(stdout, viewSynopsis)
		}
		return err
	}
	if len(files) == 0 {
		return errors.New("view: no VIEW.json given (see fhirstore view -h)")
	}
	format, ok := viewdef.ParseFormat(cfg.str("format"))
	if !ok {
		return fmt.Errorf("--format: %q is not csv, ndjson, json or parquet", cfg.str("format"))
	}
	out := ""
	cfg.fs.Visit(func(f *flag.Flag) {
		if f.Name == "out" {
			out = f.Value.String()
		}
	})
	if out == "" && len(files) > 1 {
		return errors.New("view: several views need --out DIR, a file each")
	}
	runner, err := newViewRunner(ctx, cfg, format, stderr)
	if err != nil {
		return err
	}
	defer runner.close()
	for _, f := range files {
		if err := runner.runFile(ctx, f, out, stdout); err != nil {
			return err
		}
	}
	return nil
}

// viewRunner runs views over a server or a database.
type viewRunner struct {
	format string
	since  string
	log    io.Writer
	tty    bool
	// remote: the server's base URL and token.
	base, token string
	client      *http.Client
	// direct: the database and tenant.
	db     *database
	tenant string
}

func newViewRunner(ctx context.Context, cfg *config, format string, stderr io.Writer) (*viewRunner, error) {
	r := &viewRunner{format: format, since: cfg.str("since"), log: stderr, tty: isTerminal(stderr), tenant: cfg.str("tenant")}
	if r.since != "" {
		if _, err := time.Parse(time.RFC3339Nano, r.since); err != nil {
			return nil, fmt.Errorf("--since: %q is not an instant such as 2024-01-02T00:00:00Z", r.since)
		}
	}
	direct, err := strconv.ParseBool(cfg.str("direct"))
	if err != nil {
		return nil, fmt.Errorf("--direct: %q is not true or false", cfg.str("direct"))
	}
	if !direct {
		var err error
		r.base, r.token, err = targetOf(cfg)
		r.client = &http.Client{}
		return r, err
	}
	db, err := openDatabase(ctx, cfg.str("mongodb-uri"), cfg.str("data-dir"), true, storeOptions{}, zap.NewNop())
	if err != nil {
		return nil, err
	}
	r.db = db
	return r, nil
}

func (r *viewRunner) close() {
	if r.db != nil {
		r.db.close()
	}
}

// runFile runs the view of one file into outDir (or w when outDir is "").
func (r *viewRunner) runFile(ctx context.Context, file, outDir string, w io.Writer) error {
	def, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	v, err := viewdef.Compile(def, viewdef.Options{})
	if err != nil {
		return fmt.Errorf("view %s: %w", file, err)
	}
	name := v.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	dest, path, err := r.destination(outDir, name, w)
	if err != nil {
		return err
	}
	p := &viewProgress{name: name, log: r.log, tty: r.tty, start: time.Now()}
	stop := p.run(ctx)
	if r.db != nil {
		err = r.runDirect(ctx, v, dest, p)
	} else {
		err = r.runRemote(ctx, def, dest, p)
	}
	stop()
	if c, ok := dest.(io.Closer); ok && dest != w {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if path != "" {
			_ = os.Remove(path)
		}
		return fmt.Errorf("view %s: %w", name, err)
	}
	p.summary(path)
	return nil
}

// destination is where a view's rows go: DIR/<name>.<format>, or w.
func (r *viewRunner) destination(outDir, name string, w io.Writer) (io.Writer, string, error) {
	if outDir == "" {
		if r.format == viewdef.FormatParquet && isTerminal(w) {
			return nil, "", errors.New("view: parquet is binary: give --out DIR or redirect standard output")
		}
		return w, "", nil
	}
	if err := os.MkdirAll(outDir, 0o750); err != nil {
		return nil, "", fmt.Errorf("--out: %w", err)
	}
	path := filepath.Join(outDir, name+viewdef.Extension(r.format))
	f, err := os.Create(path)
	if err != nil {
		return nil, "", fmt.Errorf("--out: %w", err)
	}
	return f, path, nil
}

// runRemote posts the view to the server's $viewdefinition-run and copies
// the rows as they stream in.
func (r *viewRunner) runRemote(ctx context.Context, def []byte, dest io.Writer, p *viewProgress) error {
	var viewRes map[string]any
	if err := json.Unmarshal(def, &viewRes); err != nil {
		return fmt.Errorf("read the view: %w", err)
	}
	if _, ok := viewRes["resourceType"]; !ok {
		viewRes["resourceType"] = viewdef.ResourceType
	}
	params := []any{map[string]any{"name": "viewResource", "resource": viewRes}, map[string]any{"name": "_format", "valueCode": r.format}}
	if r.since != "" {
		params = append(params, map[string]any{"name": "_since", "valueInstant": r.since})
	}
	body, err := json.Marshal(map[string]any{"resourceType": "Parameters", "parameter": params})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/ViewDefinition/$viewdefinition-run", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/fhir+json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return answerError(resp, http.StatusOK, "$viewdefinition-run")
	}
	defer resp.Body.Close()
	if r.format == viewdef.FormatCSV {
		p.rows.Add(-1) // the header line
	}
	_, err = io.Copy(&countingDest{w: dest, p: p, lines: r.format == viewdef.FormatNDJSON || r.format == viewdef.FormatCSV}, resp.Body)
	if err != nil {
		return fmt.Errorf("the answer broke off: %w", err)
	}
	return nil
}

// countingDest counts what is copied to w for the progress line.
type countingDest struct {
	w     io.Writer
	p     *viewProgress
	lines bool
}

func (c *countingDest) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.p.bytes.Add(int64(n))
	if c.lines {
		c.p.rows.Add(int64(bytes.Count(b[:n], []byte{'\n'})))
	}
	return n, err
}

// runDirect evaluates the view over a snapshot of the tenant's resources
// of its type, read from the database in this process.
func (r *viewRunner) runDirect(ctx context.Context, v *viewdef.View, dest io.Writer, p *viewProgress) error {
	sink, err := viewdef.NewSink(dest, r.format, v.Columns(), viewdef.SinkOptions{})
	if err != nil {
		return err
	}
	q := store.SnapshotQuery{Type: v.Resource, At: time.Now().UTC()}
	if r.since != "" {
		t, _ := time.Parse(time.RFC3339Nano, r.since)
		q.Since = &t
	}
	stream := v.NewStream(ctx, 0, func(row []any) error {
		p.rows.Add(1)
		return sink.WriteRow(row)
	})
	err = r.db.store.Snapshot(ctx, r.tenant, q, func(res *store.Resource) error {
		p.resources.Add(1)
		return stream.Add(res.JSON)
	})
	if cerr := stream.Close(); cerr != nil || errors.Is(err, viewdef.ErrStopped) {
		err = cerr
	}
	if err != nil {
		return err
	}
	return sink.Close()
}

// viewProgress is how far a view's run is, shown on a progress line.
type viewProgress struct {
	name                   string
	log                    io.Writer
	tty                    bool
	start                  time.Time
	rows, bytes, resources atomic.Int64
	width                  int
}

// run redraws the progress line every viewProgressEvery until stop.
func (p *viewProgress) run(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(viewProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				p.line()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// status describes the run so far.
func (p *viewProgress) status() string {
	s := fmt.Sprintf("view %s: %d rows", p.name, max(p.rows.Load(), 0))
	if n := p.resources.Load(); n > 0 {
		s += fmt.Sprintf(" from %d resources", n)
	}
	if n := p.bytes.Load(); n > 0 {
		s += fmt.Sprintf(", %d bytes", n)
	}
	return s + fmt.Sprintf(" in %s", time.Since(p.start).Round(time.Second))
}

func (p *viewProgress) line() {
	s := p.status()
	if p.tty {
		fmt.Fprintf(p.log, "\r%s%s", s, strings.Repeat(" ", max(p.width-len(s), 0)))
		p.width = len(s)
		return
	}
	fmt.Fprintln(p.log, s)
}

// summary ends the run's output on standard error.
func (p *viewProgress) summary(path string) {
	if p.tty && p.width > 0 {
		fmt.Fprint(p.log, "\r"+strings.Repeat(" ", p.width)+"\r")
	}
	s := p.status()
	if path != "" {
		s += " → " + path
	}
	fmt.Fprintln(p.log, s)
}

// sqlLimits are the limits of $sqlquery-run from the serve flags.
func sqlLimits(cfg *config) (viewsql.Limits, error) {
	timeout, err := cfg.duration("sql-timeout")
	if err != nil {
		return viewsql.Limits{}, err
	}
	rows, err := cfg.int64("sql-max-rows")
	if err != nil {
		return viewsql.Limits{}, err
	}
	size, err := cfg.int64("sql-max-bytes")
	if err != nil {
		return viewsql.Limits{}, err
	}
	cache, err := cfg.int64("sql-cache-bytes")
	if err != nil {
		return viewsql.Limits{}, err
	}
	return viewsql.Limits{Timeout: timeout, MaxRows: int(rows), MaxBytes: size, CacheBytes: cache}, nil
}
