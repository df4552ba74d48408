// Package subscription runs FHIR R4 Subscriptions with the rest-hook
// channel: it validates Subscription resources as they are written,
// activates them, matches every change recorded in a tenant's outbox
// against the tenant's active subscriptions with the search engine, and
// delivers the notifications from durable per-subscription queues, with
// retries, in order per resource.
package subscription

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store"
)

// Config configures an Engine.
type Config struct {
	// Store holds the subscriptions, the outbox and the queues.
	Store *store.Store
	// Registry parses the criteria.
	Registry *search.Registry
	// Endpoints is the endpoint allow-list (nil: loopback only).
	Endpoints *AllowList
	// Attempts is how many times a notification is tried before its
	// subscription is set to error (default 5).
	Attempts int
	// Timeout bounds each delivery request (default 10s).
	Timeout time.Duration
	// Backoff is the wait before the first retry; it doubles with each
	// further one, up to MaxBackoff (defaults 1s and 5m).
	Backoff, MaxBackoff time.Duration
	// Poll is how often every tenant's outbox is read even when no write
	// of this process announced a change (default 2s); Reload how often
	// the subscriptions are read again (default 30s). Both serve changes
	// made by other processes on the same database.
	Poll, Reload time.Duration
	// Lease is how long a server's claim to dispatch a tenant's
	// notifications lasts without renewal (default 30s): when several
	// servers share a database, one of them dispatches each tenant, and
	// another takes over that long after it stops.
	Lease time.Duration
	// Exclusive declares that no other server uses the database (the
	// embedded engine): the engine then dispatches every tenant without
	// leases, activates subscriptions at once (shared, two Polls after
	// it sees them, once every server records their changes), and a
	// restart after a crash need not wait for the old leases.
	Exclusive bool
	// Logger receives delivery diagnostics.
	Logger *zap.Logger
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Topics are the SubscriptionTopics topic-based subscriptions name
	// (nil: the built-in ones and those each tenant stores).
	Topics *Topics
	// BaseURL is the FHIR base of a tenant, for the references of
	// notifications (nil: references are relative).
	BaseURL func(tenant string) string
	// Sockets tunes the websocket channel (zero fields: defaults).
	Sockets SocketConfig
	// KeepEvents is how many delivered events of each topic-based
	// subscription are kept for $events (default 1000).
	KeepEvents int
}

// batchSize bounds the outbox rows read at once.
const batchSize = 200

// Engine matches and delivers notifications for every tenant of a store.
type Engine struct {
	cfg    Config
	st     *store.Store
	check  *checker
	log    *zap.Logger
	owner  string // names this engine in the dispatch leases
	client *http.Client
	stats  *stats

	mu      sync.RWMutex
	tenants map[string]*tenant

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	topics     *Topics
	hub        *hub
	handshakes sync.Map // tenant/id/version of the handshakes under way
}

// tenant is the engine's state for one tenant.
type tenant struct {
	name string
	wake chan struct{}
	// subs are the tenant's subscriptions by id (under Engine.mu).
	subs    map[string]*spec
	workers map[string]*worker
	// held tells whether this engine holds the tenant's dispatch lease;
	// claimed and loaded (matcher only) are when it was last claimed and
	// when the subscriptions were last read.
	held            atomic.Bool
	claimed, loaded time.Time
	// reloadNow asks the matcher to read the subscriptions at its next
	// wake-up; requested are when this engine first saw each requested
	// subscription version it is to activate (under Engine.mu).
	reloadNow atomic.Bool
	requested map[string]time.Time
	// events are the topic-based subscriptions' numbering (their own lock).
	events *numbering
	// known is when this engine first knew each subscription (under Engine.mu).
	known map[string]time.Time
}

// byAge lists the ids in the order the engine came to know them.
func (t *tenant) byAge(ids map[string]bool) []string {
	out := slices.Collect(maps.Keys(ids))
	slices.SortFunc(out, func(a, b string) int {
		if c := t.known[a].Compare(t.known[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return out
}

// Start loads every tenant's subscriptions, attaches the engine to the
// store's outbox and starts matching and delivering until Close.
func Start(ctx context.Context, cfg Config) (*Engine, error) {
	cfg = withDefaults(cfg)
	if cfg.Topics == nil {
		topics, err := NewTopics(cfg.Registry)
		if err != nil {
			return nil, err
		}
		cfg.Topics = topics
	}
	cfg.Topics.attach(cfg.Store)
	e := &Engine{cfg: cfg, st: cfg.Store, check: &checker{reg: cfg.Registry, allow: cfg.Endpoints, topics: cfg.Topics}, log: cfg.Logger,
		owner: uuid.NewString(), stats: newStats(), tenants: map[string]*tenant{}, topics: cfg.Topics}
	e.hub = newHub(e, cfg.Sockets)
	e.client = newClient(cfg)
	e.ctx, e.cancel = context.WithCancel(context.WithoutCancel(ctx))
	tenants, err := e.st.ListTenants(ctx)
	if err != nil {
		e.cancel()
		return nil, fmt.Errorf("start subscriptions: %w", err)
	}
	for _, t := range tenants {
		tt := e.tenant(t.Name)
		e.claim(ctx, tt)
		e.reload(ctx, tt, 0)
	}
	e.st.SetOutbox(e)
	e.wg.Add(1)
	go e.poll()
	return e, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Endpoints == nil {
		cfg.Endpoints = &AllowList{}
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Reload <= 0 {
		cfg.Reload = 30 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.KeepEvents <= 0 {
		cfg.KeepEvents = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// newClient is the delivery client: no redirects (an allowed endpoint
// must not send the server elsewhere) and, under the default allow-list,
// no connection to anything but loopback addresses.
func newClient(cfg Config) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	if cfg.Endpoints.LoopbackOnly() {
		dialer.ControlContext = loopbackDial
	}
	tr := &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: cfg.Timeout}
	return &http.Client{Transport: tr, Timeout: cfg.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Close stops matching and delivery and waits for them to stop; what is
// queued stays queued for the next start.
func (e *Engine) Close() {
	e.st.SetOutbox(nil)
	e.cancel()
	e.hub.close()
	e.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, t := range e.tenants { // another server may take over at once
		if t.held.Load() {
			if err := e.st.ReleaseLease(ctx, t.name, leaseName, e.owner); err != nil {
				e.log.Warn("release the subscription lease", zap.String("tenant", t.name), zap.Error(err))
			}
		}
	}
}

// Interest tells the store which writes to record: every Subscription
// (so that the engine hears of them durably) and the changes of typ that
// the tenant's deliverable subscriptions may match.
func (e *Engine) Interest(tenantName, typ string) ([]*search.Query, bool) {
	if typ == "Subscription" || typ == "Basic" { // Basic: topics
		return nil, true
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	t := e.tenants[tenantName]
	if t == nil {
		return nil, false
	}
	now := e.cfg.Now()
	var queries []*search.Query
	for _, s := range t.subs {
		if !s.deliverable(now) && s.status != StatusRequested { // a requested one is about to be active
			continue
		}
		if s.typ == typ {
			queries = append(queries, s.query)
		}
		if s.topic != nil {
			q, wanted := s.topic.interestIn(typ)
			if wanted && q == nil {
				return nil, true
			}
			if wanted {
				queries = append(queries, q)
			}
		}
	}
	return queries, false
}

// Recorded wakes the tenant's matcher after a write recorded changes.
func (e *Engine) Recorded(tenantName string) {
	t := e.tenant(tenantName)
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// tenant returns the state of a tenant, starting its matcher the first time.
func (e *Engine) tenant(name string) *tenant {
	e.mu.RLock()
	t := e.tenants[name]
	e.mu.RUnlock()
	if t != nil {
		return t
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if t = e.tenants[name]; t != nil {
		return t
	}
	t = &tenant{name: name, wake: make(chan struct{}, 1), subs: map[string]*spec{}, workers: map[string]*worker{}, requested: map[string]time.Time{},
		events: &numbering{last: map[string]int64{}, pending: map[string]*pendingEvents{}}, known: map[string]time.Time{}}
	e.tenants[name] = t
	if e.ctx.Err() == nil {
		e.wg.Add(1)
		go e.match(t)
	}
	return t
}

// poll wakes every tenant's matcher every Poll and reloads the
// subscriptions every Reload, for changes other processes made.
func (e *Engine) poll() {
	defer e.wg.Done()
	tick := time.NewTicker(e.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-tick.C:
		}
		tenants, err := e.st.ListTenants(e.ctx)
		if err != nil {
			e.log.Warn("list tenants for subscriptions", zap.Error(err))
			continue
		}
		for _, t := range tenants {
			e.Recorded(t.Name)
		}
	}
}

// leaseName is the job the engine claims in each tenant's database.
const leaseName = "subscriptions"

// claim makes sure this engine holds the tenant's dispatch lease, so that
// of several servers on one database exactly one matches and delivers a
// tenant's notifications; it reports whether it does. It runs on the
// tenant's matcher only, and reads the subscriptions again when it wins
// the lease (to start their workers).
func (e *Engine) claim(ctx context.Context, t *tenant) bool {
	now := time.Now()
	if e.cfg.Exclusive || (t.held.Load() && now.Sub(t.claimed) < e.cfg.Lease/3) {
		if !t.held.Swap(true) {
			t.loaded = time.Time{} // held from now on: read the subscriptions to start their workers
		}
		return true
	}
	held, err := e.st.Lease(ctx, t.name, leaseName, e.owner, e.cfg.Lease)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("claim the subscription lease", zap.String("tenant", t.name), zap.Error(err))
	}
	if was := t.held.Swap(held); held && !was {
		t.loaded = time.Time{}
	}
	if held {
		t.claimed = now
	}
	return held
}

// reload reads the tenant's subscriptions when they were last read more
// than every ago. The server that dispatches a tenant hears of their
// changes through the outbox and reads them every Reload; the others,
// which must know them to record the changes their writes make, every Poll.
func (e *Engine) reload(ctx context.Context, t *tenant, every time.Duration) {
	now := time.Now()
	if now.Sub(t.loaded) < every && !t.reloadNow.Swap(false) {
		return
	}
	if err := e.load(ctx, t.name); err != nil {
		if ctx.Err() == nil {
			e.log.Warn("read subscriptions", zap.String("tenant", t.name), zap.Error(err))
		}
		return
	}
	t.loaded = now
}

// load reads every subscription of a tenant that is not off.
func (e *Engine) load(ctx context.Context, tenantName string) error {
	q, err := e.cfg.Registry.Parse("Subscription", url.Values{"status": {"requested,active,error"}, "_count": {"100"}}, search.ParseOptions{})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for {
		page, err := e.st.Search(ctx, tenantName, q)
		if err != nil {
			return fmt.Errorf("read subscriptions of %s: %w", tenantName, err)
		}
		for _, r := range page.Entries {
			seen[r.ID] = true
			if err := e.update(ctx, tenantName, r); err != nil {
				e.log.Warn("load subscription", zap.String("tenant", tenantName), zap.String("id", r.ID), zap.Error(err))
			}
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	t := e.tenant(tenantName)
	e.mu.RLock()
	var gone []string
	for id := range t.subs {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	e.mu.RUnlock()
	for _, id := range gone {
		e.refresh(ctx, tenantName, id)
	}
	return nil
}

// refresh reads a subscription again after it changed.
func (e *Engine) refresh(ctx context.Context, tenantName, id string) {
	r, err := e.st.Read(ctx, tenantName, "Subscription", id)
	switch {
	case errors.Is(err, store.ErrGone), errors.Is(err, store.ErrNotFound):
		e.remove(ctx, tenantName, id)
	case err != nil:
		e.log.Warn("read subscription", zap.String("tenant", tenantName), zap.String("id", id), zap.Error(err))
	default:
		if err := e.update(ctx, tenantName, r); err != nil {
			e.log.Warn("reload subscription", zap.String("tenant", tenantName), zap.String("id", id), zap.Error(err))
		}
	}
}

// observe takes a committed version of a subscription into account; the
// outbox hands each subscription's versions over in order.
func (e *Engine) observe(ctx context.Context, tenantName string, r *store.Resource) error {
	if r.Deleted {
		e.remove(ctx, tenantName, r.ID)
		return nil
	}
	return e.update(ctx, tenantName, r)
}

// update takes version r of a subscription into account: requested ones
// are activated, deliverable ones get a worker. An error means the status
// could not be written yet; the caller tries again later.
func (e *Engine) update(ctx context.Context, tenantName string, r *store.Resource) error {
	sp, issues := e.check.parse(ctx, tenantName, r.JSON)
	dispatcher := e.tenant(tenantName).held.Load() // only it writes statuses
	if sp == nil || sp.status == StatusRequested {
		if sp != nil && sp.matchable() && len(issues) == 0 {
			sp.id, sp.version = r.ID, r.VersionID
			e.put(tenantName, sp) // its changes are recorded from now on
		}
		if !dispatcher {
			return nil
		}
		return e.activate(ctx, tenantName, r, sp, issues)
	}
	sp.id, sp.version = r.ID, r.VersionID
	if sp.status == StatusActive && len(issues) > 0 && dispatcher { // e.g. the allow-list changed since
		return e.setError(ctx, tenantName, sp, issues[0].Diagnostics)
	}
	if sp.status == StatusOff || !sp.matchable() {
		e.remove(ctx, tenantName, r.ID)
		return nil
	}
	e.put(tenantName, sp)
	return nil
}

// put makes sp the subscription's state, unless a newer version is known,
// and gives an active one a worker.
func (e *Engine) put(tenantName string, sp *spec) {
	t := e.tenant(tenantName)
	e.mu.Lock()
	defer e.mu.Unlock()
	old := t.subs[sp.id]
	if old != nil && old.version > sp.version {
		return
	}
	if old != nil && old.topic != nil && !sameBinding(old.topic, sp.topic) {
		// Websockets bound to it bind again, with a token issued under
		// the subscription as it is now.
		defer e.hub.unbindAll(tenantName, sp.id)
	}
	t.subs[sp.id] = sp
	if _, ok := t.known[sp.id]; !ok {
		t.known[sp.id] = time.Now()
	}
	w := t.workers[sp.id]
	if w != nil && w.topic != (sp.topic != nil) { // criteria changed kind: the worker of the other kind stops
		delete(t.workers, sp.id)
		w.poke()
		w = nil
	}
	if sp.status == StatusActive && !sp.ended(e.cfg.Now()) && w == nil && e.ctx.Err() == nil {
		w = &worker{e: e, tenant: tenantName, id: sp.id, wake: make(chan struct{}, 1), topic: sp.topic != nil}
		t.workers[sp.id] = w
		e.wg.Add(1)
		go w.run()
	}
	if w != nil {
		w.poke()
	}
}

// remove forgets a subscription that was deleted or turned off, and its queue.
func (e *Engine) remove(ctx context.Context, tenantName, id string) {
	t := e.tenant(tenantName)
	e.mu.Lock()
	delete(t.subs, id)
	delete(t.known, id)
	maps.DeleteFunc(t.requested, func(key string, _ time.Time) bool { return strings.HasPrefix(key, id+"/") })
	w := t.workers[id]
	e.mu.Unlock()
	if w != nil {
		w.poke()
	}
	if err := e.st.DropNotifications(ctx, tenantName, id); err != nil {
		e.log.Warn("drop notifications", zap.String("tenant", tenantName), zap.String("subscription", id), zap.Error(err))
	}
	e.forgetTopicSub(ctx, t, id)
}

// deliverable lists the tenant's subscriptions that queue changes of typ.
func (e *Engine) deliverable(t *tenant, typ string) []*spec {
	e.mu.RLock()
	defer e.mu.RUnlock()
	now := e.cfg.Now()
	var out []*spec
	for _, s := range t.subs {
		if s.typ == typ && s.deliverable(now) {
			out = append(out, s)
		}
	}
	return out
}
