package sqlite

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestPageCachesAndMappingAreSizedByTheOptions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name                 string
		opts                 Options
		writerKiB, readerKiB int64
		mmapBytes            int64
	}{
		{"the defaults: 16 MiB a file, nothing mapped", Options{}, 8192, 2048, 0},
		{"a budget split between the writer and 4 readers", Options{CacheBytes: 8 << 20, MmapBytes: 64 << 20}, 4096, 1024, 64 << 20},
		{"each connection keeps SQLite's least", Options{CacheBytes: 1 << 20, ReadConns: 8}, 512, minCacheKiB, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := openTest(t, tc.opts)
			if err := e.Database("db").Collection("C").InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
				t.Fatal(err)
			}
			f, _ := e.file(ctx, "db")
			r, err := f.reader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer f.release(r)
			for _, c := range []struct {
				who      string
				conn     *conn
				cacheKiB int64
			}{{"writer", f.w, tc.writerKiB}, {"reader", r, tc.readerKiB}} {
				var cache, mmap int64
				if _, err := c.conn.queryRow(ctx, "PRAGMA cache_size", nil, &cache); err != nil {
					t.Fatal(err)
				}
				if _, err := c.conn.queryRow(ctx, "PRAGMA mmap_size", nil, &mmap); err != nil {
					t.Fatal(err)
				}
				if cache != -c.cacheKiB || mmap != tc.mmapBytes {
					t.Errorf("%s: cache_size %d, mmap_size %d; want %d and %d", c.who, cache, mmap, -c.cacheKiB, tc.mmapBytes)
				}
			}
		})
	}
}
