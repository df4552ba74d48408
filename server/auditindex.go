package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"fhirstore/store"
)

// The audit trail in two steps, both cheap. A request's record is first
// spooled, before the request ends: one small row in its tenant's
// database (two index entries), written with the records of the requests
// that end meanwhile (auditor). The converter then moves spooled records
// into their audit rows (store.Audit: a compact row with the few search
// values AuditEvent's searches read), auditSpoolBatch at a time, so that
// the index pages a batch touches are written once for all of its
// records (the WAL a record costs falls with the batch's size); it waits
// up to auditLinger for a batch to fill, and works without pause while a
// quarter of a batch waits. A spooled record is durable:
// one not yet converted at shutdown is converted after the next start,
// as are records an earlier version spooled. When Config.AuditBacklog
// records wait, the trail spools no more until the backlog is under it
// again: requests then slow down rather than the backlog grow. A spooled
// record that cannot be read is logged and leaves the spool. The records
// older than Config.AuditRetention, when set, are purged at the start and
// every auditPurgeEvery.

// DefaultAuditBacklog is how many spooled audit records may wait to be
// converted before requests wait for room.
const DefaultAuditBacklog = 250_000

const (
	auditSpoolBatch = 500
	auditLinger     = 20 * time.Millisecond
	auditPurgeBatch = 1000
	auditPurgeEvery = time.Hour
	auditRetryPause = time.Second
)

// activity tells when the server last started or ended a request.
type activity struct{ last atomic.Int64 }

// touch records a request starting or ending now.
func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// auditIndexer converts the tenants' spools into audit rows and purges
// records past their retention (see above).
type auditIndexer struct {
	store     *store.Store
	log       *zap.Logger
	retention time.Duration
	maxWait   int64 // records waiting past which the trail spools no more

	mu      sync.Mutex
	backlog map[string]int64 // records waiting, by tenant
	wake    chan struct{}    // records were spooled
	room    chan struct{}    // records were converted

	file    *auditLog           // the trail's log, when records wait there
	pmu     sync.Mutex          // guards pending
	pending []store.AuditRecord // records of the log not yet stored

	spooled  atomic.Int64 // records waiting in the spools and the log
	inflight atomic.Int64 // of the log's, those being stored now
	indexed  atomic.Int64 // records converted into audit rows
	lost     atomic.Int64 // spooled records that could not be read
	purged   atomic.Int64 // records purged past their retention

	stop   context.CancelFunc
	done   chan struct{}
	purges chan struct{}
	closed atomic.Bool
}

// newAuditIndexer starts the converter, which first counts the records
// the tenants' spools hold from before, and the purges.
func newAuditIndexer(st *store.Store, log *zap.Logger, maxWait int64, retention time.Duration, file *auditLog, left []store.AuditRecord) *auditIndexer {
	ctx, stop := context.WithCancel(context.Background())
	x := &auditIndexer{store: st, log: log, retention: retention, maxWait: maxWait, backlog: map[string]int64{}, file: file,
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), stop: stop, done: make(chan struct{}), purges: make(chan struct{})}
	for i := range left {
		completeRecord(&left[i])
	}
	if len(left) > 0 {
		log.Info("audit trail: records logged before the start", zap.Int("records", len(left)))
		x.push(left)
	}
	go func() {
		defer close(x.done)
		x.countSpools(ctx)
		x.run(ctx)
	}()
	go func() {
		defer close(x.purges)
		x.purgeLoop(ctx)
	}()
	return x
}

// countSpools adds the records left in the tenants' spools to the backlog.
func (x *auditIndexer) countSpools(ctx context.Context) {
	tenants, err := x.store.ListTenants(ctx)
	if err != nil {
		x.log.Warn("audit trail: cannot list the tenants' spools", zap.Error(err))
		return
	}
	for _, t := range tenants {
		n, err := x.store.Spooled(ctx, t.Name)
		if err != nil {
			x.log.Warn("audit trail: cannot count a spool", zap.String("tenant", t.Name), zap.Error(err))
			continue
		}
		if n > 0 {
			x.log.Info("audit trail: records spooled before the start", zap.String("tenant", t.Name), zap.Int64("records", n))
			x.add(t.Name, n)
		}
	}
}

// add tells the converter that n more records wait in tenant's spool.
func (x *auditIndexer) add(tenant string, n int64) {
	x.mu.Lock()
	x.backlog[tenant] += n
	x.spooled.Add(n)
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// next is the tenant with the most records waiting ("" when none wait)
// and how many wait in all.
func (x *auditIndexer) next() (string, int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var best string
	var all int64
	for t, n := range x.backlog {
		all += n
		if best == "" || n > x.backlog[best] {
			best = t
		}
	}
	return best, all
}

// took records that n of tenant's records left its spool (none: it is
// empty, whatever the tally said).
func (x *auditIndexer) took(tenant string, n int) {
	x.mu.Lock()
	before := x.backlog[tenant]
	left := before - int64(n)
	if n == 0 || left <= 0 { // records spooled meanwhile keep the tenant in the backlog
		left = 0
		delete(x.backlog, tenant)
	} else {
		x.backlog[tenant] = left
	}
	x.spooled.Add(left - before)
	x.mu.Unlock()
	select {
	case x.room <- struct{}{}:
	default:
	}
}

// run converts until ctx ends, or, once closing, until the spools are
// empty.
func (x *auditIndexer) run(ctx context.Context) {
	recounted := false
	for ctx.Err() == nil {
		if x.storePending(ctx) {
			continue
		}
		tenant, waiting := x.next()
		if tenant == "" {
			if x.closed.Load() {
				if recounted {
					return
				}
				// The backlog is a tally kept beside the spools: count them
				// once more, so that closing leaves none behind.
				recounted = true
				x.countSpools(ctx)
				continue
			}
			select {
			case <-x.wake:
			case <-ctx.Done():
			}
			continue
		}
		if waiting < auditSpoolBatch && !x.closed.Load() {
			sleep(ctx, auditLinger) // let a batch fill
		}
		x.convert(ctx, tenant)
	}
}

// convert turns up to auditSpoolBatch of tenant's spooled records into
// audit rows.
func (x *auditIndexer) convert(ctx context.Context, tenant string) {
	taken, refused, err := x.store.DrainSpool(ctx, tenant, auditSpoolBatch, func(r store.SpoolRecord) (store.AuditRecord, error) {
		return spooledRecord(tenant, r)
	})
	if errors.Is(err, store.ErrTenantNotFound) {
		x.log.Warn("audit trail: records of a deleted tenant dropped", zap.String("tenant", tenant), zap.Int("records", taken))
		x.took(tenant, 0)
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			x.log.Error("audit trail: spooled records not converted, retrying", zap.String("tenant", tenant), zap.Error(err))
			sleep(ctx, auditRetryPause)
		}
		return
	}
	for _, r := range refused {
		x.lost.Add(1)
		x.log.Error("audit record not stored", zap.String("tenant", tenant), zap.String("key", r.Record.Key),
			zap.ByteString("record", r.Record.Data), zap.Error(r.Err))
	}
	x.indexed.Add(int64(taken - len(refused)))
	x.took(tenant, taken)
}

// push hands the converter records the log holds.
func (x *auditIndexer) push(records []store.AuditRecord) {
	x.pmu.Lock()
	x.pending = append(x.pending, records...)
	x.spooled.Add(int64(len(records)))
	x.pmu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// storePending stores up to auditSpoolBatch of the log's records as audit
// rows, after waiting up to auditLinger for a batch to fill; it reports
// whether there were any. A failed write is tried again until it succeeds
// or ctx ends: the records are durable in the log meanwhile, and requests
// wait once the backlog is full.
func (x *auditIndexer) storePending(ctx context.Context) bool {
	x.pmu.Lock()
	n := len(x.pending)
	x.pmu.Unlock()
	if n == 0 {
		return false
	}
	if n < auditSpoolBatch/4 && !x.closed.Load() {
		sleep(ctx, auditLinger)
	}
	x.pmu.Lock()
	batch := x.pending[:min(len(x.pending), auditSpoolBatch)]
	x.pmu.Unlock()
	x.inflight.Store(int64(len(batch)))
	defer x.inflight.Store(0)
	for ctx.Err() == nil {
		stored, err := storeAuditRecords(ctx, x.store, batch)
		if err == nil {
			break
		}
		batch = batch[stored:]
		x.taken(stored)
		x.log.Error("audit trail: logged records not stored, retrying", zap.Int("records", len(batch)), zap.Error(err))
		sleep(ctx, auditRetryPause)
	}
	if ctx.Err() == nil {
		x.taken(len(batch))
	}
	return true
}

// taken removes the first n pending records, stored.
func (x *auditIndexer) taken(n int) {
	if n == 0 {
		return
	}
	x.pmu.Lock()
	x.pending = append(x.pending[:0:0], x.pending[n:]...)
	x.pmu.Unlock()
	x.spooled.Add(-int64(n))
	x.indexed.Add(int64(n))
	if x.file != nil {
		x.file.storedRecords(n)
	}
	select {
	case x.room <- struct{}{}:
	default:
	}
}

// waitForRoom waits while the backlog is at its cap, the converter runs
// and stop says false. The cap is soft: a write that starts under it may
// end past it, and the batch being stored does not count, so that
// requests do not wait for a whole batch's write.
func (x *auditIndexer) waitForRoom(stop func() bool) {
	for x.spooled.Load()-x.inflight.Load() >= x.maxWait && !stop() {
		select {
		case <-x.done:
			return
		case <-x.room:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// spooledRecord is the record of a spooled one of tenant: what an earlier
// version spooled, with what it computed when it made the AuditEvent.
func spooledRecord(tenant string, s store.SpoolRecord) (store.AuditRecord, error) {
	r, err := store.DecodeAuditRecord(s.Key, s.Data)
	if err != nil {
		return r, err
	}
	r.Site = tenant
	completeRecord(&r)
	return r, nil
}

// completeRecord adds to a record of an earlier version what it computed
// when it made the AuditEvent.
func completeRecord(r *store.AuditRecord) {
	if r.Action == "" {
		r.Interaction, r.Action = auditRecord{method: r.Method, path: r.Path}.interaction()
	}
	if r.Patient == "" {
		r.Patient = auditPatient(r.Type, r.ID, r.Query)
	}
}

// purgeLoop purges the records past their retention now and every
// auditPurgeEvery, until ctx ends; without a retention it returns.
func (x *auditIndexer) purgeLoop(ctx context.Context) {
	if x.retention <= 0 {
		return
	}
	for ctx.Err() == nil {
		x.purge(ctx)
		sleep(ctx, auditPurgeEvery)
	}
}

// purge removes every tenant's records older than the retention.
func (x *auditIndexer) purge(ctx context.Context) {
	tenants, err := x.store.ListTenants(ctx)
	if err != nil {
		x.log.Warn("audit trail: cannot list the tenants to purge", zap.Error(err))
		return
	}
	before := time.Now().Add(-x.retention)
	for _, t := range tenants {
		n, err := x.store.PurgeAudit(ctx, t.Name, before, auditPurgeBatch)
		x.purged.Add(n)
		if err != nil {
			x.log.Error("audit trail: purge failed", zap.String("tenant", t.Name), zap.Int64("purged", n), zap.Error(err))
			continue
		}
		if n > 0 {
			x.log.Info("audit trail: records past their retention purged", zap.String("tenant", t.Name), zap.Int64("records", n), zap.Time("before", before))
		}
	}
}

// close converts what the spools hold until they are empty or ctx ends,
// then stops; what is left is converted after the next start.
func (x *auditIndexer) close(ctx context.Context) {
	x.closed.Store(true)
	select {
	case x.wake <- struct{}{}:
	default:
	}
	select {
	case <-x.done:
	case <-ctx.Done():
	}
	x.stop()
	<-x.done
	<-x.purges
	if n := x.spooled.Load(); n > 0 {
		x.log.Info("audit trail: records left spooled, converted after the next start", zap.Int64("records", n))
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
