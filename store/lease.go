package store

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// leasesCollection holds the time-limited claims of jobs that one process
// at a time should do in a tenant's database (the subscription dispatcher).
const leasesCollection = "leases"

type leaseDoc struct {
	Name  string    `bson:"_id"`
	Owner string    `bson:"owner"`
	Until time.Time `bson:"until"`
}

// Lease claims the job name in tenant for owner until ttl from now, or
// renews the claim when owner holds it already; it reports whether owner
// holds it. The unique insert is the race-safe step: an expired claim is
// deleted by its exact owner and expiry, then inserted anew, so two
// processes never both win it.
func (s *Store) Lease(ctx context.Context, tenant, name, owner string, ttl time.Duration) (bool, error) {
	coll := s.tenantDB(tenant).Collection(leasesCollection)
	now := s.opts.Now().UTC()
	doc := leaseDoc{Name: name, Owner: owner, Until: now.Add(ttl)}
	err := coll.InsertOne(ctx, doc)
	if err == nil {
		return true, nil
	}
	if !engine.IsDuplicateKey(err) {
		return false, dbError("claim lease", err)
	}
	var cur leaseDoc
	err = engine.FindOneInto(ctx, coll, bson.D{{Key: "_id", Value: name}}, nil, &cur)
	if errors.Is(err, engine.ErrNoDocuments) {
		return false, nil // released meanwhile: claimed next time
	}
	if err != nil {
		return false, dbError("read lease", err)
	}
	switch {
	case cur.Owner == owner:
		_, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}}, doc, false)
		return err == nil, dbError("renew lease", err)
	case cur.Until.Before(now):
		stale := bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: cur.Owner}, {Key: "until", Value: cur.Until}}
		if _, err := coll.DeleteOne(ctx, stale); err != nil {
			return false, dbError("break expired lease", err)
		}
		err := coll.InsertOne(ctx, doc)
		if engine.IsDuplicateKey(err) {
			return false, nil
		}
		return err == nil, dbError("claim lease", err)
	}
	return false, nil
}

// ReleaseLease gives up owner's claim of the job name in tenant.
func (s *Store) ReleaseLease(ctx context.Context, tenant, name, owner string) error {
	_, err := s.tenantDB(tenant).Collection(leasesCollection).DeleteOne(ctx, bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}})
	return dbError("release lease", err)
}
