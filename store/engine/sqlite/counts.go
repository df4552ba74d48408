package sqlite

import (
	"fmt"
	"sync"
)

// countCache remembers the counts the planner took of conditions, so that
// a query asked again (the same search, the next page) is planned without
// counting again. A count only chooses between plans, so one gone stale
// costs time, never answers; it is used while the collection holds within
// a tenth of the documents it held when counted.
type countCache struct {
	mu sync.Mutex
	m  map[string]cachedCount
}

// cachedCount is a count up to limit (n == limit: at least that many),
// taken when the collection held docs documents.
type cachedCount struct{ n, limit, docs int64 }

// countCacheSize bounds the counts kept.
const countCacheSize = 4096

func newCountCache() *countCache { return &countCache{m: map[string]cachedCount{}} }

// countKey names the count of a condition's SQL and arguments in a
// collection of a database.
func countKey(db, coll, sql string, args []any) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%v", db, coll, sql, args)
}

// get returns the count of key usable with limit when the collection
// holds docs documents: exact (below the limit), or unbounded (at least
// the limit); ok is false when it must be counted.
func (c *countCache) get(key string, limit, docs int64) (int64, bool) {
	c.mu.Lock()
	cc, found := c.m[key]
	c.mu.Unlock()
	if !found || 10*abs(docs-cc.docs) > cc.docs {
		return 0, false
	}
	switch {
	case cc.n < cc.limit && cc.n < limit:
		return cc.n, true
	case cc.n < cc.limit || cc.limit >= limit:
		return unbounded, true
	}
	return 0, false
}

// put remembers a count.
func (c *countCache) put(key string, cc cachedCount) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= countCacheSize {
		for k := range c.m { // evict one, any
			delete(c.m, k)
			break
		}
	}
	c.m[key] = cc
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
