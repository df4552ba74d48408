package store

import (
	"bytes"
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// CheckOptions configure CheckTenant.
type CheckOptions struct {
	// Full reads every document; otherwise the first Sample of each
	// collection.
	Full   bool
	Sample int64
	// MaxProblems stops the check of a tenant after that many problems.
	MaxProblems int
}

// Problem is one thing wrong in a tenant's database: the collection, the
// document (a resource's id, or its version for history) and what.
type Problem struct {
	Collection string
	ID         string
	Version    int
	Message    string
}

// String is the problem on one line.
func (p Problem) String() string {
	switch {
	case p.ID != "" && p.Version > 0:
		return fmt.Sprintf("collection %s: %s version %d: %s", p.Collection, p.ID, p.Version, p.Message)
	case p.ID != "":
		return fmt.Sprintf("collection %s: %s: %s", p.Collection, p.ID, p.Message)
	}
	return fmt.Sprintf("collection %s: %s", p.Collection, p.Message)
}

// CheckReport is what CheckTenant found.
type CheckReport struct {
	Documents int64 // documents decoded
	Problems  []Problem
}

// CheckTenant checks a tenant's database through the engine, for a
// database whose files cannot be checked directly (MongoDB): every
// current version and history row read decodes to a resource, a current
// version's row is in history, and its search index entries are those
// the tenant's search parameters give its resource now. The error is
// for a database that cannot be read at all.
func (s *Store) CheckTenant(ctx context.Context, tenant string, opts CheckOptions) (*CheckReport, error) {
	if opts.Sample <= 0 {
		opts.Sample = 500
	}
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 100
	}
	names, err := s.tenantDB(tenant).CollectionNames(ctx)
	if err != nil {
		return nil, dbError("list the collections of "+tenant, err)
	}
	rep := &CheckReport{}
	for _, name := range names {
		if len(rep.Problems) >= opts.MaxProblems {
			break
		}
		switch {
		case name == historyCollection:
			err = s.checkHistory(ctx, tenant, opts, rep)
		case s.checkType(name) == nil:
			err = s.checkCurrent(ctx, tenant, name, opts, rep)
		}
		if err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// scan calls fn with each document of coll that the options read.
func scan(ctx context.Context, coll engine.Collection, opts CheckOptions, fn func(raw bson.Raw)) error {
	fo := &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}}
	if !opts.Full {
		fo.Limit = opts.Sample
	}
	cur, err := coll.Find(ctx, bson.D{}, fo)
	if err != nil {
		return err
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		fn(cur.Current())
	}
	return cur.Err()
}

// checkCurrent checks the current versions of a resource type.
func (s *Store) checkCurrent(ctx context.Context, tenant, typ string, opts CheckOptions, rep *CheckReport) error {
	reg := s.indexRegistry(ctx, tenant)
	hist := s.tenantDB(tenant).Collection(historyCollection)
	var docs []*storedDoc
	err := scan(ctx, s.tenantDB(tenant).Collection(typ), opts, func(raw bson.Raw) {
		var d storedDoc
		if err := bson.Unmarshal(raw, &d); err != nil {
			id, _ := raw.Lookup("_id").StringValueOK()
			rep.Problems = append(rep.Problems, Problem{Collection: typ, ID: id, Message: "stored document does not decode: " + err.Error()})
			return
		}
		docs = append(docs, &d)
	})
	if err != nil {
		return dbError("read "+typ+" of "+tenant, err)
	}
	for _, d := range docs {
		if len(rep.Problems) >= opts.MaxProblems {
			return nil
		}
		rep.Documents++
		res, err := d.toResource(typ)
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{Collection: typ, ID: d.ID, Version: d.VID, Message: "stored resource does not decode: " + err.Error()})
			continue
		}
		if d.Deleted || isAuditRow(d) {
			continue
		}
		n, err := hist.Count(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("%s/%s/%d", typ, d.ID, d.VID)}})
		if err != nil {
			return dbError("read history of "+tenant, err)
		}
		if n == 0 {
			rep.Problems = append(rep.Problems, Problem{Collection: typ, ID: d.ID, Version: d.VID, Message: "the current version has no history row"})
		}
		idx, _, err := s.indexWith(reg, typ, res.JSON)
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{Collection: typ, ID: d.ID, Version: d.VID, Message: "index the stored resource: " + err.Error()})
			continue
		}
		if !bytes.Equal(idx, d.Idx) {
			rep.Problems = append(rep.Problems, Problem{Collection: typ, ID: d.ID, Version: d.VID, Message: "search index entries differ from those of the stored resource (run the server once: it re-indexes)"})
		}
	}
	return nil
}

// checkHistory checks that history rows decode.
func (s *Store) checkHistory(ctx context.Context, tenant string, opts CheckOptions, rep *CheckReport) error {
	err := scan(ctx, s.tenantDB(tenant).Collection(historyCollection), opts, func(raw bson.Raw) {
		if len(rep.Problems) >= opts.MaxProblems {
			return
		}
		rep.Documents++
		var h historyDoc
		if err := bson.Unmarshal(raw, &h); err != nil {
			key, _ := raw.Lookup("_id").StringValueOK()
			rep.Problems = append(rep.Problems, Problem{Collection: historyCollection, ID: key, Message: "stored version does not decode: " + err.Error()})
			return
		}
		if _, err := h.toResource(); err != nil {
			rep.Problems = append(rep.Problems, Problem{Collection: historyCollection, ID: h.Type + "/" + h.ID, Version: h.VID, Message: "stored version does not decode: " + err.Error()})
		}
	})
	if err != nil {
		return dbError("read history of "+tenant, err)
	}
	return nil
}
