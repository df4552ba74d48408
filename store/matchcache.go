package store

import (
	"strings"
	"sync"
)

// maxCachedMatches bounds the match cache; it starts over when full.
const maxCachedMatches = 10000

// matchCache remembers the matches of condition searches, and the counts
// of searches' matches, with the write generation of the searched type
// they were read at. A type's generation moves on every change of one of
// its current rows, so an entry is valid exactly while its generation is
// current — as long as this process is the only writer
// (Options.Exclusive). Bulk loads repeat the same conditional references
// thousands of times; each is a search, cheap on an index but not free.
// Each page of a search asks for the same total, and a count reads an
// index entry per match.
type matchCache struct {
	mu      sync.Mutex
	gens    map[string]int64 // "tenant/type" → generation
	entries map[string]cachedMatch
	counts  map[string]cachedCount
}

// cachedCount is a count of a search's matches at a write generation.
type cachedCount struct{ gen, n int64 }

type cachedMatch struct {
	gen int64
	res []*Resource
}

// generation is the current write generation of tenant/typ.
func (c *matchCache) generation(tenant, typ string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gens[tenant+"/"+typ]
}

// changed moves the generation of tenant/typ on: every cached search of
// the type is stale from now on.
func (s *Store) changed(tenant, typ string) {
	if typ == searchParameterType { // the tenant's registry changed: re-index what it calls for
		defer s.kickSearchIndex(tenant)
	}
	c := &s.matches
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gens == nil {
		c.gens = map[string]int64{}
	}
	c.gens[tenant+"/"+typ]++
}

func (c *matchCache) get(key string, gen int64) ([]*Resource, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || e.gen != gen || c.gens[key[:strings.IndexByte(key, '?')]] != gen {
		return nil, false
	}
	return e.res, true
}

func (c *matchCache) put(key string, gen int64, res []*Resource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxCachedMatches {
		c.entries = map[string]cachedMatch{}
	}
	c.entries[key] = cachedMatch{gen: gen, res: res}
}

// count returns the remembered count of the search key ("tenant/type?...")
// if it was read at gen, the current generation.
func (c *matchCache) count(key string, gen int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.counts[key]
	if !ok || e.gen != gen || c.gens[key[:strings.IndexByte(key, '?')]] != gen {
		return 0, false
	}
	return e.n, true
}

func (c *matchCache) putCount(key string, gen, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil || len(c.counts) >= maxCachedMatches {
		c.counts = map[string]cachedCount{}
	}
	c.counts[key] = cachedCount{gen: gen, n: n}
}

// forget drops everything cached about a tenant (created or deleted).
func (c *matchCache) forget(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if strings.HasPrefix(k, tenant+"/") {
			delete(c.entries, k)
		}
	}
	for k := range c.counts {
		if strings.HasPrefix(k, tenant+"/") {
			delete(c.counts, k)
		}
	}
	for k := range c.gens {
		if strings.HasPrefix(k, tenant+"/") {
			c.gens[k]++
		}
	}
}
