package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"fhirstore/store/engine"
)

// A committed transaction whose current rows cannot be put (the database
// refuses them) is retried by recovery with a backoff; after
// Options.RecoveryAttempts failed attempts it is quarantined: automatic
// recovery leaves it alone until an operator retries or abandons it
// (RetryTransaction, AbandonTransaction; fhirstore recover). Meanwhile the
// resources it changes are held: reading or changing them is an error
// (ErrRecovering while retried, ErrQuarantined after), never the stale
// version their current row still holds.

// Errors of held resources.
var (
	ErrRecovering  = errors.New("held by a committed transaction recovery is still applying") // 503
	ErrQuarantined = errors.New("held by a quarantined transaction")                          // 500
)

// Defaults of Options.RecoveryAttempts and Options.RecoveryBackoff.
const (
	defaultRecoveryAttempts = 5
	defaultRecoveryBackoff  = time.Second
	maxRecoveryBackoff      = time.Hour
)

// TxnState is where an unfinished transaction stands.
type TxnState string

// States of an unfinished transaction.
const (
	TxnPending     TxnState = "pending"     // being committed, or waiting for recovery
	TxnRetrying    TxnState = "retrying"    // committed; applying it failed, recovery retries it
	TxnQuarantined TxnState = "quarantined" // committed; recovery gave up, an operator decides
	TxnAbandoning  TxnState = "abandoning"  // an operator abandons it
)

// UnfinishedTxn describes a transaction still in a tenant's journal.
type UnfinishedTxn struct {
	Tenant    string
	ID        string
	State     TxnState
	At        time.Time // when it started
	Attempts  int       // failed attempts to apply it
	RetryAt   time.Time // the next automatic attempt (zero when none is due)
	LastError string
	Resources []string // Type/id of every resource it changes
}

// held indexes, per tenant, the resources of transactions that are
// retried or quarantined; every recovery pass rebuilds a tenant's part.
type held struct {
	mu       sync.RWMutex
	byTenant map[string]map[string]heldTxn // tenant → Type/id → txn
}

type heldTxn struct {
	id          string
	quarantined bool
}

func (h *held) set(tenant string, entries []journalEntry) {
	m := map[string]heldTxn{}
	for _, e := range entries {
		if e.Attempts == 0 && !e.Quarantined && !e.Abandoning {
			continue
		}
		for _, k := range e.Keys {
			m[k.Type+"/"+k.ID] = heldTxn{id: e.ID, quarantined: e.Quarantined || e.Abandoning}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byTenant == nil {
		h.byTenant = map[string]map[string]heldTxn{}
	}
	if len(m) == 0 {
		delete(h.byTenant, tenant)
		return
	}
	h.byTenant[tenant] = m
}

func (h *held) add(tenant string, e *journalEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byTenant == nil {
		h.byTenant = map[string]map[string]heldTxn{}
	}
	m := h.byTenant[tenant]
	if m == nil {
		m = map[string]heldTxn{}
		h.byTenant[tenant] = m
	}
	for _, k := range e.Keys {
		m[k.Type+"/"+k.ID] = heldTxn{id: e.ID, quarantined: e.Quarantined}
	}
}

func (h *held) lookup(tenant, key string) (heldTxn, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	t, ok := h.byTenant[tenant][key]
	return t, ok
}

// counts reports how many transactions are retried and quarantined.
func (h *held) counts() (retrying, quarantined int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, m := range h.byTenant {
		seen := map[string]bool{}
		for _, t := range m {
			if seen[t.id] {
				continue
			}
			seen[t.id] = true
			if t.quarantined {
				quarantined++
			} else {
				retrying++
			}
		}
	}
	return retrying, quarantined
}

// checkHeld fails with ErrRecovering or ErrQuarantined when typ/id is held.
func (s *Store) checkHeld(tenant, typ, id string) error {
	t, ok := s.held.lookup(tenant, typ+"/"+id)
	switch {
	case !ok:
		return nil
	case t.quarantined:
		return fmt.Errorf("%s/%s is %w %s: it committed but could not be applied; an operator resolves it with fhirstore recover", typ, id, ErrQuarantined, t.id)
	default:
		return fmt.Errorf("%s/%s is %w (transaction %s); try again later", typ, id, ErrRecovering, t.id)
	}
}

// checkHeldResources is checkHeld for every resource of a result page.
func (s *Store) checkHeldResources(tenant string, rs []*Resource) error {
	for _, r := range rs {
		if err := s.checkHeld(tenant, r.Type, r.ID); err != nil {
			return err
		}
	}
	return nil
}

// HeldTransactions counts the transactions whose resources are held,
// as of the last recovery pass: retried and quarantined (health, metrics).
func (s *Store) HeldTransactions() (retrying, quarantined int) { return s.held.counts() }

// backoff is the wait after the n-th failed attempt: the base, doubled
// for every attempt after the first, at most an hour.
func (s *Store) backoff(n int) time.Duration {
	d := s.opts.RecoveryBackoff
	for i := 1; i < n && d < maxRecoveryBackoff; i++ {
		d *= 2
	}
	return min(d, maxRecoveryBackoff)
}

// failedAttempt records that applying a committed transaction failed:
// one more attempt, the next one after a backoff, quarantine after the
// last. It holds the transaction's resources from then on.
func (s *Store) failedAttempt(ctx context.Context, tenant string, e *journalEntry, cause error) {
	e.Attempts++
	s.failedTotal.Add(1)
	e.LastError = cause.Error()
	e.RetryAt = s.opts.Now().UTC().Add(s.backoff(e.Attempts))
	if e.Attempts >= s.opts.RecoveryAttempts {
		e.Quarantined = true
		s.quarantinedTotal.Add(1)
	}
	s.held.add(tenant, e)
	log := s.log.Warn
	if e.Quarantined {
		log = s.log.Error
	}
	log("committed transaction could not be applied", zap.String("tenant", tenant), zap.String("txn", e.ID),
		zap.Int("attempts", e.Attempts), zap.Bool("quarantined", e.Quarantined), zap.Time("retry_at", e.RetryAt), zap.Error(cause))
	if err := s.saveEntry(ctx, tenant, e); err != nil {
		s.log.Warn("record failed attempt", zap.String("tenant", tenant), zap.String("txn", e.ID), zap.Error(err))
	}
}

// saveEntry replaces a journal entry with e.
func (s *Store) saveEntry(ctx context.Context, tenant string, e *journalEntry) error {
	_, err := s.tenantDB(tenant).Collection(txnJournal).ReplaceOne(ctx, bson.D{{Key: "_id", Value: e.ID}}, e, false)
	return dbError("update transaction journal", err)
}

// UnfinishedTransactions lists the transactions in the journal of every
// tenant, oldest first.
func (s *Store) UnfinishedTransactions(ctx context.Context) ([]UnfinishedTxn, error) {
	tenants, err := s.ListTenants(ctx)
	if err != nil {
		return nil, err
	}
	var out []UnfinishedTxn
	for _, t := range tenants {
		entries, err := s.journal(ctx, t.Name, bson.D{})
		if err != nil {
			return nil, err
		}
		for i := range entries {
			out = append(out, describe(t.Name, &entries[i]))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

func describe(tenant string, e *journalEntry) UnfinishedTxn {
	u := UnfinishedTxn{Tenant: tenant, ID: e.ID, State: TxnPending, At: e.At, Attempts: e.Attempts, LastError: e.LastError}
	switch {
	case e.Abandoning:
		u.State = TxnAbandoning
	case e.Quarantined:
		u.State = TxnQuarantined
	case e.Attempts > 0:
		u.State, u.RetryAt = TxnRetrying, e.RetryAt
	}
	for _, k := range e.Keys {
		u.Resources = append(u.Resources, k.Type+"/"+k.ID)
	}
	return u
}

// journal reads the journal entries matching filter.
func (s *Store) journal(ctx context.Context, tenant string, filter bson.D) ([]journalEntry, error) {
	cur, err := s.tenantDB(tenant).Collection(txnJournal).Find(ctx, filter, nil)
	if err != nil {
		return nil, dbError("read transaction journal", err)
	}
	var entries []journalEntry
	if err := engine.All(ctx, cur, &entries); err != nil {
		return nil, dbError("read transaction journal", err)
	}
	return entries, nil
}

// findEntry finds transaction txn in the journal of any tenant.
func (s *Store) findEntry(ctx context.Context, txn string) (string, *journalEntry, error) {
	tenants, err := s.ListTenants(ctx)
	if err != nil {
		return "", nil, err
	}
	for _, t := range tenants {
		entries, err := s.journal(ctx, t.Name, bson.D{{Key: "_id", Value: txn}})
		if err != nil {
			return "", nil, err
		}
		if len(entries) == 1 {
			return t.Name, &entries[0], nil
		}
	}
	return "", nil, fmt.Errorf("transaction %s: %w (no tenant's journal holds it)", txn, ErrNotFound)
}

// RetryTransaction applies a committed transaction now, whatever its state
// and backoff (quarantined ones included); an undecided one is rolled
// back, as recovery would. A failure counts as an attempt and leaves the
// transaction quarantined.
func (s *Store) RetryTransaction(ctx context.Context, txn string) (UnfinishedTxn, error) {
	tenant, e, err := s.findEntry(ctx, txn)
	if err != nil {
		return UnfinishedTxn{}, err
	}
	if e.Abandoning {
		return describe(tenant, e), fmt.Errorf("transaction %s is being abandoned; run the abandon again to finish it", txn)
	}
	committed, err := s.decide(ctx, tenant, e.ID, false)
	if err != nil {
		return describe(tenant, e), err
	}
	if !committed {
		s.rollBack(ctx, tenant, e)
		s.rolledBack.Add(1)
		return describe(tenant, e), s.refreshHeld(ctx, tenant)
	}
	if err := s.rollForward(ctx, tenant, e); err != nil {
		if !errors.Is(err, ErrUnavailable) {
			e.Attempts = max(e.Attempts, s.opts.RecoveryAttempts-1) // one more failure quarantines it
			s.failedAttempt(ctx, tenant, e, err)
		}
		return describe(tenant, e), fmt.Errorf("roll transaction %s forward: %w", txn, err)
	}
	s.rolledForward.Add(1)
	return describe(tenant, e), s.refreshHeld(ctx, tenant)
}

// AbandonTransaction undoes a committed transaction that cannot be
// applied: the versions it wrote are removed from history and every
// resource it changed is back at the version before it, as if it had
// never committed. The rows of other transactions are left alone. It is
// safe to run again after an interruption.
func (s *Store) AbandonTransaction(ctx context.Context, txn string) (UnfinishedTxn, error) {
	tenant, e, err := s.findEntry(ctx, txn)
	if err != nil {
		return UnfinishedTxn{}, err
	}
	if _, live := s.live.Load(e.ID); live {
		return describe(tenant, e), fmt.Errorf("transaction %s is being committed by this process", txn)
	}
	committed, err := s.decide(ctx, tenant, e.ID, false)
	if err != nil {
		return describe(tenant, e), err
	}
	if !committed { // undecided: an ordinary roll-back
		s.rollBack(ctx, tenant, e)
		s.rolledBack.Add(1)
		return describe(tenant, e), s.refreshHeld(ctx, tenant)
	}
	// From here no retry may apply it: a crash leaves it "abandoning".
	e.Abandoning = true
	if err := s.saveEntry(ctx, tenant, e); err != nil {
		return describe(tenant, e), err
	}
	s.held.add(tenant, e)
	for _, k := range e.Keys {
		if err := s.restorePrevious(ctx, tenant, k); err != nil {
			return describe(tenant, e), fmt.Errorf("abandon transaction %s: %w", txn, err)
		}
	}
	keys := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		keys[i] = historyKey(k.Type, k.ID, k.VID)
	}
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}, {Key: "txn", Value: e.ID}}
	if _, err := s.tenantDB(tenant).Collection(historyCollection).DeleteMany(ctx, filter); err != nil {
		return describe(tenant, e), dbError("abandon transaction "+txn+": delete its history rows", err)
	}
	s.finishTxn(ctx, tenant, e.ID)
	s.abandonedTotal.Add(1)
	s.log.Warn("abandoned committed transaction", zap.String("tenant", tenant), zap.String("txn", e.ID), zap.Strings("resources", describe(tenant, e).Resources))
	return describe(tenant, e), s.refreshHeld(ctx, tenant)
}

// restorePrevious puts back the version of k's resource before k.VID
// where the transaction's own version became current; a resource the
// transaction created loses its current row.
func (s *Store) restorePrevious(ctx context.Context, tenant string, k journalKey) error {
	coll := s.tenantDB(tenant).Collection(k.Type)
	mine := bson.D{{Key: "_id", Value: k.ID}, {Key: "vid", Value: k.VID}}
	defer s.changed(tenant, k.Type)
	if k.VID == 1 {
		_, err := coll.DeleteOne(ctx, mine)
		return dbError("remove current row", err)
	}
	var h historyDoc
	err := engine.FindOneInto(ctx, s.tenantDB(tenant).Collection(historyCollection), bson.D{{Key: "_id", Value: historyKey(k.Type, k.ID, k.VID-1)}}, nil, &h)
	if err != nil {
		return dbError(fmt.Sprintf("read version %d of %s/%s", k.VID-1, k.Type, k.ID), err)
	}
	doc, err := s.currentFromHistory(&h)
	if err != nil {
		return err
	}
	_, err = coll.ReplaceOne(ctx, mine, doc, false)
	return dbError("restore current row", err)
}

// currentFromHistory builds the current row of a history row, its search
// index included.
func (s *Store) currentFromHistory(h *historyDoc) (*storedDoc, error) {
	doc := &storedDoc{ID: h.ID, VID: h.VID, LastUpdated: h.LastUpdated, Deleted: h.Method == "DELETE", Method: h.Method, Resource: h.Resource, NumText: h.NumText}
	if doc.Deleted {
		return doc, nil
	}
	res, err := h.toResource()
	if err != nil {
		return nil, err
	}
	if doc.Idx, doc.Sort, err = s.index(h.Type, res.JSON); err != nil {
		return nil, err
	}
	return doc, nil
}

// refreshHeld rebuilds the held resources of tenant from its journal.
func (s *Store) refreshHeld(ctx context.Context, tenant string) error {
	entries, err := s.journal(ctx, tenant, bson.D{})
	if err != nil {
		return err
	}
	s.held.set(tenant, entries)
	return nil
}
