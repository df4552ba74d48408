package schemacheck

import (
	"context"
	"sync"
)

// maxCachedExtensions bounds the extension look-ups a Checker keeps; past
// it the cache starts over.
const maxCachedExtensions = 8192

// extensionCache keeps what the tenants' extension definitions say, per
// tenant, URL and conformance generation: a Patient of US Core names six
// extensions, whose StructureDefinitions would otherwise be read and
// parsed on every write.
type extensionCache struct {
	mu      sync.Mutex
	entries map[string]extensionEntry // "tenant url"
}

type extensionEntry struct {
	gen   uint64
	known map[string][]string
}

func (c *extensionCache) get(key string, gen uint64) (map[string][]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return e.known, ok && e.gen == gen
}

func (c *extensionCache) put(key string, gen uint64, known map[string][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxCachedExtensions {
		c.entries = map[string]extensionEntry{}
	}
	c.entries[key] = extensionEntry{gen: gen, known: known}
}

// generation reads the tenant's conformance generation once per validation.
type generation struct {
	read func(ctx context.Context) (uint64, error)
	once sync.Once
	gen  uint64
	err  error
}

func (g *generation) value(ctx context.Context) (uint64, error) {
	g.once.Do(func() { g.gen, g.err = g.read(ctx) })
	return g.gen, g.err
}
