package bulkexport

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store"
)

// Defaults of Config.
const (
	DefaultExpiry       = 24 * time.Hour
	DefaultMaxJobs      = 2
	DefaultMaxFileBytes = 64 << 20
	DefaultWorkers      = 2
	DefaultLease        = time.Minute
	DefaultMaxAttempts  = 3
)

// Store is what the jobs need of package store.
type Store interface {
	Snapshot(ctx context.Context, tenant string, q store.SnapshotQuery, fn func(*store.Resource) error) error
	SnapshotSize(ctx context.Context, tenant, typ string) (int64, error)
	PutExportJob(ctx context.Context, tenant, id string, job any) error
	ExportJob(ctx context.Context, tenant, id string, out any) error
	ExportJobs(ctx context.Context, tenant string, out any) error
	DeleteExportJob(ctx context.Context, tenant, id string) error
	ListTenants(ctx context.Context) ([]store.Tenant, error)
	Read(ctx context.Context, tenant, typ, id string) (*store.Resource, error)
}

// Config configures a Manager; zero values take the defaults.
type Config struct {
	// Dir holds the files, under Dir/<tenant>/<job id>/.
	Dir string
	// Expiry is how long a finished job and its files are kept.
	Expiry time.Duration
	// MaxJobs is how many jobs of one tenant may be unfinished at once.
	MaxJobs int
	// MaxFileBytes is the size at which an output file is closed and the
	// next one of its type started.
	MaxFileBytes int64
	// Workers is how many types of one job are exported at once.
	Workers int
	// Lease is how long a running job may go without a heartbeat before
	// another process (or this one, after a restart) takes it over.
	Lease time.Duration
	// MaxAttempts bounds how often a job is started; an interrupted job
	// past it fails.
	MaxAttempts int
	// Exclusive declares that no other process runs jobs on the database:
	// every unfinished job found at Start was interrupted and resumes at once.
	Exclusive bool
	// Registry parses _typeFilter queries and knows the Patient compartment.
	Registry *search.Registry
	// Logger receives job events.
	Logger *zap.Logger
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// Manager runs the export jobs of every tenant of a store.
type Manager struct {
	cfg   Config
	st    Store
	log   *zap.Logger
	owner string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards running and polls, serializes kick-offs
	running map[string]*execution
	polls   map[string]time.Time
}

// execution is a job running in this process.
type execution struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a manager of the jobs of st; call Start to resume
// interrupted jobs and expire old ones, and Close to stop.
func New(st Store, cfg Config) *Manager {
	if cfg.Expiry <= 0 {
		cfg.Expiry = DefaultExpiry
	}
	if cfg.MaxJobs <= 0 {
		cfg.MaxJobs = DefaultMaxJobs
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{cfg: cfg, st: st, log: cfg.Logger, owner: uuid.NewString(), ctx: ctx, cancel: cancel,
		running: map[string]*execution{}, polls: map[string]time.Time{}}
}

// Start resumes the jobs an earlier process left unfinished and then, in
// the background until Close, expires old jobs and takes over jobs whose
// process stopped sending heartbeats.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.sweep(ctx, m.cfg.Exclusive); err != nil {
		return err
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(m.sweepEvery())
		defer tick.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-tick.C:
				if err := m.sweep(m.ctx, false); err != nil && m.ctx.Err() == nil {
					m.log.Warn("bulk export sweep", zap.Error(err))
				}
			}
		}
	}()
	return nil
}

// sweepEvery is the period of the background sweep.
func (m *Manager) sweepEvery() time.Duration {
	return max(min(m.cfg.Lease/2, m.cfg.Expiry/2, time.Minute), 10*time.Millisecond)
}

// Close stops the running jobs where they are (a later Start resumes
// them) and the background sweep.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
}

// RetryAfter is the polling interval clients are asked to keep.
func (m *Manager) RetryAfter() time.Duration { return time.Second }

// now is the manager's clock at millisecond precision, as stored instants.
func (m *Manager) now() time.Time { return m.cfg.Now().UTC().Truncate(time.Millisecond) }

// Kickoff validates req, records a new job and starts it.
func (m *Manager) Kickoff(ctx context.Context, tenant string, req Request) (*Job, error) {
	if _, err := m.queries(req.Types, req.TypeFilters); err != nil {
		return nil, err
	}
	patients := req.Patients
	if req.Level == LevelGroup {
		var err error
		if patients, err = m.groupMembers(ctx, tenant, req.Group); err != nil {
			return nil, err
		}
	}
	now := m.now()
	job := &Job{ID: uuid.NewString(), State: StateAccepted, Request: req.URL, Level: req.Level, Group: req.Group,
		Patients: patients, Types: req.Types, Since: req.Since, TypeFilters: req.TypeFilters, Elements: req.Elements,
		Notes: req.Notes, Views: req.Views, Format: req.Format, NoHeader: req.NoHeader, TransactionTime: now, CreatedAt: now, Heartbeat: now,
		ExpiresAt: now.Add(m.cfg.Expiry), Owner: m.owner, Attempts: 1, Cursor: Cursor{Part: 1}}
	m.mu.Lock()
	defer m.mu.Unlock()
	var jobs []*Job
	if err := m.st.ExportJobs(ctx, tenant, &jobs); err != nil {
		return nil, err
	}
	active := 0
	for _, j := range jobs {
		if j.Active() && !m.expired(j) {
			active++
		}
	}
	if active >= m.cfg.MaxJobs {
		return nil, fmt.Errorf("%w: tenant %s has %d unfinished (at most %d)", ErrTooManyJobs, tenant, active, m.cfg.MaxJobs)
	}
	if err := m.st.PutExportJob(ctx, tenant, job.ID, job); err != nil {
		return nil, err
	}
	m.launchLocked(tenant, job)
	return job, nil
}

// groupMembers are the ids of the Patients a Group lists as members.
func (m *Manager) groupMembers(ctx context.Context, tenant, id string) ([]string, error) {
	res, err := m.st.Read(ctx, tenant, "Group", id)
	if err != nil {
		return nil, err
	}
	var g struct {
		Member []struct {
			Entity struct {
				Reference string `json:"reference"`
			} `json:"entity"`
		} `json:"member"`
	}
	if err := unmarshal(res.JSON, &g); err != nil {
		return nil, fmt.Errorf("read Group/%s: %w", id, err)
	}
	ids := []string{}
	seen := map[string]bool{}
	for _, mem := range g.Member {
		pid, ok := strings.CutPrefix(mem.Entity.Reference, "Patient/")
		if ok && store.ValidateID(pid) == nil && !seen[pid] {
			seen[pid] = true
			ids = append(ids, pid)
		}
	}
	return ids, nil
}

// queries parses _typeFilter values by type, rejecting those that do not
// parse or name a type outside the export.
func (m *Manager) queries(types, filters []string) (map[string][]*search.Query, error) {
	out := map[string][]*search.Query{}
	for _, f := range filters {
		typ, query, _ := strings.Cut(f, "?")
		if !contains(types, typ) {
			return nil, paramError("_typeFilter", "%q filters %s, which is not among the exported types", f, typ)
		}
		values, err := url.ParseQuery(query)
		if err != nil || len(values) == 0 {
			return nil, paramError("_typeFilter", "%q is not a search query such as Observation?status=final", f)
		}
		if m.cfg.Registry == nil {
			return nil, paramError("_typeFilter", "search is not available on this server")
		}
		q, err := m.cfg.Registry.Parse(typ, values, search.ParseOptions{Strict: true})
		if err != nil {
			return nil, paramError("_typeFilter", "%q: %v", f, err)
		}
		out[typ] = append(out[typ], q)
	}
	return out, nil
}

// Status returns the state of a job; ErrNotFound when it does not exist or
// has expired (an expired job is removed on the way).
func (m *Manager) Status(ctx context.Context, tenant, id string) (*Job, error) {
	var job Job
	if err := m.st.ExportJob(ctx, tenant, id, &job); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	if m.expired(&job) {
		if err := m.remove(ctx, tenant, id); err != nil {
			return nil, err
		}
		return nil, ErrNotFound
	}
	return &job, nil
}

// Poll records a status request of a job and tells whether it came at
// least interval after the previous one.
func (m *Manager) Poll(tenant, id string, interval time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := tenant + "/" + id
	now := time.Now()
	if last, ok := m.polls[key]; ok && now.Sub(last) < interval {
		return false
	}
	m.polls[key] = now
	return true
}

// Cancel stops a job if it runs and deletes it with its files.
func (m *Manager) Cancel(ctx context.Context, tenant, id string) error {
	if _, err := m.Status(ctx, tenant, id); err != nil {
		return err
	}
	return m.remove(ctx, tenant, id)
}

// FilePath is where the file name of job id lives, with what the manifest
// says of it; ErrNotFound for a file the finished job does not list.
func (m *Manager) FilePath(ctx context.Context, tenant, id, name string) (string, *File, error) {
	job, err := m.Status(ctx, tenant, id)
	if err != nil {
		return "", nil, err
	}
	if job.State == StateCompleted {
		for _, list := range [][]File{job.Output, job.Errors} {
			for i := range list {
				if list[i].Name == name {
					return filepath.Join(m.jobDir(tenant, id), name), &list[i], nil
				}
			}
		}
	}
	return "", nil, ErrNotFound
}

// jobDir is the directory of a job's files.
func (m *Manager) jobDir(tenant, id string) string { return filepath.Join(m.cfg.Dir, tenant, id) }

func (m *Manager) expired(j *Job) bool { return m.cfg.Now().After(j.ExpiresAt) }

// remove stops a local run of the job, then deletes its state and files.
func (m *Manager) remove(ctx context.Context, tenant, id string) error {
	key := tenant + "/" + id
	m.mu.Lock()
	ex := m.running[key]
	delete(m.polls, key)
	m.mu.Unlock()
	if ex != nil {
		ex.cancel()
		<-ex.done
	}
	if err := m.st.DeleteExportJob(ctx, tenant, id); err != nil {
		return err
	}
	if err := os.RemoveAll(m.jobDir(tenant, id)); err != nil {
		return fmt.Errorf("remove files of export %s: %w", id, err)
	}
	return nil
}

// sweep expires old jobs of every tenant and resumes the unfinished ones
// nobody runs: all of them when orphans is set, else those whose
// heartbeat is older than the lease.
func (m *Manager) sweep(ctx context.Context, orphans bool) error {
	tenants, err := m.st.ListTenants(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, t := range tenants {
		var jobs []*Job
		if err := m.st.ExportJobs(ctx, t.Name, &jobs); err != nil {
			return err
		}
		for _, j := range jobs {
			known[filepath.Join(t.Name, j.ID)] = true
			if err := m.tend(ctx, t.Name, j, orphans); err != nil {
				return err
			}
		}
	}
	return m.removeOrphans(known)
}

// removeOrphans deletes the directories of jobs that no longer exist
// (their tenant was deleted, or their state removed) once they have not
// changed for a lease, so that a job starting meanwhile is left alone.
func (m *Manager) removeOrphans(known map[string]bool) error {
	tenants, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("list export files: %w", err)
	}
	for _, t := range tenants {
		if !t.IsDir() {
			continue
		}
		jobs, err := os.ReadDir(filepath.Join(m.cfg.Dir, t.Name()))
		if err != nil {
			return fmt.Errorf("list export files: %w", err)
		}
		for _, j := range jobs {
			rel := filepath.Join(t.Name(), j.Name())
			info, err := j.Info()
			if known[rel] || err != nil || m.cfg.Now().Sub(info.ModTime()) < m.cfg.Lease {
				continue
			}
			m.log.Info("bulk export files without a job removed", zap.String("dir", rel))
			if err := os.RemoveAll(filepath.Join(m.cfg.Dir, rel)); err != nil {
				return fmt.Errorf("remove export files: %w", err)
			}
		}
	}
	return nil
}

// tend expires one job or takes it over when it was abandoned.
func (m *Manager) tend(ctx context.Context, tenant string, j *Job, orphan bool) error {
	if m.expired(j) {
		m.log.Info("bulk export expired", zap.String("tenant", tenant), zap.String("job", j.ID))
		return m.remove(ctx, tenant, j.ID)
	}
	if !j.Active() || (!orphan && m.now().Sub(j.Heartbeat) < m.cfg.Lease) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running[tenant+"/"+j.ID] != nil {
		return nil
	}
	if j.Attempts >= m.cfg.MaxAttempts {
		j.State, j.Failure = StateFailed, fmt.Sprintf("the export was interrupted %d times; start a new one", j.Attempts)
		j.ExpiresAt = m.now().Add(m.cfg.Expiry)
		return m.st.PutExportJob(ctx, tenant, j.ID, j)
	}
	j.Attempts++
	j.Owner, j.Heartbeat = m.owner, m.now()
	if err := m.st.PutExportJob(ctx, tenant, j.ID, j); err != nil {
		return err
	}
	m.log.Info("bulk export resumed", zap.String("tenant", tenant), zap.String("job", j.ID), zap.Int("attempt", j.Attempts))
	m.launchLocked(tenant, j)
	return nil
}

// launchLocked runs job in the background; m.mu is held.
func (m *Manager) launchLocked(tenant string, job *Job) {
	key := tenant + "/" + job.ID
	ctx, cancel := context.WithCancel(m.ctx)
	ex := &execution{cancel: cancel, done: make(chan struct{})}
	m.running[key] = ex
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(ex.done)
		defer cancel()
		m.execute(ctx, tenant, job)
		m.mu.Lock()
		delete(m.running, key)
		m.mu.Unlock()
	}()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
