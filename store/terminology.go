package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
	"fhirstore/store/terminology"
)

// MaxSearchCodes bounds the codes a terminology modifier (:in, :not-in,
// :below, :above) may stand for: they become one $in list.
const MaxSearchCodes = 10000

// Terminology answers terminology questions from the tenant's stored
// ValueSet and CodeSystem resources.
func (s *Store) Terminology(tenant string) *terminology.Service {
	return terminology.New(terminologySource{s: s, tenant: tenant})
}

// terminologySource reads a tenant's current terminology resources.
type terminologySource struct {
	s      *Store
	tenant string
}

// ByURL finds the current resources of typ with that canonical url (the
// url search parameter), oldest write first.
func (t terminologySource) ByURL(ctx context.Context, typ, url string) ([][]byte, error) {
	if err := t.s.checkType(typ); err != nil {
		return nil, err
	}
	coll := t.s.tenantDB(t.tenant).Collection(typ)
	opts := &engine.FindOptions{Sort: bson.D{{Key: "lastUpdated", Value: 1}, {Key: "_id", Value: 1}}, Projection: bson.D{{Key: "idx", Value: 0}}}
	cur, err := coll.Find(ctx, bson.D{{Key: "idx.url", Value: url}}, opts)
	if err != nil {
		return nil, dbError("find "+typ+" by url", err)
	}
	var docs []*storedDoc
	if err := engine.All(ctx, cur, &docs); err != nil {
		return nil, dbError("find "+typ+" by url", err)
	}
	var out [][]byte
	for _, d := range docs {
		res, err := d.toResource(typ)
		if err != nil {
			return nil, err
		}
		if !res.Deleted {
			out = append(out, res.JSON)
		}
	}
	if len(out) == 0 {
		return nil, terminology.ErrNotFound
	}
	return out, nil
}

// ByID reads typ/id; a deleted or unknown resource is not found.
func (t terminologySource) ByID(ctx context.Context, typ, id string) ([]byte, error) {
	res, err := t.s.Read(ctx, t.tenant, typ, id)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrGone) {
		return nil, terminology.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return res.JSON, nil
}

// resolver answers the deferred parts of a search of one tenant.
type resolver struct {
	s      *Store
	tenant string
}

// Codes expands a code set into token index values.
func (r resolver) Codes(ctx context.Context, set *search.CodeSet) ([]string, error) {
	svc := r.s.Terminology(r.tenant)
	var codes []terminology.Concept
	var err error
	if set.Relation == "in" {
		var vs []byte
		if vs, err = svc.ValueSet(ctx, set.ValueSet); err == nil {
			codes, err = svc.Expand(ctx, vs)
		}
	} else {
		codes, err = svc.Hierarchy(ctx, set.Relation, set.System, set.Code)
	}
	if err != nil {
		return nil, codeSetError(set, err)
	}
	if len(codes) > MaxSearchCodes {
		return nil, &search.Error{Param: set.Param, Msg: fmt.Sprintf("the value set has %d codes; a search can use at most %d", len(codes), MaxSearchCodes)}
	}
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = c.Key()
		if c.System == "" {
			out[i] = c.Code
		}
	}
	return out, nil
}

// codeSetError says why a code set could not be used (400).
func codeSetError(set *search.CodeSet, err error) error {
	var te *terminology.Error
	switch {
	case errors.As(err, &te):
		return &search.Error{Param: set.Param, Msg: "cannot expand: " + te.Msg}
	case errors.Is(err, terminology.ErrNotFound) && set.Relation == "in":
		return &search.Error{Param: set.Param, Msg: fmt.Sprintf("no ValueSet %s is stored", set.ValueSet)}
	case errors.Is(err, terminology.ErrUnknownCode):
		return &search.Error{Param: set.Param, Msg: fmt.Sprintf("cannot use :%s: %v", set.Relation, err)}
	case errors.Is(err, terminology.ErrNotFound):
		msg := strings.TrimSuffix(err.Error(), ": "+terminology.ErrNotFound.Error())
		return &search.Error{Param: set.Param, Msg: fmt.Sprintf("cannot use :%s: %s is not stored", set.Relation, msg)}
	}
	return err
}

// IDs lists the ids of the matches of q.
func (r resolver) IDs(ctx context.Context, q *search.Query) ([]string, error) {
	return r.s.matchingIDs(ctx, r.tenant, q)
}

// References lists "Type/id" of the resources a chain leads to.
func (r resolver) References(ctx context.Context, ch *search.Chain) ([]string, error) {
	return r.s.chainRefs(ctx, r.tenant, ch)
}
