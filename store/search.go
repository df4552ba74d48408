package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// SearchPage is one page of search matches.
type SearchPage struct {
	Entries []*Resource
	// Included are the resources _include and _revinclude added, each once.
	Included []*Resource
	// Total counts every match across pages; -1 when not computed.
	Total int64
	// Next and Previous are opaque cursors for the neighbouring pages ("" if none).
	Next, Previous string
}

// ErrBadCursor rejects a paging cursor this server did not issue.
var ErrBadCursor = fmt.Errorf("invalid paging cursor")

// searchDoc is what a search reads of a current row.
type searchDoc = storedDoc

// Search runs q against the current versions of q.Type. Pages are keyed by
// the sort values of their last row, so writes between pages do not shift
// them.
func (s *Store) Search(ctx context.Context, tenant string, q *search.Query) (*SearchPage, error) {
	if err := s.checkType(q.Type); err != nil {
		return nil, err
	}
	coll := s.tenantDB(tenant).Collection(q.Type)
	base, err := s.searchFilter(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	keys := sortFields(q.Sort)
	page := &SearchPage{Total: -1}
	if q.Summary == "count" || q.Count == 0 {
		page.Total, err = s.countMatches(ctx, tenant, q, base)
		return page, err
	}
	cur, err := decodeSearchCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	if cur != nil && len(cur.Values) != len(keys) {
		return nil, ErrBadCursor
	}
	if err := s.checkSnapshot(cur); err != nil {
		return nil, err
	}
	snap := s.snapshotOf(cur)
	total := s.countAhead(ctx, tenant, q, base)
	if snap.total != nil {
		total = &pendingCount{n: *snap.total, done: closedChan()}
	}
	defer total.stop()
	var rows []*searchDoc
	if snap.at != nil && cur != nil {
		rows, err = s.snapshotRows(ctx, tenant, coll, q, base, keys, cur)
	} else {
		rows, err = s.sortedRows(ctx, coll, q, base, keys, cur)
	}
	if err != nil {
		return nil, s.damaged(ctx, tenant, err)
	}
	switch {
	case q.Total == "none":
	case cur == nil && len(rows) <= q.Count: // a first page that holds every match
		page.Total = int64(len(rows))
	default:
		if page.Total, err = total.wait(ctx); err != nil {
			return nil, err
		}
	}
	if page.Total >= 0 {
		snap.total = &page.Total
	}
	if page, err = fillSearchPage(page, q, keys, rows, cur, snap); err != nil {
		return nil, err
	}
	if cur == nil && (page.Next != "" || page.Previous != "") {
		waitPast(snap.at.Time()) // later writes are stamped after the snapshot
	}
	if err := s.checkHeldResources(tenant, page.Entries); err != nil {
		return nil, err
	}
	if page.Included, err = s.includes(ctx, tenant, q, page.Entries); err != nil {
		return nil, s.damaged(ctx, tenant, err)
	}
	if err := s.checkHeldResources(tenant, page.Included); err != nil {
		return nil, err
	}
	return page, nil
}

// searchFilter is q's filter over current, undeleted rows, with each _has
// resolved to the ids its resources refer to.
func (s *Store) searchFilter(ctx context.Context, tenant string, q *search.Query) (bson.D, error) {
	if err := q.Resolve(ctx, resolver{s: s, tenant: tenant}); err != nil {
		return nil, err
	}
	all := bson.A{q.Filter()}
	if !needsValue(q.Filter()) || len(q.Has) > 0 {
		// Deleted rows carry no search values, so a condition that needs a
		// value leaves them out already; only filters that also match rows
		// without values (:missing=true, :not) need the flag. Left out, the
		// index lookups of the condition are the whole query (a count of
		// 10,000 matches reads 10,000 index entries, not as many rows).
		all = append(all, bson.D{{Key: "deleted", Value: false}})
	}
	for _, h := range q.Has {
		ids, err := s.referencedIDs(ctx, tenant, q.Type, h)
		if err != nil {
			return nil, err
		}
		all = append(all, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	}
	for _, ch := range q.Chains {
		refs, err := s.chainRefs(ctx, tenant, ch)
		if err != nil {
			return nil, err
		}
		all = append(all, bson.D{{Key: "idx." + ch.Param, Value: bson.D{{Key: "$in", Value: refs}}}})
	}
	return bson.D{{Key: "$and", Value: all}}, nil
}

// chainRefs lists "Type/id" of the matches of each target of a chain.
func (s *Store) chainRefs(ctx context.Context, tenant string, ch *search.Chain) ([]string, error) {
	refs := []string{}
	for _, t := range ch.Targets {
		ids, err := s.matchingIDs(ctx, tenant, t.Query)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			refs = append(refs, t.Type+"/"+id)
		}
	}
	return refs, nil
}

// needsValue tells whether every document filter matches has a value at
// some idx.* path: one of its conjuncts is an equality, $in, prefix, range
// or $exists:true on an idx field, or an $or of such.
func needsValue(filter bson.D) bool {
	for _, e := range filter {
		switch {
		case e.Key == "$and":
			for _, c := range e.Value.(bson.A) {
				if d, ok := c.(bson.D); ok && needsValue(d) {
					return true
				}
			}
		case e.Key == "$or":
			alts, _ := e.Value.(bson.A)
			all := len(alts) > 0
			for _, c := range alts {
				d, ok := c.(bson.D)
				all = all && ok && needsValue(d)
			}
			if all {
				return true
			}
		case strings.HasPrefix(e.Key, "idx."):
			if positive(e.Value) {
				return true
			}
		}
	}
	return false
}

// positive tells whether a field condition holds only for present values.
func positive(v any) bool {
	ops, ok := v.(bson.D)
	if !ok {
		return true // equality with a value, or a regular expression
	}
	for _, op := range ops {
		switch op.Key {
		case "$in", "$eq", "$gt", "$gte", "$lt", "$lte":
			return true
		case "$exists":
			if b, _ := op.Value.(bool); b {
				return true
			}
		}
	}
	return false
}

// matchingIDs returns the ids of every match of a (chained) search.
func (s *Store) matchingIDs(ctx context.Context, tenant string, q *search.Query) ([]string, error) {
	if err := s.checkType(q.Type); err != nil {
		return nil, err
	}
	filter, err := s.searchFilter(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	return idsMatching(ctx, s.tenantDB(tenant).Collection(q.Type), filter, q.PostFilter, "search chain "+q.Type)
}

// idsMatching returns the ids of the rows of coll that match filter and
// pass post (when set); what names the search in errors.
func idsMatching(ctx context.Context, coll engine.Collection, filter bson.D, post func(bson.Raw) bool, what string) ([]string, error) {
	cur, err := coll.Find(ctx, filter, &engine.FindOptions{Projection: bson.D{{Key: "_id", Value: 1}, {Key: "idx", Value: 1}}})
	if err != nil {
		return nil, dbError(what, err)
	}
	defer cur.Close(ctx)
	ids := []string{}
	for cur.Next(ctx) {
		idx, _ := cur.Current().Lookup("idx").DocumentOK()
		if post != nil && !post(idx) {
			continue
		}
		if id, ok := cur.Current().Lookup("_id").StringValueOK(); ok {
			ids = append(ids, id)
		}
	}
	return ids, dbError(what, cur.Err())
}

// referencedIDs runs a _has query and returns the ids of typ its matches
// refer to through h.Param.
func (s *Store) referencedIDs(ctx context.Context, tenant, typ string, h *search.Has) ([]string, error) {
	if err := s.checkType(h.Type); err != nil {
		return nil, err
	}
	filter, err := s.searchFilter(ctx, tenant, h.Query)
	if err != nil {
		return nil, err
	}
	field := "idx." + h.Param
	cur, err := s.tenantDB(tenant).Collection(h.Type).Find(ctx, filter, &engine.FindOptions{Projection: bson.D{{Key: field, Value: 1}}})
	if err != nil {
		return nil, dbError("search _has "+h.Type, err)
	}
	defer cur.Close(ctx)
	seen := map[string]bool{}
	ids := []string{}
	for cur.Next(ctx) {
		refs, _ := cur.Current().Lookup("idx", h.Param).ArrayOK()
		vals, _ := refs.Values()
		for _, v := range vals {
			ref, ok := v.StringValueOK()
			if id, found := strings.CutPrefix(ref, typ+"/"); ok && found && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids, dbError("search _has "+h.Type, cur.Err())
}

// sortField is one key of the search order: a stored field and its
// direction. least is the least value of the field's kind for a _sort key
// some rows may lack (nil for keys every row has).
type sortField struct {
	path  string
	desc  bool
	least any
}

// sortFields are the _sort keys then the default order: _lastUpdated, _id.
// _id and _lastUpdated sort by the row's own fields; the keys after _id
// never decide (ids are unique), and an order ending in _id has it once.
func sortFields(keys []search.SortKey) []sortField {
	var out []sortField
	for _, k := range keys {
		switch k.Param {
		case "_id":
			return append(out, sortField{path: "_id", desc: k.Descending})
		case "_lastUpdated":
			out = append(out, sortField{path: "lastUpdated", desc: k.Descending})
			continue
		}
		out = append(out, sortField{path: sortKeyPath(k), desc: k.Descending, least: leastSortValue(k.Type)})
	}
	if !slices.ContainsFunc(out, func(f sortField) bool { return f.path == "lastUpdated" }) {
		out = append(out, sortField{path: "lastUpdated"})
	}
	return out
}

// sortKeyPath is the stored path a _sort key orders by: the least sort
// value ascending and the greatest descending (the one value of a
// parameter that has one), or the bounds of a parameter's one range.
func sortKeyPath(k search.SortKey) string {
	switch {
	case k.Range && k.Descending:
		return "idx." + k.Param + ".hi"
	case k.Range:
		return "idx." + k.Param + ".lo"
	case k.Descending && !k.OneValue:
		return "sort." + k.Param + ".d"
	}
	return "sort." + k.Param + ".a"
}

// endsWithID tells whether the last key of an order is _id, which then
// needs no tie-breaker.
func endsWithID(keys []sortField) bool {
	return len(keys) > 0 && keys[len(keys)-1].path == "_id"
}

func orderBy(keys []sortField, dir int) bson.D {
	order := bson.D{}
	for _, k := range keys {
		d := dir
		if k.desc {
			d = -d
		}
		order = append(order, bson.E{Key: k.path, Value: d})
	}
	if endsWithID(keys) {
		return order
	}
	return append(order, bson.E{Key: "_id", Value: dir})
}

// searchCursor is the position after (or before) a row in search order.
type searchCursor struct {
	Values   bson.A `bson:"v"`
	ID       string `bson:"i"`
	Backward bool   `bson:"b,omitempty"`
	// Type is the row's resource type in a system search (the last key
	// of its order, after the id).
	Type string `bson:"t,omitempty"`
	// At and Total are the search's snapshot: its time point and total
	// (see snapshot.go); absent in links of searches that have none.
	At    *bson.DateTime `bson:"at,omitempty"`
	Total *int64         `bson:"n,omitempty"`
}

func encodeSearchCursor(c searchCursor) string {
	b, err := bson.Marshal(c)
	if err != nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeSearchCursor(s string) (*searchCursor, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, ErrBadCursor
	}
	var c searchCursor
	if err := bson.Unmarshal(b, &c); err != nil || c.ID == "" {
		return nil, ErrBadCursor
	}
	for _, v := range c.Values { // positionOf writes only these: anything else would be an operator
		switch v.(type) {
		case nil, string, float64, int32, int64, bson.DateTime:
		default:
			return nil, ErrBadCursor
		}
	}
	return &c, nil
}

// beyondRow narrows filter to rows beyond the cursor in an order of keys
// every row has a value of, also keeping the cursor's own row when orSame
// is set.
func beyondRow(filter bson.D, keys []sortField, c *searchCursor, orSame bool) bson.D {
	beyond, _ := keyset(keys, make([]bool, len(keys)), c, orSame) // the _id alternative is always there
	return bson.D{{Key: "$and", Value: bson.A{filter, beyond}}}
}

// sortedRows reads the next Count+1 rows of the search beyond cur (or
// before it, reading backwards) in the search order, where a row without
// a value of a _sort key follows the rows with one, whichever the
// direction. The engines sort a missing value as the least, so the rows
// are read as streams, one per combination of the _sort keys a row has or
// lacks (of those some rows may lack), each filtered to its rows, sorted
// by the keys they have and narrowed to the rows beyond the cursor, and
// merged. The streams of rows with a value of the first key are read
// before those of rows without one, and the latter only when the page is
// not full: a search sorted by one key reads one stream while it can.
func (s *Store) sortedRows(ctx context.Context, coll engine.Collection, q *search.Query, base bson.D, keys []sortField, cur *searchCursor) ([]*searchDoc, error) {
	var optional []int // the keys some rows may lack, by position in keys
	for i, k := range keys {
		if k.least != nil {
			optional = append(optional, i)
		}
	}
	groups := [][]int{nil} // the streams of rows that have the first key, then of those that lack it
	lead := len(optional) > 0 && optional[0] == 0
	if lead {
		groups = append(groups, nil)
	}
	for m := range 1 << len(optional) { // bit j set: the stream's rows lack key optional[j]
		g := 0
		if lead {
			g = m & 1
		}
		groups[g] = append(groups[g], m)
	}
	backward := cur != nil && cur.Backward
	if backward {
		slices.Reverse(groups)
	}
	want := q.Count + 1
	var rows []*searchDoc
	for _, group := range groups {
		got, err := s.mergedStreams(ctx, coll, q, base, keys, optional, group, cur, want-len(rows))
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
		if len(rows) == want {
			break
		}
	}
	return rows, nil
}

// mergedStreams reads up to want rows of the streams masks (see
// sortedRows) beyond cur, merged in the search order.
func (s *Store) mergedStreams(ctx context.Context, coll engine.Collection, q *search.Query, base bson.D, keys []sortField, optional, masks []int, cur *searchCursor, want int) ([]*searchDoc, error) {
	backward := cur != nil && cur.Backward
	dir := 1
	if backward {
		dir = -1
	}
	var rows []*searchDoc
	for _, m := range masks {
		lacks := make([]bool, len(keys))
		filter := bson.A{base}
		for j, i := range optional {
			k := keys[i]
			if lacks[i] = m>>j&1 == 1; lacks[i] {
				filter = append(filter, bson.D{{Key: k.path, Value: bson.D{{Key: "$exists", Value: false}}}})
				continue
			}
			// the rows with a value, in terms the engine walks the path's index by
			filter = append(filter, bson.D{{Key: k.path, Value: bson.D{{Key: "$gte", Value: k.least}}}})
		}
		if cur != nil {
			beyond, ok := keyset(keys, lacks, cur, false)
			if !ok {
				continue // no row of the stream is beyond the cursor
			}
			filter = append(filter, beyond)
		}
		var present []sortField
		for i, k := range keys {
			if !lacks[i] {
				present = append(present, k)
			}
		}
		f := base
		if len(filter) > 1 {
			f = bson.D{{Key: "$and", Value: filter}}
		}
		got, err := s.searchRows(ctx, coll, q, f, orderBy(present, dir), false, want)
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
	}
	if len(masks) > 1 {
		type positioned struct {
			doc *searchDoc
			pos searchCursor
		}
		ps := make([]positioned, len(rows))
		for i, d := range rows {
			ps[i] = positioned{d, positionOf(d, keys, false)}
		}
		slices.SortStableFunc(ps, func(a, b positioned) int { return dir * compareRows(keys, a.pos, b.pos) })
		for i, p := range ps {
			rows[i] = p.doc
		}
	}
	return rows[:min(len(rows), want)], nil
}

// keyset is the condition on a stream's rows (lacks: the keys they have
// no value of) of being beyond the cursor in the search order (before
// it, reading backwards): some key orders them after it and every key
// before that ties, where a missing value ties a missing one and follows
// any value; with orSame, the cursor's own row too. ok is false when no
// row of the stream can be beyond it.
func keyset(keys []sortField, lacks []bool, c *searchCursor, orSame bool) (beyond bson.D, ok bool) {
	alts := bson.A{}
	prefix := bson.D{}
	last := len(keys) // the position of the _id key
	if endsWithID(keys) {
		last--
	}
	for i := 0; i <= last; i++ {
		path, v, desc, rowLacks := "_id", any(c.ID), false, false
		if i < len(keys) {
			path, v, desc, rowLacks = keys[i].path, c.Values[i], keys[i].desc, lacks[i]
		}
		curLacks := v == nil && i < last
		// the row follows (precedes) the cursor at key i
		switch {
		case rowLacks && !curLacks && !c.Backward: // a missing value follows any
			alts = append(alts, prefix)
		case rowLacks, curLacks && !c.Backward:
		case curLacks: // reading backwards: any value precedes a missing one
			alts = append(alts, prefix)
		default:
			op := "$gt"
			if desc != c.Backward {
				op = "$lt"
			}
			if orSame && i == last {
				op += "e"
			}
			alts = append(alts, append(slices.Clone(prefix), bson.E{Key: path, Value: bson.D{{Key: op, Value: v}}}))
		}
		// ties at key i: both missing, or the same value
		switch {
		case i == last, rowLacks != curLacks:
			return orOf(alts)
		case !rowLacks:
			prefix = append(slices.Clone(prefix), bson.E{Key: path, Value: v})
		}
	}
	return orOf(alts)
}

// orOf is the disjunction of alts (false when there are none).
func orOf(alts bson.A) (bson.D, bool) {
	if len(alts) == 0 {
		return nil, false
	}
	return bson.D{{Key: "$or", Value: alts}}, true
}

// compareRows orders two rows' positions in the search order: by each
// key in its direction, a missing value after any, then by id.
func compareRows(keys []sortField, a, b searchCursor) int {
	for i, k := range keys {
		va, vb := a.Values[i], b.Values[i]
		switch {
		case va == nil && vb == nil:
			continue
		case va == nil:
			return 1
		case vb == nil:
			return -1
		}
		c := compareValues(va, vb)
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return strings.Compare(a.ID, b.ID)
}

// searchRows reads up to want matching rows in order, dropping the false
// positives the post-filter finds, reading on until it has want. With
// keysOnly, the rows hold their sort values and no resource.
func (s *Store) searchRows(ctx context.Context, coll engine.Collection, q *search.Query, filter, order bson.D, keysOnly bool, want int) ([]*searchDoc, error) {
	var kept []*searchDoc
	for skip := int64(0); ; {
		limit := int64(want - len(kept))
		if q.PostFilter != nil {
			limit = max(limit, 50)
		}
		opts := &engine.FindOptions{Sort: order, Skip: skip, Limit: limit}
		switch {
		case keysOnly:
			opts.Projection = bson.D{{Key: "lastUpdated", Value: 1}, {Key: "sort", Value: 1}}
			if q.PostFilter != nil || ordersByIdx(order) {
				opts.Projection = append(opts.Projection, bson.E{Key: "idx", Value: 1})
			}
		case q.PostFilter == nil && len(q.Includes) == 0 && !ordersByIdx(order):
			opts.Projection = bson.D{{Key: "idx", Value: 0}} // idx is read only to check or follow it
		}
		cur, err := coll.Find(ctx, filter, opts)
		if err != nil {
			return nil, dbError("search "+q.Type, err)
		}
		var batch []*searchDoc
		if err := engine.All(ctx, cur, &batch); err != nil {
			return nil, dbError("search "+q.Type, err)
		}
		for _, d := range batch {
			if q.PostFilter == nil || q.PostFilter(d.Idx) {
				kept = append(kept, d)
			}
			if len(kept) == want {
				return kept, nil
			}
		}
		if int64(len(batch)) < limit {
			return kept, nil
		}
		skip += int64(len(batch))
	}
}

// pendingCount is the total of a search: remembered, counted while the
// page is read (the two take about as long when many rows match), or
// counted when asked.
type pendingCount struct {
	count  func(context.Context) (int64, error)
	done   chan struct{} // nil: not counting ahead
	n      int64
	err    error
	cancel context.CancelFunc
}

// countAhead prepares the total of q: remembered, or counted on another
// goroutine, unless the search wants no total or its count reads every
// candidate (a post-filter): then wait counts when asked. A first page
// that holds every match makes the count unneeded; stop abandons it.
func (s *Store) countAhead(ctx context.Context, tenant string, q *search.Query, filter bson.D) *pendingCount {
	p := &pendingCount{count: func(ctx context.Context) (int64, error) { return s.countMatches(ctx, tenant, q, filter) }}
	if q.Total == "none" || q.PostFilter != nil {
		return p
	}
	p.done = make(chan struct{})
	if n, ok := s.rememberedCount(tenant, q, filter); ok {
		p.n = n
		close(p.done)
		return p
	}
	cctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	go func() {
		defer close(p.done)
		p.n, p.err = p.count(cctx)
	}()
	return p
}

// wait returns the total.
func (p *pendingCount) wait(ctx context.Context) (int64, error) {
	if p.done == nil {
		return p.count(ctx)
	}
	<-p.done
	return p.n, p.err
}

// stop abandons a count no longer needed and waits for its goroutine.
func (p *pendingCount) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
}

// countKey is the match cache's key of the count of q's matches, with the
// type's write generation; "" when counts of q are not remembered (another
// process may write, or a post-filter decides what matches).
func (s *Store) countKey(tenant string, q *search.Query, filter bson.D) (string, int64) {
	if !s.opts.Exclusive || q.PostFilter != nil {
		return "", 0
	}
	raw, err := bson.Marshal(filter)
	if err != nil {
		return "", 0
	}
	return tenant + "/" + q.Type + "?" + string(raw), s.matches.generation(tenant, q.Type)
}

// rememberedCount is the remembered count of q's matches, if any.
func (s *Store) rememberedCount(tenant string, q *search.Query, filter bson.D) (int64, bool) {
	key, gen := s.countKey(tenant, q, filter)
	if key == "" {
		return 0, false
	}
	return s.matches.count(key, gen)
}

// countMatches counts the matches of q in tenant. A count is remembered
// while nothing writes the type, when this process is the only writer
// (the match cache's rule): the next pages of a search, and the same
// search asked again, reuse it.
func (s *Store) countMatches(ctx context.Context, tenant string, q *search.Query, filter bson.D) (int64, error) {
	key, gen := s.countKey(tenant, q, filter)
	if key != "" {
		if n, ok := s.matches.count(key, gen); ok {
			return n, nil
		}
	}
	n, err := s.countRows(ctx, s.tenantDB(tenant).Collection(q.Type), q, filter)
	if err == nil && key != "" {
		s.matches.putCount(key, gen, n)
	}
	return n, err
}

// countRows counts the matches in the database; with a post-filter every
// candidate's index values are read and checked.
func (s *Store) countRows(ctx context.Context, coll engine.Collection, q *search.Query, filter bson.D) (int64, error) {
	if q.PostFilter == nil {
		n, err := coll.Count(ctx, filter)
		return n, dbError("count "+q.Type, err)
	}
	cur, err := coll.Find(ctx, filter, &engine.FindOptions{Projection: bson.D{{Key: "idx", Value: 1}}})
	if err != nil {
		return 0, dbError("count "+q.Type, err)
	}
	defer cur.Close(ctx)
	var n int64
	for cur.Next(ctx) {
		idx, _ := cur.Current().Lookup("idx").DocumentOK()
		if q.PostFilter(idx) {
			n++
		}
	}
	return n, dbError("count "+q.Type, cur.Err())
}

func fillSearchPage(page *SearchPage, q *search.Query, keys []sortField, rows []*searchDoc, cur *searchCursor, snap snapshot) (*SearchPage, error) {
	more := len(rows) > q.Count
	if more {
		rows = rows[:q.Count]
	}
	backward := cur != nil && cur.Backward
	if backward {
		slices.Reverse(rows)
	}
	for _, d := range rows {
		res, err := d.toResource(q.Type)
		if err != nil {
			return nil, err
		}
		page.Entries = append(page.Entries, res)
	}
	if len(rows) == 0 {
		return page, nil
	}
	hasNext, hasPrev := more, cur != nil
	if backward {
		hasNext, hasPrev = true, more
	}
	if hasNext {
		page.Next = encodeSearchCursor(snap.carry(positionOf(rows[len(rows)-1], keys, false)))
	}
	if hasPrev {
		page.Previous = encodeSearchCursor(snap.carry(positionOf(rows[0], keys, true)))
	}
	return page, nil
}

// positionOf reads a row's sort values.
func positionOf(d *searchDoc, keys []sortField, backward bool) searchCursor {
	c := searchCursor{ID: d.ID, Backward: backward}
	for _, k := range keys {
		switch k.path {
		case "lastUpdated":
			c.Values = append(c.Values, d.LastUpdated)
			continue
		case "_id":
			c.Values = append(c.Values, d.ID)
			continue
		}
		v, ok := sortValueOf(d, k.path)
		if !ok {
			c.Values = append(c.Values, nil)
			continue
		}
		c.Values = append(c.Values, rawValue(v))
	}
	return c
}

// sortValueOf reads a row's value at a sort key's path (sortKeyPath):
// "sort.<code>.<a|d>" in its sort document, or "idx.<code>.<lo|hi>", the
// bound of the one range of its idx document.
func sortValueOf(d *searchDoc, path string) (bson.RawValue, bool) {
	code, bound := path[strings.IndexByte(path, '.')+1:strings.LastIndexByte(path, '.')], path[strings.LastIndexByte(path, '.')+1:]
	if strings.HasPrefix(path, "sort.") {
		v, err := bson.Raw(d.Sort).LookupErr(code, bound)
		return v, err == nil
	}
	v, err := bson.Raw(d.Idx).LookupErr(code, bound)
	return v, err == nil
}

// ordersByIdx tells whether an order reads a key from idx (see
// sortKeyPath): its rows must then hold their idx for their positions.
func ordersByIdx(order bson.D) bool {
	return slices.ContainsFunc(order, func(e bson.E) bool { return strings.HasPrefix(e.Key, "idx.") })
}

func rawValue(v bson.RawValue) any {
	switch v.Type {
	case bson.TypeString:
		return v.StringValue()
	case bson.TypeDouble:
		return v.Double()
	case bson.TypeDateTime:
		return v.Time().UTC()
	case bson.TypeInt32:
		return v.Int32()
	case bson.TypeInt64:
		return v.Int64()
	}
	return nil
}

// MatchingIDs returns the ids of every resource q matches, read from the
// index without the resources themselves (q's paging, sort and result
// parameters are ignored).
func (s *Store) MatchingIDs(ctx context.Context, tenant string, q *search.Query) ([]string, error) {
	if err := s.checkType(q.Type); err != nil {
		return nil, err
	}
	filter, err := s.searchFilter(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	proj := bson.D{{Key: "_id", Value: 1}}
	if q.PostFilter != nil {
		proj = append(proj, bson.E{Key: "idx", Value: 1})
	}
	cur, err := s.tenantDB(tenant).Collection(q.Type).Find(ctx, filter, &engine.FindOptions{Projection: proj})
	if err != nil {
		return nil, dbError("search "+q.Type, err)
	}
	defer cur.Close(ctx)
	var ids []string
	for cur.Next(ctx) {
		row := cur.Current()
		if q.PostFilter != nil {
			if idx, _ := row.Lookup("idx").DocumentOK(); !q.PostFilter(idx) {
				continue
			}
		}
		if id, ok := row.Lookup("_id").StringValueOK(); ok {
			ids = append(ids, id)
		}
	}
	return ids, dbError("search "+q.Type, s.damaged(ctx, tenant, cur.Err()))
}
