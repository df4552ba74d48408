package store

import (
	"context"
	"net/url"
	"regexp"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// conditionalRefPattern finds conditional references in a JSON body.
var conditionalRefPattern = regexp.MustCompile(`"reference"\s*:\s*"([A-Z][A-Za-z]+\?[^"\\]+)"`)

// tokenGroup is the conditional references of one type that name one token
// parameter with a single value: they are resolved by one search.
type tokenGroup struct {
	typ, param string
	refs       map[string]string // value → reference
}

// prefetchReferences resolves the conditional references of every op in a
// few searches: references such as Practitioner?identifier=sys|v are
// grouped by type and parameter and looked up together, and each is
// matched back by its value. References of another shape (and values that
// match no or several resources) are left to rewriteReference, which
// reports them.
func (t *txn) prefetchReferences(ctx context.Context) error {
	groups := map[string]*tokenGroup{}
	for _, o := range t.ops {
		if o.Method == "DELETE" || len(o.Body) == 0 {
			continue
		}
		for _, m := range conditionalRefPattern.FindAllSubmatch(o.Body, -1) {
			t.groupReference(ctx, string(m[1]), groups)
		}
	}
	for _, g := range groups {
		if err := t.resolveGroup(ctx, g); err != nil {
			return err
		}
	}
	return nil
}

// groupReference adds ref to its group when it has the simple token shape.
func (t *txn) groupReference(ctx context.Context, ref string, groups map[string]*tokenGroup) {
	if _, done := t.resolved[ref]; done {
		return
	}
	typ, query, _ := strings.Cut(ref, "?")
	if hit, ok := t.s.cachedReference(ctx, t.tenant, typ, query); ok {
		t.resolved[ref] = typ + "/" + hit.ID
		return
	}
	if !t.s.opts.ResourceTypes(typ) {
		return
	}
	param, value, ok := t.s.simpleToken(typ, query)
	if !ok {
		return
	}
	key := typ + "?" + param
	if groups[key] == nil {
		groups[key] = &tokenGroup{typ: typ, param: param, refs: map[string]string{}}
	}
	groups[key].refs[value] = ref
}

// resolveGroup looks a group's values up in one search and records each
// value that matches exactly one resource.
func (t *txn) resolveGroup(ctx context.Context, g *tokenGroup) error {
	values := make([]string, 0, len(g.refs))
	for v := range g.refs {
		values = append(values, v)
	}
	q, err := t.s.opts.Registry.Parse(g.typ, url.Values{g.param: {strings.Join(values, ",")}}, search.ParseOptions{Strict: true})
	if err != nil {
		return nil // rewriteReference reports it, reference by reference
	}
	filter, err := t.s.searchFilter(ctx, t.tenant, q)
	if err != nil {
		return err
	}
	gen := t.s.matches.generation(t.tenant, g.typ)
	proj := &engine.FindOptions{Projection: bson.D{{Key: "_id", Value: 1}, {Key: "vid", Value: 1}, {Key: "idx." + g.param, Value: 1}}}
	cur, err := t.s.tenantDB(t.tenant).Collection(g.typ).Find(ctx, filter, proj)
	if err != nil {
		return dbError("resolve conditional references", err)
	}
	defer cur.Close(ctx)
	matches := map[string][]*Resource{} // value → matches
	for cur.Next(ctx) {
		id, _ := cur.Current().Lookup("_id").StringValueOK()
		vid, _ := cur.Current().Lookup("vid").AsInt64OK()
		res := &Resource{Type: g.typ, ID: id, VersionID: int(vid)}
		for _, v := range idxStrings(cur.Current().Lookup("idx").Document(), g.param) {
			if _, wanted := g.refs[v]; wanted {
				matches[v] = append(matches[v], res)
			}
		}
	}
	if err := cur.Err(); err != nil {
		return dbError("resolve conditional references", err)
	}
	for v, ref := range g.refs {
		if found := matches[v]; len(found) == 1 {
			t.resolved[ref] = g.typ + "/" + found[0].ID
			t.s.cacheReference(t.tenant, ref, gen, found[0])
		}
	}
	return nil
}

// referenceKey is the match-cache key of a resolved conditional reference;
// it is apart from condition searches, whose entries hold whole resources.
func referenceKey(tenant, typ, query string) string {
	return tenant + "/" + typ + "?\x00ref\x00" + query
}

// cachedReference is the resource a conditional reference resolved to, if
// no write to its type happened since and it is still current.
func (s *Store) cachedReference(ctx context.Context, tenant, typ, query string) (*Resource, bool) {
	if !s.opts.Exclusive {
		return nil, false
	}
	hit, ok := s.matches.get(referenceKey(tenant, typ, query), s.matches.generation(tenant, typ))
	if !ok || len(hit) != 1 || !s.stillCurrent(ctx, tenant, typ, hit) {
		return nil, false
	}
	return hit[0], true
}

// cacheReference remembers what a conditional reference resolved to at
// write generation gen.
func (s *Store) cacheReference(tenant, ref string, gen int64, res *Resource) {
	if !s.opts.Exclusive {
		return
	}
	typ, query, _ := strings.Cut(ref, "?")
	s.matches.put(referenceKey(tenant, typ, query), gen, []*Resource{res})
}
