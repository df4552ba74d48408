package profile

import (
	"context"
	"fmt"
	"sync"
)

// Merge returns the Definitions that answer from tenant first and from
// core for what tenant does not hold: a tenant's own StructureDefinition,
// ValueSet or CodeSystem takes precedence over the core one of the same
// URL. Its generation changes when either's does. Two merges of the same
// tenant and core values compare equal, so they share cached compiled
// profiles.
func Merge(tenant, core Definitions) Definitions {
	return merged{tenant: tenant, core: core}
}

type merged struct {
	tenant, core Definitions
}

// Resource looks typ and url up in the tenant's definitions, then the core.
func (m merged) Resource(ctx context.Context, typ, url string) (map[string]any, error) {
	if m.tenant != nil {
		r, err := m.tenant.Resource(ctx, typ, url)
		if err != nil || r != nil {
			return r, err
		}
	}
	if m.core == nil {
		return nil, nil
	}
	return m.core.Resource(ctx, typ, url)
}

// Generation mixes the two generations.
func (m merged) Generation(ctx context.Context) (uint64, error) {
	var g uint64
	for _, d := range []Definitions{m.tenant, m.core} {
		if d == nil {
			continue
		}
		n, err := d.Generation(ctx)
		if err != nil {
			return 0, err
		}
		g = g*1_000_003 + n
	}
	return g, nil
}

// Memory is Definitions held in memory: the definitions of a package read
// for offline validation, or of a test. Safe for concurrent use.
type Memory struct {
	mu    sync.RWMutex
	gen   uint64
	byURL map[string]map[string]any // "Type url" and "Type url|version"
}

// NewMemory returns Memory holding resources (StructureDefinition,
// ValueSet, CodeSystem; others are ignored).
func NewMemory(resources ...map[string]any) *Memory {
	m := &Memory{byURL: map[string]map[string]any{}}
	for _, r := range resources {
		m.Add(r)
	}
	return m
}

// Add stores a conformance resource under its URL (and URL|version),
// replacing one of the same URL, and moves the generation on. It reports
// whether the resource was a conformance resource with a URL.
func (m *Memory) Add(r map[string]any) bool {
	typ, _ := r["resourceType"].(string)
	url, _ := r["url"].(string)
	switch typ {
	case "StructureDefinition", "ValueSet", "CodeSystem":
	default:
		return false
	}
	if url == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byURL[typ+" "+url] = r
	if v, _ := r["version"].(string); v != "" {
		m.byURL[typ+" "+url+"|"+v] = r
	}
	m.gen++
	return true
}

// Resource returns the resource of type typ at url.
func (m *Memory) Resource(_ context.Context, typ, url string) (map[string]any, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byURL[typ+" "+url], nil
}

// Generation counts the resources added.
func (m *Memory) Generation(context.Context) (uint64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.gen, nil
}

// lookup fetches a conformance resource, falling back from url|version to
// url when the version is not held.
func lookup(ctx context.Context, defs Definitions, typ, canonical string) (map[string]any, error) {
	r, err := defs.Resource(ctx, typ, canonical)
	if err != nil {
		return nil, fmt.Errorf("look up %s %s: %w", typ, canonical, err)
	}
	if r != nil {
		return r, nil
	}
	if url, version := splitCanonical(canonical); version != "" {
		r, err = defs.Resource(ctx, typ, url)
		if err != nil {
			return nil, fmt.Errorf("look up %s %s: %w", typ, url, err)
		}
	}
	return r, nil
}
