package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"fhirstore/store"
)

// Records of the audit trail written before the trail wrote them as rows
// of their own: earlier versions spooled a request's record first and
// turned it into an AuditEvent resource later. What such a version left in
// a tenant's spool becomes audit rows after the start, auditSpoolBatch
// records at a time, in the background (whether the trail is on or not);
// a spooled record that cannot be read is logged and leaves the spool.
// The same background task purges the records older than
// Config.AuditRetention, when set, at the start and every auditPurgeEvery.

// DefaultAuditBacklog is how many audit records may wait to be written
// before requests wait for room (each request waits for its own record
// anyway).
const DefaultAuditBacklog = 250_000

const (
	auditSpoolBatch = 500
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

	spooled atomic.Int64 // records waiting in the spools
	indexed atomic.Int64 // records stored as audit rows, by the trail or from a spool
	lost    atomic.Int64 // spooled records that could not be read
	purged  atomic.Int64 // records purged past their retention

	stop context.CancelFunc
	done chan struct{}
}

// newAuditIndexer starts the conversion of the spools, then the purges.
func newAuditIndexer(st *store.Store, log *zap.Logger, retention time.Duration) *auditIndexer {
	ctx, stop := context.WithCancel(context.Background())
	x := &auditIndexer{store: st, log: log, retention: retention, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(x.done)
		x.convertSpools(ctx)
		x.purgeLoop(ctx)
	}()
	return x
}

// convertSpools turns what every tenant's spool holds into audit rows.
func (x *auditIndexer) convertSpools(ctx context.Context) {
	tenants, err := x.store.ListTenants(ctx)
	if err != nil {
		x.log.Warn("audit trail: cannot list the tenants' spools", zap.Error(err))
		return
	}
	counts := map[string]int64{}
	for _, t := range tenants {
		n, err := x.store.Spooled(ctx, t.Name)
		if err != nil {
			x.log.Warn("audit trail: cannot count a spool", zap.String("tenant", t.Name), zap.Error(err))
			continue
		}
		if n > 0 {
			counts[t.Name] = n
			x.spooled.Add(n)
		}
	}
	for tenant, n := range counts {
		x.log.Info("audit trail: converting records spooled by an earlier version", zap.String("tenant", tenant), zap.Int64("records", n))
		x.convertSpool(ctx, tenant)
	}
}

// convertSpool converts one tenant's spool until it is empty or ctx ends.
func (x *auditIndexer) convertSpool(ctx context.Context, tenant string) {
	for ctx.Err() == nil {
		taken, refused, err := x.store.DrainSpool(ctx, tenant, auditSpoolBatch, func(r store.SpoolRecord) (store.AuditRecord, error) {
			return spooledRecord(tenant, r)
		})
		if errors.Is(err, store.ErrTenantNotFound) {
			x.log.Warn("audit trail: records of a deleted tenant dropped", zap.String("tenant", tenant), zap.Int("records", taken))
			x.spooled.Add(-int64(taken))
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				x.log.Error("audit trail: spooled records not converted, retrying", zap.String("tenant", tenant), zap.Error(err))
				sleep(ctx, auditRetryPause)
			}
			continue
		}
		for _, r := range refused {
			x.lost.Add(1)
			x.log.Error("audit record not stored", zap.String("tenant", tenant), zap.String("key", r.Record.Key),
				zap.ByteString("record", r.Record.Data), zap.Error(r.Err))
		}
		x.spooled.Add(-int64(taken))
		x.indexed.Add(int64(taken - len(refused)))
		if taken < auditSpoolBatch {
			return
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
	if r.Action == "" {
		r.Interaction, r.Action = auditRecord{method: r.Method, path: r.Path}.interaction()
	}
	if r.Patient == "" {
		r.Patient = auditPatient(r.Type, r.ID, r.Query)
	}
	return r, nil
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

// close stops the conversion and the purges; what is left in a spool is
// converted after the next start.
func (x *auditIndexer) close() {
	x.stop()
	<-x.done
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
