package store

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// batchWorkers is how many ops of a batch are applied at once: their
// writes meet in the database's group commit.
const batchWorkers = 8

// Batch applies each op on its own, as a transaction of one: errs[i] is the
// failure of ops[i] (as Transaction reports it) and leaves the others
// alone. Ops are applied several at a time (FHIR asks a batch's entries
// not to depend on one another, so that their order does not matter),
// unless two of them name the same resource or the same criteria: those
// batches are applied in order. With
// Options.Exclusive, the conditional creates and updates of the batch are
// looked up together first, one search per type and parameter instead of
// one per op, and the answers are kept up to date with the batch's own
// writes.
func (s *Store) Batch(ctx context.Context, tenant string, ops []Op) ([]Result, []error) {
	results, errs := make([]Result, len(ops)), make([]error, len(ops))
	var hints *conditionHints
	if s.opts.Exclusive {
		var err error
		if hints, err = s.prefetchConditions(ctx, tenant, ops); err != nil {
			hints = nil // every op searches for itself
		}
	}
	bundle := bundleOf(ops)
	workers := batchWorkers
	if !independent(ops) {
		workers = 1
	}
	var next atomic.Int64
	onGoroutines(min(workers, len(ops)), func(int) {
		for i := int(next.Add(1) - 1); i < len(ops); i = int(next.Add(1) - 1) {
			r, err := s.transaction(ctx, tenant, []Op{ops[i]}, hints, bundle)
			if err != nil {
				errs[i] = err
				continue
			}
			results[i] = r[0]
		}
	})
	return results, errs
}

// independent tells that no two ops name the same resource or the same
// criteria, so that the order they are applied in changes nothing.
func independent(ops []Op) bool {
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		var key string
		switch {
		case op.Condition != "":
			key = "?" + conditionKey(op.Type, op.Condition)
		case op.ID != "":
			key = op.Type + "/" + op.ID
		default:
			continue
		}
		if seen[key] {
			return false
		}
		seen[key] = true
	}
	return true
}

// conditionHints are the matches of simple conditions read together at a
// known write generation of their type.
type conditionHints struct {
	mu     sync.Mutex                // the batch's ops run concurrently
	byKey  map[string]*conditionHint // conditionKey → hint
	byType map[string][]*conditionHint
}

// conditionHint is what a condition param=value of typ matched when the
// type's write generation was gen.
type conditionHint struct {
	typ, param, value string
	gen               int64
	matches           []*Resource
}

// simpleToken reports whether a condition is a single token parameter with
// a single value and no modifier, which a batch can look up in bulk.
func (s *Store) simpleToken(typ, condition string) (param, value string, ok bool) {
	values, err := url.ParseQuery(condition)
	if err != nil || len(values) != 1 || s.opts.Registry == nil {
		return "", "", false
	}
	for name, vs := range values {
		p, known := s.opts.Registry.Lookup(typ, name)
		if !known || p.Type != "token" || len(vs) != 1 || vs[0] == "" || strings.ContainsAny(vs[0], ",\\$") {
			return "", "", false
		}
		param, value = name, vs[0]
	}
	return param, value, true
}

// prefetchConditions looks up the simple conditions of the batch's creates
// and updates, one search per type and parameter.
func (s *Store) prefetchConditions(ctx context.Context, tenant string, ops []Op) (*conditionHints, error) {
	h := &conditionHints{byKey: map[string]*conditionHint{}, byType: map[string][]*conditionHint{}}
	groups := map[string][]*conditionHint{} // "typ?param" → hints
	for _, op := range ops {
		if op.Condition == "" || (op.Method != "POST" && op.Method != "PUT") || !s.opts.ResourceTypes(op.Type) {
			continue
		}
		param, value, ok := s.simpleToken(op.Type, op.Condition)
		key := conditionKey(op.Type, op.Condition)
		if !ok || h.byKey[key] != nil {
			continue
		}
		hint := &conditionHint{typ: op.Type, param: param, value: value}
		h.byKey[key] = hint
		h.byType[op.Type] = append(h.byType[op.Type], hint)
		groups[op.Type+"?"+param] = append(groups[op.Type+"?"+param], hint)
	}
	for _, g := range groups {
		if err := s.lookUpHints(ctx, tenant, g); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// lookUpHints fills hints of one type and parameter from one search.
func (s *Store) lookUpHints(ctx context.Context, tenant string, hints []*conditionHint) error {
	typ, param := hints[0].typ, hints[0].param
	byValue := map[string]*conditionHint{}
	values := make([]string, 0, len(hints))
	for _, h := range hints {
		byValue[h.value] = h
		values = append(values, h.value)
	}
	q, err := s.opts.Registry.Parse(typ, url.Values{param: {strings.Join(values, ",")}}, search.ParseOptions{Strict: true})
	if err != nil {
		return err
	}
	filter, err := s.searchFilter(ctx, tenant, q)
	if err != nil {
		return err
	}
	gen := s.matches.generation(tenant, typ)
	cur, err := s.tenantDB(tenant).Collection(typ).Find(ctx, filter, &engine.FindOptions{Projection: bson.D{{Key: "sort", Value: 0}}})
	if err != nil {
		return dbError("look up conditions", err)
	}
	var rows []*storedDoc
	if err := engine.All(ctx, cur, &rows); err != nil {
		return dbError("look up conditions", err)
	}
	for _, h := range hints {
		h.gen = gen
	}
	for _, d := range rows {
		res, err := d.toResource(typ)
		if err != nil {
			return err
		}
		for _, v := range idxStrings(d.Idx, param) {
			if h := byValue[v]; h != nil {
				h.matches = append(h.matches, res)
			}
		}
	}
	return nil
}

// lookup returns the matches of a condition if its hint is still exact:
// nothing has written the type since the hint was last brought up to date.
func (h *conditionHints) lookup(s *Store, tenant, typ, condition string) ([]*Resource, bool) {
	if h == nil {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hint := h.byKey[conditionKey(typ, condition)]
	if hint == nil || hint.gen != s.matches.generation(tenant, typ) {
		return nil, false
	}
	return hint.matches, true
}

// observe brings the hints of a type up to date after the batch wrote v,
// which moved the type's generation by one. When the generation moved
// further, someone else wrote too and the hints are dropped.
func (h *conditionHints) observe(s *Store, tenant string, v *version) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	typ := v.hist.Type
	now := s.matches.generation(tenant, typ)
	var kept []*conditionHint
	for _, hint := range h.byType[typ] {
		if hint.gen+1 != now {
			hint.gen = -1 // never exact again
			continue
		}
		hint.gen = now
		hint.matches = withVersion(hint.matches, v, hint.param, hint.value)
		kept = append(kept, hint)
	}
	h.byType[typ] = kept
}

// withVersion updates matches of param=value with the new version v of a
// resource: it joins, stays (updated) or leaves.
func withVersion(matches []*Resource, v *version, param, value string) []*Resource {
	out := matches[:0:0]
	for _, m := range matches {
		if m.ID != v.res.ID {
			out = append(out, m)
		}
	}
	if v.doc.Deleted {
		return out
	}
	for _, x := range idxStrings(v.doc.Idx, param) {
		if x == value {
			return append(out, v.res)
		}
	}
	return out
}
