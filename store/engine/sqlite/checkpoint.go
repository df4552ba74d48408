package sqlite

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"
)

// The WAL's bound. The checkpointer copies committed pages into the file
// once a second at most while writes go on (PASSIVE: it waits for no
// reader or writer). That alone does not bound the WAL under steady
// load: SQLite starts the WAL over only when a write begins after a
// checkpoint that copied all of it while no reader still reads from it,
// which readers and writers that never pause never allow. So once the
// WAL holds more than a quarter of its limit (Options.WALLimit, default
// DefaultWALLimit), the checkpointer asks for a RESTART checkpoint: it
// copies the rest and waits for the readers still in the WAL, so that the
// next write starts the WAL over from its beginning (the file keeps its
// size, and is written over). While it runs new writes wait, so it runs
// just after a PASSIVE checkpoint that copied every page (nothing is left
// to copy and sync: a TRUNCATE checkpoint, which also syncs the emptied
// file, held writes for 60–200 ms here), unless the WAL nears its limit,
// and waits for readers at most restartWait; a checkpoint that could not
// finish is tried again a few times a second until one does.
// journal_size_limit truncates a WAL started over to half the limit.
const (
	// DefaultWALLimit is the size a file's WAL is kept under.
	DefaultWALLimit = 64 << 20
	restartWait     = 40 * time.Millisecond
	checkpointSoon  = 200 * time.Millisecond
	walWatch        = 50 * time.Millisecond
)

// walLimit is the WAL bound of o (DefaultWALLimit unless set).
func walLimit(limit int64) int64 {
	if limit <= 0 {
		return DefaultWALLimit
	}
	return limit
}

// walPragmas are the writer's pragmas that bound the WAL to limit.
func walPragmas(limit int64) []string {
	return []string{fmt.Sprintf("journal_size_limit = %d", limit/2)}
}

// checkpointConn opens the checkpointer's connection: SQLite's smallest
// page cache, and a short wait for readers and the writer.
func (f *file) checkpointConn() (*conn, error) {
	return openConn(f.path, slices.Concat(pragmas, memory{}.pragmas(), []string{fmt.Sprintf("busy_timeout = %d", restartWait.Milliseconds())}))
}

// checkpoint copies the WAL into the file and, when it has grown past a
// quarter of the limit, starts it over if the readers allow; it returns how
// long to wait at most before the next one (the checkpointer looks at the
// WAL's size meanwhile, see pause).
func (f *file) checkpoint(c *conn) time.Duration {
	ctx := context.Background()
	var busy, logged, copied int64
	if _, err := c.queryRow(ctx, "PRAGMA wal_checkpoint(PASSIVE)", nil, &busy, &logged, &copied); err != nil {
		return checkpointEvery
	}
	size := f.walBytes()
	if size <= f.walLimit/4 {
		return checkpointEvery
	}
	// The RESTART checkpoint holds writes back while it copies what is
	// left and syncs: it runs once the PASSIVE one copied every page (a
	// reader in the way stops it short; the next, soon, may not be), or
	// when the WAL nears its limit whatever it has to copy.
	if logged != copied && size <= f.walLimit/2 {
		return checkpointSoon
	}
	start := time.Now()
	if _, err := c.queryRow(ctx, "PRAGMA wal_checkpoint(RESTART)", nil, &busy, &logged, &copied); err != nil || busy != 0 {
		f.stats.walBusy.Add(1)
		return checkpointSoon
	}
	f.stats.walResets.Add(1)
	if took := time.Since(start); took > 4*restartWait {
		f.log.Debug("WAL emptied slowly")
	}
	return checkpointEvery
}

// walBytes is the size of the file's WAL (0 when there is none).
func (f *file) walBytes() int64 {
	st, err := os.Stat(f.path + "-wal")
	if err != nil {
		return 0
	}
	return st.Size()
}

// pause waits d before the next checkpoint, less when the WAL grows past
// half its limit meanwhile or, after a checkpoint that left it under a
// quarter (d is checkpointEvery), past that. It reports false when the
// file is closing.
func (f *file) pause(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	watch := time.NewTicker(walWatch)
	defer watch.Stop()
	for {
		select {
		case <-f.stop:
			return false
		case <-deadline.C:
			return true
		case <-watch.C:
			if n := f.walBytes(); n > f.walLimit/2 || d == checkpointEvery && n > f.walLimit/4 {
				return true
			}
		}
	}
}
