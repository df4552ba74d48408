package sqlite

import (
	"context"
	"fhirstore/store/engine"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestHotPlans checks the plan of each of the store's hot queries on a
// small copy of the benchmark data: which way it is answered (driven by
// its most selective condition, or walking the sort path's index), and,
// from SQLite's EXPLAIN QUERY PLAN, that no table or index is scanned in
// full: every access is a search of an index.
func TestHotPlans(t *testing.T) {
	const n = 2000
	e := openTest(t, Options{})
	fill(t, e, n)
	// how: "walk" (the sort path's entries in order), "drive" (a
	// condition's matches, sorted), "count" (one statement counting).
	want := map[string]string{
		"1-FindByID":          "drive",
		"2-PatientPage":       "drive",
		"3-CodePage":          "drive", // 200 matches: under sortFloor, sorted (walked at the benchmark's sizes)
		"3-CodePageKeyset":    "walk",
		"3-CodeCount":         "count",
		"4-FamilyPrefix":      "", // either, by how many names the prefix matches
		"4-FamilyPrefixCount": "count",
		"5-CountNotDeleted":   "count",
		"6-HistoryInstance":   "drive",
		"6-HistorySystem":     "walk",
		"6-HistoryType":       "walk",
		"7-SearchAll":         "walk",
	}
	for _, q := range hotQueries(n) {
		t.Run(q.name, func(t *testing.T) {
			c := e.Database("bench").Collection(q.coll).(*collection)
			r := rand.New(rand.NewPCG(1, 1))
			sql, args := planOf(t, c, q, q.filter(r))
			how := "drive"
			switch {
			case q.count:
				how = "count"
			case strings.Contains(sql, c.n.x+" AS s CROSS JOIN"):
				how = "walk"
			}
			if w := want[q.name]; w != "" && how != w {
				t.Errorf("answered by %s, want %s:\n%s", how, want[q.name], sql)
			}
			for _, line := range explain(t, e, sql, args) {
				if scansTable(line) {
					t.Errorf("full scan %q in the plan of\n%s", line, sql)
				}
			}
		})
	}
}

// explain returns the detail lines of SQLite's plan for sql.
func explain(t *testing.T, e *Engine, sql string, args []any) []string {
	t.Helper()
	ctx := context.Background()
	f, err := e.file(ctx, "bench")
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.reader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer f.release(c)
	r, err := c.query(ctx, "EXPLAIN QUERY PLAN "+sql, args)
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	var lines []string
	for r.next() {
		lines = append(lines, r.text(3))
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return lines
}

// scansTable tells a plan line reading a whole table or index: "SCAN x"
// of anything but the engine's own intermediate results (subqueries t
// t, u and g, the candidates c of a page and their top and last).
func scansTable(line string) bool {
	name, ok := strings.CutPrefix(line, "SCAN ")
	if !ok {
		return false
	}
	name, _, _ = strings.Cut(name, " ")
	switch name {
	case "t", "u", "g", "c", "top", "last", "CONSTANT":
		return false
	}
	return true
}

// TestPlanChoices checks the planner's choices on shapes the hot queries
// do not cover.
func TestPlanChoices(t *testing.T) {
	const n = 2000
	e := openTest(t, Options{})
	fill(t, e, n)
	c := e.Database("bench").Collection("Observation").(*collection)
	h := e.Database("bench").Collection("history").(*collection)
	for _, tc := range []struct {
		name   string
		filter string // a hot query's
		want   []string
		reject []string
	}{
		// deleted: false is counted as all documents less the deleted
		{"3-CodeCount", "", []string{") - (SELECT count(*)"}, nil},
		{"5-CountNotDeleted", "", []string{"coalesce((SELECT n FROM"}, []string{"EXISTS"}},
		// no document is deleted: deleted: false is not checked
		{"2-PatientPage", "", nil, []string{"EXISTS", "DISTINCT", " ON c", "NOT IN"}},
		// an equality on text is a lookup of its entry's key (f, v, rid);
		// the sort value (a date) is read from the row keys
		{"6-HistoryInstance", "", []string{`EXISTS (SELECT 1 FROM "x_history" WHERE rid = g.rid AND f = `, "fs_sort(d.k, "}, []string{"fs_row", "INDEXED BY"}},
		// the keyset's bound on the walked path starts the walk
		{"3-CodePageKeyset", "", []string{"s.v <= ?"}, []string{"x'F0' AND s.v"}},
	} {
		for _, q := range hotQueries(n) {
			if q.name != tc.name {
				continue
			}
			coll := c
			if q.coll == "history" {
				coll = h
			}
			sql, _ := planOf(t, coll, q, q.filter(rand.New(rand.NewPCG(1, 1))))
			for _, s := range tc.want {
				if !strings.Contains(sql, s) {
					t.Errorf("%s: %q not in\n%s", tc.name, s, sql)
				}
			}
			for _, s := range tc.reject {
				if strings.Contains(sql, s) {
					t.Errorf("%s: %q in\n%s", tc.name, s, sql)
				}
			}
		}
	}
	// A few deleted documents: the others are those not among them.
	r := rand.New(rand.NewPCG(9, 9))
	for i := range 3 {
		d := observation(n+i, r)
		for j := range d {
			if d[j].Key == "deleted" {
				d[j].Value = true
			}
		}
		if err := c.InsertOne(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	q := hotQueries(n)[1]
	sql, _ := planOf(t, c, q, q.filter(rand.New(rand.NewPCG(1, 1))))
	if !strings.Contains(sql, "NOT IN (SELECT rid FROM") {
		t.Errorf("%s with deleted documents:\n%s", q.name, sql)
	}
}

// TestWalkOfValuesOnlyHasOneStep sorts documents of which some lack the
// sort path: the documents without it are read by a plan of their own,
// unless the filter holds only for documents with a value there (the
// store's "at least the least value" condition), when the walk is all.
func TestWalkOfValuesOnlyHasOneStep(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("walk").Collection("Observation").(*collection)
	var docs []any
	for i := range 400 {
		d := bson.D{{Key: "_id", Value: fmt.Sprintf("o%03d", i)}, {Key: "code", Value: "c"}}
		if i%2 == 0 {
			d = append(d, bson.E{Key: "date", Value: float64(i)})
		}
		docs = append(docs, d)
	}
	if err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	order := bson.D{{Key: "date", Value: -1}, {Key: "_id", Value: 1}}
	for _, tc := range []struct {
		name   string
		filter bson.D
		steps  int
		first  string
		n      int
	}{
		{"every document", bson.D{}, 2, "o398", 400},
		{"documents with a date", bson.D{{Key: "date", Value: bson.D{{Key: "$gte", Value: -math.MaxFloat64}}}}, 1, "o398", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := compileFilter(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			keys, err := parseSort(order)
			if err != nil {
				t.Fatal(err)
			}
			p, release, err := c.reader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			steps, err := p.find(ctx, x, keys, 5)
			release()
			if err != nil || len(steps) != tc.steps {
				t.Fatalf("%d steps (%v), want %d", len(steps), err, tc.steps)
			}
			cur, err := c.Find(ctx, tc.filter, &engine.FindOptions{Sort: order})
			if err != nil {
				t.Fatal(err)
			}
			var got []bson.M
			if err := engine.All(ctx, cur, &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.n || got[0]["_id"] != tc.first {
				t.Fatalf("%d documents, the first %v; want %d, the first %s", len(got), got[0]["_id"], tc.n, tc.first)
			}
		})
	}
}
