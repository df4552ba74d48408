package store

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// IndexVersion numbers the format of the search values stored with each
// current row (idx and sort). A tenant records the version its rows were
// written with; Reindex brings older tenants up to date. Version 2 added
// composite parameters and the _text and _content word lists, version 3
// the point keys of token$quantity composites; version 4 stores the one
// range of a parameter that has one as itself (its sort order), a Timing
// as its outer limits, and no longer stores _id, the system| token forms
// or the values of combo parameters (searched through what they unite).
const IndexVersion = 4

// settingsCollection holds a tenant database's own records.
const settingsCollection = "settings"

// indexVersionID is the settings document recording IndexVersion.
const indexVersionID = "searchIndex"

// defaultReindexBatch is how many rows one step of a reindex reads
// (Options.ReindexBatch).
const defaultReindexBatch = 500

// reindexBatch is how many rows one step of a reindex reads.
func (s *Store) reindexBatch() int {
	if s.opts.ReindexBatch > 0 {
		return s.opts.ReindexBatch
	}
	return defaultReindexBatch
}

// tenantIndexVersion reads the index version a tenant's rows have; a
// tenant that never recorded one has version 1.
func (s *Store) tenantIndexVersion(ctx context.Context, tenant string) (int, error) {
	var doc struct {
		Version int `bson:"version"`
	}
	raw, err := s.tenantDB(tenant).Collection(settingsCollection).FindOne(ctx, bson.D{{Key: "_id", Value: indexVersionID}}, nil)
	err = engine.Decode(raw, err, &doc)
	if errors.Is(err, engine.ErrNoDocuments) {
		return 1, nil
	}
	if err != nil {
		return 0, dbError("read index version of tenant "+tenant, err)
	}
	return doc.Version, nil
}

// recordIndexVersion marks a tenant's rows as written with IndexVersion.
func (s *Store) recordIndexVersion(ctx context.Context, tenant string) error {
	_, err := s.tenantDB(tenant).Collection(settingsCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: indexVersionID}},
		bson.D{{Key: "_id", Value: indexVersionID}, {Key: "version", Value: IndexVersion}}, true)
	return dbError("record index version of tenant "+tenant, err)
}

// Reindex recomputes the search values of every current row of the
// tenants whose rows predate IndexVersion, and reports how many rows it
// rewrote. Run it on start-up: until it has run, searches that need the
// newer values miss the older rows.
func (s *Store) Reindex(ctx context.Context) (int, error) {
	if s.opts.Registry == nil {
		return 0, nil
	}
	tenants, err := s.ListTenants(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, t := range tenants {
		n, err := s.ReindexTenant(ctx, t.Name)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// ReindexTenant is Reindex for one tenant. The rows are indexed with the
// tenant's registry, its own SearchParameters included.
func (s *Store) ReindexTenant(ctx context.Context, tenant string) (int, error) {
	v, err := s.tenantIndexVersion(ctx, tenant)
	if err != nil || v >= IndexVersion {
		return 0, err
	}
	reg, err := s.Registry(ctx, tenant)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, typ := range s.opts.Registry.ResourceTypes() {
		n, err := s.reindexType(ctx, tenant, typ, reg)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, s.recordIndexVersion(ctx, tenant)
}

// reindexType rewrites the idx and sort of a type's current rows with
// reg, in _id order, a batch at a time.
func (s *Store) reindexType(ctx context.Context, tenant, typ string, reg *search.Registry) (int, error) {
	coll := s.tenantDB(tenant).Collection(typ)
	n, last := 0, ""
	for {
		done, next, err := s.reindexRows(ctx, coll, reg, typ, last)
		n += done
		if err != nil {
			return n, err
		}
		if done > 0 {
			s.changed(tenant, typ)
		}
		if done < s.reindexBatch() {
			return n, nil
		}
		last = next
	}
}

// reindexRows rewrites the idx and sort of the next batch of a type's
// current rows after the _id after ("" from the first), and reports how
// many it rewrote and the last _id. A row written meanwhile (another vid)
// is left alone: its writer indexed it already.
func (s *Store) reindexRows(ctx context.Context, coll engine.Collection, reg *search.Registry, typ, after string) (int, string, error) {
	filter := bson.D{{Key: "deleted", Value: false}}
	if after != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}})
	}
	cur, err := coll.Find(ctx, filter, &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}, Limit: int64(s.reindexBatch())})
	if err != nil {
		return 0, after, dbError("reindex "+typ, err)
	}
	var rows []*storedDoc
	if err := engine.All(ctx, cur, &rows); err != nil {
		return 0, after, dbError("reindex "+typ, err)
	}
	for i, d := range rows {
		if err := s.reindexRow(ctx, coll, reg, typ, d); err != nil {
			return i, after, err
		}
		after = d.ID
	}
	return len(rows), after, nil
}

func (s *Store) reindexRow(ctx context.Context, coll engine.Collection, reg *search.Registry, typ string, d *storedDoc) error {
	res, err := d.toResource(typ)
	if err != nil {
		return err
	}
	if d.Idx, d.Sort, err = s.indexWith(reg, typ, res.JSON); err != nil {
		return err
	}
	filter := bson.D{{Key: "_id", Value: d.ID}, {Key: "vid", Value: d.VID}}
	if _, err := coll.ReplaceOne(ctx, filter, d, false); err != nil {
		return dbError(fmt.Sprintf("reindex %s/%s", typ, d.ID), err)
	}
	return nil
}
