package sqlite

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestDocEntries(t *testing.T) {
	at := time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC)
	doc := bson.D{
		{Key: "_id", Value: "x"},
		{Key: "resource", Value: bson.D{{Key: "id", Value: "x"}}},
		{Key: "numText", Value: bson.A{"1"}},
		{Key: "s", Value: "text"},
		{Key: "n", Value: int32(3)},
		{Key: "l", Value: int64(3)}, // equal to n's value: both are 3.0
		{Key: "f", Value: 2.5},
		{Key: "nan", Value: math.NaN()},
		{Key: "b", Value: true},
		{Key: "t", Value: at},
		{Key: "nul", Value: nil},
		{Key: "empty", Value: bson.A{}},
		{Key: "none", Value: bson.D{}},
		{Key: "bin", Value: bson.Binary{Data: []byte{1}}},
		{Key: "a", Value: bson.A{"x", "y", "x", int32(1), 1.0, bson.A{"nested"}, bson.D{{Key: "k", Value: "v"}}}},
		{Key: "idx", Value: bson.D{{Key: "code", Value: bson.A{"c"}}, {Key: "date", Value: bson.A{bson.D{{Key: "lo", Value: at}}}}}},
	}
	raw, _ := bson.Marshal(doc)
	got, err := docEntries(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := []entry{
		{"a", 1.0}, {"a", "x"}, {"a", "y"}, {"a", markOther}, {"a.k", "v"},
		{"b", boolValue(true)},
		{"bin", markOther},
		{"empty", markEmpty},
		{"f", 2.5},
		{"idx.code", "c"}, {"idx.date.lo", timeValue(at.UnixMilli())},
		{"l", 3.0}, {"n", 3.0},
		{"nan", markOther},
		{"none", markEmpty},
		{"nul", markNull},
		{"s", "text"},
		{"t", timeValue(at.UnixMilli())},
	}
	if !slices.EqualFunc(got, want, func(a, b entry) bool { return a.f == b.f && sameValue(a.v, b.v) }) {
		t.Errorf("entries:\n got %v\nwant %v", got, want)
	}
	d := pathDeltas{}
	d.add(got, 1)
	for f, w := range map[string]pathStat{"a": {1, 3}, "a.k": {1, 1}, "bin": {}, "s": {1, 1}, docsPath: {1, 1}} {
		var ps pathStat
		if p := d[f]; p != nil {
			ps = *p
		}
		if ps != w {
			t.Errorf("counts of %q: %+v, want %+v", f, ps, w)
		}
	}
}

// TestValueOrder checks that the encoded values of every kind sort in
// SQLite as compareValues says and as MongoDB sorts them: numbers,
// strings, booleans, times, then the markers.
func TestValueOrder(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	f, err := e.file(ctx, "db")
	if err != nil {
		t.Fatal(err)
	}
	w := f.w
	if err := w.run(ctx, "CREATE TABLE o (v ANY) STRICT"); err != nil {
		t.Fatal(err)
	}
	vals := []any{
		math.Inf(-1), -1.5, 0.0, 2.0, 1e300, math.Inf(1),
		"", "A", "a", "a\x00", "ab", "é",
		boolValue(false), boolValue(true),
		timeValue(-1000), timeValue(0), timeValue(1), timeValue(time.Now().UnixMilli()),
		markNull, markEmpty, markOther,
	}
	for _, v := range vals {
		if _, err := w.exec(ctx, "INSERT INTO o VALUES (?)", v); err != nil {
			t.Fatal(err)
		}
	}
	r, err := w.query(ctx, "SELECT v FROM o ORDER BY v", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	for r.next() {
		got = append(got, r.value(0))
	}
	if !slices.EqualFunc(got, vals, sameValue) {
		t.Errorf("SQLite's order:\n%v\nwant\n%v", got, vals)
	}
	for i := range vals {
		for j := range vals {
			if c := compareValues(vals[i], vals[j]); (c < 0) != (i < j) || (c == 0) != (i == j) {
				t.Errorf("compareValues(%v, %v) = %d", vals[i], vals[j], c)
			}
		}
	}
}

func TestLiteral(t *testing.T) {
	for _, tc := range []struct {
		pattern, want string
		ok            bool
	}{
		{"abc", "abc", true},
		{`a\.b\*c\\d\$`, `a.b*c\d$`, true},
		{`\(\)\[\]\{\}\|\?\+\^`, "()[]{}|?+^", true},
		{`a\x00b`, "a\x00b", true},
		{"", "", true},
		{"a.b", "", false},
		{"a*", "", false},
		{`\d`, "", false},
		{`a$`, "", false},
		{`\x01`, "", false},
	} {
		got, ok := literal(tc.pattern)
		if ok != tc.ok || got != tc.want {
			t.Errorf("literal(%q) = %q %v, want %q %v", tc.pattern, got, ok, tc.want, tc.ok)
		}
	}
	for s, want := range map[string]string{"abc": "abd", "a\xff": "b", "\xff\xff": "", "": ""} {
		if got := successor(s); got != want {
			t.Errorf("successor(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestPathCounts checks the per-path counts against the documents after
// inserts, replacements and deletes.
func TestPathCounts(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C").(*collection)
	for i := range 50 {
		d := bson.D{{Key: "_id", Value: fmt.Sprint(i)}, {Key: "k", Value: i % 3}}
		if i%2 == 0 {
			d = append(d, bson.E{Key: "tags", Value: bson.A{"x", "y"}})
		}
		if err := c.InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "0"}}, bson.D{{Key: "_id", Value: "0"}, {Key: "tags", Value: bson.A{"z"}}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteMany(ctx, bson.D{{Key: "k", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	f, _ := e.file(ctx, "db")
	want := map[string]pathStat{}
	docs, err := readDocs(ctx, f.w, c.n, -1, e.codec)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		entries, _ := docEntries(doc.doc)
		d := pathDeltas{}
		d.add(entries, 1)
		for p, ps := range d {
			w := want[p]
			want[p] = pathStat{n: w.n + ps.n, e: w.e + ps.e}
		}
	}
	r, err := f.w.query(ctx, "SELECT f, n, e FROM "+pathsTable+" WHERE c = ? AND (n != 0 OR e != 0)", []any{"C"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pathStat{}
	for r.next() {
		got[r.text(0)] = pathStat{n: r.int64(1), e: r.int64(2)}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("path counts %v, want %v", got, want)
	}
}

func TestCountCache(t *testing.T) {
	c := newCountCache()
	c.put("exact", cachedCount{n: 40, limit: 100, docs: 1000})
	c.put("many", cachedCount{n: 100, limit: 100, docs: 1000})
	for _, tc := range []struct {
		key         string
		limit, docs int64
		n           int64
		ok          bool
	}{
		{"exact", 100, 1000, 40, true},
		{"exact", 41, 1050, 40, true},
		{"exact", 40, 1000, unbounded, true}, // 40 is not below the limit
		{"exact", 100, 1200, 0, false},       // the collection grew
		{"many", 50, 1000, unbounded, true},  // at least 100: at least 50
		{"many", 200, 1000, 0, false},        // at least 100, maybe below 200
		{"none", 100, 1000, 0, false},
	} {
		n, ok := c.get(tc.key, tc.limit, tc.docs)
		if n != tc.n || ok != tc.ok {
			t.Errorf("get(%s, %d, %d) = %d %v, want %d %v", tc.key, tc.limit, tc.docs, n, ok, tc.n, tc.ok)
		}
	}
}
