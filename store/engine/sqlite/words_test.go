package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"fhirstore/store/engine"
)

// vocabulary are the words of the word-list tests: plain, pairs, and
// what the word table's tokens must escape.
var vocabulary = []string{
	"heart", "heart rate", "heartbeat", "hear", "rate", "blood", "blood pressure",
	"pressure", "café", "cafe", "Heart", "a_b", "a b", "ab", "x\"y", "x*y", "o'neil",
	"über", "日本", "日本語", "AND", "or", "near", "2024", "8867-4", "", " ",
}

// wordDoc is document i of the word-list tests: words at "w" (or a null,
// an empty array, a number, nothing), and other fields to combine with.
func wordDoc(i int, r *rand.Rand) bson.D {
	d := bson.D{{Key: "_id", Value: fmt.Sprintf("d%03d", i)}, {Key: "k", Value: i % 7}}
	switch r.IntN(10) {
	case 0:
		d = append(d, bson.E{Key: "w", Value: nil})
	case 1:
		d = append(d, bson.E{Key: "w", Value: bson.A{}})
	case 2:
		d = append(d, bson.E{Key: "w", Value: bson.A{"heart", 42}})
	case 3:
	default:
		var ws bson.A
		for range 1 + r.IntN(6) {
			ws = append(ws, vocabulary[r.IntN(len(vocabulary))])
		}
		d = append(d, bson.E{Key: "w", Value: ws})
	}
	return append(d, bson.E{Key: "t", Value: bson.A{vocabulary[r.IntN(len(vocabulary))]}})
}

// wordFilters are the filters both engines must answer alike.
func wordFilters() []bson.D {
	eq := func(v any) bson.D { return bson.D{{Key: "w", Value: v}} }
	op := func(o string, v any) bson.D { return bson.D{{Key: "w", Value: bson.D{{Key: o, Value: v}}}} }
	prefix := func(p string) bson.D { return eq(bson.Regex{Pattern: "^" + regexpQuote(p)}) }
	var out []bson.D
	for _, v := range vocabulary {
		out = append(out, eq(v), prefix(v))
	}
	return append(out,
		prefix("hea"), prefix("heart "), prefix("日"), prefix("x\""), prefix("a_"),
		op("$in", bson.A{"heart", "blood", "café"}),
		op("$in", bson.A{"heart", 42}),
		op("$nin", bson.A{"heart", "rate"}),
		op("$ne", "heart"),
		eq(nil), eq(42), op("$in", bson.A{nil, "rate"}), op("$exists", true), op("$exists", false),
		op("$ne", nil), bson.D{{Key: "w", Value: bson.D{{Key: "$exists", Value: true}, {Key: "$ne", Value: "heart"}}}},
		bson.D{{Key: "$or", Value: bson.A{eq("heart"), bson.D{{Key: "k", Value: 3}}}}},
		bson.D{{Key: "$or", Value: bson.A{eq("heart"), prefix("blo")}}},
		bson.D{{Key: "w", Value: "heart"}, {Key: "k", Value: bson.D{{Key: "$gte", Value: 4}}}},
		bson.D{{Key: "w", Value: "heart"}, {Key: "t", Value: "rate"}},
		bson.D{{Key: "$and", Value: bson.A{eq("heart"), prefix("blood")}}},
		bson.D{{Key: "$and", Value: bson.A{
			bson.D{{Key: "$or", Value: bson.A{eq("heart"), prefix("heart ")}}},
			bson.D{{Key: "$or", Value: bson.A{eq("rate"), prefix("rate ")}}},
		}}},
		bson.D{{Key: "$and", Value: bson.A{eq("heart"), bson.D{{Key: "$or", Value: bson.A{eq("rate"), bson.D{{Key: "k", Value: 1}}}}}}}},
	)
}

// regexpQuote is the grammar's literal of s (regexp.QuoteMeta).
func regexpQuote(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// TestWordPaths checks that an engine keeping "w" in a word table answers
// every filter on it as the engine indexing it like any other path, after
// inserts, replacements and deletions, sorted, paged and counted.
func TestWordPaths(t *testing.T) {
	ctx := context.Background()
	words := openTest(t, Options{WordPaths: []string{"w", "t"}}).Database("db").Collection("C")
	plain := openTest(t, Options{}).Database("db").Collection("C")
	r := rand.New(rand.NewPCG(1, 2))
	var docs []any
	for i := range 300 {
		docs = append(docs, wordDoc(i, r))
	}
	both := func(f func(c engine.Collection) error) {
		t.Helper()
		for _, c := range []engine.Collection{words, plain} {
			if err := f(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	both(func(c engine.Collection) error { return c.InsertMany(ctx, docs[:250]) })
	for _, d := range docs[250:] {
		both(func(c engine.Collection) error { return c.InsertOne(ctx, d) })
	}
	for i := 0; i < 300; i += 7 { // new words, the same words, other fields only
		d := wordDoc(i, r)
		if i%3 == 0 {
			d = append(slices.Clone(docs[i].(bson.D)[:1]), bson.E{Key: "k", Value: 100 + i})
			d = append(d, docs[i].(bson.D)[2:]...)
		}
		both(func(c engine.Collection) error {
			_, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: d[0].Value}}, d, false)
			return err
		})
	}
	both(func(c engine.Collection) error { _, err := c.DeleteMany(ctx, bson.D{{Key: "k", Value: 5}}); return err })
	both(func(c engine.Collection) error {
		_, err := c.DeleteOne(ctx, bson.D{{Key: "w", Value: "blood"}})
		return err
	})

	for _, f := range wordFilters() {
		for _, sort := range []bson.D{nil, {{Key: "k", Value: -1}, {Key: "_id", Value: 1}}} {
			got, want := findIDs(t, words, f, sort), findIDs(t, plain, f, sort)
			if sort == nil { // in no particular order
				slices.Sort(got)
				slices.Sort(want)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%v sorted %v: %v, want %v", f, sort, got, want)
			}
		}
		page := &engine.FindOptions{Sort: bson.D{{Key: "k", Value: 1}, {Key: "_id", Value: 1}}, Limit: 3}
		if got, want := pageIDs(t, words, f, page), pageIDs(t, plain, f, page); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%v, first page of 3: %v, want %v", f, got, want)
		}
		n, err := words.Count(ctx, f)
		m, err2 := plain.Count(ctx, f)
		if err != nil || err2 != nil || n != m {
			t.Errorf("count %v: %d (%v), want %d (%v)", f, n, err, m, err2)
		}
	}
	if n := len(findIDs(t, words, bson.D{{Key: "w", Value: "heart"}}, nil)); n < 10 {
		t.Errorf("only %d documents with the word heart: the test data is too thin", n)
	}
}

// TestWordPathsRefuse checks what a word path cannot answer or hold fails
// with engine.ErrUnsupported, and that a refused write stores nothing.
func TestWordPathsRefuse(t *testing.T) {
	ctx := context.Background()
	c := openTest(t, Options{WordPaths: []string{"w"}}).Database("db").Collection("C")
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "w", Value: bson.A{"heart"}}}); err != nil {
		t.Fatal(err)
	}
	op := func(o string, v any) bson.D { return bson.D{{Key: "w", Value: bson.D{{Key: o, Value: v}}}} }
	for _, f := range []bson.D{
		op("$gt", "a"), op("$lte", "z"),
		{{Key: "w", Value: bson.Regex{Pattern: "ear"}}},
		{{Key: "$or", Value: bson.A{bson.D{{Key: "k", Value: 1}}, op("$gte", "b")}}},
	} {
		if _, err := c.Find(ctx, f, nil); !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("find %v: %v, want ErrUnsupported", f, err)
		}
		if _, err := c.Count(ctx, f); !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("count %v: %v, want ErrUnsupported", f, err)
		}
	}
	if _, err := c.Find(ctx, bson.D{}, &engine.FindOptions{Sort: bson.D{{Key: "w", Value: 1}}}); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("sort by a word path: %v, want ErrUnsupported", err)
	}
	long := strings.Repeat("a", maxWordBytes+1)
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "b"}, {Key: "w", Value: bson.A{"rate", long}}}); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("insert a word of %d bytes: %v, want ErrUnsupported", len(long), err)
	}
	if _, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "w", Value: long}}, false); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("replace with a word of %d bytes: %v, want ErrUnsupported", len(long), err)
	}
	if got := fmt.Sprint(findIDs(t, c, bson.D{{Key: "w", Value: "heart"}}, nil), findIDs(t, c, bson.D{{Key: "w", Value: "rate"}}, nil)); got != "[a] []" {
		t.Errorf("after the refused writes: %s, want [a] []", got)
	}
	if _, err := Open(ctx, t.TempDir(), Options{WordPaths: []string{"_id"}}); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("_id as a word path: %v, want ErrUnsupported", err)
	}
}

// TestWordPathsChange checks that a file written with other word paths
// (or none, as files written before word tables) is indexed again when
// opened, once, and answers as before, both ways; and that dropping a
// database with word tables leaves it usable.
func TestWordPathsChange(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	var docs []any
	for i := range 120 {
		docs = append(docs, wordDoc(i, r))
	}
	e := openAt(t, dir, Options{})
	if err := e.Database("db").Collection("C").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// H holds no strings at the word paths: it is not read again.
	if err := e.Database("db").Collection("H").InsertOne(ctx, bson.D{{Key: "_id", Value: "h"}, {Key: "k", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, f := range wordFilters() {
		want[fmt.Sprint(f)] = fmt.Sprint(findIDs(t, e.Database("db").Collection("C"), f, bson.D{{Key: "k", Value: 1}, {Key: "_id", Value: 1}}))
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, paths := range [][]string{{"w"}, {"w"}, {"t", "w"}, nil} {
		core, logs := observer.New(zap.InfoLevel)
		e := openAt(t, dir, Options{WordPaths: paths, Logger: zap.New(core)})
		c := e.Database("db").Collection("C")
		for _, f := range wordFilters() {
			if got := fmt.Sprint(findIDs(t, c, f, bson.D{{Key: "k", Value: 1}, {Key: "_id", Value: 1}})); got != want[fmt.Sprint(f)] {
				t.Errorf("word paths %v, %v: %s, want %s", paths, f, got, want[fmt.Sprint(f)])
			}
		}
		h := e.Database("db").Collection("H")
		id := fmt.Sprint("h", i)
		if err := h.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "w", Value: bson.A{"heart"}}, {Key: "t", Value: "rate"}}); err != nil {
			t.Fatal(err)
		}
		for _, f := range []bson.D{{{Key: "w", Value: "heart"}, {Key: "t", Value: "rate"}}, {{Key: "w", Value: bson.Regex{Pattern: "^hea"}}}} {
			if got := findIDs(t, h, f, nil); !slices.Contains(got, id) || len(got) != i+1 {
				t.Errorf("word paths %v, %v in a collection without words before: %v", paths, f, got)
			}
		}
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n, want := logs.FilterMessageSnippet("word tables").Len(), []int{1, 0, 1, 1}[i]; n != want {
			t.Errorf("word paths %v: %d log lines about indexing words, want %d", paths, n, want)
		}
	}

	e = openAt(t, dir, Options{WordPaths: []string{"w"}})
	db := e.Database("db")
	if err := db.Drop(ctx); err != nil {
		t.Fatalf("drop a database with word tables: %v", err)
	}
	c := db.Collection("C")
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "again"}, {Key: "w", Value: bson.A{"heart"}}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(findIDs(t, c, bson.D{{Key: "w", Value: bson.Regex{Pattern: "^hea"}}}, nil)); got != "[again]" {
		t.Errorf("after the drop: %s, want [again]", got)
	}
}

// TestWordPlans checks that a condition on a word path is answered by the
// word table's index (FTS5's MATCH: "M" in its plan) and that no plan
// scans a table, whether it drives, is checked during a walk or counts.
func TestWordPlans(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{WordPaths: []string{"w"}})
	c := e.Database("bench").Collection("Words").(*collection)
	r := rand.New(rand.NewPCG(5, 6))
	var docs []any
	for i := range 2000 {
		docs = append(docs, wordDoc(i, r))
	}
	if err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	eq := func(v any) bson.D { return bson.D{{Key: "w", Value: v}} }
	prefix := func(p string) bson.D { return eq(bson.Regex{Pattern: "^" + p}) }
	page := &engine.FindOptions{Sort: bson.D{{Key: "k", Value: -1}, {Key: "_id", Value: 1}}, Limit: 10}
	for _, q := range []hotQuery{
		{name: "eq", filter: func(*rand.Rand) bson.D { return eq("heart") }, opts: &engine.FindOptions{}},
		{name: "eq-page", filter: func(*rand.Rand) bson.D { return eq("rate") }, opts: page},
		{name: "prefix-page", filter: func(*rand.Rand) bson.D { return prefix("hea") }, opts: page},
		{name: "and-k", filter: func(*rand.Rand) bson.D { return bson.D{{Key: "k", Value: 3}, {Key: "w", Value: "café"}} }, opts: page},
		{name: "or", filter: func(*rand.Rand) bson.D {
			return bson.D{{Key: "$or", Value: bson.A{eq("blood"), prefix("rate ")}}}
		}, opts: page},
		{name: "phrase", filter: func(*rand.Rand) bson.D {
			return bson.D{{Key: "$and", Value: bson.A{
				bson.D{{Key: "$or", Value: bson.A{eq("heart"), prefix("heart ")}}},
				bson.D{{Key: "$or", Value: bson.A{eq("rate"), prefix("rate ")}}},
			}}}
		}, opts: page},
		{name: "count", filter: func(*rand.Rand) bson.D { return prefix("blo") }, count: true},
		{name: "count-and", filter: func(*rand.Rand) bson.D { return bson.D{{Key: "w", Value: "heart"}, {Key: "k", Value: 2}} }, count: true},
	} {
		t.Run(q.name, func(t *testing.T) {
			q.coll = "Words"
			sql, args := planOf(t, c, q, q.filter(r))
			lines := explain(t, e, sql, args)
			words := 0
			for _, line := range lines {
				if strings.Contains(line, c.n.w[1:len(c.n.w)-1]) {
					words++
					if !strings.Contains(line, "VIRTUAL TABLE INDEX") || !strings.Contains(line[strings.Index(line, "INDEX"):], "M") {
						t.Errorf("the word table is not searched by MATCH: %q in the plan of\n%s", line, sql)
					}
					continue
				}
				if scansTable(line) {
					t.Errorf("full scan %q in the plan of\n%s", line, sql)
				}
			}
			if words == 0 {
				t.Errorf("no use of the word table in the plan of\n%s\n%s", sql, strings.Join(lines, "\n"))
			}
		})
	}
}
