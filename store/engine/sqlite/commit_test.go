package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// queued holds the writer of db's file while start launches writes, waits
// until n of them are queued and lets them go: they run as one batch.
func queued(t *testing.T, e *Engine, db string, n int, start func()) {
	t.Helper()
	f, err := e.file(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	f.wmu.Lock()
	start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.qmu.Lock()
		got := len(f.queue)
		f.qmu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			f.wmu.Unlock()
			t.Fatalf("%d writes queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
	f.wmu.Unlock()
}

func TestWritesQueuedTogetherCommitInOneTransaction(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "seed"}, {Key: "k", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	before := e.WriteStats()
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	queued(t, e, "db", n, func() {
		for i := range n {
			wg.Go(func() {
				errs[i] = c.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprint("d", i)}, {Key: "k", Value: i}, {Key: "even", Value: i%2 == 0}})
			})
		}
	})
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	after := e.WriteStats()
	if w, tx := after.Writes-before.Writes, after.Transactions-before.Transactions; w != n || tx != 1 {
		t.Fatalf("%d writes in %d transactions, want %d in 1", w, tx, n)
	}
	if got, err := c.Count(ctx, bson.D{{Key: "even", Value: true}}); err != nil || got != n/2 {
		t.Fatalf("count of even: %d %v, want %d", got, err, n/2)
	}
}

// TestAWriteThatFailsFailsAlone runs, in one batch, writes that fail their
// own checks among writes that succeed: each gets its own outcome, and
// what the failed ones did is rolled back while the others commit.
func TestAWriteThatFailsFailsAlone(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	for _, id := range []string{"taken", "r", "gone"} {
		if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: "old"}}); err != nil {
			t.Fatal(err)
		}
	}
	type outcome struct {
		name string
		run  func() error
		want error // nil: succeeds
	}
	writes := []outcome{
		{"a new document", func() error { return c.InsertOne(ctx, bson.D{{Key: "_id", Value: "n1"}, {Key: "v", Value: "new"}}) }, nil},
		{"a duplicate _id", func() error { return c.InsertOne(ctx, bson.D{{Key: "_id", Value: "taken"}, {Key: "v", Value: "dup"}}) }, engine.ErrDuplicateKey},
		{"a replacement changing _id", func() error {
			_, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "r"}}, bson.D{{Key: "_id", Value: "other"}, {Key: "v", Value: "bad"}}, false)
			return err
		}, engine.ErrUnsupported},
		{"a replacement", func() error {
			_, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: "r"}}, bson.D{{Key: "_id", Value: "r"}, {Key: "v", Value: "replaced"}, {Key: "fresh", Value: "path"}}, false)
			return err
		}, nil},
		{"an insert of many with one duplicate", func() error {
			return c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "m1"}, {Key: "v", Value: "new"}}, bson.D{{Key: "_id", Value: "taken"}}})
		}, engine.ErrDuplicateKey},
		{"a delete", func() error { _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "gone"}}); return err }, nil},
		{"an unsupported filter", func() error { _, err := c.DeleteMany(ctx, bson.D{{Key: "$where", Value: "1"}}); return err }, engine.ErrUnsupported},
	}
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	// the unsupported filter fails before it queues
	queued(t, e, "db", len(writes)-1, func() {
		for i, w := range writes {
			wg.Go(func() { errs[i] = w.run() })
		}
	})
	wg.Wait()
	for i, w := range writes {
		switch {
		case w.want == nil && errs[i] != nil:
			t.Errorf("%s: %v, want success", w.name, errs[i])
		case w.want == engine.ErrDuplicateKey && !engine.IsDuplicateKey(errs[i]):
			t.Errorf("%s: %v, want only duplicate keys", w.name, errs[i])
		case w.want != nil && w.want != engine.ErrDuplicateKey && !errors.Is(errs[i], w.want):
			t.Errorf("%s: %v, want %v", w.name, errs[i], w.want)
		}
	}
	for _, tc := range []struct {
		filter bson.D
		want   []string
	}{
		{bson.D{{Key: "v", Value: "new"}}, []string{"m1", "n1"}},
		{bson.D{{Key: "v", Value: "replaced"}, {Key: "fresh", Value: "path"}}, []string{"r"}},
		{bson.D{{Key: "v", Value: bson.D{{Key: "$in", Value: bson.A{"bad", "dup"}}}}}, nil},
		{bson.D{{Key: "_id", Value: "other"}}, nil},
		{bson.D{{Key: "_id", Value: "gone"}}, nil},
		{bson.D{{Key: "v", Value: "old"}}, []string{"taken"}},
	} {
		if got := findIDs(t, c, tc.filter, bson.D{{Key: "_id", Value: 1}}); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%v: %v, want %v", tc.filter, got, tc.want)
		}
	}
	if n, err := c.Count(ctx, bson.D{}); err != nil || n != 4 {
		t.Errorf("count %d %v, want 4 (n1, m1, r, taken)", n, err)
	}
}

// TestARolledBackWriteForgetsThePathsItNumbered: a write numbers a new
// path and fails; a later write of the same batch using that path must
// number it anew, or its entries would name a number that no longer
// exists.
func TestARolledBackWriteForgetsThePathsItNumbered(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "seed"}}); err != nil {
		t.Fatal(err)
	}
	f, err := e.file(ctx, "db")
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused by its own check")
	var failed, inserted error
	var wg sync.WaitGroup
	queued(t, e, "db", 2, func() {
		wg.Go(func() {
			failed = f.write(ctx, func(ctx context.Context, w *conn) error {
				if _, err := w.codes.code(ctx, w, "brand.new"); err != nil {
					return err
				}
				return refused
			})
		})
		// queued second: the first in the queue runs first
		time.Sleep(20 * time.Millisecond)
		wg.Go(func() {
			inserted = c.InsertOne(ctx, bson.D{{Key: "_id", Value: "d"}, {Key: "brand", Value: bson.D{{Key: "new", Value: "x"}}}})
		})
	})
	wg.Wait()
	if !errors.Is(failed, refused) || inserted != nil {
		t.Fatalf("outcomes %v and %v, want the refusal and success", failed, inserted)
	}
	if got := findIDs(t, c, bson.D{{Key: "brand.new", Value: "x"}}, nil); strings.Join(got, ",") != "d" {
		t.Fatalf("brand.new = x finds %v, want d", got)
	}
}

func TestAPanickingWritePanicsInItsOwnGoroutineOnly(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "seed"}}); err != nil {
		t.Fatal(err)
	}
	f, _ := e.file(ctx, "db")
	var recovered any
	var inserted error
	var wg sync.WaitGroup
	queued(t, e, "db", 2, func() {
		wg.Go(func() {
			defer func() { recovered = recover() }()
			_ = f.write(ctx, func(ctx context.Context, w *conn) error {
				if _, err := w.exec(ctx, "INSERT INTO "+namesOf("C").d+" (id, doc) VALUES ('ghost', x'00')"); err != nil {
					return err
				}
				panic("boom")
			})
		})
		time.Sleep(20 * time.Millisecond)
		wg.Go(func() { inserted = c.InsertOne(ctx, bson.D{{Key: "_id", Value: "d"}}) })
	})
	wg.Wait()
	if recovered == nil || !strings.Contains(fmt.Sprint(recovered), "boom") || inserted != nil {
		t.Fatalf("panic %v, insert %v: want the panic in its writer and the insert done", recovered, inserted)
	}
	if got := findIDs(t, c, bson.D{}, bson.D{{Key: "_id", Value: 1}}); strings.Join(got, ",") != "d,seed" {
		t.Fatalf("documents %v, want d and seed (the panicking write rolled back)", got)
	}
}

func TestAWriteWhoseContextEndedBeforeItsTurnDoesNotRun(t *testing.T) {
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	if err := c.InsertOne(context.Background(), bson.D{{Key: "_id", Value: "seed"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	var wg sync.WaitGroup
	queued(t, e, "db", 1, func() {
		wg.Go(func() { err = c.InsertOne(ctx, bson.D{{Key: "_id", Value: "late"}}) })
		time.Sleep(20 * time.Millisecond)
		cancel()
	})
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("insert after its context ended: %v, want context.Canceled", err)
	}
	if got := findIDs(t, c, bson.D{{Key: "_id", Value: "late"}}, nil); len(got) != 0 {
		t.Fatalf("the cancelled insert is there: %v", got)
	}
}

// TestConcurrentWritersEachGetTheirOwnOutcome has many goroutines insert,
// replace and insert duplicates at once (run it with -race): every write
// that succeeded is there, every duplicate failed alone.
func TestConcurrentWritersEachGetTheirOwnOutcome(t *testing.T) {
	ctx := context.Background()
	e := openTest(t, Options{})
	c := e.Database("db").Collection("C")
	const writers, each = 16, 25
	if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "dup"}, {Key: "w", Value: -1}}); err != nil {
		t.Fatal(err)
	}
	before := e.WriteStats()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "w", Value: w}, {Key: "v", Value: 1}}); err != nil {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("insert %s: %v", id, err))
					mu.Unlock()
				}
				if err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "dup"}, {Key: "w", Value: w}}); !errors.Is(err, engine.ErrDuplicateKey) {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("duplicate from %d: %v", w, err))
					mu.Unlock()
				}
				if _, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "_id", Value: id}, {Key: "w", Value: w}, {Key: "v", Value: 2}}, false); err != nil {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("replace %s: %v", id, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("%d problems, the first: %s", len(problems), problems[0])
	}
	for w := range writers {
		if n, err := c.Count(ctx, bson.D{{Key: "w", Value: w}, {Key: "v", Value: 2}}); err != nil || n != each {
			t.Errorf("writer %d: %d documents at version 2 (%v), want %d", w, n, err, each)
		}
	}
	if n, _ := c.Count(ctx, bson.D{{Key: "w", Value: -1}}); n != 1 {
		t.Errorf("the document the duplicates aimed at: %d, want it once, unchanged", n)
	}
	st := e.WriteStats()
	t.Logf("%d writes in %d transactions", st.Writes-before.Writes, st.Transactions-before.Transactions)
}
