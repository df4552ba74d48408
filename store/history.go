package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// HistoryQuery selects versions for the instance, type or system history.
type HistoryQuery struct {
	Type string // empty for system history
	ID   string // empty for type or system history
	// Count is the page size.
	Count int
	// Since keeps versions written at or after this instant.
	Since *time.Time
	// At keeps versions that were current at some point in [At.Lo, At.Hi].
	At *TimeRange
	// After continues below this position (next page); Before continues
	// above it (previous page). At most one is set.
	After, Before *HistoryPosition
	// Until pins the snapshot the pages show: versions written after it
	// are left out of the entries and the total. History sets it to the
	// time of the first page when it is nil; the next pages pass it back.
	Until *time.Time
}

// TimeRange is a closed interval of instants.
type TimeRange struct{ Lo, Hi time.Time }

// HistoryPosition is a place in the newest-first order of history rows.
type HistoryPosition struct {
	LastUpdated time.Time
	Key         string
}

// HistoryPage is one page of versions, newest first.
type HistoryPage struct {
	Entries []*Resource
	// Total counts every version the query selects, across pages.
	Total int64
	// First and Last are the positions of the page's ends, for paging links.
	First, Last *HistoryPosition
	// HasNext and HasPrevious tell whether older or newer versions remain.
	HasNext, HasPrevious bool
	// Until is the snapshot's time point, to carry to the other pages.
	Until time.Time
}

// History returns one page of versions. Pages are keyed by position, not by
// offset, and pinned to the first page's time point (q.Until), so writes
// that happen while a client pages change neither the entries nor the
// total of the pages that follow.
func (s *Store) History(ctx context.Context, tenant string, q HistoryQuery) (*HistoryPage, error) {
	if q.Type != "" {
		if err := s.checkType(q.Type); err != nil {
			return nil, err
		}
	}
	if q.Count <= 0 {
		q.Count = 10
	}
	coll := s.tenantDB(tenant).Collection(historyCollection)
	first := q.Until == nil
	if first {
		until, err := s.snapshotPoint(ctx, coll, q)
		if err != nil {
			return nil, err
		}
		q.Until = until
	}
	total, err := s.historyTotal(ctx, coll, q)
	if err != nil {
		return nil, err
	}
	filter, dir := historyFilter(q, q.Since, q.upper()), -1
	switch {
	case q.After != nil:
		filter = beyond(filter, q.After, "$lt")
	case q.Before != nil:
		filter, dir = beyond(filter, q.Before, "$gt"), 1
	}
	rows, err := s.historyRows(ctx, tenant, coll, q, filter, dir)
	if err != nil {
		return nil, s.damaged(ctx, tenant, err)
	}
	page, err := newHistoryPage(q, rows, total)
	if err == nil && total == 0 && q.ID != "" {
		s.auditHistory(ctx, tenant, q, page)
	}
	if err == nil && first && (page.HasNext || page.HasPrevious) {
		waitPast(*q.Until)
	}
	return page, err
}

// snapshotPoint is the time point of a first history page: now, or the
// newest version the query selects when that is later (a resource updated
// several times within a millisecond has versions stamped ahead of the
// clock, to keep them ordered).
func (s *Store) snapshotPoint(ctx context.Context, coll engine.Collection, q HistoryQuery) (*time.Time, error) {
	at := s.now()
	opts := &engine.FindOptions{Sort: bson.D{{Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}}, Projection: bson.D{{Key: "lastUpdated", Value: 1}}}
	var newest struct {
		LastUpdated time.Time `bson:"lastUpdated"`
	}
	err := engine.FindOneInto(ctx, coll, historyFilter(q, q.Since, nil), opts, &newest)
	switch {
	case errors.Is(err, engine.ErrNoDocuments):
	case err != nil:
		return nil, dbError("read newest history version", err)
	case newest.LastUpdated.After(at):
		at = newest.LastUpdated.UTC()
	}
	return &at, nil
}

// waitPast waits until the clock has passed a snapshot's time point (a
// millisecond, as a rule), so that every write starting later is stamped
// after it and stays out of the snapshot the links of a first page carry.
// A first page that issues no link does not wait.
func waitPast(at time.Time) {
	if wait := time.Until(at.Add(time.Millisecond)); wait > 0 && wait <= maxSnapshotWait {
		time.Sleep(wait)
	}
}

// maxSnapshotWait bounds the wait of waitPast (a clock stepped back must
// not hold a request).
const maxSnapshotWait = 100 * time.Millisecond

// upper is the latest lastUpdated the query selects: the snapshot's point,
// or the end of the _at range when that is earlier.
func (q HistoryQuery) upper() *time.Time {
	if q.At != nil && (q.Until == nil || q.At.Hi.Before(*q.Until)) {
		return &q.At.Hi
	}
	return q.Until
}

func newHistoryPage(q HistoryQuery, rows []*historyDoc, total int64) (*HistoryPage, error) {
	page := &HistoryPage{Total: total}
	if q.Until != nil {
		page.Until = *q.Until
	}
	more := len(rows) > q.Count
	if more {
		rows = rows[:q.Count]
	}
	if q.Before != nil {
		slices.Reverse(rows)
		page.HasPrevious, page.HasNext = more, true
	} else {
		page.HasNext, page.HasPrevious = more, q.After != nil
	}
	for _, h := range rows {
		res, err := h.toResource()
		if err != nil {
			return nil, err
		}
		page.Entries = append(page.Entries, res)
	}
	if n := len(rows); n > 0 {
		page.First = &HistoryPosition{LastUpdated: rows[0].LastUpdated, Key: rows[0].Key}
		page.Last = &HistoryPosition{LastUpdated: rows[n-1].LastUpdated, Key: rows[n-1].Key}
	}
	return page, nil
}

// historyFilter selects the resource or type and lastUpdated in [from, to].
func historyFilter(q HistoryQuery, from, to *time.Time) bson.D {
	f := bson.D{}
	if q.Type != "" {
		f = append(f, bson.E{Key: "type", Value: q.Type})
	}
	if q.ID != "" {
		f = append(f, bson.E{Key: "id", Value: q.ID})
	}
	ts := bson.D{}
	if from != nil {
		ts = append(ts, bson.E{Key: "$gte", Value: *from})
	}
	if to != nil {
		ts = append(ts, bson.E{Key: "$lte", Value: *to})
	}
	if len(ts) > 0 {
		f = append(f, bson.E{Key: "lastUpdated", Value: ts})
	}
	return f
}

// beyond narrows filter to rows strictly beyond pos in the (lastUpdated, _id)
// order; $and keeps it one key however often it is narrowed.
func beyond(filter bson.D, pos *HistoryPosition, op string) bson.D {
	keyset := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "lastUpdated", Value: bson.D{{Key: op, Value: pos.LastUpdated}}}},
		bson.D{{Key: "lastUpdated", Value: pos.LastUpdated}, {Key: "_id", Value: bson.D{{Key: op, Value: pos.Key}}}},
	}}}
	return bson.D{{Key: "$and", Value: bson.A{filter, keyset}}}
}

// historyRows reads up to Count+1 rows matching filter. Rows of unfinished
// transactions are dropped and, with _at, rows superseded before the range
// began; it reads on in batches until the page is full or the rows run out.
func (s *Store) historyRows(ctx context.Context, tenant string, coll engine.Collection, q HistoryQuery, filter bson.D, dir int) ([]*historyDoc, error) {
	want := q.Count + 1
	base := filter
	var kept []*historyDoc
	for {
		limit := want - len(kept)
		opts := &engine.FindOptions{Sort: bson.D{{Key: "lastUpdated", Value: dir}, {Key: "_id", Value: dir}}, Limit: int64(limit)}
		cur, err := coll.Find(ctx, filter, opts)
		if err != nil {
			return nil, dbError("read history", err)
		}
		var batch []*historyDoc
		if err := engine.All(ctx, cur, &batch); err != nil {
			return nil, dbError("read history", err)
		}
		fetched := len(batch)
		if fetched > 0 {
			last := batch[fetched-1]
			op := map[int]string{-1: "$lt", 1: "$gt"}[dir]
			filter = beyond(base, &HistoryPosition{LastUpdated: last.LastUpdated, Key: last.Key}, op)
		}
		if batch, err = s.dropPending(ctx, tenant, batch); err != nil {
			return nil, err
		}
		if q.At != nil && len(batch) > 0 {
			if batch, err = s.dropSuperseded(ctx, coll, batch, q.At.Lo); err != nil {
				return nil, err
			}
		}
		kept = append(kept, batch...)
		if fetched < limit || len(kept) >= want {
			return kept, nil
		}
	}
}

// dropPending removes rows of transactions that have not finished.
func (s *Store) dropPending(ctx context.Context, tenant string, rows []*historyDoc) ([]*historyDoc, error) {
	pending, err := s.pendingTxns(ctx, tenant, rows)
	if err != nil || len(pending) == 0 {
		return rows, err
	}
	out := rows[:0]
	for _, h := range rows {
		if !pending[h.Txn] {
			out = append(out, h)
		}
	}
	return out, nil
}

// dropSuperseded removes rows written at or before lo whose next version was
// also written at or before lo: they were not current at any time from lo on.
func (s *Store) dropSuperseded(ctx context.Context, coll engine.Collection, rows []*historyDoc, lo time.Time) ([]*historyDoc, error) {
	var next []string
	for _, h := range rows {
		if !h.LastUpdated.After(lo) {
			next = append(next, historyKey(h.Type, h.ID, h.VID+1))
		}
	}
	if len(next) == 0 {
		return rows, nil
	}
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: next}}}, {Key: "lastUpdated", Value: bson.D{{Key: "$lte", Value: lo}}}}
	cur, err := coll.Find(ctx, filter, &engine.FindOptions{Projection: bson.D{{Key: "_id", Value: 1}}})
	if err != nil {
		return nil, dbError("read history successors", err)
	}
	var succ []struct {
		Key string `bson:"_id"`
	}
	if err := engine.All(ctx, cur, &succ); err != nil {
		return nil, dbError("read history successors", err)
	}
	superseded := make(map[string]bool, len(succ))
	for _, x := range succ {
		superseded[x.Key] = true
	}
	out := rows[:0]
	for _, h := range rows {
		if !superseded[historyKey(h.Type, h.ID, h.VID+1)] {
			out = append(out, h)
		}
	}
	return out, nil
}

// historyTotal counts the versions the query selects: with _at, the versions
// written inside the range plus one per resource that existed when it began.
func (s *Store) historyTotal(ctx context.Context, coll engine.Collection, q HistoryQuery) (int64, error) {
	if q.At == nil {
		// Every version, less those written after the snapshot's point:
		// two counts of one condition each (the type's, or the few newest
		// entries of the lastUpdated index), where one count of both would
		// check the time of each of the type's versions.
		n, err := coll.Count(ctx, historyFilter(q, q.Since, nil))
		if err != nil || q.Until == nil {
			return n, dbError("count history", err)
		}
		later := q.Until.Add(time.Millisecond) // stored instants have millisecond precision
		if q.Since != nil && q.Since.After(later) {
			later = *q.Since
		}
		newer, err := coll.Count(ctx, historyFilter(q, &later, nil))
		return n - newer, dbError("count history", err)
	}
	from := q.At.Lo.Add(time.Millisecond) // stored instants have millisecond precision
	if q.Since != nil && q.Since.After(from) {
		from = *q.Since
	}
	n, err := coll.Count(ctx, historyFilter(q, &from, q.upper()))
	if err != nil {
		return 0, dbError("count history", err)
	}
	existing, err := coll.CountDistinct(ctx, historyFilter(q, q.Since, &q.At.Lo), "type", "id")
	if err != nil {
		return 0, dbError("count history", err)
	}
	return n + existing, nil
}
