package store

import (
	"context"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// MaxIncludeDepth bounds how often :iterate includes are applied.
const MaxIncludeDepth = 3

// includes resolves _include and _revinclude for a page: one query per
// target type and per _revinclude at each depth, whatever the page size.
// Each resource is returned once and never when it is already a match.
func (s *Store) includes(ctx context.Context, tenant string, q *search.Query, matches []*Resource) ([]*Resource, error) {
	if len(q.Includes) == 0 && len(q.Revincludes) == 0 {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, m := range matches {
		seen[m.Type+"/"+m.ID] = true
	}
	var out []*Resource
	frontier := matches
	for depth := 0; depth < MaxIncludeDepth && len(frontier) > 0; depth++ {
		first := depth == 0
		found, err := s.includeStep(ctx, tenant, q, frontier, first)
		if err != nil {
			return nil, err
		}
		var next []*Resource
		for _, r := range found {
			if key := r.Type + "/" + r.ID; !seen[key] {
				seen[key] = true
				out = append(out, r)
				next = append(next, r)
			}
		}
		frontier = next
		if !hasIterate(q) {
			break
		}
	}
	return out, nil
}

func hasIterate(q *search.Query) bool {
	for _, inc := range append(slices.Clone(q.Includes), q.Revincludes...) {
		if inc.Iterate {
			return true
		}
	}
	return false
}

// includeStep follows the includes that apply to the frontier once.
func (s *Store) includeStep(ctx context.Context, tenant string, q *search.Query, frontier []*Resource, first bool) ([]*Resource, error) {
	ids := map[string][]string{}   // target type → ids
	canon := map[string][]string{} // target type → canonical URLs
	for _, inc := range q.Includes {
		if !first && !inc.Iterate {
			continue
		}
		for _, r := range frontier {
			if r.Type != inc.Source {
				continue
			}
			for _, ref := range idxStrings(r.idx, inc.Param) {
				collectReference(ref, inc.Targets, ids, canon)
			}
		}
	}
	var found []*Resource
	for typ, list := range ids {
		rs, err := s.findCurrent(ctx, tenant, typ, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: list}}}})
		if err != nil {
			return nil, err
		}
		found = append(found, rs...)
	}
	for typ, urls := range canon {
		rs, err := s.findCurrent(ctx, tenant, typ, bson.D{{Key: "idx.url", Value: bson.D{{Key: "$in", Value: urls}}}})
		if err != nil {
			return nil, err
		}
		found = append(found, rs...)
	}
	for _, inc := range q.Revincludes {
		if !first && !inc.Iterate {
			continue
		}
		var refs []string
		for _, r := range frontier {
			if len(inc.Targets) == 0 || slices.Contains(inc.Targets, r.Type) {
				refs = append(refs, r.Type+"/"+r.ID)
			}
		}
		if len(refs) == 0 {
			continue
		}
		rs, err := s.findCurrent(ctx, tenant, inc.Source, bson.D{{Key: "idx." + inc.Param, Value: bson.D{{Key: "$in", Value: refs}}}})
		if err != nil {
			return nil, err
		}
		found = append(found, rs...)
	}
	return found, nil
}

// collectReference files a stored reference value under its target type:
// "Type/id" by id, a canonical URL under every allowed target type.
func collectReference(ref string, targets []string, ids, canon map[string][]string) {
	if strings.Contains(ref, "://") || strings.HasPrefix(ref, "urn:") {
		url, _, _ := strings.Cut(ref, "|")
		for _, t := range targets {
			if !slices.Contains(canon[t], url) {
				canon[t] = append(canon[t], url)
			}
		}
		return
	}
	typ, id, ok := strings.Cut(ref, "/")
	if !ok || strings.Contains(id, "/") || (len(targets) > 0 && !slices.Contains(targets, typ)) {
		return
	}
	if !slices.Contains(ids[typ], id) {
		ids[typ] = append(ids[typ], id)
	}
}

// idxStrings are the string values of one idx field.
func idxStrings(idx bson.Raw, code string) []string {
	arr, ok := idx.Lookup(code).ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		if s, ok := v.StringValueOK(); ok {
			out = append(out, s)
		}
	}
	return out
}

// findCurrent reads the current, undeleted rows of a type matching filter.
func (s *Store) findCurrent(ctx context.Context, tenant, typ string, filter bson.D) ([]*Resource, error) {
	if err := s.checkType(typ); err != nil {
		return nil, nil // a reference to a type that does not exist includes nothing
	}
	all := bson.D{{Key: "$and", Value: bson.A{filter, bson.D{{Key: "deleted", Value: false}}}}}
	cur, err := s.tenantDB(tenant).Collection(typ).Find(ctx, all, &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}})
	if err != nil {
		return nil, dbError("include "+typ, err)
	}
	var docs []*storedDoc
	if err := engine.All(ctx, cur, &docs); err != nil {
		return nil, dbError("include "+typ, err)
	}
	out := make([]*Resource, 0, len(docs))
	for _, d := range docs {
		r, err := d.toResource(typ)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
