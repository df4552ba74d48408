package profile

import (
	"context"
	"fmt"
	"reflect"
	"sync"
)

// maxScopes bounds the definitions sets whose compilations a Validator
// keeps; past it, it starts afresh.
const maxScopes = 1024

// scope holds what one Definitions value yields at one generation: the
// compiled profiles and the value set expansions.
type scope struct {
	gen  uint64
	defs Definitions

	mu         sync.Mutex
	profiles   map[string]*profileEntry
	expansions map[string]*expansionEntry
}

type profileEntry struct {
	once sync.Once
	p    *compiled
	err  error
}

type expansionEntry struct {
	once sync.Once
	x    *expansion
	err  error
}

// scope returns the cache of defs at its current generation, replacing a
// stale one.
func (v *Validator) scope(ctx context.Context, defs Definitions) (*scope, error) {
	gen, err := defs.Generation(ctx)
	if err != nil {
		return nil, fmt.Errorf("definitions generation: %w", err)
	}
	key, ok := scopeKey(defs)
	if !ok {
		return newScope(defs, gen), nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.scopes[key]; s != nil && s.gen == gen {
		return s, nil
	}
	if v.scopes == nil || len(v.scopes) >= maxScopes {
		v.scopes = map[any]*scope{}
	}
	s := newScope(defs, gen)
	v.scopes[key] = s
	return s, nil
}

func newScope(defs Definitions, gen uint64) *scope {
	return &scope{gen: gen, defs: defs, profiles: map[string]*profileEntry{}, expansions: map[string]*expansionEntry{}}
}

// scopeKey is the map key of a Definitions value: the value itself when it
// is comparable (a pointer, a Merge of pointers).
func scopeKey(defs Definitions) (any, bool) {
	if defs == nil || !reflect.ValueOf(defs).Comparable() {
		return nil, false
	}
	return defs, true
}

// profile returns the compiled StructureDefinition at url (url|version),
// generating its snapshot from the differential when it has none; nil,
// nil when the definitions do not hold it.
func (s *scope) profile(ctx context.Context, url string) (*compiled, error) {
	s.mu.Lock()
	e := s.profiles[url]
	if e == nil {
		e = &profileEntry{}
		s.profiles[url] = e
	}
	s.mu.Unlock()
	e.once.Do(func() { e.p, e.err = s.compileURL(ctx, url) })
	if e.err != nil && ctx.Err() != nil {
		s.forget(url) // cancelled: the next caller tries again
	}
	return e.p, e.err
}

func (s *scope) compileURL(ctx context.Context, url string) (*compiled, error) {
	sd, err := lookup(ctx, s.defs, "StructureDefinition", url)
	if err != nil || sd == nil {
		return nil, err
	}
	if len(snapshotElements(sd)) == 0 {
		if sd, err = GenerateSnapshot(ctx, s.defs, sd); err != nil {
			return nil, err
		}
	}
	p, err := compile(sd)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", url, err)
	}
	p.source = url
	return p, nil
}

// elementDefinition returns the ElementDefinition of el, an element of p,
// as p's snapshot has it. The compiled profile keeps only what validation
// reads, so the snapshot is looked up again (and generated again when the
// definition has none) the first time one is asked for.
func (s *scope) elementDefinition(ctx context.Context, p *compiled, el *element) (map[string]any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.definitions == nil {
		sd, err := lookup(ctx, s.defs, "StructureDefinition", p.source)
		if err != nil {
			return nil, err
		}
		if sd == nil {
			return nil, fmt.Errorf("%w: %s", ErrUnknownProfile, p.source)
		}
		if len(snapshotElements(sd)) == 0 {
			if sd, err = GenerateSnapshot(ctx, s.defs, sd); err != nil {
				return nil, err
			}
		}
		p.definitions = snapshotElements(sd)
	}
	if el.index >= len(p.definitions) || p.definitions[el.index]["path"] != el.path {
		return nil, fmt.Errorf("the snapshot of %s has changed", p.source)
	}
	return p.definitions[el.index], nil
}

// expansion returns the expansion of the value set at url, computed once
// per generation.
func (s *scope) expansion(ctx context.Context, url string) (*expansion, error) {
	s.mu.Lock()
	e := s.expansions[url]
	if e == nil {
		e = &expansionEntry{}
		s.expansions[url] = e
	}
	s.mu.Unlock()
	e.once.Do(func() { e.x, e.err = expand(ctx, s.defs, url) })
	if e.err != nil && ctx.Err() != nil {
		s.mu.Lock()
		delete(s.expansions, url)
		s.mu.Unlock()
	}
	return e.x, e.err
}

// forget drops the cached compilation of url, so that a failure due to a
// cancelled context is not kept.
func (s *scope) forget(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.profiles, url)
}
