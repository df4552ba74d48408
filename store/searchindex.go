package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// When a tenant's SearchParameters change, the rows of their base types
// written before hold no values (or stale ones) of the parameters that
// changed. A background job per tenant extracts them again, type by type,
// a batch of rows at a time, and records in the tenant's settings what
// every row of a type holds (indexState.Complete: code → signature) and
// how far the job is (indexState.Job: the last _id done). So the job
// resumes where it stopped after a restart, any server of the database
// may take it over (one at a time: a lease), and a search can tell
// whether a tenant parameter answers from every row yet (Reindexing).

// indexStateKind marks the settings documents of indexState.
const indexStateKind = "searchIndex"

// searchIndexLease names the lease of a tenant's re-indexing job.
const searchIndexLease = "searchIndex"

// Timings of the re-indexing job: how long its lease lasts without a
// renewal (a batch renews it), how often it logs its progress, and how
// often a search that finds a parameter still being re-indexed may ask
// this process to take the job over (its owner may have stopped).
// FaultReindexBatch is the fault point (Options.Fault) before each batch
// of a re-indexing job: an error stops the job there, as a crash would.
const FaultReindexBatch = "searchindex.batch"

const (
	searchIndexLeaseTTL  = 2 * time.Minute
	searchIndexLogEvery  = 10 * time.Second
	searchIndexNudgeWait = 10 * time.Second
)

// indexState is what the rows of one type of a tenant hold of the
// tenant's own parameters.
type indexState struct {
	ID   string `bson:"_id"` // searchIndex/<Type>
	Kind string `bson:"kind"`
	Type string `bson:"type"`
	// Complete maps the codes whose values every row holds to the
	// signature of the definition they were extracted with.
	Complete map[string]string `bson:"complete"`
	// Job is the re-indexing under way; nil when none is.
	Job *indexJob `bson:"job,omitempty"`
}

// indexJob is a re-indexing of one type's rows towards Target.
type indexJob struct {
	ID      string            `bson:"id"`
	Target  map[string]string `bson:"target"`
	After   string            `bson:"after"` // the last _id done; "" before the first batch
	Done    int64             `bson:"done"`
	Total   int64             `bson:"total"` // rows when the job started
	Started time.Time         `bson:"started"`
	Updated time.Time         `bson:"updated"`
}

// searchIndexer runs the re-indexing jobs of this process, one goroutine
// per tenant at most, until the store closes.
type searchIndexer struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	owner   string
	closed  bool
	running map[string]bool
	again   map[string]bool
	nudged  map[string]time.Time
}

// kickSearchIndex makes this process look for re-indexing work in
// tenant, now or, when it is at it already, once more afterwards.
func (s *Store) kickSearchIndex(tenant string) {
	x := &s.searchIndex
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed || s.opts.Registry == nil {
		return
	}
	if x.ctx == nil {
		x.ctx, x.cancel = context.WithCancel(context.Background())
		x.owner = "store-" + uuid.NewString()
		x.running, x.again, x.nudged = map[string]bool{}, map[string]bool{}, map[string]time.Time{}
	}
	if x.running[tenant] {
		x.again[tenant] = true
		return
	}
	x.running[tenant] = true
	x.wg.Add(1)
	go s.searchIndexLoop(x.ctx, tenant)
}

// nudgeSearchIndex is kickSearchIndex at most once per searchIndexNudgeWait.
func (s *Store) nudgeSearchIndex(tenant string) {
	x := &s.searchIndex
	x.mu.Lock()
	last, now := x.nudged[tenant], time.Now()
	if x.nudged != nil && now.Sub(last) < searchIndexNudgeWait {
		x.mu.Unlock()
		return
	}
	if x.nudged != nil {
		x.nudged[tenant] = now
	}
	x.mu.Unlock()
	s.kickSearchIndex(tenant)
}

// stopSearchIndex stops the jobs of this process and waits for them;
// their progress is recorded, and the next start resumes them.
func (s *Store) stopSearchIndex() {
	x := &s.searchIndex
	x.mu.Lock()
	x.closed = true
	if x.cancel != nil {
		x.cancel()
	}
	x.mu.Unlock()
	x.wg.Wait()
}

func (s *Store) searchIndexLoop(ctx context.Context, tenant string) {
	x := &s.searchIndex
	defer x.wg.Done()
	for {
		if err := s.reindexTenantParams(ctx, tenant); err != nil && ctx.Err() == nil {
			s.log.Error("re-index the search parameters of a tenant", zap.String("tenant", tenant), zap.Error(err))
		}
		x.mu.Lock()
		if !x.again[tenant] || ctx.Err() != nil {
			delete(x.running, tenant)
			x.mu.Unlock()
			return
		}
		delete(x.again, tenant)
		x.mu.Unlock()
	}
}

// holdSearchIndex takes or renews this process's lease of tenant's
// re-indexing work. A process that is the database's only writer
// (Options.Exclusive) needs none: a lease it finds is a previous run's.
func (s *Store) holdSearchIndex(ctx context.Context, tenant string) (bool, error) {
	if s.opts.Exclusive {
		return true, nil
	}
	return s.Lease(ctx, tenant, searchIndexLease, s.searchIndex.owner, searchIndexLeaseTTL)
}

// errRegistryMoved stops a job whose target the tenant's
// SearchParameters changed meanwhile: it is planned again.
var errRegistryMoved = errors.New("the search parameters changed")

// reindexTenantParams does the re-indexing work of tenant, if this
// process can take its lease, until none is left.
func (s *Store) reindexTenantParams(ctx context.Context, tenant string) error {
	ok, err := s.holdSearchIndex(ctx, tenant)
	if err != nil || !ok {
		return err // another process is at it
	}
	if !s.opts.Exclusive {
		defer func() {
			_ = s.ReleaseLease(context.WithoutCancel(ctx), tenant, searchIndexLease, s.searchIndex.owner)
		}()
	}
	for {
		tr, err := s.tenantRegistry(ctx, tenant)
		if err != nil {
			return err
		}
		states, pending, err := s.indexPlan(ctx, tenant, tr.reg)
		if err != nil || len(pending) == 0 {
			return err
		}
		for _, typ := range pending {
			err := s.runIndexJob(ctx, tenant, states[typ], tr.reg.TenantSignatures(typ))
			if errors.Is(err, errRegistryMoved) {
				break
			}
			if err != nil {
				return err
			}
		}
	}
}

// indexPlan reads the index states of tenant and lists the types whose
// rows do not hold what reg's tenant parameters need, sorted. A type
// without a state gets an empty one.
func (s *Store) indexPlan(ctx context.Context, tenant string, reg *search.Registry) (map[string]*indexState, []string, error) {
	states, err := s.indexStates(ctx, tenant)
	if err != nil {
		return nil, nil, err
	}
	types := reg.TenantTypes()
	for t := range states {
		types = append(types, t)
	}
	slices.Sort(types)
	var pending []string
	for _, t := range slices.Compact(types) {
		if states[t] == nil {
			states[t] = &indexState{ID: indexStateKind + "/" + t, Kind: indexStateKind, Type: t, Complete: map[string]string{}}
		}
		if !maps.Equal(states[t].Complete, reg.TenantSignatures(t)) {
			pending = append(pending, t)
		}
	}
	return states, pending, nil
}

// runIndexJob brings the rows of st.Type to target: it resumes the job
// recorded when its target is the same, and starts one otherwise.
func (s *Store) runIndexJob(ctx context.Context, tenant string, st *indexState, target map[string]string) error {
	coll := s.tenantDB(tenant).Collection(st.Type)
	if st.Job == nil || !maps.Equal(st.Job.Target, target) {
		total, err := coll.Count(ctx, bson.D{{Key: "deleted", Value: false}})
		if err != nil {
			return dbError("count the rows to re-index", err)
		}
		now := s.opts.Now().UTC()
		st.Job = &indexJob{ID: uuid.NewString(), Target: target, Total: total, Started: now, Updated: now}
		if err := s.saveIndexState(ctx, tenant, st); err != nil {
			return err
		}
	}
	s.log.Info("search parameters: re-indexing the resources written before them",
		zap.String("tenant", tenant), zap.String("type", st.Type), zap.Strings("parameters", pendingCodes(st.Complete, target)),
		zap.Int64("done", st.Job.Done), zap.Int64("total", st.Job.Total))
	if err := s.ensureParamIndexes(ctx, tenant, st.Type, target); err != nil {
		return err
	}
	if err := s.indexJobBatches(ctx, tenant, coll, st); err != nil {
		return err
	}
	s.log.Info("search parameters: re-indexing finished", zap.String("tenant", tenant), zap.String("type", st.Type),
		zap.Int64("resources", st.Job.Done), zap.Duration("took", s.opts.Now().Sub(st.Job.Started)))
	st.Complete, st.Job = target, nil
	return s.saveIndexState(ctx, tenant, st)
}

// indexJobBatches extracts the values of the rows after st.Job.After a
// batch at a time, recording the progress after each, until none is left.
func (s *Store) indexJobBatches(ctx context.Context, tenant string, coll engine.Collection, st *indexState) error {
	job, logged := st.Job, time.Now()
	for {
		tr, err := s.tenantRegistry(ctx, tenant)
		if err != nil {
			return err
		}
		if !maps.Equal(tr.reg.TenantSignatures(st.Type), job.Target) {
			return errRegistryMoved
		}
		if err := s.fault(FaultReindexBatch); err != nil {
			return err
		}
		n, last, err := s.reindexRows(ctx, coll, tr.reg, st.Type, job.After)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		s.changed(tenant, st.Type)
		job.After, job.Done, job.Updated = last, job.Done+int64(n), s.opts.Now().UTC()
		if err := s.saveIndexState(ctx, tenant, st); err != nil {
			return err
		}
		if held, err := s.holdSearchIndex(ctx, tenant); err != nil || !held {
			return fmt.Errorf("re-index %s of tenant %s: the lease was lost: %w", st.Type, tenant, err)
		}
		if time.Since(logged) >= searchIndexLogEvery {
			logged = time.Now()
			s.log.Info("search parameters: re-indexing", zap.String("tenant", tenant), zap.String("type", st.Type),
				zap.Int64("done", job.Done), zap.Int64("total", job.Total))
		}
	}
}

// ensureParamIndexes creates the database indexes of the tenant
// parameters in target on typ's collection.
func (s *Store) ensureParamIndexes(ctx context.Context, tenant, typ string, target map[string]string) error {
	reg, err := s.Registry(ctx, tenant)
	if err != nil {
		return err
	}
	var indexes []engine.Index
	for _, field := range reg.IndexFields(typ) {
		code, _, _ := strings.Cut(strings.TrimPrefix(field, "idx."), ".")
		code, _, _ = strings.Cut(code, ":")
		if _, own := target[code]; own && !(s.limits.WholeArrayKeys && search.IsWordList(field)) {
			indexes = append(indexes, engine.Index{Name: field + "_1", Keys: bson.D{{Key: field, Value: 1}}})
		}
	}
	if len(indexes) == 0 {
		return nil
	}
	return dbError("create the search indexes of "+tenant+"/"+typ, s.tenantDB(tenant).Collection(typ).CreateIndexes(ctx, indexes))
}

// pendingCodes are the codes of target that complete does not hold as
// target defines them, sorted.
func pendingCodes(complete, target map[string]string) []string {
	var out []string
	for code, sig := range target {
		if complete[code] != sig {
			out = append(out, code)
		}
	}
	sort.Strings(out)
	return out
}

// indexStates reads the index states of tenant by type.
func (s *Store) indexStates(ctx context.Context, tenant string) (map[string]*indexState, error) {
	cur, err := s.tenantDB(tenant).Collection(settingsCollection).Find(ctx, bson.D{{Key: "kind", Value: indexStateKind}}, nil)
	if err != nil {
		return nil, dbError("read the search index states of "+tenant, err)
	}
	var list []*indexState
	if err := engine.All(ctx, cur, &list); err != nil {
		return nil, dbError("read the search index states of "+tenant, err)
	}
	out := make(map[string]*indexState, len(list))
	for _, st := range list {
		if st.Complete == nil {
			st.Complete = map[string]string{}
		}
		out[st.Type] = st
	}
	return out, nil
}

// indexStateOf reads the index state of one type; nil when it has none.
func (s *Store) indexStateOf(ctx context.Context, tenant, typ string) (*indexState, error) {
	var st indexState
	raw, err := s.tenantDB(tenant).Collection(settingsCollection).FindOne(ctx, bson.D{{Key: "_id", Value: indexStateKind + "/" + typ}}, nil)
	err = engine.Decode(raw, err, &st)
	if errors.Is(err, engine.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, dbError("read the search index state of "+tenant+"/"+typ, err)
	}
	return &st, nil
}

func (s *Store) saveIndexState(ctx context.Context, tenant string, st *indexState) error {
	_, err := s.tenantDB(tenant).Collection(settingsCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: st.ID}}, st, true)
	return dbError("record the search index state of "+tenant+"/"+st.Type, err)
}

// IndexProgress is the re-indexing of one of a tenant's parameters: the
// resources of Type written before its definition are being indexed
// again, Done of the Total there were when it started.
type IndexProgress struct {
	Type, Code  string
	Done, Total int64
	Started     time.Time
}

// Reindexing tells which of the tenant parameters a search uses (see
// search.Query.Uses) do not answer from every resource yet, and how far
// their re-indexing is. It asks this process to take the work over when
// no other does it.
func (s *Store) Reindexing(ctx context.Context, tenant string, uses []search.ParamUse) ([]IndexProgress, error) {
	if len(uses) == 0 {
		return nil, nil
	}
	tr, err := s.tenantRegistry(ctx, tenant)
	if err != nil || tr == nil {
		return nil, err
	}
	states := map[string]*indexState{}
	var out []IndexProgress
	for _, u := range uses {
		key := u.Type + " " + u.Code
		if _, done := tr.complete.Load(key); done {
			continue
		}
		st, read := states[u.Type]
		if !read {
			if st, err = s.indexStateOf(ctx, tenant, u.Type); err != nil {
				return nil, err
			}
			states[u.Type] = st
		}
		sig := tr.reg.TenantSignatures(u.Type)[u.Code]
		if st != nil && sig != "" && st.Complete[u.Code] == sig {
			tr.complete.Store(key, true)
			continue
		}
		p := IndexProgress{Type: u.Type, Code: u.Code}
		if st != nil && st.Job != nil {
			p.Done, p.Total, p.Started = st.Job.Done, st.Job.Total, st.Job.Started
		}
		out = append(out, p)
	}
	if len(out) > 0 {
		s.nudgeSearchIndex(tenant)
	}
	return out, nil
}

// IndexStatus is the state of the values of a tenant's own search
// parameters on one resource type.
type IndexStatus struct {
	Type string
	// Complete are the codes whose values every resource holds; Pending
	// those being extracted from the resources written before them.
	Complete, Pending []string
	// Running tells that a job is at it: Done of Total resources,
	// started at Started, last progress at Updated.
	Running          bool
	Done, Total      int64
	Started, Updated time.Time
}

// SearchIndexStatus reports, for each type with parameters of the
// tenant's own (or whose rows still hold values of former ones), what
// its resources hold of them, sorted by type.
func (s *Store) SearchIndexStatus(ctx context.Context, tenant string) ([]IndexStatus, error) {
	tr, err := s.tenantRegistry(ctx, tenant)
	if err != nil || tr == nil {
		return nil, err
	}
	states, types, err := s.indexPlan(ctx, tenant, tr.reg)
	if err != nil {
		return nil, err
	}
	if len(types) > 0 {
		s.nudgeSearchIndex(tenant)
	}
	out := make([]IndexStatus, 0, len(states))
	for _, t := range sortedKeys(states) {
		st, target := states[t], tr.reg.TenantSignatures(t)
		is := IndexStatus{Type: t, Pending: pendingCodes(st.Complete, target)}
		for code := range target {
			if !slices.Contains(is.Pending, code) {
				is.Complete = append(is.Complete, code)
			}
		}
		sort.Strings(is.Complete)
		if st.Job != nil {
			is.Running, is.Done, is.Total, is.Started, is.Updated = true, st.Job.Done, st.Job.Total, st.Job.Started, st.Job.Updated
		}
		if len(is.Complete)+len(is.Pending) > 0 || is.Running {
			out = append(out, is)
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ResumeSearchIndex starts the re-indexing work of every tenant that has
// some: jobs a stop interrupted, and SearchParameters written by a
// process that stopped before its job began. Run it on start-up; it
// reports how many tenants have work.
func (s *Store) ResumeSearchIndex(ctx context.Context) (int, error) {
	if s.opts.Registry == nil {
		return 0, nil
	}
	tenants, err := s.ListTenants(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range tenants {
		tr, err := s.tenantRegistry(ctx, t.Name)
		if err != nil {
			return n, err
		}
		_, pending, err := s.indexPlan(ctx, t.Name, tr.reg)
		if err != nil {
			return n, err
		}
		if len(pending) > 0 {
			n++
			s.kickSearchIndex(t.Name)
		}
	}
	return n, nil
}
