package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"fhirstore/search"
	"fhirstore/store/document"
)

// Append stores resources the server built itself (its audit trail) as
// new resources of typ, all or nothing, the way a transaction of creates
// stores them less what only a client's input needs: no schema, invariant
// or profile validation, no conditional criteria, no references to
// rewrite. Each body must be a resource of typ the caller built valid;
// its id is assigned. Each is still a version 1 with its history row,
// indexed with the tenant's search parameters, held to the engine's
// limits, committed through the journal and announced to the
// subscriptions that listen to typ. A failure is an *OpError naming the
// body at fault, or the database's error; nothing is stored then.
//
// Conformance resources and SearchParameters change how the tenant
// validates and searches, which needs the checks: they cannot be
// appended.
func (s *Store) Append(ctx context.Context, tenant, typ string, bodies [][]byte) ([]*Resource, error) {
	return s.appendWithIDs(ctx, tenant, typ, bodies, nil)
}

// appendWithIDs is Append giving body i the id ids[i] (a new one when ids
// is nil).
func (s *Store) appendWithIDs(ctx context.Context, tenant, typ string, bodies [][]byte, ids []string) ([]*Resource, error) {
	if err := s.checkType(typ); err != nil {
		return nil, err
	}
	if conformanceTypes[typ] {
		return nil, fmt.Errorf("append %s: a conformance resource is written with its checks", typ)
	}
	tr, err := s.heldRegistry(ctx, tenant, true)
	if err != nil {
		return nil, err
	}
	var reg *search.Registry
	if tr != nil {
		reg = tr.reg
	}
	defer s.beginWrite()()
	ts := s.now()
	t := &txn{s: s, tenant: tenant, ops: make([]*txnOp, len(bodies))}
	errs := make([]error, len(bodies))
	inParallel(len(bodies), func(i int) {
		id := uuid.NewString()
		if ids != nil {
			id = ids[i]
		}
		t.ops[i], errs[i] = s.appendOp(reg, typ, bodies[i], id, i, ts)
	})
	for i, err := range errs {
		if err != nil {
			return nil, &OpError{Index: i, Err: err}
		}
	}
	if err := t.commit(ctx); err != nil {
		return nil, err
	}
	out := make([]*Resource, len(t.ops))
	for i, o := range t.ops {
		out[i] = o.result.Resource
	}
	return out, nil
}

// appendOp plans body as the new resource typ/id written at ts.
func (s *Store) appendOp(reg *search.Registry, typ string, body []byte, id string, index int, ts time.Time) (*txnOp, error) {
	dec, err := document.FromJSON(body, s.opts.MaxDepth)
	if err != nil {
		return nil, err
	}
	if rt, _ := lookup(dec.Doc, "resourceType").(string); rt != typ {
		return nil, fmt.Errorf("append %s: the resource is a %q", typ, rt)
	}
	o := &txnOp{Op: Op{Method: "POST", Type: typ, ID: id}, index: index}
	o.prep = &prepared{typ: typ, doc: dec.Doc, numText: dec.NumText, reg: reg}
	if o.write, err = s.buildVersion(o.prep, o.ID, nil, "POST", ts, nil); err != nil {
		return nil, err
	}
	o.result = Result{Outcome: Created, Resource: o.write.res}
	return o, nil
}

// appendChunk is how many bodies make a goroutine's worth of Append's
// parsing, indexing and rendering: most of its time outside the database.
const appendChunk = 32
