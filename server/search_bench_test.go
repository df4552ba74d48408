package server_test

// Search benchmarks: each query through the real server over HTTP, next to
// the database engine running the same filter, sort and limit on the same
// collection, so the figures separate the database's work from the
// server's. Figures and commands: docs/performance.md, section "Search".

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store"
	"fhirstore/store/document"
	"fhirstore/store/engine"
	"fhirstore/store/engine/mongodb"
)

// envBenchLarge switches the search benchmarks from 1,000 to 10,000 Patients.
const envBenchLarge = "FHIRSTORE_BENCH_LARGE"

// searchBenchSize is the number of Patients the search benchmarks store.
func searchBenchSize() int {
	if os.Getenv(envBenchLarge) == "1" {
		return 10_000
	}
	return 1_000
}

// Seed data: family names are one of 100 (syllable pairs), so a prefix that
// picks one family matches 1% of the Patients; no given name shares it.
var (
	benchFamilyHeads = []string{"Bar", "Cor", "Dal", "Fen", "Gar", "Hol", "Kin", "Lam", "Mor", "Nas"}
	benchFamilyTails = []string{"ton", "ley", "wick", "field", "berg", "son", "man", "ford", "well", "by"}
	benchGivenNames  = []string{"Anna", "Ben", "Clara", "David", "Emma", "Felix", "Grace", "Henry", "Iris", "Jonas",
		"Karen", "Leo", "Maria", "Noah", "Olga", "Paul", "Rosa", "Sam", "Tara", "Victor"}
	benchGenders    = []string{"female", "male", "other", "unknown"}
	benchBirthFirst = time.Date(1930, 1, 1, 0, 0, 0, 0, time.UTC)
	benchBirthDays  = int(time.Date(2020, 12, 31, 0, 0, 0, 0, time.UTC).Sub(benchBirthFirst)/(24*time.Hour)) + 1
)

// benchSearchPatient is the i-th seed Patient (about 650 bytes) and its birth date.
func benchSearchPatient(i int) (string, time.Time) {
	f := (i * 37) % 100 // a permutation of 0..99 over every 100 consecutive i
	family := benchFamilyHeads[f%10] + benchFamilyTails[f/10]
	birth := benchBirthFirst.AddDate(0, 0, (i*7919)%benchBirthDays) // 7919 is prime to the day count: spread evenly
	body := fmt.Sprintf(`{"resourceType":"Patient","active":true,`+
		`"identifier":[{"system":"urn:mrn","value":"MRN-%d"}],`+
		`"name":[{"use":"official","family":%q,"given":[%q,%q]}],`+
		`"telecom":[{"system":"phone","value":"(03) 5555 %04d","use":"home"}],`+
		`"gender":%q,"birthDate":%q,`+
		`"address":[{"use":"home","line":["%d Erewhon St"],"city":"PleasantVille","state":"Vic","postalCode":"3999"}]}`,
		i, family, benchGivenNames[i%len(benchGivenNames)], benchGivenNames[(i/len(benchGivenNames)+3)%len(benchGivenNames)],
		i%10000, benchGenders[i%len(benchGenders)], birth.Format(time.DateOnly), i)
	return body, birth
}

// searchBenchCase is one query and what it must find.
type searchBenchCase struct {
	name   string
	params url.Values
	total  int // matches across pages
	page   int // entries on the first page
}

// seedSearchPatients stores n seed Patients directly through the store
// (several writers at once: the embedded engine spends most of a write in
// this process) and returns the queries with their expected results. The
// first Patient is written alone: it creates the collection and its indexes.
func seedSearchPatients(b *testing.B, e *env, n int) []searchBenchCase {
	b.Helper()
	create := func(i int) error {
		body, _ := benchSearchPatient(i)
		if _, err := e.store.Create(context.Background(), e.tenant, "Patient", []byte(body), store.WriteOptions{}); err != nil {
			return fmt.Errorf("seed Patient %d: %w", i, err)
		}
		return nil
	}
	if err := create(0); err != nil {
		b.Fatal(err)
	}
	seedParallel(b, 1, n, create)
	since := time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)
	recent := 0
	for i := 0; i < n; i++ {
		if _, birth := benchSearchPatient(i); !birth.Before(since) {
			recent++
		}
	}
	page := func(total, count int) int { return min(total, count) }
	return []searchBenchCase{
		{"name", url.Values{"name": {"Bart"}}, n / 100, page(n/100, search.DefaultCount)},
		{"birthdate", url.Values{"birthdate": {"ge2015-01-01"}}, recent, page(recent, search.DefaultCount)},
		{"identifier", url.Values{"identifier": {"urn:mrn|MRN-" + strconv.Itoa(n/2+7)}}, 1, 1},
		{"sort", url.Values{"_sort": {"-birthdate"}, "_count": {"100"}}, n, page(n, 100)},
	}
}

// rawSearchRow mirrors the row the store decodes for each match, so the raw
// benchmarks decode the same documents into the same shape.
type rawSearchRow struct {
	ID          string             `bson:"_id"`
	VID         int                `bson:"vid"`
	LastUpdated time.Time          `bson:"lastUpdated"`
	Deleted     bool               `bson:"deleted"`
	Method      string             `bson:"method,omitempty"`
	Resource    bson.Raw           `bson:"resource,omitempty"`
	NumText     []document.NumText `bson:"numText,omitempty"`
	Idx         bson.Raw           `bson:"idx,omitempty"`
	Sort        bson.Raw           `bson:"sort,omitempty"`
}

// rawSearch is the database work of a first search page as store.Search
// does it: the filter over current rows, the order (the _sort keys, then
// lastUpdated and _id) and the limit (one more than the page, to know
// whether there is a next page). Conditions the filter cannot express
// exactly come with a post-filter on idx; then the store counts by reading
// idx of every candidate and reads the page in batches of at least 50,
// and so does rawSearch.
type rawSearch struct {
	filter bson.D
	order  bson.D
	want   int
	post   func(idx bson.Raw) bool
}

func newRawSearch(b *testing.B, params url.Values) rawSearch {
	b.Helper()
	q, err := db.Registry().Parse("Patient", params, search.ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(q.Has) > 0 || len(q.Chains) > 0 || len(q.Includes) > 0 || len(q.Revincludes) > 0 {
		b.Fatalf("%v: the raw query does not reproduce _has, chains or includes", params)
	}
	order := bson.D{}
	for _, k := range q.Sort {
		if k.Descending {
			order = append(order, bson.E{Key: "sort." + k.Param + ".d", Value: -1})
		} else {
			order = append(order, bson.E{Key: "sort." + k.Param + ".a", Value: 1})
		}
	}
	return rawSearch{
		filter: bson.D{{Key: "$and", Value: bson.A{q.Filter(), bson.D{{Key: "deleted", Value: false}}}}},
		order:  append(order, bson.E{Key: "lastUpdated", Value: 1}, bson.E{Key: "_id", Value: 1}),
		want:   q.Count + 1,
		post:   q.PostFilter,
	}
}

// rows reads the first page plus one row.
func (r rawSearch) rows(ctx context.Context, coll engine.Collection) ([]*rawSearchRow, error) {
	var kept []*rawSearchRow
	for skip := int64(0); ; {
		limit := int64(r.want - len(kept))
		if r.post != nil {
			limit = max(limit, 50)
		}
		cur, err := coll.Find(ctx, r.filter, &engine.FindOptions{Sort: r.order, Skip: skip, Limit: limit})
		if err != nil {
			return nil, err
		}
		var batch []*rawSearchRow
		if err := engine.All(ctx, cur, &batch); err != nil {
			return nil, err
		}
		for _, d := range batch {
			if r.post == nil || r.post(d.Idx) {
				kept = append(kept, d)
			}
			if len(kept) == r.want {
				return kept, nil
			}
		}
		if int64(len(batch)) < limit {
			return kept, nil
		}
		skip += int64(len(batch))
	}
}

// count counts the matches: CountDocuments, or with a post-filter the
// candidates' idx read and checked.
func (r rawSearch) count(ctx context.Context, coll engine.Collection) (int64, error) {
	if r.post == nil {
		return coll.Count(ctx, r.filter)
	}
	cur, err := coll.Find(ctx, r.filter, &engine.FindOptions{Projection: bson.D{{Key: "idx", Value: 1}}})
	if err != nil {
		return 0, err
	}
	defer cur.Close(ctx)
	var n int64
	for cur.Next(ctx) {
		if idx, _ := cur.Current().Lookup("idx").DocumentOK(); r.post(idx) {
			n++
		}
	}
	return n, cur.Err()
}

// BenchmarkSearch runs each query three ways, and the first against the
// third in one loop, on one tenant of searchBenchSize() Patients:
//
//	http        GET /fhir/r4/Patient?<query> through the real server (token,
//	            tenant host, middleware, count, find, Bundle rendering)
//	find        the driver's Find with the filter, sort and limit the server
//	            generates, decoding the rows the server decodes
//	count+find  the count (CountDocuments, or the post-filtered read of idx)
//	            then that Find: the database work of the http case, which
//	            also counts the total
//	paired      http and count+find alternately in one loop, reporting
//	            each one's mean (http-ns/op, raw-ns/op) and http/raw
func BenchmarkSearch(b *testing.B) {
	n := searchBenchSize()
	e := newEnv(b)
	start := time.Now()
	cases := seedSearchPatients(b, e, n)
	b.Logf("seeded %d Patients in %v", n, time.Since(start).Round(time.Millisecond))

	ctx := context.Background()
	eng, err := db.Engine(ctx, mongodb.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Close(context.Background()) })
	coll := eng.Database(db.Options().DatabasePrefix + e.tenant).Collection("Patient")

	for _, c := range cases {
		path := "/Patient?" + c.params.Encode()
		raw := newRawSearch(b, c.params)
		want := checkSearchBench(b, e, path, c)
		rows, err := raw.rows(ctx, coll)
		if err != nil {
			b.Fatal(err)
		}
		if got := rowIDs(rows, c.page); !slices.Equal(got, want) {
			b.Fatalf("%s: the raw query reads %v, the server returned %v", c.name, got, want)
		}
		if total, err := raw.count(ctx, coll); err != nil || total != int64(c.total) {
			b.Fatalf("%s: the raw count is %d (%v), want %d", c.name, total, err, c.total)
		}

		prefix := fmt.Sprintf("n=%d/%s/", n, c.name)
		b.Run(prefix+"http", func(b *testing.B) {
			se := *e
			se.t = b
			b.ReportAllocs()
			for b.Loop() {
				if r := se.get(path); r.Status != http.StatusOK {
					b.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
				}
			}
		})
		b.Run(prefix+"find", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := raw.rows(ctx, coll); err != nil {
					b.Fatal(err)
				}
			}
		})
		countFind := func(b *testing.B) {
			if _, err := raw.count(ctx, coll); err != nil {
				b.Fatal(err)
			}
			if _, err := raw.rows(ctx, coll); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(prefix+"count+find", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				countFind(b)
			}
		})
		// paired alternates one http search and one count+find per
		// operation and reports each one's mean time and their ratio: on a
		// shared machine, load that drifts between sub-benchmarks affects
		// both sides alike.
		b.Run(prefix+"paired", func(b *testing.B) {
			se := *e
			se.t = b
			b.ReportAllocs()
			var viaHTTP, viaRaw time.Duration
			i := 0
			for b.Loop() {
				for step := range 2 {
					start := time.Now()
					if (i+step)%2 == 0 {
						if r := se.get(path); r.Status != http.StatusOK {
							b.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
						}
						viaHTTP += time.Since(start)
					} else {
						countFind(b)
						viaRaw += time.Since(start)
					}
				}
				i++
			}
			b.ReportMetric(float64(viaHTTP.Nanoseconds())/float64(i), "http-ns/op")
			b.ReportMetric(float64(viaRaw.Nanoseconds())/float64(i), "raw-ns/op")
			b.ReportMetric(float64(viaHTTP)/float64(viaRaw), "http/raw")
		})
	}
}

// checkSearchBench runs the search once over HTTP, checks the total and the
// page size, and returns the ids of the page in order.
func checkSearchBench(b *testing.B, e *env, path string, c searchBenchCase) []string {
	b.Helper()
	r := e.get(path)
	if r.Status != http.StatusOK {
		b.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	bundle := r.JSON(b)
	if total := fmt.Sprint(bundle["total"]); total != strconv.Itoa(c.total) {
		b.Fatalf("GET %s: total %s, want %d", path, total, c.total)
	}
	entries, _ := bundle["entry"].([]any)
	if len(entries) != c.page {
		b.Fatalf("GET %s: %d entries, want %d", path, len(entries), c.page)
	}
	ids := make([]string, len(entries))
	for i, en := range entries {
		ids[i], _ = en.(map[string]any)["resource"].(map[string]any)["id"].(string)
	}
	return ids
}

// rowIDs are the ids of the first page of rows (the extra row only tells
// that there is a next page).
func rowIDs(rows []*rawSearchRow, page int) []string {
	var ids []string
	for i, r := range rows {
		if i == page {
			break
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// seedParallel calls fn for every i from from to n-1, from 4 goroutines
// (the way concurrent clients write), failing b on the first error.
func seedParallel(b *testing.B, from, n int, fn func(i int) error) {
	b.Helper()
	const writers = 4
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func() {
			for i := from + w; i < n; i += writers {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}
