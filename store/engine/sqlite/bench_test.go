package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// Benchmarks of the store's hot queries on the synthetic collections,
// each next to the SQL its plan runs, executed directly on the same
// reader connections (the difference is the engine's own work: planning,
// its estimate queries, projection and decoding).
//
//	FHIRSTORE_BENCH_DOCS=3000,10000,100000 go test ./store/engine/sqlite -run '^$' -bench Hot -benchtime 2000x
//
// sizes the collections (default 3000); FHIRSTORE_BENCH_DIR keeps the
// built files between runs.

func benchSizes() []int {
	spec := os.Getenv("FHIRSTORE_BENCH_DOCS")
	if spec == "" || testing.Short() {
		return []int{3000}
	}
	var out []int
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// benchEngine opens an engine on a directory holding the synthetic data
// for n documents, building it if need be.
func benchEngine(b *testing.B, n int) *Engine {
	b.Helper()
	dir := b.TempDir()
	if keep := os.Getenv("FHIRSTORE_BENCH_DIR"); keep != "" {
		dir = filepath.Join(keep, strconv.Itoa(n))
	}
	marker := filepath.Join(dir, "built")
	_, err := os.Stat(marker)
	built := err == nil
	e, err := Open(context.Background(), dir, Options{SharedField: "resource"}) // as the store opens it
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(context.Background()) })
	if !built {
		start := time.Now()
		fill(b, e, n)
		d := time.Since(start)
		b.Logf("built %d observations and %d history rows in %v (%.0f documents/s)", n, n, d.Round(time.Millisecond), float64(2*n)/d.Seconds())
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// hotQuery is one of the store's hot reads.
type hotQuery struct {
	name   string
	coll   string
	filter func(r *rand.Rand) bson.D
	opts   *engine.FindOptions
	count  bool // a Count rather than a Find
}

func hotQueries(n int) []hotQuery {
	patient := func(r *rand.Rand) string { return fmt.Sprintf("Patient/p%d", r.IntN(patients)) }
	notDeleted := bson.D{{Key: "deleted", Value: false}}
	search := func(conds ...bson.D) bson.D {
		all := bson.A{}
		for _, c := range conds {
			all = append(all, c)
		}
		return bson.D{{Key: "$and", Value: bson.A{bson.D{{Key: "$and", Value: all}}, notDeleted}}}
	}
	defaultOrder := &engine.FindOptions{Sort: bson.D{{Key: "lastUpdated", Value: 1}, {Key: "_id", Value: 1}}, Limit: 21, Projection: bson.D{{Key: "idx", Value: 0}}}
	byDate := bson.D{{Key: "idx.date.hi", Value: -1}, {Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}}
	code0 := bson.D{{Key: "idx.code", Value: loinc + "|1000-0"}, {Key: "deleted", Value: false}}
	// the store's searches sorted by date read the dated rows apart
	dated := bson.D{{Key: "idx.date.hi", Value: bson.D{{Key: "$gte", Value: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}}}}
	codeDated := bson.D{{Key: "$and", Value: bson.A{code0, dated}}}
	newest := bson.D{{Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}}
	return []hotQuery{
		{name: "1-FindByID", coll: "Observation", filter: func(r *rand.Rand) bson.D {
			return bson.D{{Key: "_id", Value: fmt.Sprintf("obs%07d", r.IntN(n))}}
		}, opts: &engine.FindOptions{Limit: 1}},
		{name: "2-PatientPage", coll: "Observation", filter: func(r *rand.Rand) bson.D {
			return search(bson.D{{Key: "idx.patient", Value: bson.D{{Key: "$in", Value: bson.A{patient(r)}}}}})
		}, opts: defaultOrder},
		{name: "3-CodePage", coll: "Observation", filter: func(*rand.Rand) bson.D { return codeDated },
			opts: &engine.FindOptions{Sort: byDate, Limit: 11, Projection: bson.D{{Key: "idx", Value: 0}}}},
		{name: "3-CodePageKeyset", coll: "Observation", filter: func(r *rand.Rand) bson.D {
			at := dataEpoch.Add(time.Duration(r.Int64N(int64(5 * 365 * 24 * time.Hour)))).Truncate(time.Second)
			key := bson.D{{Key: "$or", Value: bson.A{
				bson.D{{Key: "idx.date.hi", Value: bson.D{{Key: "$lt", Value: at}}}},
				bson.D{{Key: "idx.date.hi", Value: at}, {Key: "lastUpdated", Value: bson.D{{Key: "$lt", Value: at}}}},
				bson.D{{Key: "idx.date.hi", Value: at}, {Key: "lastUpdated", Value: at}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: "obs"}}}},
			}}}
			return bson.D{{Key: "$and", Value: bson.A{codeDated, key}}}
		}, opts: &engine.FindOptions{Sort: byDate, Limit: 11, Projection: bson.D{{Key: "idx", Value: 0}}}},
		{name: "3-CodeCount", coll: "Observation", filter: func(*rand.Rand) bson.D { return code0 }, count: true},
		{name: "4-FamilyPrefix", coll: "Observation", filter: func(r *rand.Rand) bson.D {
			f := families[r.IntN(len(families))][:3]
			return search(bson.D{{Key: "idx.family", Value: bson.Regex{Pattern: "^" + f}}})
		}, opts: defaultOrder},
		{name: "4-FamilyPrefixCount", coll: "Observation", filter: func(r *rand.Rand) bson.D {
			f := families[r.IntN(len(families))][:3]
			return search(bson.D{{Key: "idx.family", Value: bson.Regex{Pattern: "^" + f}}})
		}, count: true},
		{name: "5-CountNotDeleted", coll: "Observation", filter: func(*rand.Rand) bson.D { return notDeleted }, count: true},
		{name: "6-HistoryInstance", coll: "history", filter: func(r *rand.Rand) bson.D {
			return bson.D{{Key: "type", Value: "Observation"}, {Key: "id", Value: fmt.Sprintf("obs%07d", r.IntN(n/2))}}
		}, opts: &engine.FindOptions{Sort: newest, Limit: 11}},
		{name: "6-HistorySystem", coll: "history", filter: func(*rand.Rand) bson.D { return bson.D{} },
			opts: &engine.FindOptions{Sort: newest, Limit: 11}},
		{name: "6-HistoryType", coll: "history", filter: func(*rand.Rand) bson.D { return bson.D{{Key: "type", Value: "Observation"}} },
			opts: &engine.FindOptions{Sort: newest, Limit: 11}},
		{name: "7-SearchAll", coll: "Observation", filter: func(*rand.Rand) bson.D { return search(bson.D{}) }, opts: defaultOrder},
	}
}

func BenchmarkHot(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes() {
		e := benchEngine(b, n)
		for _, q := range hotQueries(n) {
			c := e.Database("bench").Collection(q.coll).(*collection)
			// The same variants of the query for both, planned beforehand
			// for the raw SQL.
			r := rand.New(rand.NewPCG(1, 1))
			filters := make([]bson.D, 64)
			plans := make([]rawPlan, len(filters))
			for i := range filters {
				filters[i] = q.filter(r)
				plans[i].sql, plans[i].args = planOf(b, c, q, filters[i])
			}
			b.Run(fmt.Sprintf("docs=%d/%s", n, q.name), func(b *testing.B) {
				i := 0
				for b.Loop() {
					filter := filters[i%len(filters)]
					i++
					if q.count {
						if _, err := c.Count(ctx, filter); err != nil {
							b.Fatal(err)
						}
						continue
					}
					readAll(b, c, filter, q.opts)
				}
			})
			b.Run(fmt.Sprintf("docs=%d/%s/raw", n, q.name), func(b *testing.B) {
				f, err := c.e.file(ctx, c.db)
				if err != nil {
					b.Fatal(err)
				}
				conn, err := f.reader(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer f.release(conn)
				i := 0
				for b.Loop() {
					p := plans[i%len(plans)]
					i++
					rows, err := conn.query(ctx, p.sql, p.args)
					if err != nil {
						b.Fatal(err)
					}
					for rows.next() {
						_ = rows.value(0)
					}
					if rows.err != nil {
						b.Fatal(rows.err)
					}
				}
			})
		}
	}
}

// rawPlan is the SQL a query runs.
type rawPlan struct {
	sql  string
	args []any
}

// readAll runs a Find to its end, returning how many documents it read.
func readAll(tb testing.TB, c *collection, filter bson.D, opts *engine.FindOptions) int {
	tb.Helper()
	ctx := context.Background()
	cur, err := c.Find(ctx, filter, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer cur.Close(ctx)
	n := 0
	for cur.Next(ctx) {
		n++
	}
	if err := cur.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// planOf is the SQL (with its arguments) the engine runs for q: one step.
func planOf(tb testing.TB, c *collection, q hotQuery, filter bson.D) (string, []any) {
	tb.Helper()
	ctx := context.Background()
	x, err := c.compile(filter)
	if err != nil {
		tb.Fatal(err)
	}
	p, release, err := c.reader(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer release()
	if q.count {
		s, err := p.count(ctx, x)
		if err != nil {
			tb.Fatal(err)
		}
		return s.sql, s.args
	}
	keys, err := parseSort(q.opts.Sort)
	if err != nil {
		tb.Fatal(err)
	}
	steps, err := p.find(ctx, x, keys, q.opts.Limit)
	if err != nil {
		tb.Fatal(err)
	}
	if len(steps) != 1 {
		tb.Fatalf("%s: %d steps", q.name, len(steps))
	}
	s, err := steps[0](ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return s.sql + " LIMIT ? OFFSET 0", append(s.args, q.opts.Limit)
}

// BenchmarkInsertMany writes the synthetic observations in batches of 500.
func BenchmarkInsertMany(b *testing.B) {
	ctx := context.Background()
	e := openTest(b, Options{})
	c := e.Database("bench").Collection("Observation")
	r := rand.New(rand.NewPCG(1, 2))
	i := 0
	start := time.Now()
	for b.Loop() {
		batch := make([]any, 500)
		for j := range batch {
			batch[j] = observation(i, r)
			i++
		}
		if err := c.InsertMany(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(i)/time.Since(start).Seconds(), "docs/s")
}
