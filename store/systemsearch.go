package store

import (
	"context"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// typedRow is a match of one type's part of a system search: its type,
// its row (ids and sort values only) and its position in the merged order.
// then is the version of a resource written since the search's snapshot,
// as it was at the snapshot's time point.
type typedRow struct {
	typ  string
	doc  *searchDoc
	pos  searchCursor
	then *Resource
}

// SearchSystem runs a search across resource types (GET [base]?params): qs
// are its parts, one query per type, parsed from the same parameters (so
// they share sort keys, page size, summary and cursor). Each part is the
// indexed, keyset-paged search of one collection that Search runs, reading
// only the ids and sort values of the next Count+1 rows; the parts merge
// in the order of their sort keys, then id, then type, and only the
// page's winners are read in full. The next cursor is the last row's
// position with its type, so paging neither repeats nor skips a match.
// Like a type's search, a system search is a snapshot (see snapshot.go):
// later pages hold the matches as of the first page's time point, and its
// total.
func (s *Store) SearchSystem(ctx context.Context, tenant string, qs []*search.Query) (*SearchPage, error) {
	page := &SearchPage{Total: -1}
	if len(qs) == 0 {
		page.Total = 0
		return page, nil
	}
	for _, q := range qs {
		if err := s.checkType(q.Type); err != nil {
			return nil, err
		}
	}
	first := qs[0]
	keys := sortFields(first.Sort)
	cur, err := decodeSearchCursor(first.Cursor)
	if err != nil {
		return nil, err
	}
	if cur != nil && (cur.Backward || cur.Type == "" || len(cur.Values) != len(keys) || slices.Contains(cur.Values, nil)) {
		return nil, ErrBadCursor
	}
	if err := s.checkSnapshot(cur); err != nil {
		return nil, err
	}
	snap := s.snapshotOf(cur)
	if qs, err = s.heldTypes(ctx, tenant, qs); err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		if first.Total != "none" {
			page.Total = 0
		}
		return page, nil
	}
	bases := make([]bson.D, len(qs))
	for i, q := range qs {
		if bases[i], err = s.searchFilter(ctx, tenant, q); err != nil {
			return nil, err
		}
	}
	if first.Summary == "count" || first.Count == 0 {
		page.Total, err = s.countSystem(ctx, tenant, qs, bases)
		return page, err
	}
	var at *time.Time
	if cur != nil && snap.at != nil {
		t := snap.at.Time()
		at = &t
	}
	rows, err := s.systemRows(ctx, tenant, qs, bases, keys, cur, at)
	if err != nil {
		return nil, err
	}
	more := len(rows) > first.Count
	if more {
		rows = rows[:first.Count]
	}
	switch {
	case first.Total == "none":
	case cur == nil && !more:
		page.Total = int64(len(rows))
	case snap.total != nil:
		page.Total = *snap.total
	default:
		if page.Total, err = s.countSystem(ctx, tenant, qs, bases); err != nil {
			return nil, err
		}
	}
	if page.Total >= 0 {
		snap.total = &page.Total
	}
	if page.Entries, err = s.readRows(ctx, tenant, rows); err != nil {
		return nil, err
	}
	if more && len(rows) > 0 {
		page.Next = encodeSearchCursor(snap.carry(rows[len(rows)-1].pos))
		if cur == nil {
			waitPast(snap.at.Time()) // later writes are stamped after the snapshot
		}
	}
	page.Included, err = s.systemIncludes(ctx, tenant, qs, page.Entries)
	return page, err
}

// HeldTypes lists the resource types of which the tenant may hold
// resources (every type it holds one of is listed).
func (s *Store) HeldTypes(ctx context.Context, tenant string) ([]string, error) {
	names, err := s.tenantDB(tenant).CollectionNames(ctx)
	if err != nil {
		return nil, dbError("list the collections of "+tenant, err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return s.checkType(n) != nil }), nil
}

// heldTypes keeps the parts whose types the tenant holds resources of:
// one listing of the database's collections spares a query per empty type
// (most of the 146, as a rule).
func (s *Store) heldTypes(ctx context.Context, tenant string, qs []*search.Query) ([]*search.Query, error) {
	names, err := s.HeldTypes(ctx, tenant)
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool, len(names))
	for _, n := range names {
		held[n] = true
	}
	return slices.DeleteFunc(slices.Clone(qs), func(q *search.Query) bool { return !held[q.Type] }), nil
}

// systemRows reads the next Count+1 rows of every part beyond cur and
// merges them in the system search order. Once Count+1 rows are at hand,
// the first sort value of the last of them bounds the later parts: a part
// reads only rows up to it, so a type whose rows all sort later costs one
// index probe. With a snapshot time point at, a part reads the rows
// unchanged since and the versions at it of those written later.
func (s *Store) systemRows(ctx context.Context, tenant string, qs []*search.Query, bases []bson.D, keys []sortField, cur *searchCursor, at *time.Time) ([]typedRow, error) {
	want := qs[0].Count + 1
	var rows []typedRow
	for i, q := range qs {
		filter := bases[i]
		if at != nil {
			filter = bson.D{{Key: "$and", Value: bson.A{filter, bson.D{{Key: "lastUpdated", Value: bson.D{{Key: "$lte", Value: *at}}}}}}}
		}
		if cur != nil {
			// The cursor's own (values, id) is a row of another type, or of
			// this one when its type sorts first; later types keep an equal row.
			filter = beyondRow(filter, keys, cur, q.Type > cur.Type)
		}
		if len(rows) == want {
			filter = upTo(filter, keys[0], rows[want-1].pos.Values[0])
		}
		docs, err := s.searchRows(ctx, s.tenantDB(tenant).Collection(q.Type), q, filter, orderBy(keys, 1), true, want)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			rows = append(rows, typedRowOf(q.Type, d, keys, nil))
		}
		if at != nil {
			then, err := s.systemRowsThen(ctx, tenant, q, bases[i], keys, cur, *at, want)
			if err != nil {
				return nil, err
			}
			rows = append(rows, then...)
		}
		slices.SortFunc(rows, func(a, b typedRow) int { return comparePositions(keys, a.pos, b.pos) })
		if len(rows) > want {
			rows = rows[:want]
		}
	}
	return rows, nil
}

// typedRowOf is a part's row with its position in the merged order.
func typedRowOf(typ string, d *searchDoc, keys []sortField, then *Resource) typedRow {
	pos := positionOf(d, keys, false)
	pos.Type = typ
	return typedRow{typ: typ, doc: d, pos: pos, then: then}
}

// systemRowsThen reads the rows beyond cur of the resources of q's type
// written after at, as their versions at at matched the search.
func (s *Store) systemRowsThen(ctx context.Context, tenant string, q *search.Query, base bson.D, keys []sortField, cur *searchCursor, at time.Time, want int) ([]typedRow, error) {
	versions, err := s.versionsAt(ctx, tenant, q.Type, at)
	if err != nil || len(versions) == 0 {
		return nil, err
	}
	byID := make(map[string]*storedDoc, len(versions))
	for _, v := range versions {
		byID[v.ID] = v
	}
	docs, err := s.withProbe(ctx, tenant, versions, func(coll engine.Collection, only bson.D) ([]*searchDoc, error) {
		filter := bson.D{{Key: "$and", Value: bson.A{base, only}}}
		if cur != nil {
			filter = beyondRow(filter, keys, cur, q.Type > cur.Type)
		}
		return s.searchRows(ctx, coll, q, filter, orderBy(keys, 1), true, want)
	})
	if err != nil {
		return nil, err
	}
	rows := make([]typedRow, 0, len(docs))
	for _, d := range docs {
		res, err := byID[d.ID].toResource(q.Type)
		if err != nil {
			return nil, err
		}
		rows = append(rows, typedRowOf(q.Type, d, keys, res))
	}
	return rows, nil
}

// upTo narrows filter to rows whose first sort key does not sort after v:
// one range on the path the engine walks, where the walk then stops (a
// keyset condition on every key would be an $or the engine cannot walk).
func upTo(filter bson.D, k sortField, v any) bson.D {
	op := "$lte"
	if k.desc {
		op = "$gte"
	}
	return bson.D{{Key: "$and", Value: bson.A{filter, bson.D{{Key: k.path, Value: bson.D{{Key: op, Value: v}}}}}}}
}

// comparePositions orders two rows of a system search: by the sort keys
// (each in its direction), then id, then type.
func comparePositions(keys []sortField, a, b searchCursor) int {
	for i, k := range keys {
		c := compareValues(a.Values[i], b.Values[i])
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	return strings.Compare(a.Type, b.Type)
}

// compareValues orders two sort values of one key as the engines do:
// numbers, then strings, then times; nil first.
func compareValues(a, b any) int {
	ra, rb := kindRank(a), kindRank(b)
	if ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case string:
		return strings.Compare(x, b.(string))
	case time.Time:
		return x.Compare(b.(time.Time))
	case nil:
		return 0
	}
	fa, fb := number(a), number(b)
	switch {
	case fa < fb:
		return -1
	case fa > fb:
		return 1
	}
	return 0
}

// kindRank is the rank of a sort value's kind in MongoDB's order.
func kindRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case float64, int32, int64:
		return 1
	case string:
		return 2
	}
	return 3 // time.Time
}

func number(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	}
	return 0
}

// readRows reads the page's rows in full, one query per type, keeping the
// merged order; a row deleted in between is left out.
func (s *Store) readRows(ctx context.Context, tenant string, rows []typedRow) ([]*Resource, error) {
	ids := map[string][]string{}
	for _, r := range rows {
		if r.then == nil {
			ids[r.typ] = append(ids[r.typ], r.doc.ID)
		}
	}
	found := map[string]*Resource{}
	for typ, list := range ids {
		res, err := s.findCurrent(ctx, tenant, typ, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: list}}}})
		if err != nil {
			return nil, err
		}
		for _, r := range res {
			found[typ+"/"+r.ID] = r
		}
	}
	out := make([]*Resource, 0, len(rows))
	for _, r := range rows {
		if r.then != nil {
			out = append(out, r.then)
		} else if res, ok := found[r.typ+"/"+r.doc.ID]; ok {
			out = append(out, res)
		}
	}
	return out, nil
}

// countSystem adds up the matches of every part.
func (s *Store) countSystem(ctx context.Context, tenant string, qs []*search.Query, bases []bson.D) (int64, error) {
	var total int64
	for i, q := range qs {
		n, err := s.countMatches(ctx, tenant, q, bases[i])
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// systemIncludes resolves each part's _include and _revinclude for the
// page's matches of its type; every resource comes once, never when it is
// a match.
func (s *Store) systemIncludes(ctx context.Context, tenant string, qs []*search.Query, matches []*Resource) ([]*Resource, error) {
	seen := map[string]bool{}
	for _, m := range matches {
		seen[m.Type+"/"+m.ID] = true
	}
	var out []*Resource
	for _, q := range qs {
		var mine []*Resource
		for _, m := range matches {
			if m.Type == q.Type {
				mine = append(mine, m)
			}
		}
		if len(mine) == 0 {
			continue
		}
		found, err := s.includes(ctx, tenant, q, mine)
		if err != nil {
			return nil, err
		}
		for _, r := range found {
			if key := r.Type + "/" + r.ID; !seen[key] {
				seen[key] = true
				out = append(out, r)
			}
		}
	}
	return out, nil
}
