package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// Search pages are a snapshot. A first page takes the time point of its
// search (T), and its links carry T and the page's total; later pages
// show the matches as of T:
//
//   - the current rows the search matches and that were last written at
//     or before T: unchanged since, they are what matched then;
//   - the resources written after T (their current row is newer): the
//     version each had at T, from history (none if it was created later
//     or deleted then), matched and ordered by the search itself on a
//     scratch copy, as subscriptions are matched (matchProbe).
//
// Both are read beyond the page's cursor in the search's order and merged.
// So a write between two pages changes neither the total nor which
// resources later pages hold. Reading what changed costs a page in
// proportion to the writes since T: a link older than the snapshot's
// lifetime (Options.SnapshotLifetime), or whose type has had more than
// maxSnapshotChanges resources written since, is refused with
// ErrSnapshotExpired (410).

// ErrSnapshotExpired refuses a page whose search snapshot is too old to
// be read (410): the client runs the search again.
var ErrSnapshotExpired = errors.New("the search's snapshot expired")

// DefaultSnapshotLifetime is how long search links stay valid by default.
const DefaultSnapshotLifetime = 10 * time.Minute

// maxSnapshotChanges bounds the resources of a type written since a
// snapshot that a page re-reads at their version of then.
const maxSnapshotChanges = 1000

// snapshotLifetime is the configured lifetime of search links.
func (s *Store) snapshotLifetime() time.Duration {
	if s.opts.SnapshotLifetime > 0 {
		return s.opts.SnapshotLifetime
	}
	return DefaultSnapshotLifetime
}

// checkSnapshot refuses a cursor whose snapshot is past its lifetime.
func (s *Store) checkSnapshot(cur *searchCursor) error {
	if cur == nil || cur.At == nil {
		return nil
	}
	at := cur.At.Time()
	if age := s.now().Sub(at); age > s.snapshotLifetime() {
		return fmt.Errorf("%w: this page belongs to a search run at %s, more than %s ago; run the search again",
			ErrSnapshotExpired, at.UTC().Format(time.RFC3339), s.snapshotLifetime())
	}
	return nil
}

// snapshotRows is sortedRows as of the cursor's snapshot (see above).
func (s *Store) snapshotRows(ctx context.Context, tenant string, coll engine.Collection, q *search.Query, base bson.D, keys []sortField, cur *searchCursor) ([]*searchDoc, error) {
	at := cur.At.Time()
	unchanged := bson.D{{Key: "$and", Value: bson.A{base, bson.D{{Key: "lastUpdated", Value: bson.D{{Key: "$lte", Value: at}}}}}}}
	rows, err := s.sortedRows(ctx, coll, q, unchanged, keys, cur)
	if err != nil {
		return nil, err
	}
	then, err := s.versionsAt(ctx, tenant, q.Type, at)
	if err != nil || len(then) == 0 {
		return rows, err
	}
	changed, err := s.probeRows(ctx, tenant, q, base, keys, cur, then)
	if err != nil {
		return nil, err
	}
	return mergeRows(keys, cur, q.Count+1, rows, changed), nil
}

// versionsAt returns, for the resources of typ written after at, the
// version each had at at (as a current row would hold it, index
// included), leaving out those that did not exist then or were deleted.
func (s *Store) versionsAt(ctx context.Context, tenant, typ string, at time.Time) ([]*storedDoc, error) {
	cur, err := s.tenantDB(tenant).Collection(typ).Find(ctx, bson.D{{Key: "lastUpdated", Value: bson.D{{Key: "$gt", Value: at}}}},
		&engine.FindOptions{Projection: bson.D{{Key: "vid", Value: 1}}, Limit: maxSnapshotChanges + 1})
	if err != nil {
		return nil, dbError("read what changed since a search's snapshot", err)
	}
	var newer []struct {
		ID string `bson:"_id"`
	}
	if err := engine.All(ctx, cur, &newer); err != nil {
		return nil, dbError("read what changed since a search's snapshot", err)
	}
	if len(newer) > maxSnapshotChanges {
		return nil, fmt.Errorf("%w: more than %d %s resources changed since this search ran at %s; run the search again",
			ErrSnapshotExpired, maxSnapshotChanges, typ, at.UTC().Format(time.RFC3339))
	}
	if len(newer) == 0 {
		return nil, nil
	}
	ids := make([]string, len(newer))
	for i, n := range newer {
		ids[i] = n.ID
	}
	return s.historyAt(ctx, tenant, typ, ids, at)
}

// historyAt reads the newest version at or before at of each of ids.
func (s *Store) historyAt(ctx context.Context, tenant, typ string, ids []string, at time.Time) ([]*storedDoc, error) {
	filter := bson.D{{Key: "type", Value: typ}, {Key: "id", Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: "lastUpdated", Value: bson.D{{Key: "$lte", Value: at}}}}
	cur, err := s.tenantDB(tenant).Collection(historyCollection).Find(ctx, filter, nil)
	if err != nil {
		return nil, dbError("read the versions of a search's snapshot", err)
	}
	var rows []*historyDoc
	if err := engine.All(ctx, cur, &rows); err != nil {
		return nil, dbError("read the versions of a search's snapshot", s.damaged(ctx, tenant, err))
	}
	if rows, err = s.dropPending(ctx, tenant, rows); err != nil {
		return nil, err
	}
	newest := map[string]*historyDoc{}
	for _, h := range rows {
		if n := newest[h.ID]; n == nil || h.VID > n.VID {
			newest[h.ID] = h
		}
	}
	reg := s.indexRegistry(ctx, tenant)
	var out []*storedDoc
	for _, id := range ids {
		h := newest[id]
		if h == nil || h.Method == "DELETE" {
			continue
		}
		d := &storedDoc{ID: id, VID: h.VID, LastUpdated: h.LastUpdated, Method: h.Method, Resource: h.Resource, NumText: h.NumText}
		res, err := d.toResource(typ)
		if err != nil {
			return nil, err
		}
		if d.Idx, d.Sort, err = s.indexWith(reg, typ, res.JSON); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// probeRows runs the search beyond cur on a scratch copy of docs (the
// versions of a snapshot), returning their rows that match, in order.
func (s *Store) probeRows(ctx context.Context, tenant string, q *search.Query, base bson.D, keys []sortField, cur *searchCursor, docs []*storedDoc) ([]*searchDoc, error) {
	return s.withProbe(ctx, tenant, docs, func(coll engine.Collection, only bson.D) ([]*searchDoc, error) {
		return s.sortedRows(ctx, coll, q, bson.D{{Key: "$and", Value: bson.A{base, only}}}, keys, cur)
	})
}

// withProbe puts docs into the tenant's scratch collection, runs read on
// it with the filter that selects them, and takes them out again.
func (s *Store) withProbe(ctx context.Context, tenant string, docs []*storedDoc, read func(coll engine.Collection, only bson.D) ([]*searchDoc, error)) ([]*searchDoc, error) {
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
		return nil, dbError("clear search snapshot probe", err)
	}
	if err := coll.InsertMany(ctx, rows); err != nil {
		return nil, dbError("fill search snapshot probe", err)
	}
	defer func() {
		if _, err := coll.DeleteMany(context.WithoutCancel(ctx), byID); err != nil {
			s.log.Warn("clear search snapshot probe", zap.String("tenant", tenant), zap.Error(err))
		}
	}()
	return read(coll, byID)
}

// mergeRows merges two lists of rows read in the search's order (reversed
// when cur reads backwards), keeping the first want.
func mergeRows(keys []sortField, cur *searchCursor, want int, a, b []*searchDoc) []*searchDoc {
	dir := 1
	if cur != nil && cur.Backward {
		dir = -1
	}
	out := append(slices.Clone(a), b...)
	slices.SortStableFunc(out, func(x, y *searchDoc) int {
		return dir * compareRows(keys, positionOf(x, keys, false), positionOf(y, keys, false))
	})
	return out[:min(len(out), want)]
}

// snapshot is the time point and total of a search, carried by its links.
type snapshot struct {
	at    *bson.DateTime
	total *int64
}

// snapshotOf is the snapshot of a page: its cursor's, or a new one taken
// now for a first page (or the link of a search that had none).
func (s *Store) snapshotOf(cur *searchCursor) snapshot {
	if cur != nil && cur.At != nil {
		return snapshot{at: cur.At, total: cur.Total}
	}
	// Every write of this process stamped at or before the time point has
	// finished, so that the first page sees all that its snapshot holds.
	t := s.now()
	if w, ok := s.writes.oldest(); ok && !w.After(t) {
		t = w.Add(-time.Millisecond)
	}
	at := bson.NewDateTimeFromTime(t)
	return snapshot{at: &at}
}

// carry puts the snapshot into a link's cursor.
func (snap snapshot) carry(c searchCursor) searchCursor {
	c.At, c.Total = snap.at, snap.total
	return c
}

// closedChan is a channel that is closed: a count already known.
func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
