package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"fhirstore/store/engine"
)

// A transaction of several writes commits through a redo journal, which works
// on any MongoDB deployment including the embedded engine (no multi-document
// transactions there):
//
//  1. journal: insert {_id: txn, keys} into txnJournal.
//  2. history: insert every history row, marked txn; a duplicate key is a
//     conflict with another writer: delete our rows, drop the journal, 409.
//  3. decide: insert {_id: txn, commit: true} into txnDecisions. The unique
//     insert is the commit point; recovery decides "abort" by the same insert,
//     so exactly one of them wins even when both run at once.
//  4. current: put every current row.
//  5. done: delete the journal entry, then the decision.
//
// History rows marked with a txn whose journal entry still exists are
// invisible to readers, so nobody sees half a transaction. Recover rolls
// committed transactions forward and the others back.
const (
	txnJournal   = "txnJournal"
	txnDecisions = "txnDecisions"
)

// Fault points of the commit protocol, in order (Options.Fault).
const (
	FaultJournal = "txn.journal" // before the journal entry is written
	FaultHistory = "txn.history" // before the history rows are inserted
	FaultDecide  = "txn.decide"  // before the commit point
	FaultCurrent = "txn.current" // after the commit point, before current rows
	FaultDone    = "txn.done"    // after current rows, before the journal is cleared
	// FaultPutCurrent is called just before the current rows are put,
	// after FaultCurrent, and FaultPutCurrent+"/"+Type before those of
	// each type: an error there is the database refusing them (the rows
	// put before stay).
	FaultPutCurrent = "txn.putcurrent"
	// FaultReadJournal is called by readers of history rows after they
	// read the rows and before they read the journal to tell which are
	// visible: a roll-back there is one that races the read.
	FaultReadJournal = "read.journal"
	// FaultRollForward is called by recovery before it puts the current
	// rows of a committed transaction, and FaultRollForward+"/"+Type
	// before each: an error there is a roll-forward the database refuses.
	FaultRollForward = "txn.rollforward"
)

// journalEntry records an undecided or unfinished transaction.
type journalEntry struct {
	ID   string       `bson:"_id"`
	At   time.Time    `bson:"at"`
	Keys []journalKey `bson:"keys"`
	// Attempts counts the failed attempts to apply a committed
	// transaction; the next is due at RetryAt. Quarantined ones wait for
	// an operator; Abandoning ones are being undone (quarantine.go).
	Attempts    int       `bson:"attempts,omitempty"`
	RetryAt     time.Time `bson:"retryAt,omitempty"`
	LastError   string    `bson:"lastError,omitempty"`
	Quarantined bool      `bson:"quarantined,omitempty"`
	Abandoning  bool      `bson:"abandoning,omitempty"`
}

type journalKey struct {
	Type   string `bson:"type"`
	ID     string `bson:"id"`
	VID    int    `bson:"vid"`
	Exists bool   `bson:"exists"`
}

type decision struct {
	ID     string    `bson:"_id"`
	Commit bool      `bson:"commit"`
	At     time.Time `bson:"at"`
}

// errFault is returned when Options.Fault stops a commit.
var errFault = errors.New("injected fault")

func (s *Store) fault(point string) error {
	if s.opts.Fault == nil {
		return nil
	}
	if err := s.opts.Fault(point); err != nil {
		return fmt.Errorf("%s: %w: %w", point, errFault, err)
	}
	return nil
}

// commitJournal stores versions all or nothing. exists[i] tells whether
// versions[i] replaces a current row. A duplicate history row fails the
// whole set with a *OpError wrapping ErrConflict at index owner[i].
// started is called once the database starts writing them.
func (s *Store) commitJournal(ctx context.Context, tenant string, versions []*version, exists []bool, owner []int, started func()) error {
	db := s.tenantDB(tenant)
	if a, ok := db.(engine.Atomic); ok && s.opts.Fault == nil {
		return s.commitAtomic(ctx, tenant, a, versions, exists, owner, started)
	}
	started()
	txn := uuid.NewString()
	entry := journalEntry{ID: txn, At: s.opts.Now().UTC(), Keys: make([]journalKey, len(versions))}
	rows := make([]any, len(versions))
	for i, v := range versions {
		entry.Keys[i] = journalKey{Type: v.hist.Type, ID: v.hist.ID, VID: v.hist.VID, Exists: exists[i]}
		v.hist.Txn = txn
		rows[i] = v.hist
	}
	s.live.Store(txn, true)
	defer s.live.Delete(txn)
	if err := s.fault(FaultJournal); err != nil {
		return err
	}
	if err := db.Collection(txnJournal).InsertOne(ctx, entry); err != nil {
		return dbError("write transaction journal", err)
	}
	// From here on the transaction finishes (or undoes) what it started even
	// when the client goes away; recovery covers a crash.
	ctx = context.WithoutCancel(ctx)
	if err := s.fault(FaultHistory); err != nil {
		return err
	}
	err := db.Collection(historyCollection).InsertMany(ctx, rows)
	if err != nil {
		s.rollBack(ctx, tenant, &entry)
		if idx, ok := duplicateIndex(err); ok {
			v := versions[idx]
			return &OpError{Index: owner[idx], Err: fmt.Errorf("%w: version %d of %s/%s was written concurrently", ErrConflict, v.hist.VID, v.hist.Type, v.hist.ID)}
		}
		return dbError("insert history rows", err)
	}
	if err := s.fault(FaultDecide); err != nil {
		return err
	}
	committed, err := s.decide(ctx, tenant, txn, true)
	if err != nil || !committed {
		s.rollBack(ctx, tenant, &entry)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: the transaction was abandoned by recovery", ErrConflict)
	}
	if err := s.fault(FaultCurrent); err != nil {
		return err
	}
	err = s.fault(FaultPutCurrent)
	if err == nil {
		err = s.putCurrentRows(ctx, tenant, versions, exists, false)
	}
	if err != nil {
		// Committed: recovery rolls the current rows forward later, and
		// holds the resources until then (quarantine.go).
		s.failedAttempt(ctx, tenant, &entry, err)
		return nil
	}
	if err := s.fault(FaultDone); err != nil {
		return err
	}
	s.finishTxn(ctx, tenant, txn)
	return nil
}

// commitAtomic writes the history and current rows of versions in one
// atomic write of an engine that has them: the journal, its decision and
// recovery are not needed (a crash leaves all of them or none). With
// fault points set (tests of recovery) the journal is used instead.
func (s *Store) commitAtomic(ctx context.Context, tenant string, a engine.Atomic, versions []*version, exists []bool, owner []int, started func()) error {
	db := s.tenantDB(tenant)
	for _, v := range versions {
		v.hist.Txn = ""
	}
	if err := prepareRows(a, versions); err != nil {
		return err
	}
	rows := make([]any, len(versions))
	for i, v := range versions {
		rows[i] = v.historyRow()
	}
	var histErr error
	err := a.RunAtomic(ctx, func(ctx context.Context) error {
		started()
		if histErr = db.Collection(historyCollection).InsertMany(ctx, rows); histErr != nil {
			return histErr
		}
		return s.putCurrentRows(ctx, tenant, versions, exists, true)
	})
	if histErr != nil {
		if idx, ok := duplicateIndex(histErr); ok {
			v := versions[idx]
			return &OpError{Index: owner[idx], Err: fmt.Errorf("%w: version %d of %s/%s was written concurrently", ErrConflict, v.hist.VID, v.hist.Type, v.hist.ID)}
		}
		return dbError("insert history rows", histErr)
	}
	if err != nil {
		return err
	}
	changed := map[string]bool{}
	for _, v := range versions {
		if !changed[v.hist.Type] {
			changed[v.hist.Type] = true
			s.changedRow(ctx, tenant, v.hist.Type)
		}
	}
	return nil
}

// duplicateIndex finds the first duplicate-key write of a bulk insert.
func duplicateIndex(err error) (int, bool) {
	var be *engine.BulkError
	if errors.As(err, &be) {
		for _, we := range be.Errors {
			if errors.Is(we.Err, engine.ErrDuplicateKey) {
				return we.Index, true
			}
		}
	}
	return 0, false
}

// decide records the fate of txn with a unique insert; whichever of the
// committer and recovery inserts first wins. It reports the decision.
func (s *Store) decide(ctx context.Context, tenant, txn string, commit bool) (bool, error) {
	coll := s.tenantDB(tenant).Collection(txnDecisions)
	err := coll.InsertOne(ctx, decision{ID: txn, Commit: commit, At: s.opts.Now().UTC()})
	if err == nil {
		return commit, nil
	}
	if !engine.IsDuplicateKey(err) {
		return false, dbError("decide transaction", err)
	}
	var d decision
	if err := engine.FindOneInto(ctx, coll, bson.D{{Key: "_id", Value: txn}}, nil, &d); err != nil {
		return false, dbError("read transaction decision", err)
	}
	return d.Commit, nil
}

// putCurrentRows writes the current rows of a committed transaction: new
// resources in one insert, replaced ones one by one.
//
// Inside an atomic write (atomic), the caches are told of the changes by
// the caller once it committed, not here.
func (s *Store) putCurrentRows(ctx context.Context, tenant string, versions []*version, exists []bool, atomic bool) error {
	put := func(ctx context.Context, tenant, typ string, v *version) error {
		if atomic {
			return s.putCurrentRow(ctx, tenant, typ, &v.doc, v.currentRow(), true)
		}
		return s.putCurrent(ctx, tenant, typ, &v.doc, true)
	}
	byType := map[string][]*version{}
	var order []string
	for i, v := range versions {
		if exists[i] {
			if err := s.fault(FaultPutCurrent + "/" + v.hist.Type); err != nil {
				return err
			}
			if err := put(ctx, tenant, v.hist.Type, v); err != nil {
				return err
			}
			continue
		}
		if _, ok := byType[v.hist.Type]; !ok {
			order = append(order, v.hist.Type)
		}
		byType[v.hist.Type] = append(byType[v.hist.Type], v)
	}
	for _, typ := range order {
		vs := byType[typ]
		docs := make([]any, len(vs))
		for i, v := range vs {
			docs[i] = v.currentRow()
		}
		if err := s.fault(FaultPutCurrent + "/" + typ); err != nil {
			return err
		}
		err := s.tenantDB(tenant).Collection(typ).InsertMany(ctx, docs)
		if !atomic {
			s.changedRow(ctx, tenant, typ)
		}
		if err == nil {
			continue
		}
		var be *engine.BulkError
		if !errors.As(err, &be) || len(be.Errors) == 0 {
			return dbError("insert current rows", err)
		}
		for _, we := range be.Errors { // a row already there: replace it if older
			if !errors.Is(we.Err, engine.ErrDuplicateKey) {
				return dbError("insert current rows", err)
			}
			if err := put(ctx, tenant, typ, vs[we.Index]); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishTxn clears a finished transaction's journal entry (making its history
// rows visible) and then its decision.
func (s *Store) finishTxn(ctx context.Context, tenant, txn string) {
	db := s.tenantDB(tenant)
	byID := bson.D{{Key: "_id", Value: txn}}
	if _, err := db.Collection(txnJournal).DeleteOne(ctx, byID); err != nil {
		s.log.Warn("clear transaction journal", zap.String("tenant", tenant), zap.String("txn", txn), zap.Error(err))
		return
	}
	if _, err := db.Collection(txnDecisions).DeleteOne(ctx, byID); err != nil {
		s.log.Warn("clear transaction decision", zap.String("tenant", tenant), zap.String("txn", txn), zap.Error(err))
	}
}

// rollBack removes the history rows an undecided transaction inserted and
// its journal entry; rows of other writers are left alone.
func (s *Store) rollBack(ctx context.Context, tenant string, entry *journalEntry) {
	keys := make([]string, len(entry.Keys))
	for i, k := range entry.Keys {
		keys[i] = historyKey(k.Type, k.ID, k.VID)
	}
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}, {Key: "txn", Value: entry.ID}}
	if _, err := s.tenantDB(tenant).Collection(historyCollection).DeleteMany(ctx, filter); err != nil {
		s.log.Warn("roll back transaction", zap.String("tenant", tenant), zap.String("txn", entry.ID), zap.Error(err))
		return // the journal entry stays; recovery retries
	}
	s.finishTxn(ctx, tenant, entry.ID)
}

// rollForward puts the current rows of a committed transaction from its
// history rows.
func (s *Store) rollForward(ctx context.Context, tenant string, entry *journalEntry) error {
	if err := s.fault(FaultRollForward); err != nil {
		return err
	}
	for _, k := range entry.Keys {
		var h historyDoc
		err := engine.FindOneInto(ctx, s.tenantDB(tenant).Collection(historyCollection), bson.D{{Key: "_id", Value: historyKey(k.Type, k.ID, k.VID)}}, nil, &h)
		if err != nil {
			return dbError("read committed history row", err)
		}
		doc, err := s.currentFromHistory(&h)
		if err != nil {
			return err
		}
		if err := s.fault(FaultRollForward + "/" + h.Type); err != nil {
			return err
		}
		if err := s.putCurrent(ctx, tenant, h.Type, doc, false); err != nil {
			return err
		}
	}
	s.finishTxn(ctx, tenant, entry.ID)
	return nil
}

// RecoveryReport counts what Recover did: transactions finished either
// way, failed attempts to apply committed ones, and of these the ones
// quarantined (and, in Recovered, abandoned by an operator).
type RecoveryReport struct {
	RolledForward, RolledBack int
	Failed, Quarantined       int
	Abandoned                 int
}

// Recover finishes transactions interrupted by a crash in every tenant:
// committed ones are rolled forward, undecided ones back. Only journal
// entries older than olderThan are touched, so transactions that another
// live process is committing are left to it.
func (s *Store) Recover(ctx context.Context, olderThan time.Duration) (RecoveryReport, error) {
	var total RecoveryReport
	tenants, err := s.ListTenants(ctx)
	if err != nil {
		return total, err
	}
	for _, t := range tenants {
		r, err := s.RecoverTenant(ctx, t.Name, olderThan)
		total.RolledForward += r.RolledForward
		total.RolledBack += r.RolledBack
		total.Failed += r.Failed
		total.Quarantined += r.Quarantined
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Recovered counts the transactions every Recover and RecoverTenant of
// this Store has finished since it was opened.
func (s *Store) Recovered() RecoveryReport {
	return RecoveryReport{RolledForward: int(s.rolledForward.Load()), RolledBack: int(s.rolledBack.Load()),
		Failed: int(s.failedTotal.Load()), Quarantined: int(s.quarantinedTotal.Load()), Abandoned: int(s.abandonedTotal.Load())}
}

// RecoverTenant is Recover for one tenant. A committed transaction that
// cannot be applied is retried with a backoff and quarantined after
// Options.RecoveryAttempts attempts; it fails no recovery pass (only a
// database out of reach does).
func (s *Store) RecoverTenant(ctx context.Context, tenant string, olderThan time.Duration) (RecoveryReport, error) {
	var r RecoveryReport
	now := s.opts.Now().UTC()
	cutoff := now.Add(-olderThan)
	entries, err := s.journal(ctx, tenant, bson.D{{Key: "at", Value: bson.D{{Key: "$lte", Value: cutoff}}}})
	if err != nil {
		return r, err
	}
	for i := range entries {
		e := &entries[i]
		if _, live := s.live.Load(e.ID); live || e.Quarantined || e.Abandoning || e.Attempts > 0 && now.Before(e.RetryAt) {
			continue
		}
		committed, err := s.decide(ctx, tenant, e.ID, false)
		if err != nil {
			return r, err
		}
		if committed {
			if err := s.rollForward(ctx, tenant, e); err != nil {
				if errors.Is(err, ErrUnavailable) {
					return r, fmt.Errorf("roll transaction %s forward: %w", e.ID, err)
				}
				s.failedAttempt(ctx, tenant, e, err)
				r.Failed++
				if e.Quarantined {
					r.Quarantined++
				}
				continue
			}
			r.RolledForward++
			s.rolledForward.Add(1)
		} else {
			s.rollBack(ctx, tenant, e)
			r.RolledBack++
			s.rolledBack.Add(1)
		}
		s.log.Info("recovered transaction", zap.String("tenant", tenant), zap.String("txn", e.ID), zap.Bool("committed", committed))
	}
	if err := s.refreshHeld(ctx, tenant); err != nil {
		return r, err
	}
	return r, s.dropStaleDecisions(ctx, tenant, cutoff)
}

// dropStaleDecisions removes decisions whose journal entry is gone (a crash
// between the two deletes of finishTxn).
func (s *Store) dropStaleDecisions(ctx context.Context, tenant string, cutoff time.Time) error {
	db := s.tenantDB(tenant)
	cur, err := db.Collection(txnDecisions).Find(ctx, bson.D{{Key: "at", Value: bson.D{{Key: "$lte", Value: cutoff}}}}, nil)
	if err != nil {
		return dbError("read transaction decisions", err)
	}
	var ds []decision
	if err := engine.All(ctx, cur, &ds); err != nil {
		return dbError("read transaction decisions", err)
	}
	for _, d := range ds {
		n, err := db.Collection(txnJournal).Count(ctx, bson.D{{Key: "_id", Value: d.ID}})
		if err != nil {
			return dbError("read transaction journal", err)
		}
		if n == 0 {
			if _, err := db.Collection(txnDecisions).DeleteOne(ctx, bson.D{{Key: "_id", Value: d.ID}}); err != nil {
				return dbError("clear transaction decision", err)
			}
		}
	}
	return nil
}

// pendingTxns reports which transactions named by rows are still in the
// journal, or were rolled back while rows were read: their rows are not
// (yet, or any more) part of history.
func (s *Store) pendingTxns(ctx context.Context, tenant string, rows []*historyDoc) (map[string]bool, error) {
	var ids []string
	seen := map[string]bool{}
	for _, h := range rows {
		if h.Txn != "" && !seen[h.Txn] {
			seen[h.Txn] = true
			ids = append(ids, h.Txn)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if err := s.fault(FaultReadJournal); err != nil {
		return nil, err
	}
	cur, err := s.tenantDB(tenant).Collection(txnJournal).Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		&engine.FindOptions{Projection: bson.D{{Key: "_id", Value: 1}}})
	if err != nil {
		return nil, dbError("read transaction journal", err)
	}
	var open []struct {
		ID string `bson:"_id"`
	}
	if err := engine.All(ctx, cur, &open); err != nil {
		return nil, dbError("read transaction journal", err)
	}
	pending := make(map[string]bool, len(open))
	for _, o := range open {
		pending[o.ID] = true
	}
	return pending, s.undoneWhileRead(ctx, tenant, rows, pending)
}

// undoneWhileRead adds to pending the transactions of rows that are gone from
// history after their journal entry was found gone: rows read before a
// roll-back deleted them, whose entry the roll-back then cleared before
// the journal was read. A roll-back deletes its rows before its entry, so
// a row still there once the entry is gone was committed.
func (s *Store) undoneWhileRead(ctx context.Context, tenant string, rows []*historyDoc, pending map[string]bool) error {
	var keys []string
	for _, h := range rows {
		if h.Txn != "" && !pending[h.Txn] {
			keys = append(keys, h.Key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	cur, err := s.tenantDB(tenant).Collection(historyCollection).Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}},
		&engine.FindOptions{Projection: bson.D{{Key: "_id", Value: 1}}})
	if err != nil {
		return dbError("read history rows again", err)
	}
	var there []struct {
		Key string `bson:"_id"`
	}
	if err := engine.All(ctx, cur, &there); err != nil {
		return dbError("read history rows again", err)
	}
	kept := make(map[string]bool, len(there))
	for _, t := range there {
		kept[t.Key] = true
	}
	for _, h := range rows {
		if h.Txn != "" && !pending[h.Txn] && !kept[h.Key] {
			pending[h.Txn] = true
		}
	}
	return nil
}
