package main

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestMemorySettings(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		name  string
		args  []string
		want  memoryOptions
		limit int64 // the runtime's limit afterwards; 0: untouched
		err   string
	}{
		{"the defaults", nil, memoryOptions{cacheBytes: 8 << 20}, 0, ""},
		{"a bigger cache, a mapping and a limit", []string{"--db-cache-bytes", "67108864", "--db-mmap-bytes", "1073741824", "--memory-limit-bytes", "268435456"},
			memoryOptions{cacheBytes: 64 << 20, mmapBytes: 1 << 30}, 256 << 20, ""},
		{"a cache under 1 MiB", []string{"--db-cache-bytes", "1000"}, memoryOptions{}, 0, "--db-cache-bytes"},
		{"a negative mapping", []string{"--db-mmap-bytes", "-1"}, memoryOptions{}, 0, "--db-mmap-bytes"},
		{"a negative limit", []string{"--memory-limit-bytes", "-5"}, memoryOptions{}, 0, "--memory-limit-bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			cfg := newConfig("serve", serveFlags...)
			if _, err := cfg.parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, err := applyMemory(cfg)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if got.cacheBytes != tc.want.cacheBytes || got.mmapBytes != tc.want.mmapBytes {
				t.Errorf("options %+v, want %+v", got, tc.want)
			}
			limit := debug.SetMemoryLimit(-1)
			if tc.limit == 0 && limit != math.MaxInt64 || tc.limit != 0 && limit != tc.limit {
				t.Errorf("runtime memory limit %d, want %d", limit, tc.limit)
			}
		})
	}
}
