package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// searchParameterType is the resource type whose resources define a
// tenant's own search parameters.
const searchParameterType = "SearchParameter"

// tenantRegistry is a tenant's search registry as this process last read
// it, with what it read it under.
type tenantRegistry struct {
	reg *search.Registry
	// local is the write generation of the tenant's SearchParameters in
	// this process (matchCache) when it was read, gen the tenant's
	// conformance generation (read when other processes may write).
	local int64
	gen   uint64
	// complete remembers the tenant parameters ("Type code") found
	// completely indexed: under one registry, a parameter stays so.
	complete sync.Map
}

// registrySlot holds one tenant's registry; mu serializes its reloads.
type registrySlot struct {
	mu  sync.Mutex
	cur atomic.Pointer[tenantRegistry]
}

// Registry returns the search registry of tenant: the built-in parameters
// and those of the tenant's own SearchParameters in force. It follows
// every write of a SearchParameter at once: this process's own, and, when
// other processes share the database (not Options.Exclusive), theirs too
// through the tenant's conformance generation, read on each call. A store
// without a registry answers nil.
func (s *Store) Registry(ctx context.Context, tenant string) (*search.Registry, error) {
	tr, err := s.tenantRegistry(ctx, tenant)
	if err != nil || tr == nil {
		return nil, err
	}
	return tr.reg, nil
}

// tenantRegistry returns the tenant's current registry, reading the
// tenant's SearchParameters again when they changed.
func (s *Store) tenantRegistry(ctx context.Context, tenant string) (*tenantRegistry, error) {
	if s.opts.Registry == nil {
		return nil, nil
	}
	slotAny, _ := s.registries.LoadOrStore(tenant, &registrySlot{})
	slot := slotAny.(*registrySlot)
	local := s.matches.generation(tenant, searchParameterType)
	var gen uint64
	if !s.opts.Exclusive {
		var err error
		if gen, err = s.ConformanceGeneration(ctx, tenant); err != nil {
			return nil, err
		}
	}
	if tr := slot.cur.Load(); tr != nil && tr.local == local && tr.gen == gen {
		return tr, nil
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if tr := slot.cur.Load(); tr != nil && tr.local == local && tr.gen == gen {
		return tr, nil // read by another caller meanwhile
	}
	defs, err := s.searchDefinitions(ctx, tenant)
	if err != nil {
		return nil, err
	}
	tr := &tenantRegistry{reg: s.opts.Registry.With(defs), local: local, gen: gen}
	slot.cur.Store(tr)
	return tr, nil
}

// heldRegistry is tenantRegistry, or, when held is set and other
// processes may write the database, the registry this process read last
// (whatever the generation now) if it has one.
func (s *Store) heldRegistry(ctx context.Context, tenant string, held bool) (*tenantRegistry, error) {
	if held && !s.opts.Exclusive {
		if slot, ok := s.registries.Load(tenant); ok {
			if tr := slot.(*registrySlot).cur.Load(); tr != nil && tr.local == s.matches.generation(tenant, searchParameterType) {
				return tr, nil
			}
		}
	}
	return s.tenantRegistry(ctx, tenant)
}

// searchDefinitions reads the tenant's current SearchParameters, oldest
// write first (the earlier of two that claim one code keeps it).
func (s *Store) searchDefinitions(ctx context.Context, tenant string) ([]*search.Definition, error) {
	coll := s.tenantDB(tenant).Collection(searchParameterType)
	opts := &engine.FindOptions{Sort: bson.D{{Key: "lastUpdated", Value: 1}, {Key: "_id", Value: 1}},
		Projection: bson.D{{Key: "idx", Value: 0}, {Key: "sort", Value: 0}}}
	cur, err := coll.Find(ctx, bson.D{{Key: "deleted", Value: false}}, opts)
	if err != nil {
		return nil, dbError("read the search parameters of "+tenant, err)
	}
	var docs []*storedDoc
	if err := engine.All(ctx, cur, &docs); err != nil {
		return nil, dbError("read the search parameters of "+tenant, err)
	}
	defs := make([]*search.Definition, 0, len(docs))
	for _, d := range docs {
		res, err := d.toResource(searchParameterType)
		if err != nil {
			return nil, err
		}
		def, err := search.ParseDefinition(res.JSON)
		if err != nil { // stored before definitions were checked: left out
			s.log.Warn("a stored SearchParameter cannot be read", zap.String("tenant", tenant), zap.String("id", d.ID), zap.Error(err))
			continue
		}
		defs = append(defs, def)
	}
	return defs, nil
}

// prepareSearch sets the registry in's search values are extracted with,
// and checks a SearchParameter: one that cannot be searched is refused
// (400, located at the element at fault) and stores nothing. On a
// database other processes write, a resource other than a
// SearchParameter is indexed with the registry this process holds,
// without reading the generation: recheckIndex reads it once the rows
// are written, and indexes them again if it moved.
func (s *Store) prepareSearch(ctx context.Context, tenant string, in *prepared, body []byte) error {
	tr, err := s.heldRegistry(ctx, tenant, in.typ != searchParameterType)
	if err != nil || tr == nil {
		return err
	}
	in.reg = tr.reg
	if in.typ != searchParameterType {
		return nil
	}
	def, err := search.ParseDefinition(body)
	if err != nil {
		return syntaxIssue("structure", err.Error(), searchParameterType)
	}
	warnings, err := tr.reg.Check(def)
	for _, w := range warnings {
		in.warnings = append(in.warnings, Issue{Severity: "warning", Code: "not-supported", Diagnostics: w.Msg, Expression: w.Path})
	}
	var de *search.DefinitionError
	if errors.As(err, &de) {
		refused := &InvalidError{Syntax: true}
		for _, is := range de.Issues {
			refused.Issues = append(refused.Issues, Issue{Severity: "error", Code: "invalid", Diagnostics: is.Msg, Expression: is.Path})
		}
		return refused
	}
	return err
}

// indexRegistry is the registry a row of tenant is indexed with outside a
// write (repairs): the tenant's, or the built-in one when it cannot be
// read.
func (s *Store) indexRegistry(ctx context.Context, tenant string) *search.Registry {
	tr, err := s.tenantRegistry(ctx, tenant)
	if err != nil || tr == nil {
		return s.opts.Registry
	}
	return tr.reg
}

// recheckIndex extracts again, with the tenant's registry as it is now,
// the search values of the versions just written with another one. On a
// database other processes write (not Options.Exclusive), the registry
// a write was indexed with may be older than a SearchParameter written
// there, whose re-indexing may even have passed these rows before they
// were written; its process changes the generation before that starts,
// so this read of it after the rows are written sees the change.
func (s *Store) recheckIndex(ctx context.Context, tenant string, versions []*version) {
	if s.opts.Exclusive || s.opts.Registry == nil {
		return
	}
	tr, err := s.tenantRegistry(ctx, tenant)
	if err != nil {
		s.log.Warn("check the search registry after a write", zap.String("tenant", tenant), zap.Error(err))
		return
	}
	for _, v := range versions {
		if v.doc.Deleted || v.reg == nil || v.reg == tr.reg {
			continue
		}
		d := v.doc
		if err := s.reindexRow(ctx, s.tenantDB(tenant).Collection(v.hist.Type), tr.reg, v.hist.Type, &d); err != nil {
			s.log.Warn("index a resource again with the tenant's new search parameters", zap.String("tenant", tenant),
				zap.String("type", v.hist.Type), zap.String("id", v.doc.ID), zap.Error(err))
		}
	}
}
