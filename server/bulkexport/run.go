package bulkexport

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"fhirstore/search"
	"fhirstore/store"
)

// errCancelled stops a run whose job was deleted meanwhile.
var errCancelled = errors.New("export job cancelled")

// maxIssues bounds the per-resource problems a job keeps for its error file.
const maxIssues = 1000

// errorFile is the name of a job's OperationOutcome file.
const errorFile = "errors.ndjson"

// run is one execution of a job.
type run struct {
	m      *Manager
	tenant string
	dir    string
	mu     sync.Mutex // guards job while the heartbeat saves it
	job    *Job

	// pmu guards what the type workers share: the issues, where each type
	// stands, and the checkpoints (one worker records at a time).
	pmu    sync.Mutex
	issues []string
	// cur is where the last checkpoint stands (job.Cursor); types holds
	// the types under way or done since, with their files not yet recorded.
	cur        Cursor
	types      map[int]*typeProgress
	checkpoint time.Time
}

// typeProgress is how far one type of a run got since the last checkpoint.
type typeProgress struct {
	files []File // closed, not yet synced or recorded
	after string // id of the last resource in files
	part  int    // number of the next file
	done  bool
}

// checkpointEvery is how often a run makes its finished files durable and
// records them: syncing and recording each file on its own would cost more
// than writing it when types are small.
const checkpointEvery = time.Second

// execute runs job to its end: completed, or failed with the reason. A run
// stopped by Close or Cancel leaves the job as it is.
func (m *Manager) execute(ctx context.Context, tenant string, job *Job) {
	r := &run{m: m, tenant: tenant, dir: m.jobDir(tenant, job.ID), job: job}
	err := r.export(ctx)
	if ctx.Err() != nil || errors.Is(err, errCancelled) {
		return
	}
	if err != nil {
		m.log.Error("bulk export failed", zap.String("tenant", tenant), zap.String("job", job.ID), zap.Error(err))
		r.mu.Lock()
		job.State, job.Failure = StateFailed, failureText(err)
		job.ExpiresAt = m.now().Add(m.cfg.Expiry)
		r.mu.Unlock()
		if err := r.save(ctx); err != nil && !errors.Is(err, errCancelled) {
			m.log.Error("record failed bulk export", zap.String("job", job.ID), zap.Error(err))
		}
		return
	}
	m.log.Info("bulk export completed", zap.String("tenant", tenant), zap.String("job", job.ID), zap.Int64("resources", job.Exported))
}

// failureText is what a client is told of a failure: database details stay in the log.
func failureText(err error) string {
	if errors.Is(err, store.ErrUnavailable) {
		return "the database did not answer; start the export again later"
	}
	var pe *ParamError
	if errors.As(err, &pe) {
		return pe.Error()
	}
	return "the export failed on the server; see its log"
}

// export writes every remaining type, then the error file, and marks the
// job completed.
func (r *run) export(ctx context.Context) error {
	r.mu.Lock()
	r.job.State, r.job.Heartbeat = StateRunning, r.m.now()
	r.mu.Unlock()
	if err := r.save(ctx); err != nil {
		return err
	}
	if err := r.clean(); err != nil {
		return err
	}
	stop := r.heartbeat(ctx)
	defer stop()
	queries, err := r.m.queries(r.job.Types, r.job.TypeFilters)
	if err != nil {
		return err
	}
	r.cur, r.types, r.checkpoint = r.job.Cursor, map[int]*typeProgress{}, time.Now()
	if err := r.exportTypes(ctx, queries); err != nil {
		return err
	}
	if err := r.writeErrors(); err != nil {
		return err
	}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	return r.record(ctx, true)
}

// exportTypes exports the types from the cursor on, Config.Workers of them
// at a time, the largest first (so that no large type starts last and
// runs alone); the first error stops them all.
func (r *run) exportTypes(ctx context.Context, queries map[string][]*search.Query) error {
	order, err := r.largestFirst(ctx)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.m.cfg.Workers)
	for _, i := range order {
		from := Cursor{Type: i, Part: 1}
		if i == r.cur.Type {
			from = r.cur
		}
		g.Go(func() error { return r.exportType(gctx, from, queries) })
	}
	return g.Wait()
}

// largestFirst orders the types from the cursor on by their estimated
// size, largest first (in _type order with one worker, or one type).
func (r *run) largestFirst(ctx context.Context) ([]int, error) {
	var order []int
	for i := r.cur.Type; i < len(r.job.Types); i++ {
		order = append(order, i)
	}
	if r.m.cfg.Workers < 2 || len(order) < 2 {
		return order, nil
	}
	size := make(map[int]int64, len(order))
	for _, i := range order {
		n, err := r.m.st.SnapshotSize(ctx, r.tenant, r.job.Types[i])
		if err != nil {
			return nil, err
		}
		size[i] = n
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(size[b], size[a]) })
	return order, nil
}

// clean prepares the job's directory: what a previous run wrote but did
// not record as finished is removed, so no half-written file is kept.
func (r *run) clean() error {
	if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return fmt.Errorf("export directory: %w", err)
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("export directory: %w", err)
	}
	keep := map[string]bool{}
	for _, f := range r.job.Output {
		keep[f.Name] = true
	}
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := os.Remove(filepath.Join(r.dir, e.Name())); err != nil {
				return fmt.Errorf("remove unfinished export file: %w", err)
			}
		}
	}
	r.job.Errors = nil
	return nil
}

// heartbeat saves the job regularly so that other processes know it runs.
func (r *run) heartbeat(ctx context.Context) (stop func()) {
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(max(r.m.cfg.Lease/3, 5*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-tick.C:
				r.mu.Lock()
				r.job.Heartbeat = r.m.now()
				r.mu.Unlock()
				if err := r.save(hctx); err != nil && hctx.Err() == nil && !errors.Is(err, errCancelled) {
					r.m.log.Warn("bulk export heartbeat", zap.String("job", r.job.ID), zap.Error(err))
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// save stores the job's state unless the job was deleted meanwhile.
func (r *run) save(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var cur Job
	if err := r.m.st.ExportJob(ctx, r.tenant, r.job.ID, &cur); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errCancelled
		}
		return err
	}
	if cur.Owner != r.job.Owner {
		return errCancelled // another process took the job over
	}
	return r.m.st.PutExportJob(ctx, r.tenant, r.job.ID, r.job)
}

// exportType writes the resources of one type, from where the cursor from
// says, into files, recording them at checkpoints.
func (r *run) exportType(ctx context.Context, from Cursor, filters map[string][]*search.Query) error {
	if len(r.job.Views) > 0 {
		return r.exportView(ctx, from)
	}
	typ := r.job.Types[from.Type]
	match, err := r.match(typ, filters[typ])
	if err != nil {
		return err
	}
	r.pmu.Lock()
	r.types[from.Type] = &typeProgress{after: from.After, part: from.Part}
	r.pmu.Unlock()
	w := &fileWriter{dir: r.dir, typ: typ, part: from.Part, max: r.m.cfg.MaxFileBytes}
	defer w.abort()
	elements := elementsOf(typ, r.job.Elements)
	q := store.SnapshotQuery{Type: typ, At: r.job.TransactionTime, Since: r.job.Since, Match: match, After: from.After}
	err = r.m.st.Snapshot(ctx, r.tenant, q, func(res *store.Resource) error {
		line, err := subset(res.JSON, elements)
		if err != nil {
			r.issue(fmt.Sprintf("%s/%s could not be exported: %v", typ, res.ID, err))
			return nil
		}
		full, err := w.write(line, res.ID)
		if err != nil || !full {
			return err
		}
		return r.finish(ctx, from.Type, w, false)
	})
	if err != nil {
		return err
	}
	return r.finish(ctx, from.Type, w, true)
}

// finish closes the current file of w, the writer of type i (at the
// type's end, marking the type done), recording what is pending once a
// checkpoint is due.
func (r *run) finish(ctx context.Context, i int, w partWriter, typeDone bool) error {
	f, err := w.close()
	if err != nil {
		return err
	}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	p := r.types[i]
	if f != nil {
		p.files = append(p.files, *f)
		p.after, p.part = w.position()
	}
	p.done = typeDone
	if time.Since(r.checkpoint) < checkpointEvery {
		return nil
	}
	return r.record(ctx, false)
}

// record makes the closed files of the types before the first type still
// under way, and of that type, durable under their final names, and saves
// the job with them and the cursor: a crash before leaves them as .part
// files that the next run deletes and writes again. Files of later types
// wait: the cursor says only how far the types are done in order. With
// complete (every type done) the job is saved as completed. The caller
// holds pmu.
func (r *run) record(ctx context.Context, complete bool) error {
	r.checkpoint = time.Now()
	cur, files := r.cur, []File(nil)
	for cur.Type < len(r.job.Types) {
		p := r.types[cur.Type]
		if p == nil {
			break
		}
		files = append(files, p.files...)
		p.files = nil
		if !p.done {
			cur.After, cur.Part = p.after, p.part
			break
		}
		delete(r.types, cur.Type)
		cur = Cursor{Type: cur.Type + 1, Part: 1}
	}
	if len(files) == 0 && cur == r.cur && !complete {
		return nil
	}
	if err := finalize(r.dir, files); err != nil {
		return err
	}
	r.mu.Lock()
	for _, f := range files {
		r.job.Output = append(r.job.Output, f)
		r.job.Exported += f.Count
	}
	r.job.Cursor = cur
	if complete {
		r.job.State, r.job.ExpiresAt = StateCompleted, r.m.now().Add(r.m.cfg.Expiry)
	}
	r.mu.Unlock()
	r.cur = cur
	return r.save(ctx)
}

// match is the selection of typ: the _typeFilter queries (any of them),
// each narrowed to the patients in scope of a Patient or Group export.
func (r *run) match(typ string, filters []*search.Query) ([]*search.Query, error) {
	if r.job.Level == LevelSystem {
		return filters, nil
	}
	if r.m.cfg.Registry == nil {
		return nil, errors.New("patient-level export needs the search registry")
	}
	pop, err := r.m.cfg.Registry.PatientPopulation(typ, r.job.Patients)
	if err != nil {
		return nil, err
	}
	if len(filters) == 0 {
		return []*search.Query{pop}, nil
	}
	out := make([]*search.Query, len(filters))
	for i, f := range filters {
		q := *f
		q.Conditions = append(q.Conditions[:len(q.Conditions):len(q.Conditions)], pop.Conditions...)
		out[i] = &q
	}
	return out, nil
}

// issue records a problem for the error file.
func (r *run) issue(msg string) {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if len(r.issues) < maxIssues {
		r.issues = append(r.issues, msg)
	}
}

// writeErrors writes the notes of the kick-off and the problems of the run
// as OperationOutcome lines, when there are any.
func (r *run) writeErrors() error {
	msgs := append(append([]string(nil), r.job.Notes...), r.issues...)
	if len(msgs) == 0 {
		return nil
	}
	var b strings.Builder
	for _, msg := range msgs {
		line, err := json.Marshal(map[string]any{"resourceType": "OperationOutcome", "issue": []map[string]any{
			{"severity": "warning", "code": "processing", "diagnostics": msg}}})
		if err != nil {
			return fmt.Errorf("error file: %w", err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := writeFileSync(filepath.Join(r.dir, errorFile), []byte(b.String())); err != nil {
		return err
	}
	r.mu.Lock()
	r.job.Errors = []File{{Type: "OperationOutcome", Name: errorFile, Count: int64(len(msgs))}}
	r.mu.Unlock()
	return nil
}

func unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
