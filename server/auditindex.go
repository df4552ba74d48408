package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"fhirstore/store"
)

// The audit trail in two steps. A request's record is first spooled: one
// small row in its tenant's database, written in batches (auditor). The
// indexer then turns spooled records into AuditEvent resources (a version,
// a history row, a few dozen index entries: twenty times the work), at
// the pace the requests leave room for:
//
//   - while no request has started or ended for auditIdleGap, it works
//     through the spool auditIdleBatch records at a time;
//   - while requests are being served, it takes at most auditBusyShare of
//     one core, auditBusyBatch records at a time, so that it neither
//     holds the database's writer long nor competes with the requests;
//   - when Config.AuditBacklog records wait (DefaultAuditBacklog, about a
//     minute and a half of indexing, unless set), it works at full pace,
//     auditBusyBatch records at a time, whatever the load, and the trail
//     spools no more until the backlog is under it again: requests then
//     slow down (the in-memory queue fills) rather than the backlog grow.
//
// A spooled record is durable: a record not yet an AuditEvent at shutdown
// becomes one after the next start. The number waiting is
// fhirstore_audit_spooled_records.

// DefaultAuditBacklog is how many spooled audit records may wait to be
// indexed before the trail takes its full share of the server.
const DefaultAuditBacklog = 250_000

const (
	auditIdleGap    = 20 * time.Millisecond
	auditIdleBatch  = 200
	auditBusyBatch  = 50
	auditBusyShare  = 0.1
	auditRetryPause = time.Second
)

// activity tells when the server last started or ended a request.
type activity struct{ last atomic.Int64 }

// touch records a request starting or ending now.
func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// busy reports whether a request started or ended within gap.
func (a *activity) busy(gap time.Duration) bool {
	return time.Now().UnixNano()-a.last.Load() < int64(gap)
}

// auditIndexer turns the records of the tenants' spools into AuditEvents
// in the background (see above).
type auditIndexer struct {
	store    *store.Store
	log      *zap.Logger
	activity *activity
	maxWait  int64 // records waiting past which it works at full pace

	mu      sync.Mutex
	backlog map[string]int64 // records waiting, by tenant
	wake    chan struct{}    // records were spooled
	room    chan struct{}    // records were indexed

	spooled atomic.Int64 // records waiting in all
	indexed atomic.Int64 // records that became AuditEvents
	lost    atomic.Int64 // records refused

	stop   context.CancelFunc
	done   chan struct{}
	closed atomic.Bool
}

// newAuditIndexer starts the indexer; it first counts the records the
// tenants' spools hold from before.
func newAuditIndexer(st *store.Store, log *zap.Logger, act *activity, maxWait int64) *auditIndexer {
	ctx, stop := context.WithCancel(context.Background())
	x := &auditIndexer{store: st, log: log, activity: act, maxWait: maxWait, backlog: map[string]int64{}, wake: make(chan struct{}, 1), room: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(x.done)
		x.countSpools(ctx)
		x.run(ctx)
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

// add tells the indexer that n more records wait in tenant's spool.
func (x *auditIndexer) add(tenant string, n int64) {
	x.mu.Lock()
	x.backlog[tenant] += n
	x.spooled.Add(n) // under the lock, as took's sum
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// next is the tenant with the most records waiting, "" when none wait.
func (x *auditIndexer) next() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var best string
	for t, n := range x.backlog {
		if n > x.backlog[best] || best == "" {
			best = t
		}
	}
	return best
}

// took records that n of tenant's records left its spool; empty says the
// spool has no more.
func (x *auditIndexer) took(tenant string, n int, empty bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	left := x.backlog[tenant] - int64(n)
	if empty || left <= 0 {
		left = 0
		delete(x.backlog, tenant)
	} else {
		x.backlog[tenant] = left
	}
	x.spooled.Store(sumBacklog(x.backlog))
	select {
	case x.room <- struct{}{}:
	default:
	}
}

func sumBacklog(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// run indexes until ctx ends, or, once closing, until the spools are empty.
func (x *auditIndexer) run(ctx context.Context) {
	recounted := false
	for ctx.Err() == nil {
		tenant := x.next()
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
		full := x.spooled.Load() >= x.maxWait
		hurried := full || x.closed.Load() || !x.activity.busy(auditIdleGap)
		batch := auditBusyBatch // past the cap too: the spool takes records as this frees room
		if hurried && !full {
			batch = auditIdleBatch
		}
		start := time.Now()
		if _, err := x.index(ctx, tenant, batch); err != nil {
			if ctx.Err() == nil {
				x.log.Error("audit trail: spooled records not indexed, retrying", zap.String("tenant", tenant), zap.Error(err))
				sleep(ctx, auditRetryPause)
			}
			continue
		}
		if !hurried { // leave the requests the rest of the core
			sleep(ctx, time.Duration(float64(time.Since(start))*(1/auditBusyShare-1)))
		}
	}
}

// index turns up to limit of tenant's spooled records into AuditEvents.
func (x *auditIndexer) index(ctx context.Context, tenant string, limit int) (int, error) {
	taken, refused, err := x.store.Unspool(ctx, tenant, "AuditEvent", limit, func(r store.SpoolRecord) ([]byte, error) {
		return auditEventBody(tenant, r.Data)
	})
	if errors.Is(err, store.ErrTenantNotFound) {
		x.log.Warn("audit trail: records of a deleted tenant dropped", zap.String("tenant", tenant), zap.Int("records", taken))
		x.took(tenant, taken, true)
		return taken, nil
	}
	if err != nil {
		return 0, err
	}
	for _, r := range refused {
		x.lost.Add(1)
		x.log.Error("audit record not stored", zap.String("tenant", tenant), zap.String("key", r.Record.Key),
			zap.ByteString("record", r.Record.Data), zap.Error(r.Err))
	}
	x.indexed.Add(int64(taken - len(refused)))
	x.took(tenant, taken, taken < limit)
	return taken, nil
}

// waitForRoom waits while the backlog is at its cap, the indexer runs and
// stop says false (the cap is soft: a write that starts under it may end
// past it).
func (x *auditIndexer) waitForRoom(stop func() bool) {
	for x.spooled.Load() >= x.maxWait && !stop() {
		select {
		case <-x.done:
			return
		case <-x.room:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// close indexes what the spools hold until they are empty or ctx ends,
// then stops; what is left becomes AuditEvents after the next start.
func (x *auditIndexer) close(ctx context.Context) {
	x.closed.Store(true)
	select {
	case x.wake <- struct{}{}:
	default:
	}
	select {
	case <-x.done:
	case <-ctx.Done():
		x.stop()
		<-x.done
	}
	x.stop()
	if n := x.spooled.Load(); n > 0 {
		x.log.Info("audit trail: records left spooled, indexed after the next start", zap.Int64("records", n))
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

// spooledAudit is how a record waits in the spool: its fields, short.
type spooledAudit struct {
	At        int64  `json:"t"`
	RequestID string `json:"r,omitempty"`
	Method    string `json:"m"`
	Path      string `json:"p"`
	Query     string `json:"q,omitempty"`
	Status    int    `json:"s"`
	Type      string `json:"ty,omitempty"`
	ID        string `json:"id,omitempty"`
	Subject   string `json:"su,omitempty"`
	Issuer    string `json:"is,omitempty"`
	ClientID  string `json:"c,omitempty"`
	Address   string `json:"a,omitempty"`
}

// spoolData is the spooled form of r.
func (r auditRecord) spoolData() ([]byte, error) {
	return json.Marshal(spooledAudit{At: r.at.UnixNano(), RequestID: r.requestID, Method: r.method, Path: r.path, Query: r.query,
		Status: r.status, Type: r.typ, ID: r.id, Subject: r.subject, Issuer: r.issuer, ClientID: r.clientID, Address: r.address})
}

// auditEventBody is the AuditEvent JSON of a record spooled in tenant.
func auditEventBody(tenant string, data []byte) ([]byte, error) {
	var s spooledAudit
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("unreadable spooled audit record: %w", err)
	}
	r := auditRecord{tenant: tenant, at: time.Unix(0, s.At), requestID: s.RequestID, method: s.Method, path: s.Path, query: s.Query,
		status: s.Status, typ: s.Type, id: s.ID, subject: s.Subject, issuer: s.Issuer, clientID: s.ClientID, address: s.Address}
	return json.Marshal(r.auditEvent())
}
