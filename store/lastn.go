package store

import (
	"context"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// LastN runs q (a search of Observations) and keeps the max most recent
// matches of each code for each subject: the Observation $lastn
// operation. Codes are equal when a system and code are; an Observation
// with several codings joins their groups (translations are equal, and
// equality is transitive); one without coding is grouped by its code's
// text. Recency is the date parameter (effective[x]), newest first, then
// lastUpdated. Every match of q is read, so q should name a patient or
// subject. The matches are ordered by subject and group, newest first;
// q's _include and _revinclude add their resources, and Total counts the
// matches.
func (s *Store) LastN(ctx context.Context, tenant string, q *search.Query, max int) (*SearchPage, error) {
	if err := s.checkType(q.Type); err != nil {
		return nil, err
	}
	filter, err := s.searchFilter(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	date := search.SortKey{Param: "date", Descending: true, Type: "date"}
	if p, ok := s.opts.Registry.Lookup(q.Type, "date"); ok {
		date = p.SortKey(true)
	}
	order := bson.D{{Key: sortKeyPath(date), Value: -1}, {Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}}
	skip := bson.D{{Key: "sort", Value: 0}}
	if q.PostFilter == nil && len(q.Includes) == 0 {
		skip = append(skip, bson.E{Key: "idx", Value: 0}) // read only to check or follow it
	}
	cur, err := s.tenantDB(tenant).Collection(q.Type).Find(ctx, filter, &engine.FindOptions{Sort: order, Projection: skip})
	if err != nil {
		return nil, dbError("$lastn "+q.Type, err)
	}
	var matches []*storedDoc
	if err := engine.All(ctx, cur, &matches); err != nil {
		return nil, dbError("$lastn "+q.Type, err)
	}
	if q.PostFilter != nil {
		matches = slices.DeleteFunc(matches, func(d *storedDoc) bool { return !q.PostFilter(d.Idx) })
	}
	groups := codeGroups(matches)
	counts := map[string]int{}
	type member struct {
		group string
		doc   *storedDoc
	}
	var kept []member
	for i, d := range matches { // newest first
		if counts[groups[i]] < max {
			counts[groups[i]]++
			kept = append(kept, member{groups[i], d})
		}
	}
	slices.SortStableFunc(kept, func(a, b member) int { return strings.Compare(a.group, b.group) })
	page := &SearchPage{Entries: make([]*Resource, len(kept)), Total: int64(len(kept))}
	for i, m := range kept {
		if page.Entries[i], err = m.doc.toResource(q.Type); err != nil {
			return nil, err
		}
	}
	page.Included, err = s.includes(ctx, tenant, q, page.Entries)
	return page, err
}

// codeGroups names the $lastn group of each Observation: its subject and
// the least code key of the codes it is transitively equal to.
func codeGroups(docs []*storedDoc) []string {
	parent := map[string]string{}
	var find func(k string) string
	find = func(k string) string {
		p, ok := parent[k]
		if !ok || p == k {
			parent[k] = k
			return k
		}
		root := find(p)
		parent[k] = root
		return root
	}
	keys := make([][]string, len(docs))
	for i, d := range docs {
		keys[i] = codeKeys(d.Resource)
		for _, k := range keys[i][1:] {
			a, b := find(keys[i][0]), find(k)
			if a != b {
				parent[max(a, b)] = min(a, b) // the least key names the group
			}
		}
	}
	out := make([]string, len(docs))
	for i, k := range keys {
		out[i] = find(k[0])
	}
	return out
}

// codeKeys are an Observation's subject with each system|code of its code
// (or its text when it has no coding): at least one key.
func codeKeys(resource bson.Raw) []string {
	subject, _ := resource.Lookup("subject", "reference").StringValueOK()
	var keys []string
	if arr, ok := resource.Lookup("code", "coding").ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			c, ok := v.DocumentOK()
			if !ok {
				continue
			}
			system, _ := c.Lookup("system").StringValueOK()
			code, _ := c.Lookup("code").StringValueOK()
			if code != "" {
				keys = append(keys, subject+"\x00"+system+"|"+code)
			}
		}
	}
	if len(keys) == 0 {
		text, _ := resource.Lookup("code", "text").StringValueOK()
		keys = append(keys, subject+"\x00text\x00"+text)
	}
	return keys
}
