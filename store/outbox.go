package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// The outbox announces changes to subscriptions, durably and in the same
// write as the change:
//
//   - A single write whose type the attached Outbox wants inserts an
//     outbox row {_id: "Type/id/vid"} in the same atomic write as its
//     history and current rows, on an engine that has them (the embedded
//     one): the change and its row commit together. Elsewhere, and for a
//     transaction (all of its rows before its journal entry), the row is
//     inserted first, then the change written as usual: the history row is
//     the commit point and the outbox row exists before it, so a committed
//     change has its row whatever moment a crash picks.
//   - A row is ready once its history row is visible (its transaction, if
//     any, finished). A row whose history row never appears (the write
//     failed, its transaction rolled back) is dropped when older than
//     Options.LockLease.
//   - Two writers racing for one version share one row (the duplicate key
//     is ignored): whichever wins, its version is the one announced.
//
// The subscription engine reads ready changes, matches them, queues one
// notification per matching subscription and then deletes the outbox rows;
// a crash in between queues the same notifications again (their keys are
// unique), so nothing is lost and nothing is queued twice.
const (
	outboxCollection        = "outbox"
	notificationsCollection = "notifications"
	probeCollection         = "subscriptionProbe"
)

// Outbox decides which writes announce their changes.
type Outbox interface {
	// Interest returns the searches of the subscriptions that listen to
	// changes of typ in tenant; all means every change of typ is wanted.
	// A change is recorded when all is set, when it is a deletion, or
	// when its version may match one of the searches.
	Interest(tenant, typ string) (queries []*search.Query, all bool)
	// Recorded is called after a write that recorded changes has finished.
	Recorded(tenant string)
}

// SetOutbox attaches the outbox that decides which writes record changes;
// nil detaches it.
func (s *Store) SetOutbox(o Outbox) {
	if o == nil {
		s.outbox.Store(nil)
		return
	}
	s.outbox.Store(&o)
}

// outboxRow is a change waiting to be matched against subscriptions.
type outboxRow struct {
	Key  string    `bson:"_id"`
	Type string    `bson:"type"`
	ID   string    `bson:"id"`
	VID  int       `bson:"vid"`
	At   time.Time `bson:"at"`
}

// recordChanges inserts the outbox rows of the versions the outbox wants,
// before they are written; call the returned func once the write is over.
func (s *Store) recordChanges(ctx context.Context, tenant string, versions []*version) (func(), error) {
	rows, o := s.outboxRows(tenant, versions)
	if len(rows) == 0 {
		return func() {}, nil
	}
	if err := s.insertOutboxRows(ctx, tenant, rows); err != nil {
		return nil, err
	}
	return func() { o.Recorded(tenant) }, nil
}

// outboxRows are the outbox rows of the versions the attached outbox
// wants recorded, and that outbox (nil rows when none is attached).
func (s *Store) outboxRows(tenant string, versions []*version) ([]any, Outbox) {
	p := s.outbox.Load()
	if p == nil {
		return nil, nil
	}
	o := *p
	var rows []any
	at := s.opts.Now().UTC()
	for _, v := range versions {
		if wanted(o, tenant, v) {
			rows = append(rows, outboxRow{Key: v.hist.Key, Type: v.hist.Type, ID: v.hist.ID, VID: v.hist.VID, At: at})
		}
	}
	return rows, o
}

// insertOutboxRows inserts rows into the tenant's outbox; a row there
// already (another writer's of the same version) is kept.
func (s *Store) insertOutboxRows(ctx context.Context, tenant string, rows []any) error {
	if err := s.tenantDB(tenant).Collection(outboxCollection).InsertMany(ctx, rows); err != nil && !onlyDuplicates(err) {
		return dbError("record changes in the outbox", err)
	}
	return nil
}

// wanted tells whether the outbox wants version v recorded. A version
// that no subscription's search can match (by mayMatch, so that this
// never errs) costs its write nothing.
func wanted(o Outbox, tenant string, v *version) bool {
	queries, all := o.Interest(tenant, v.hist.Type)
	if all || (v.doc.Deleted && len(queries) > 0) {
		return true
	}
	for _, q := range queries {
		if mayMatch(q.Filter(), v.doc.Idx) {
			return true
		}
	}
	return false
}

// onlyDuplicates tells whether every failure of an insert is a duplicate key.
func onlyDuplicates(err error) bool {
	var be *engine.BulkError
	if !errors.As(err, &be) {
		return engine.IsDuplicateKey(err)
	}
	for _, we := range be.Errors {
		if !errors.Is(we.Err, engine.ErrDuplicateKey) {
			return false
		}
	}
	return true
}

// Change is a committed version announced through the outbox.
type Change struct {
	// Key names the version: Type/id/vid.
	Key string
	// Resource is the version; a deletion has Deleted set and no JSON.
	Resource *Resource
	// Previous is the version a deletion deleted (nil otherwise).
	Previous *Resource
}

// Changes returns the ready changes of the tenant's outbox, oldest first,
// at most one per resource (its lowest pending version, so that each
// resource's changes are handled in order), reading at most limit rows.
// Rows whose write never committed are dropped on the way.
func (s *Store) Changes(ctx context.Context, tenant string, limit int) ([]*Change, error) {
	coll := s.tenantDB(tenant).Collection(outboxCollection)
	if err := s.ensureOutboxIndexes(ctx, tenant, coll); err != nil {
		return nil, err
	}
	cur, err := coll.Find(ctx, bson.D{}, &engine.FindOptions{Sort: outboxOrder, Limit: int64(limit)})
	if err != nil {
		return nil, dbError("read outbox", err)
	}
	var rows []*outboxRow
	if err := engine.All(ctx, cur, &rows); err != nil {
		return nil, dbError("read outbox", err)
	}
	rows = firstPerResource(rows)
	hist, err := s.historyRowsByKey(ctx, tenant, keysOf(rows, 0))
	if err != nil {
		return nil, err
	}
	var out []*Change
	var deletions []*Change
	for _, r := range rows {
		h := hist[r.Key]
		if h == nil {
			s.dropAbandoned(ctx, tenant, r)
			continue
		}
		res, err := h.toResource()
		if err != nil {
			return nil, err
		}
		c := &Change{Key: r.Key, Resource: res}
		out = append(out, c)
		if res.Deleted {
			deletions = append(deletions, c)
		}
	}
	return out, s.fillPrevious(ctx, tenant, deletions)
}

// outboxOrder is the order changes are handled in: the order their
// writes began, which is version order for each resource.
var outboxOrder = bson.D{{Key: "at", Value: 1}, {Key: "type", Value: 1}, {Key: "id", Value: 1}, {Key: "vid", Value: 1}}

// ensureOutboxIndexes lets a long outbox (after downtime) be read in order
// without sorting all of it.
func (s *Store) ensureOutboxIndexes(ctx context.Context, tenant string, coll engine.Collection) error {
	key := tenant + "/" + outboxCollection
	if _, done := s.indexed.Load(key); done {
		return nil
	}
	if err := coll.CreateIndexes(ctx, []engine.Index{{Name: "at", Keys: outboxOrder}}); err != nil {
		return dbError("create outbox indexes of "+tenant, err)
	}
	s.indexed.Store(key, true)
	return nil
}

// firstPerResource keeps the lowest version of each resource among rows.
func firstPerResource(rows []*outboxRow) []*outboxRow {
	first := map[string]*outboxRow{}
	var out []*outboxRow
	for _, r := range rows {
		k := r.Type + "/" + r.ID
		if f, ok := first[k]; ok {
			if r.VID < f.VID {
				*f = *r
			}
			continue
		}
		first[k] = r
		out = append(out, r)
	}
	return out
}

func keysOf(rows []*outboxRow, back int) []string {
	keys := make([]string, 0, len(rows))
	for _, r := range rows {
		keys = append(keys, historyKey(r.Type, r.ID, r.VID-back))
	}
	return keys
}

// historyRowsByKey reads the visible history rows among keys.
func (s *Store) historyRowsByKey(ctx context.Context, tenant string, keys []string) (map[string]*historyDoc, error) {
	out := map[string]*historyDoc{}
	if len(keys) == 0 {
		return out, nil
	}
	cur, err := s.tenantDB(tenant).Collection(historyCollection).Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}}, nil)
	if err != nil {
		return nil, dbError("read history rows", err)
	}
	var rows []*historyDoc
	if err := engine.All(ctx, cur, &rows); err != nil {
		return nil, dbError("read history rows", err)
	}
	pending, err := s.pendingTxns(ctx, tenant, rows)
	if err != nil {
		return nil, err
	}
	for _, h := range rows {
		if !pending[h.Txn] {
			out[h.Key] = h
		}
	}
	return out, nil
}

// dropAbandoned deletes an outbox row whose version never became visible
// once it is older than any write may take; a younger one waits.
func (s *Store) dropAbandoned(ctx context.Context, tenant string, r *outboxRow) {
	if s.opts.Now().Sub(r.At) < s.opts.LockLease {
		return
	}
	exists, err := s.tenantDB(tenant).Collection(historyCollection).Count(ctx, bson.D{{Key: "_id", Value: r.Key}})
	if err != nil || exists > 0 {
		return // a transaction still deciding owns the row
	}
	if _, err := s.tenantDB(tenant).Collection(outboxCollection).DeleteOne(ctx, bson.D{{Key: "_id", Value: r.Key}}); err != nil {
		s.log.Warn("drop abandoned outbox row", zap.String("tenant", tenant), zap.String("key", r.Key), zap.Error(err))
		return
	}
	s.log.Info("dropped the outbox row of a write that never committed", zap.String("tenant", tenant), zap.String("key", r.Key))
}

// fillPrevious reads the versions the deletions deleted.
func (s *Store) fillPrevious(ctx context.Context, tenant string, deletions []*Change) error {
	if len(deletions) == 0 {
		return nil
	}
	keys := make([]string, len(deletions))
	for i, c := range deletions {
		keys[i] = historyKey(c.Resource.Type, c.Resource.ID, c.Resource.VersionID-1)
	}
	prev, err := s.historyRowsByKey(ctx, tenant, keys)
	if err != nil {
		return err
	}
	for i, c := range deletions {
		if h := prev[keys[i]]; h != nil {
			if c.Previous, err = h.toResource(); err != nil {
				return err
			}
		}
	}
	return nil
}

// DoneChanges removes handled changes from the outbox.
func (s *Store) DoneChanges(ctx context.Context, tenant string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := s.tenantDB(tenant).Collection(outboxCollection).DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}})
	return dbError("clear outbox rows", err)
}

// MatchChanges runs each query (all of typ) against the changes of typ as
// the search engine would against current versions: a deletion is judged
// by the version it deleted. It returns, per query, the keys of the
// changes that match. The queries are the searches themselves, run on the
// current rows where those still are the changed versions and on a
// scratch copy of the versions otherwise, so matching has exactly the
// semantics of a search; mayMatch only spares searches that cannot find
// anything.
func (s *Store) MatchChanges(ctx context.Context, tenant, typ string, queries []*search.Query, changes []*Change) ([]map[string]bool, error) {
	docs, keyOf, err := s.probeDocs(typ, changes)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]bool, len(queries))
	for i := range out {
		out[i] = map[string]bool{}
	}
	idxOf := make(map[string]bson.Raw, len(docs))
	for _, d := range docs {
		idxOf[d.ID] = d.Idx
	}
	if !anyMayMatch(queries, idxOf) {
		return out, nil // no query can find anything: no need to search
	}
	var searched []*search.Query
	var at []int // position in queries of each of searched
	for i, q := range queries {
		if ids, ok := matchInMemory(q, docs); ok {
			for _, id := range ids {
				out[i][keyOf[id]] = true
			}
			continue
		}
		searched, at = append(searched, q), append(at, i)
	}
	if len(searched) == 0 {
		return out, nil
	}
	matched, err := s.matchLive(ctx, tenant, typ, searched, docs, idxOf)
	if err != nil {
		return nil, err
	}
	for j, ids := range matched {
		for id := range ids {
			out[at[j]][keyOf[id]] = true
		}
	}
	return out, nil
}

// matchInMemory decides q on the index values of docs without a search,
// when every condition of q is an equality or $in of strings on an idx
// field that each doc holds as a string or an array of strings (a token
// or reference criterion, the usual subscription): the search would
// answer exactly that. ok is false when any part needs the database.
func matchInMemory(q *search.Query, docs []*storedDoc) (ids []string, ok bool) {
	if len(q.Has) > 0 || len(q.Chains) > 0 || q.PostFilter != nil || len(q.Conditions) == 0 {
		return nil, false
	}
	for _, d := range docs {
		match, decided := exactMatch(q.Filter(), d.ID, d.Idx)
		if !decided {
			return nil, false
		}
		if match {
			ids = append(ids, d.ID)
		}
	}
	return ids, true
}

// exactMatch evaluates filter on a version's id and index values when it
// is a conjunction of string equalities and $in on _id and idx fields;
// decided is false for any other condition or any value it cannot compare
// exactly.
func exactMatch(filter bson.D, id string, idx bson.Raw) (match, decided bool) {
	match = true
	for _, e := range filter {
		switch {
		case e.Key == "$and":
			conds, ok := e.Value.(bson.A)
			if !ok {
				return false, false
			}
			for _, c := range conds {
				d, ok := c.(bson.D)
				if !ok {
					return false, false
				}
				m, dec := exactMatch(d, id, idx)
				if !dec {
					return false, false
				}
				match = match && m
			}
		case e.Key == "_id":
			want, ok := equalities(e.Value)
			if !ok {
				return false, false
			}
			match = match && slices.Contains(want, id)
		case strings.HasPrefix(e.Key, "idx."):
			want, ok := equalities(e.Value)
			if !ok {
				return false, false
			}
			m, dec := holds(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: idx}, strings.Split(strings.TrimPrefix(e.Key, "idx."), "."), want)
			if !dec {
				return false, false
			}
			match = match && m
		default:
			return false, false
		}
	}
	return match, true
}

// holds tells whether the value at path under v equals one of want, as
// MongoDB compares (an array element by element), when that is certain: a
// missing path, a string, or an array of scalars. Paths through arrays
// and documents at the end are left undecided.
func holds(v bson.RawValue, path []string, want []string) (match, decided bool) {
	for _, key := range path {
		if v.Type == bson.TypeArray {
			return false, false
		}
		doc, ok := v.DocumentOK()
		if !ok {
			return false, true // a scalar has no fields: nothing there
		}
		if v = doc.Lookup(key); v.Type == 0 {
			return false, true
		}
	}
	if s, ok := v.StringValueOK(); ok {
		return slices.Contains(want, s), true
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return false, v.Type != bson.TypeEmbeddedDocument
	}
	vals, err := arr.Values()
	if err != nil {
		return false, false
	}
	for _, x := range vals {
		if x.Type == bson.TypeArray || x.Type == bson.TypeEmbeddedDocument {
			return false, false
		}
		if s, ok := x.StringValueOK(); ok && slices.Contains(want, s) {
			match = true
		}
	}
	return match, true
}

// matchLive runs the queries against the versions that are still the
// current rows of their resources (the usual case: nothing to write), and
// against a scratch copy for the others. A version is taken as current
// when its row has its version number both before and after the queries.
func (s *Store) matchLive(ctx context.Context, tenant, typ string, queries []*search.Query, docs []*storedDoc, idxOf map[string]bson.Raw) ([]map[string]bool, error) {
	coll := s.tenantDB(tenant).Collection(typ)
	before, err := s.currentVersions(ctx, coll, docs)
	if err != nil {
		return nil, err
	}
	var live, rest []*storedDoc
	for _, d := range docs {
		if before[d.ID] == d.VID {
			live = append(live, d)
		} else {
			rest = append(rest, d)
		}
	}
	out, err := s.matchIn(ctx, tenant, coll, queries, live, idxOf)
	if err != nil {
		return nil, err
	}
	after, err := s.currentVersions(ctx, coll, live)
	if err != nil {
		return nil, err
	}
	for _, d := range live {
		if after[d.ID] != d.VID { // overtaken by a newer version meanwhile
			rest = append(rest, d)
			for _, m := range out {
				delete(m, d.ID)
			}
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	probed, err := s.matchProbe(ctx, tenant, queries, rest, idxOf)
	for i, m := range probed {
		for id := range m {
			out[i][id] = true
		}
	}
	return out, err
}

// currentVersions maps the ids of docs to the version numbers of their
// current rows (deleted ones left out).
func (s *Store) currentVersions(ctx context.Context, coll engine.Collection, docs []*storedDoc) (map[string]int, error) {
	out := make(map[string]int, len(docs))
	if len(docs) == 0 {
		return out, nil
	}
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		&engine.FindOptions{Projection: bson.D{{Key: "vid", Value: 1}, {Key: "deleted", Value: 1}}})
	if err != nil {
		return nil, dbError("read current versions", err)
	}
	var rows []struct {
		ID      string `bson:"_id"`
		VID     int    `bson:"vid"`
		Deleted bool   `bson:"deleted"`
	}
	if err := engine.All(ctx, cur, &rows); err != nil {
		return nil, dbError("read current versions", err)
	}
	for _, r := range rows {
		if !r.Deleted {
			out[r.ID] = r.VID
		}
	}
	return out, nil
}

// matchProbe puts docs in the tenant's scratch collection and runs the
// queries there.
func (s *Store) matchProbe(ctx context.Context, tenant string, queries []*search.Query, docs []*storedDoc, idxOf map[string]bson.Raw) ([]map[string]bool, error) {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	coll := s.tenantDB(tenant).Collection(probeCollection)
	ids := make([]string, len(docs))
	rows := make([]any, len(docs))
	for i, d := range docs {
		ids[i], rows[i] = d.ID, d
	}
	byID := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}
	if _, err := coll.DeleteMany(ctx, byID); err != nil { // left by a crash
		return nil, dbError("clear subscription probe", err)
	}
	if err := coll.InsertMany(ctx, rows); err != nil {
		return nil, dbError("fill subscription probe", err)
	}
	defer func() {
		if _, err := coll.DeleteMany(context.WithoutCancel(ctx), byID); err != nil {
			s.log.Warn("clear subscription probe", zap.String("tenant", tenant), zap.Error(err))
		}
	}()
	return s.matchIn(ctx, tenant, coll, queries, docs, idxOf)
}

// matchIn runs each query against the rows of docs in coll, each only on
// the rows that mayMatch lets through; it returns the ids each matches.
func (s *Store) matchIn(ctx context.Context, tenant string, coll engine.Collection, queries []*search.Query, docs []*storedDoc, idxOf map[string]bson.Raw) ([]map[string]bool, error) {
	out := make([]map[string]bool, len(queries))
	for i, q := range queries {
		out[i] = map[string]bool{}
		var candidates []string
		for _, d := range docs {
			if mayMatch(q.Filter(), idxOf[d.ID]) {
				candidates = append(candidates, d.ID)
			}
		}
		if len(candidates) == 0 {
			continue
		}
		only := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: candidates}}}}
		matched, err := s.probe(ctx, tenant, coll, q, only)
		if err != nil {
			return nil, err
		}
		for _, id := range matched {
			out[i][id] = true
		}
	}
	return out, nil
}

// probeDocs are the current rows the changes of typ would have; keyOf maps
// their ids to change keys.
func (s *Store) probeDocs(typ string, changes []*Change) ([]*storedDoc, map[string]string, error) {
	var docs []*storedDoc
	keyOf := map[string]string{}
	for _, c := range changes {
		v := c.Resource
		if v.Deleted {
			v = c.Previous
		}
		if v == nil || v.Type != typ || v.Deleted {
			continue
		}
		if _, dup := keyOf[v.ID]; dup {
			return nil, nil, fmt.Errorf("match changes: two versions of %s/%s at once", typ, v.ID)
		}
		idx, sortDoc, err := s.index(typ, v.JSON)
		if err != nil {
			return nil, nil, err
		}
		docs = append(docs, &storedDoc{ID: v.ID, VID: v.VersionID, LastUpdated: v.LastUpdated, Idx: idx, Sort: sortDoc})
		keyOf[v.ID] = c.Key
	}
	return docs, keyOf, nil
}

// probe returns the ids of the scratch rows q matches.
func (s *Store) probe(ctx context.Context, tenant string, coll engine.Collection, q *search.Query, only bson.D) ([]string, error) {
	filter, err := s.searchFilter(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	filter = bson.D{{Key: "$and", Value: bson.A{filter, only}}}
	return idsMatching(ctx, coll, filter, q.PostFilter, "match subscription criteria")
}

func anyMayMatch(queries []*search.Query, idxOf map[string]bson.Raw) bool {
	for _, q := range queries {
		for _, idx := range idxOf {
			if mayMatch(q.Filter(), idx) {
				return true
			}
		}
	}
	return false
}

// mayMatch is a necessary condition of filter on a version's index values:
// false only when a conjunct of filter is an equality or $in of strings
// on an idx field and idx holds none of them there, so that the search
// certainly finds nothing. It spares matching most queries of many
// subscriptions; the search itself decides every match.
func mayMatch(filter bson.D, idx bson.Raw) bool {
	for _, e := range filter {
		switch {
		case e.Key == "$and":
			conds, _ := e.Value.(bson.A)
			for _, c := range conds {
				if d, ok := c.(bson.D); ok && !mayMatch(d, idx) {
					return false
				}
			}
		case strings.HasPrefix(e.Key, "idx."):
			if want, ok := equalities(e.Value); ok && !mayHold(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: idx}, strings.Split(strings.TrimPrefix(e.Key, "idx."), "."), want) {
				return false
			}
		}
	}
	return true
}

// equalities are the strings a field must equal one of under cond (a
// string, or {$in: [strings]}); ok is false for any other condition.
func equalities(cond any) ([]string, bool) {
	switch c := cond.(type) {
	case string:
		return []string{c}, true
	case bson.D:
		if len(c) != 1 || c[0].Key != "$in" {
			return nil, false
		}
		switch vals := c[0].Value.(type) {
		case []string:
			return vals, true
		case bson.A:
			out := make([]string, 0, len(vals))
			for _, v := range vals {
				s, ok := v.(string)
				if !ok {
					return nil, false
				}
				out = append(out, s)
			}
			return out, true
		}
	}
	return nil, false
}

// mayHold tells whether the value at path under v may equal one of want
// (MongoDB compares an array element by element): false only when the
// path is missing or leads to strings and scalars none of which is wanted.
// Paths through arrays are not followed: they may hold anything.
func mayHold(v bson.RawValue, path []string, want []string) bool {
	for _, key := range path {
		doc, ok := v.DocumentOK()
		if !ok {
			return v.Type == bson.TypeArray
		}
		if v = doc.Lookup(key); v.Type == 0 {
			return false // missing: equality with a string cannot hold
		}
	}
	if s, ok := v.StringValueOK(); ok {
		return slices.Contains(want, s)
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return v.Type == bson.TypeEmbeddedDocument
	}
	vals, _ := arr.Values()
	for _, x := range vals {
		s, ok := x.StringValueOK()
		if !ok && (x.Type == bson.TypeArray || x.Type == bson.TypeEmbeddedDocument) {
			return true
		}
		if ok && slices.Contains(want, s) {
			return true
		}
	}
	return false
}
