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
// matches of each code for each subject: the Observation $lastn operation.
// Recency is the date parameter (effective[x]), newest first, then
// lastUpdated. The matches of q are read in that order through the
// database's sort and grouped as they come, so q should name a patient or
// subject to bound what is read. The result is ordered by subject, then
// code, then newest first.
func (s *Store) LastN(ctx context.Context, tenant string, q *search.Query, max int) ([]*Resource, error) {
	if err := s.checkType(q.Type); err != nil {
		return nil, err
	}
	filter, err := s.searchFilter(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	order := bson.D{{Key: "sort.date.d", Value: -1}, {Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}}
	cur, err := s.tenantDB(tenant).Collection(q.Type).Find(ctx, filter, &engine.FindOptions{Sort: order})
	if err != nil {
		return nil, dbError("$lastn "+q.Type, err)
	}
	defer cur.Close(ctx)
	type kept struct {
		group string
		res   *Resource
	}
	var out []kept
	counts := map[string]int{}
	for cur.Next(ctx) {
		var d storedDoc
		if err := bson.Unmarshal(cur.Current(), &d); err != nil {
			return nil, dbError("$lastn "+q.Type, err)
		}
		if q.PostFilter != nil && !q.PostFilter(d.Idx) {
			continue
		}
		group := lastnGroup(d.Resource)
		if counts[group] >= max {
			continue
		}
		counts[group]++
		res, err := d.toResource(q.Type)
		if err != nil {
			return nil, err
		}
		out = append(out, kept{group: group, res: res})
	}
	if err := cur.Err(); err != nil {
		return nil, dbError("$lastn "+q.Type, err)
	}
	slices.SortStableFunc(out, func(a, b kept) int { return strings.Compare(a.group, b.group) })
	resources := make([]*Resource, len(out))
	for i, k := range out {
		resources[i] = k.res
	}
	return resources, nil
}

// lastnGroup is the subject and code of an Observation: its subject
// reference, then the system|code of each coding of its code, sorted (or
// the code's text when it has no coding).
func lastnGroup(resource bson.Raw) string {
	subject, _ := resource.Lookup("subject", "reference").StringValueOK()
	var codes []string
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
				codes = append(codes, system+"|"+code)
			}
		}
	}
	if len(codes) == 0 {
		text, _ := resource.Lookup("code", "text").StringValueOK()
		codes = append(codes, "text:"+text)
	}
	slices.Sort(codes)
	return subject + "\x00" + strings.Join(codes, "\x00")
}
