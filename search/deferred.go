package search

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Deferred is a part of a condition that another lookup answers before the
// filter can run: the codes of a value set or of a code hierarchy, the ids
// of the matches of a sub-search, or the references a chain leads to. A
// condition holds it as the value of its field ({field: *Deferred});
// Query.Resolve replaces it by {field: {$in: values}} (or $nin), so the
// database sees only index-friendly equality lists.
type Deferred struct {
	Field string // idx.<code>, or _id for a sub-search
	Not   bool   // $nin instead of $in
	// Exactly one of the following is set.
	Codes []*CodeSet // union of code sets (token index values)
	Query *Query     // ids of the matches of a search of the same type
	Chain *Chain     // "Type/id" of the resources a chain leads to
}

// CodeSet names codes by terminology: the members of a ValueSet, or the
// codes at or below (above) a code in a stored CodeSystem's hierarchy.
type CodeSet struct {
	Param    string // the parameter as written, for errors
	Relation string // "in", "below" or "above"
	ValueSet string // for "in": a canonical URL (url|version allowed) or ValueSet/id
	System   string // for "below" and "above"
	Code     string
}

// Resolver answers the deferred parts of a query from the database.
type Resolver interface {
	// Codes lists the token index values ("system|code") of a code set.
	Codes(ctx context.Context, set *CodeSet) ([]string, error)
	// IDs lists the ids of the matches of q.
	IDs(ctx context.Context, q *Query) ([]string, error)
	// References lists "Type/id" of the resources ch leads to.
	References(ctx context.Context, ch *Chain) ([]string, error)
}

// Deferred reports whether the query has parts Resolve must answer first.
func (q *Query) Deferred() bool {
	for _, c := range q.Conditions {
		if hasDeferred(c) {
			return true
		}
	}
	return false
}

// Resolve answers every deferred part of q's conditions in place.
func (q *Query) Resolve(ctx context.Context, r Resolver) error {
	for _, c := range q.Conditions {
		if err := resolveIn(ctx, r, c); err != nil {
			return err
		}
	}
	return nil
}

func hasDeferred(v any) bool {
	switch x := v.(type) {
	case *Deferred:
		return true
	case bson.D:
		for _, e := range x {
			if hasDeferred(e.Value) {
				return true
			}
		}
	case bson.A:
		for _, el := range x {
			if hasDeferred(el) {
				return true
			}
		}
	}
	return false
}

func resolveIn(ctx context.Context, r Resolver, v any) error {
	switch x := v.(type) {
	case bson.D:
		for i, e := range x {
			d, ok := e.Value.(*Deferred)
			if !ok {
				if err := resolveIn(ctx, r, e.Value); err != nil {
					return err
				}
				continue
			}
			values, err := d.values(ctx, r)
			if err != nil {
				return err
			}
			op := "$in"
			if d.Not {
				op = "$nin"
			}
			x[i].Value = bson.D{{Key: op, Value: values}}
		}
	case bson.A:
		for _, el := range x {
			if err := resolveIn(ctx, r, el); err != nil {
				return err
			}
		}
	}
	return nil
}

// values are what the deferred part stands for, never nil (an empty $in
// matches nothing, an empty $nin everything).
func (d *Deferred) values(ctx context.Context, r Resolver) ([]string, error) {
	out := []string{}
	switch {
	case d.Query != nil:
		ids, err := r.IDs(ctx, d.Query)
		if err != nil {
			return nil, fmt.Errorf("sub-search of %s: %w", d.Query.Type, err)
		}
		return append(out, ids...), nil
	case d.Chain != nil:
		refs, err := r.References(ctx, d.Chain)
		if err != nil {
			return nil, fmt.Errorf("chain %s: %w", d.Chain.Param, err)
		}
		return append(out, refs...), nil
	}
	seen := map[string]bool{}
	for _, set := range d.Codes {
		codes, err := r.Codes(ctx, set)
		if err != nil {
			return nil, err
		}
		for _, c := range codes {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out, nil
}
