package main

import (
	"fmt"
	"runtime/debug"
	"strconv"
)

// memoryOptions are the embedded database's page caches and mapping.
type memoryOptions struct {
	cacheBytes, mmapBytes int64
}

// applyMemory reads the memory settings, sets the Go runtime's soft
// memory limit (a limit of 0 leaves the runtime's own, GOMEMLIMIT or
// none) and returns the database's.
func applyMemory(cfg *config) (memoryOptions, error) {
	var m memoryOptions
	var err error
	if m.cacheBytes, err = cfg.int64("db-cache-bytes"); err != nil {
		return m, err
	}
	if m.cacheBytes < 1<<20 {
		return m, fmt.Errorf("--db-cache-bytes: %d is less than 1 MiB", m.cacheBytes)
	}
	if m.mmapBytes, err = byteCount(cfg, "db-mmap-bytes"); err != nil {
		return m, err
	}
	limit, err := byteCount(cfg, "memory-limit-bytes")
	if err != nil {
		return m, err
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return m, nil
}

// byteCount reads a setting of 0 or more bytes.
func byteCount(cfg *config, name string) (int64, error) {
	n, err := strconv.ParseInt(cfg.str(name), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--%s: %q is not a number of bytes (0 or more)", name, cfg.str(name))
	}
	return n, nil
}
