package enginetest

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// fixture is the documents of the filter, sort and projection tables.
func fixture() []bson.D {
	doc := func(es ...bson.E) bson.D { return bson.D(es) }
	e := func(k string, v any) bson.E { return bson.E{Key: k, Value: v} }
	rng := func(lo, hi float64) bson.D { return bson.D{{Key: "lo", Value: lo}, {Key: "hi", Value: hi}} }
	return []bson.D{
		doc(e("_id", "a"), e("s", "apple"), e("n", int32(1)), e("f", 1.5), e("b", true), e("t", date(2020, 1, 1)),
			e("tags", bson.A{"red", "green"}), e("r", bson.A{rng(1, 2), rng(10, 20)}), e("sub", doc(e("x", "one"), e("y", int64(5))))),
		doc(e("_id", "b"), e("s", "Apple"), e("n", int64(2)), e("b", false), e("t", date(2021, 6, 1)),
			e("tags", bson.A{"green"}), e("sub", doc(e("x", "two")))),
		doc(e("_id", "c"), e("s", "banana"), e("n", 3.0), e("b", false), e("tags", bson.A{}), e("nul", nil)),
		doc(e("_id", "d"), e("s", "a.b*c"), e("n", int32(-4)), e("b", true), e("t", date(2020, 7, 1)),
			e("r", bson.A{rng(5, 6)}), e("sub", bson.D{})),
		doc(e("_id", "e"), e("s", "ünïcode"), e("n", "3"), e("tags", bson.A{"blue", "red"})),
		doc(e("_id", "f"), e("s", "nul\x00byte"), e("b", true)),
		doc(e("_id", "g")),
	}
}

type filterCase struct {
	name   string
	filter bson.D
	want   []string // _ids, sorted
}

// filterCases are the grammar's filters on fixture, with their matches.
func filterCases() []filterCase {
	f := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	op := func(k, o string, v any) bson.D { return bson.D{{Key: k, Value: bson.D{{Key: o, Value: v}}}} }
	and := func(ds ...bson.D) bson.D { return bson.D{{Key: "$and", Value: toA(ds)}} }
	or := func(ds ...bson.D) bson.D { return bson.D{{Key: "$or", Value: toA(ds)}} }
	prefix := func(s string) bson.Regex { return bson.Regex{Pattern: "^" + literal(s)} }
	substr := func(s string) bson.Regex { return bson.Regex{Pattern: literal(s)} }
	all := []string{"a", "b", "c", "d", "e", "f", "g"}
	return []filterCase{
		{"empty", bson.D{}, all},
		{"string", f("s", "apple"), []string{"a"}},
		{"string case", f("s", "Apple"), []string{"b"}},
		{"string NUL", f("s", "nul\x00byte"), []string{"f"}},
		{"int32 as int", f("n", 1), []string{"a"}},
		{"int32 as double", f("n", 1.0), []string{"a"}},
		{"int64", f("n", int64(2)), []string{"b"}},
		{"double as int", f("n", 3), []string{"c"}},
		{"number is not string", f("n", "3"), []string{"e"}},
		{"double", f("f", 1.5), []string{"a"}},
		{"$eq", op("s", "$eq", "banana"), []string{"c"}},
		{"$gt number", op("n", "$gt", 1), []string{"b", "c"}},
		{"$gte $lt", bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: -4}, {Key: "$lt", Value: 2}}}}, []string{"a", "d"}},
		{"$lte", op("n", "$lte", 0), []string{"d"}},
		{"$gt string", op("s", "$gt", "a"), []string{"a", "c", "d", "e", "f"}},
		{"$lt string", op("s", "$lt", "b"), []string{"a", "b", "d"}},
		{"$lte string", op("s", "$lte", "apple"), []string{"a", "b", "d"}},
		{"bool true", f("b", true), []string{"a", "d", "f"}},
		{"bool false", f("b", false), []string{"b", "c"}},
		{"$ne matches missing", op("b", "$ne", true), []string{"b", "c", "e", "g"}},
		{"$gt bool", op("b", "$gt", false), []string{"a", "d", "f"}},
		{"time", f("t", date(2020, 1, 1)), []string{"a"}},
		{"time DateTime", f("t", bson.NewDateTimeFromTime(date(2021, 6, 1))), []string{"b"}},
		{"$gt time", op("t", "$gt", date(2020, 6, 1)), []string{"b", "d"}},
		{"$lte time", op("t", "$lte", date(2020, 7, 1)), []string{"a", "d"}},
		{"$exists false", op("t", "$exists", false), []string{"c", "e", "f", "g"}},
		{"$exists true", op("t", "$exists", true), []string{"a", "b", "d"}},
		{"array element", f("tags", "red"), []string{"a", "e"}},
		{"$in array", op("tags", "$in", bson.A{"blue", "green"}), []string{"a", "b", "e"}},
		{"$in []string", op("s", "$in", []string{"apple", "banana", "kiwi"}), []string{"a", "c"}},
		{"$in numbers", op("n", "$in", bson.A{1, 3.0, int64(7)}), []string{"a", "c"}},
		{"$in empty", op("s", "$in", bson.A{}), []string{}},
		{"$nin array", op("tags", "$nin", bson.A{"red"}), []string{"b", "c", "d", "f", "g"}},
		{"$nin empty", op("s", "$nin", bson.A{}), all},
		{"$ne array", op("tags", "$ne", "green"), []string{"c", "d", "e", "f", "g"}},
		{"$exists empty array", op("tags", "$exists", true), []string{"a", "b", "c", "e"}},
		{"array of documents", op("r.lo", "$gte", 5), []string{"a", "d"}},
		{"elements apart", and(op("r.lo", "$lte", 1), op("r.hi", "$gte", 20)), []string{"a"}},
		{"operators apart", bson.D{{Key: "r.lo", Value: bson.D{{Key: "$gt", Value: 2}, {Key: "$lt", Value: 10}}}}, []string{"a", "d"}},
		{"subdocument", f("sub.x", "one"), []string{"a"}},
		{"$exists document", op("sub", "$exists", true), []string{"a", "b", "d"}},
		{"$exists under", op("sub.y", "$exists", true), []string{"a"}},
		{"$exists false under", op("sub.x", "$exists", false), []string{"c", "d", "e", "f", "g"}},
		{"$exists prefix is not parent", op("su", "$exists", true), []string{}},
		{"null", f("nul", nil), all},
		{"null exists", op("nul", "$exists", true), []string{"c"}},
		{"$ne null", op("nul", "$ne", nil), []string{}},
		{"missing", f("s", nil), []string{"g"}},
		{"$in null", op("s", "$in", bson.A{nil, "apple"}), []string{"a", "g"}},
		{"$nin null", op("s", "$nin", bson.A{nil, "apple"}), []string{"b", "c", "d", "e", "f"}},
		{"$gt null", op("s", "$gt", nil), []string{}},
		{"$lte null", op("s", "$lte", nil), []string{"g"}},
		{"prefix", f("s", prefix("a")), []string{"a", "d"}},
		{"prefix with metacharacters", f("s", prefix("a.b*")), []string{"d"}},
		{"prefix is not a pattern", f("s", prefix("a.")), []string{"d"}},
		{"prefix case", f("s", prefix("A")), []string{"b"}},
		{"prefix unicode", f("s", prefix("ünï")), []string{"e"}},
		{"prefix NUL", f("s", prefix("nul\x00")), []string{"f"}},
		{"empty prefix", f("s", prefix("")), []string{"a", "b", "c", "d", "e", "f"}},
		{"substring", f("s", substr("an")), []string{"c"}},
		{"substring metacharacters", f("s", substr("*c")), []string{"d"}},
		{"substring of elements", f("tags", substr("ee")), []string{"a", "b"}},
		{"$not prefix", op("s", "$not", prefix("a")), []string{"b", "c", "e", "f", "g"}},
		{"$not prefix of elements", op("tags", "$not", prefix("gr")), []string{"c", "d", "e", "f", "g"}},
		{"$not substring", op("s", "$not", substr("an")), []string{"a", "b", "d", "e", "f", "g"}},
		{"$not prefix and $nin", and(op("tags", "$not", prefix("bl")), op("tags", "$nin", bson.A{"red"})), []string{"b", "c", "d", "f", "g"}},
		{"regex skips numbers", f("n", substr("3")), []string{"e"}},
		{"prefix of elements", f("tags", prefix("gr")), []string{"a", "b"}},
		{"_id", f("_id", "c"), []string{"c"}},
		{"_id $in", op("_id", "$in", bson.A{"a", "c", "zz"}), []string{"a", "c"}},
		{"_id $gt", op("_id", "$gt", "d"), []string{"e", "f", "g"}},
		{"_id $lte", op("_id", "$lte", "b"), []string{"a", "b"}},
		{"_id $ne", op("_id", "$ne", "a"), []string{"b", "c", "d", "e", "f", "g"}},
		{"_id $nin", op("_id", "$nin", bson.A{"a", "b"}), []string{"c", "d", "e", "f", "g"}},
		{"_id prefix", f("_id", prefix("c")), []string{"c"}},
		{"_id number", f("_id", 5), []string{}},
		{"_id $exists", op("_id", "$exists", true), all},
		{"$or", or(f("s", "apple"), f("n", 2)), []string{"a", "b"}},
		{"$and $or", and(f("b", true), or(f("tags", "red"), f("s", prefix("a.")))), []string{"a", "d"}},
		{"$or _id", or(f("_id", "a"), f("b", false)), []string{"a", "b", "c"}},
		{"$or $exists", or(op("n", "$exists", false), op("n", "$lt", 0)), []string{"d", "f", "g"}},
		{"$or nested $and", or(and(f("b", true), op("n", "$gt", 0)), and(f("b", false), op("n", "$gt", 2))), []string{"a", "c"}},
		{"$and nested", and(and(f("b", true)), and(op("t", "$exists", true), f("sub.x", "one"))), []string{"a"}},
		{"implicit and", bson.D{{Key: "b", Value: true}, {Key: "t", Value: bson.D{{Key: "$exists", Value: true}}}}, []string{"a", "d"}},
		{"nothing", and(f("s", "apple"), f("s", "banana")), []string{}},
		{"$nin and $in", bson.D{{Key: "tags", Value: bson.D{{Key: "$in", Value: bson.A{"red"}}, {Key: "$nin", Value: bson.A{"blue"}}}}}, []string{"a"}},
	}
}

func toA(ds []bson.D) bson.A {
	a := make(bson.A, len(ds))
	for i, d := range ds {
		a[i] = d
	}
	return a
}

// literal is how the store writes a literal regular expression: its
// metacharacters quoted, NUL as \x00.
func literal(s string) string {
	q := regexp.QuoteMeta(s)
	out := make([]byte, 0, len(q))
	for i := 0; i < len(q); i++ {
		if q[i] == 0 {
			out = append(out, `\x00`...)
			continue
		}
		out = append(out, q[i])
	}
	return string(out)
}

func testFilters(t *testing.T, db engine.Database) {
	c := db.Collection("fixture")
	insert(t, c, fixture()...)
	for _, tc := range filterCases() {
		if got := find(t, c, tc.filter, byID); !equal(got, tc.want) {
			t.Errorf("%s: %v finds %v, want %v", tc.name, tc.filter, got, tc.want)
		}
		var docs []bson.D
		for _, d := range fixture() {
			if match(d, tc.filter) {
				docs = append(docs, d)
			}
		}
		ref := []string{}
		for _, d := range docs {
			ref = append(ref, idOf(d))
		}
		if !equal(ref, tc.want) {
			t.Errorf("%s: the reference evaluator finds %v, the table says %v", tc.name, ref, tc.want)
		}
	}
}

func testSorts(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("fixture")
	insert(t, c, fixture()...)
	s := func(kv ...any) bson.D {
		var d bson.D
		for i := 0; i < len(kv); i += 2 {
			d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
		}
		return d
	}
	for _, tc := range []struct {
		name        string
		filter      bson.D
		sort        bson.D
		skip, limit int64
		want        []string
	}{
		{"_id", nil, s("_id", 1), 0, 0, []string{"a", "b", "c", "d", "e", "f", "g"}},
		{"_id descending", nil, s("_id", -1), 0, 0, []string{"g", "f", "e", "d", "c", "b", "a"}},
		{"strings, missing first", nil, s("s", 1), 0, 0, []string{"g", "b", "d", "a", "c", "f", "e"}},
		{"strings descending, missing last", nil, s("s", -1), 0, 0, []string{"e", "f", "c", "a", "d", "b", "g"}},
		{"times, missing last", nil, s("t", -1, "_id", 1), 0, 0, []string{"b", "d", "a", "c", "e", "f", "g"}},
		{"times ascending, missing first", nil, s("t", 1, "_id", -1), 0, 0, []string{"g", "f", "e", "c", "a", "d", "b"}},
		{"bools", nil, s("b", -1, "_id", -1), 0, 0, []string{"f", "d", "a", "c", "b", "g", "e"}},
		{"skip limit", nil, s("b", -1, "_id", -1), 1, 3, []string{"d", "a", "c"}},
		{"skip past the values", nil, s("t", -1, "_id", 1), 4, 2, []string{"e", "f"}},
		{"limit", nil, s("_id", 1), 0, 2, []string{"a", "b"}},
		{"skip all", nil, s("_id", 1), 10, 2, []string{}},
		{"subdocument path", nil, s("sub.x", 1, "_id", 1), 0, 0, []string{"c", "d", "e", "f", "g", "a", "b"}},
		{"filtered", bson.D{{Key: "b", Value: true}}, s("t", 1, "_id", 1), 0, 0, []string{"f", "a", "d"}},
		{"filtered limit", bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: -10}}}}, s("n", -1, "_id", 1), 0, 2, []string{"c", "b"}},
		{"numbers of several types", bson.D{{Key: "n", Value: bson.D{{Key: "$gte", Value: -10}}}}, s("n", 1), 0, 0, []string{"d", "a", "b", "c"}},
		{"filtered on the sort path", bson.D{{Key: "t", Value: bson.D{{Key: "$lt", Value: date(2021, 1, 1)}}}}, s("t", -1), 0, 1, []string{"d"}},
	} {
		got := find(t, c, tc.filter, &engine.FindOptions{Sort: tc.sort, Skip: tc.skip, Limit: tc.limit})
		if !equal(got, tc.want) {
			t.Errorf("%s: sort %v skip %d limit %d: %v, want %v", tc.name, tc.sort, tc.skip, tc.limit, got, tc.want)
		}
		if ref := query(fixture(), tc.filter, tc.sort, tc.skip, tc.limit); !equal(ref, tc.want) {
			t.Errorf("%s: the reference evaluator sorts %v, the table says %v", tc.name, ref, tc.want)
		}
	}
	raw, err := c.FindOne(ctx, bson.D{{Key: "b", Value: false}}, &engine.FindOptions{Sort: s("_id", -1)})
	if id, _ := raw.Lookup("_id").StringValueOK(); err != nil || id != "c" {
		t.Errorf("find one sorted: %s %v, want c", id, err)
	}
}

func testProjections(t *testing.T, db engine.Database) {
	ctx := context.Background()
	c := db.Collection("fixture")
	insert(t, c, fixture()...)
	for _, tc := range []struct {
		name       string
		projection bson.D
		want       []string // top-level keys of document a
	}{
		{"include", bson.D{{Key: "s", Value: 1}, {Key: "n", Value: 1}}, []string{"_id", "n", "s"}},
		{"include true", bson.D{{Key: "b", Value: true}}, []string{"_id", "b"}},
		{"include _id", bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: 1}}, []string{"_id", "s"}},
		{"exclude", bson.D{{Key: "tags", Value: 0}, {Key: "r", Value: 0}, {Key: "sub", Value: 0}}, []string{"_id", "b", "f", "n", "s", "t"}},
		{"include dotted", bson.D{{Key: "sub.x", Value: 1}}, []string{"_id", "sub"}},
		{"missing field", bson.D{{Key: "zz", Value: 1}}, []string{"_id"}},
	} {
		raw, err := c.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}, &engine.FindOptions{Projection: tc.projection})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		elems, _ := raw.Elements()
		var keys []string
		for _, e := range elems {
			keys = append(keys, e.Key())
		}
		slices.Sort(keys)
		if !equal(keys, tc.want) {
			t.Errorf("%s: %v keeps %v, want %v", tc.name, tc.projection, keys, tc.want)
		}
		if slices.Contains(tc.want, "sub") {
			if x, _ := raw.Lookup("sub", "x").StringValueOK(); x != "one" {
				t.Errorf("%s: sub.x is %q", tc.name, x)
			}
		}
		if slices.Contains(tc.want, "n") {
			if n, _ := raw.Lookup("n").Int32OK(); n != 1 {
				t.Errorf("%s: n is %v", tc.name, raw.Lookup("n"))
			}
		}
	}
	got := find(t, c, bson.D{{Key: "b", Value: true}}, &engine.FindOptions{Projection: bson.D{{Key: "s", Value: 0}}, Sort: bson.D{{Key: "_id", Value: 1}}})
	if !equal(got, []string{"a", "d", "f"}) {
		t.Errorf("find with a projection: %v", got)
	}
}
