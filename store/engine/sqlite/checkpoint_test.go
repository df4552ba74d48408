package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestWALStaysBoundedUnderSteadyLoad: writes that stream in while readers
// never pause copy many times the WAL's limit through it, and the WAL
// file stays within the limit (plus what one write and one second of
// writes add before the checkpointer looks again); every document is
// there after.
func TestWALStaysBoundedUnderSteadyLoad(t *testing.T) {
	const limit = 4 << 20
	ctx := context.Background()
	dir := t.TempDir()
	e := openAt(t, dir, Options{WALLimit: limit})
	coll := e.Database("t").Collection("Binary")
	wal := filepath.Join(dir, "t.db-wal")
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 { // readers that keep a read transaction open most of the time
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := coll.Count(ctx, bson.D{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	r := rand.New(rand.NewPCG(1, 2))
	var largest int64
	const batches, perBatch, size = 150, 20, 4096
	for b := range batches {
		docs := make([]any, perBatch)
		for i := range docs {
			data := make([]byte, size) // random: it keeps its size compressed
			for j := range data {
				data[j] = byte(r.Uint32())
			}
			docs[i] = bson.D{{Key: "_id", Value: fmt.Sprint(b*perBatch + i)}, {Key: "data", Value: bson.Binary{Data: data}}}
		}
		if err := coll.InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(wal); err == nil {
			largest = max(largest, st.Size())
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	readers.Wait()
	written := int64(batches * perBatch * size)
	if written < 2*limit {
		t.Fatalf("the test writes %d bytes, too few to pass the limit", written)
	}
	if largest > limit {
		t.Fatalf("the WAL reached %d bytes, over its limit of %d, while %d bytes were written (%+v)", largest, limit, written, e.WriteStats())
	}
	if st := e.WriteStats(); st.WALResets == 0 {
		t.Fatalf("no checkpoint emptied the WAL: %+v", st)
	}
	if n, err := coll.Count(ctx, bson.D{}); err != nil || n != batches*perBatch {
		t.Fatalf("%d documents, %v; want %d", n, err, batches*perBatch)
	}
}
