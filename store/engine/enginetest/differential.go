package enginetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// The differential tests generate documents shaped like the store's rows
// and compare an engine's answers with the reference evaluator's, on
// filters, sorts, limits and skips drawn at random: enough documents and
// conditions of every selectivity for an engine's plans to differ.

var (
	words = []string{"alpha", "alp", "Alpha", "beta", "bet", "gamma", "ga.ma", "delta", "ünï", "zeta"}
	codes = []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"}
	epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
)

// generate makes n documents: some fields missing, idx values multiple,
// sort values single, codes skewed.
func generate(n int, r *rand.Rand) []bson.D {
	docs := make([]bson.D, n)
	for i := range docs {
		d := bson.D{{Key: "_id", Value: fmt.Sprintf("r%04d", i)}}
		deleted := r.IntN(10) == 0
		d = append(d, bson.E{Key: "vid", Value: int32(1 + r.IntN(3))})
		d = append(d, bson.E{Key: "lastUpdated", Value: epoch.Add(time.Duration(r.IntN(n/2+1)) * time.Minute)})
		d = append(d, bson.E{Key: "deleted", Value: deleted})
		if !deleted {
			idx := bson.D{}
			var cs bson.A
			for range 1 + r.IntN(3) {
				c := codes[min(r.IntN(len(codes)), r.IntN(len(codes)))] // skewed to the first codes
				cs = append(cs, c, "sys|"+c)
			}
			idx = append(idx, bson.E{Key: "code", Value: cs})
			if r.IntN(4) > 0 {
				idx = append(idx, bson.E{Key: "name", Value: bson.A{words[r.IntN(len(words))]}})
			}
			if r.IntN(5) > 0 {
				lo := float64(r.IntN(50))
				var ranges bson.A
				for range 1 + r.IntN(2) {
					ranges = append(ranges, bson.D{{Key: "lo", Value: lo}, {Key: "hi", Value: lo + float64(r.IntN(10))}})
					lo += float64(r.IntN(20))
				}
				idx = append(idx, bson.E{Key: "value", Value: ranges})
			}
			d = append(d, bson.E{Key: "idx", Value: idx})
			if r.IntN(6) > 0 {
				at := epoch.Add(time.Duration(r.IntN(40)) * 24 * time.Hour)
				d = append(d, bson.E{Key: "sort", Value: bson.D{{Key: "date", Value: bson.D{{Key: "a", Value: at}, {Key: "d", Value: at}}}}})
			}
			if r.IntN(3) > 0 {
				d = append(d, bson.E{Key: "n", Value: []any{int32(r.IntN(30)), float64(r.IntN(30)) + 0.5, int64(r.IntN(30))}[r.IntN(3)]})
			}
			if r.IntN(2) > 0 { // text and numbers at one path
				d = append(d, bson.E{Key: "mixed", Value: []any{words[r.IntN(len(words))], float64(r.IntN(30)), bson.A{float64(r.IntN(30)), words[r.IntN(len(words))]}}[r.IntN(3)]})
			}
		}
		docs[i] = d
	}
	return docs
}

// randomFilter draws a conjunction of one to three conditions.
func randomFilter(r *rand.Rand, docs []bson.D) bson.D {
	f := bson.D{}
	for range 1 + r.IntN(3) {
		f = append(f, randomCondition(r, docs, 0)...)
	}
	return f
}

func randomCondition(r *rand.Rand, docs []bson.D, depth int) bson.D {
	op := func(path, o string, v any) bson.D { return bson.D{{Key: path, Value: bson.D{{Key: o, Value: v}}}} }
	code := func() string { return codes[r.IntN(len(codes))] }
	at := func() time.Time { return epoch.Add(time.Duration(r.IntN(len(docs)/2+1)) * time.Minute) }
	day := func() time.Time { return epoch.Add(time.Duration(r.IntN(40)) * 24 * time.Hour) }
	switch r.IntN(22) {
	case 0:
		return bson.D{{Key: "deleted", Value: false}}
	case 1:
		return bson.D{{Key: "idx.code", Value: code()}}
	case 2:
		return op("idx.code", "$in", []string{code(), "sys|" + code()})
	case 3:
		if r.IntN(2) == 0 {
			return op("idx.code", "$not", bson.Regex{Pattern: "^" + literal("sys|"+code()[:1])})
		}
		return op("idx.code", "$nin", bson.A{code(), code()})
	case 4:
		return op("idx.code", "$ne", code())
	case 5:
		w := []rune(words[r.IntN(len(words))])
		return bson.D{{Key: "idx.name", Value: bson.Regex{Pattern: "^" + literal(string(w[:1+r.IntN(3)]))}}}
	case 6:
		return bson.D{{Key: "idx.name", Value: bson.Regex{Pattern: literal([]string{"lp", "et", ".", "a"}[r.IntN(4)])}}}
	case 7:
		return op("idx.value.lo", []string{"$gt", "$gte", "$lt", "$lte"}[r.IntN(4)], float64(r.IntN(60)))
	case 8:
		return bson.D{{Key: "idx.value.lo", Value: bson.D{{Key: "$gte", Value: r.IntN(30)}}}, {Key: "idx.value.hi", Value: bson.D{{Key: "$lte", Value: 20 + r.IntN(40)}}}}
	case 9:
		return op("lastUpdated", []string{"$gt", "$gte", "$lt", "$lte"}[r.IntN(4)], at())
	case 10:
		return op("sort.date.d", []string{"$gt", "$lt"}[r.IntN(2)], day())
	case 11:
		return op([]string{"idx.name", "idx.value", "sort.date", "n", "idx"}[r.IntN(5)], "$exists", r.IntN(2) == 0)
	case 12:
		return op("n", []string{"$gt", "$lte", "$eq", "$ne"}[r.IntN(4)], []any{r.IntN(30), float64(r.IntN(30)) + 0.5}[r.IntN(2)])
	case 13:
		return bson.D{{Key: "vid", Value: 1 + r.IntN(3)}}
	case 14:
		return op("_id", []string{"$gt", "$lt"}[r.IntN(2)], fmt.Sprintf("r%04d", r.IntN(len(docs))))
	case 15:
		ids := bson.A{}
		for range 1 + r.IntN(5) {
			ids = append(ids, fmt.Sprintf("r%04d", r.IntN(len(docs))))
		}
		return op("_id", "$in", ids)
	case 16:
		return bson.D{{Key: "n", Value: nil}}
	case 17:
		return op("mixed", []string{"$gt", "$lt", "$eq"}[r.IntN(3)], []any{words[r.IntN(len(words))], float64(r.IntN(30))}[r.IntN(2)])
	case 18:
		w := []rune(words[r.IntN(len(words))])
		return bson.D{{Key: "mixed", Value: bson.Regex{Pattern: "^" + literal(string(w[:1+r.IntN(2)]))}}}
	}
	if depth > 1 {
		return bson.D{{Key: "idx.code", Value: code()}}
	}
	var alts bson.A
	for range 2 + r.IntN(2) {
		c := randomCondition(r, docs, depth+1)
		if r.IntN(3) == 0 {
			c = append(c, randomCondition(r, docs, depth+1)...)
		}
		alts = append(alts, c)
	}
	if r.IntN(4) == 0 {
		return bson.D{{Key: "$and", Value: alts}}
	}
	return bson.D{{Key: "$or", Value: alts}}
}

// sorts are the orders the store reads in.
var sorts = []bson.D{
	nil,
	{{Key: "lastUpdated", Value: 1}, {Key: "_id", Value: 1}},
	{{Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}},
	{{Key: "sort.date.d", Value: -1}, {Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}},
	{{Key: "sort.date.a", Value: 1}, {Key: "lastUpdated", Value: 1}, {Key: "_id", Value: 1}},
	{{Key: "n", Value: 1}, {Key: "_id", Value: -1}},
	{{Key: "_id", Value: -1}},
	{{Key: "vid", Value: -1}, {Key: "_id", Value: 1}},
	{{Key: "idx.name", Value: 1}, {Key: "_id", Value: 1}},
}

// rounds is how many random queries testDifferential runs:
// ENGINETEST_ROUNDS, default 300 (and its seed, ENGINETEST_SEED).
func rounds() (int, uint64) {
	n, err := strconv.Atoi(os.Getenv("ENGINETEST_ROUNDS"))
	if err != nil || n <= 0 {
		n = 300
	}
	seed, _ := strconv.ParseUint(os.Getenv("ENGINETEST_SEED"), 10, 64)
	return n, seed
}

func testDifferential(t *testing.T, db engine.Database) {
	ctx := context.Background()
	n, seed := rounds()
	r := rand.New(rand.NewPCG(1+seed, 2))
	docs := generate(300, r)
	c := db.Collection("Observation")
	batch := make([]any, len(docs))
	for i, d := range docs {
		batch[i] = d
	}
	if err := c.InsertMany(ctx, batch); err != nil {
		t.Fatalf("insert: %v", err)
	}
	failures := 0
	for i := 0; i < n && failures < 10; i++ {
		filter := randomFilter(r, docs)
		sort := sorts[r.IntN(len(sorts))]
		limit := []int64{0, 1, 3, 11, 50}[r.IntN(5)]
		skip := []int64{0, 0, 0, 2, 20}[r.IntN(5)]
		want := query(docs, filter, sort, skip, limit)
		opts := &engine.FindOptions{Sort: sort, Skip: skip, Limit: limit}
		got := find(t, c, filter, opts)
		if sort == nil { // any order: compare as sets
			want = query(docs, filter, bson.D{{Key: "_id", Value: 1}}, 0, 0)
			got = sortedIDs(got)
			if limit > 0 || skip > 0 {
				got, want = nil, nil // which documents is not fixed either
			}
		}
		if !equal(got, want) {
			failures++
			t.Errorf("#%d: %v sort %v skip %d limit %d:\n got %v\nwant %v", i, filter, sort, skip, limit, got, want)
		}
		if n := count(t, c, filter); n != int64(len(query(docs, filter, nil, 0, 0))) {
			failures++
			t.Errorf("#%d: count %v = %d, want %d", i, filter, n, len(query(docs, filter, nil, 0, 0)))
		}
	}
}

func sortedIDs(ids []string) []string {
	out := append([]string{}, ids...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// testKeysetPaging pages through matches the way the store does: each
// page is the rows after the previous page's last, by an $or of the sort
// keys, and the pages together are the whole order.
func testKeysetPaging(t *testing.T, db engine.Database) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	docs := generate(300, r)
	c := db.Collection("Observation")
	batch := make([]any, len(docs))
	for i, d := range docs {
		batch[i] = d
	}
	if err := c.InsertMany(ctx, batch); err != nil {
		t.Fatalf("insert: %v", err)
	}
	// A keyset condition never matches a missing value ($lt null matches
	// nothing): the filters keep to documents that have the sort values,
	// as the store's searches do (they read the rows without one apart).
	dated := bson.E{Key: "sort.date.d", Value: bson.D{{Key: "$exists", Value: true}}}
	for _, tc := range []struct {
		filter bson.D
		keys   []string // sort paths before _id, all descending
		page   int64
	}{
		{bson.D{{Key: "deleted", Value: false}, dated}, []string{"sort.date.d", "lastUpdated"}, 7},
		{bson.D{{Key: "idx.code", Value: "c1"}, {Key: "deleted", Value: false}, dated}, []string{"sort.date.d", "lastUpdated"}, 5},
		{bson.D{{Key: "idx.code", Value: "c7"}}, []string{"lastUpdated"}, 3},
		{bson.D{}, []string{"lastUpdated"}, 11},
		{bson.D{dated}, []string{"sort.date.d", "lastUpdated"}, 13},
		{bson.D{{Key: "idx.value.lo", Value: bson.D{{Key: "$gte", Value: 10}}}}, []string{"vid", "lastUpdated"}, 4},
	} {
		sort := bson.D{}
		for _, k := range tc.keys {
			sort = append(sort, bson.E{Key: k, Value: -1})
		}
		sort = append(sort, bson.E{Key: "_id", Value: -1})
		want := query(docs, tc.filter, sort, 0, 0)
		var got []string
		filter := tc.filter
		for pages := 0; pages < 200; pages++ {
			ids := find(t, c, filter, &engine.FindOptions{Sort: sort, Limit: tc.page})
			got = append(got, ids...)
			if int64(len(ids)) < tc.page {
				break
			}
			last := docByID(docs, ids[len(ids)-1])
			filter = after(tc.filter, last, tc.keys)
		}
		if !equal(got, want) {
			t.Errorf("paging %v by %v:\n got %v\nwant %v", tc.filter, sort, got, want)
		}
	}
}

// after is the store's keyset condition: rows after last in descending
// (keys..., _id) order.
func after(filter bson.D, last bson.D, keys []string) bson.D {
	alts := bson.A{}
	for i := 0; i <= len(keys); i++ {
		cond := bson.D{}
		for _, k := range keys[:i] {
			cond = append(cond, bson.E{Key: k, Value: sortValue(last, k)})
		}
		if i < len(keys) {
			cond = append(cond, bson.E{Key: keys[i], Value: bson.D{{Key: "$lt", Value: sortValue(last, keys[i])}}})
		} else {
			cond = append(cond, bson.E{Key: "_id", Value: bson.D{{Key: "$lt", Value: idOf(last)}}})
		}
		alts = append(alts, cond)
	}
	return bson.D{{Key: "$and", Value: bson.A{filter, bson.D{{Key: "$or", Value: alts}}}}}
}

func docByID(docs []bson.D, id string) bson.D {
	for _, d := range docs {
		if idOf(d) == id {
			return d
		}
	}
	return nil
}
