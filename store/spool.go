package store

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// A tenant's spool holds records the server made (its audit trail) that
// are to become resources later, when the server has time for them:
// storing a record is one small row, while the resource it becomes costs a
// version, a history row and a few dozen index entries. Spool stores
// records; Unspool turns the oldest into resources of a type, with the
// record's key as the resource's id, and removes them. A record whose
// resource is already stored (Unspool stopped after appending and before
// removing) is removed without being appended again, so each record
// becomes exactly one resource whatever moment a crash picks.
const spoolCollection = "spool"

// SpoolRecord is a record in a tenant's spool: Key orders the records
// (oldest first) and becomes its resource's id, so it must be a valid
// FHIR id; Data is the caller's encoding of the record.
type SpoolRecord struct {
	Key  string `bson:"_id"`
	Data []byte `bson:"d"`
}

// RefusedRecord is a spooled record that could not become a resource:
// the caller could not build it, or the store refused what it built. It
// has left the spool.
type RefusedRecord struct {
	Record SpoolRecord
	Err    error
}

// Spool stores records in the tenant's spool, all or none.
func (s *Store) Spool(ctx context.Context, tenant string, records []SpoolRecord) error {
	if len(records) == 0 {
		return nil
	}
	if err := ValidateTenantName(tenant); err != nil {
		return err
	}
	for _, r := range records {
		if err := ValidateID(r.Key); err != nil {
			return fmt.Errorf("spool record %q: %w", r.Key, err)
		}
	}
	rows := make([]any, len(records))
	for i := range records {
		rows[i] = &records[i]
	}
	defer s.beginWrite()()
	db := s.tenantDB(tenant)
	if a, ok := db.(engine.Atomic); ok {
		err := a.RunAtomic(ctx, func(ctx context.Context) error {
			return db.Collection(spoolCollection).InsertMany(ctx, rows)
		})
		return dbError("spool records", err)
	}
	return dbError("spool records", db.Collection(spoolCollection).InsertMany(ctx, rows))
}

// Spooled counts the records waiting in the tenant's spool.
func (s *Store) Spooled(ctx context.Context, tenant string) (int64, error) {
	n, err := s.tenantDB(tenant).Collection(spoolCollection).Count(ctx, bson.D{})
	return n, dbError("count spooled records", err)
}

// Unspool appends the oldest records of the tenant's spool, at most
// limit, as new resources of typ (see Append): build turns a record into
// the resource's JSON, whose id the store sets to the record's key. The
// records leave the spool once their resources are stored, those refused
// (by build or by the store) too, listed in refused. It returns how many
// records left the spool; 0 when it is empty. A tenant that no longer
// exists has its records dropped (ErrTenantNotFound).
func (s *Store) Unspool(ctx context.Context, tenant, typ string, limit int, build func(SpoolRecord) ([]byte, error)) (taken int, refused []RefusedRecord, err error) {
	records, gone, err := s.spoolHead(ctx, tenant, limit, "unspool")
	if len(records) == 0 || gone || err != nil {
		return len(records), nil, err
	}
	pending, err := s.notStored(ctx, tenant, typ, records)
	if err != nil {
		return 0, nil, err
	}
	refused, err = s.appendSpooled(ctx, tenant, typ, pending, build)
	if err != nil {
		return 0, nil, err
	}
	return len(records), refused, s.dropSpooled(ctx, tenant, records)
}

// notStored keeps the records whose resources typ does not hold yet.
func (s *Store) notStored(ctx context.Context, tenant, typ string, records []SpoolRecord) ([]SpoolRecord, error) {
	cur, err := s.tenantDB(tenant).Collection(typ).Find(ctx, byKeys(records), &engine.FindOptions{Projection: bson.D{{Key: "_id", Value: 1}}})
	if err != nil {
		return nil, dbError("find unspooled resources", err)
	}
	var stored []struct {
		ID string `bson:"_id"`
	}
	if err := engine.All(ctx, cur, &stored); err != nil {
		return nil, dbError("find unspooled resources", err)
	}
	if len(stored) == 0 {
		return records, nil
	}
	have := make(map[string]bool, len(stored))
	for _, d := range stored {
		have[d.ID] = true
	}
	var out []SpoolRecord
	for _, r := range records {
		if !have[r.Key] {
			out = append(out, r)
		}
	}
	return out, nil
}

// appendSpooled appends the resources built from records, setting aside
// those that build or the store refuses, one failure at a time.
func (s *Store) appendSpooled(ctx context.Context, tenant, typ string, records []SpoolRecord, build func(SpoolRecord) ([]byte, error)) ([]RefusedRecord, error) {
	var refused []RefusedRecord
	bodies := make([][]byte, 0, len(records))
	kept := make([]SpoolRecord, 0, len(records))
	for _, r := range records {
		body, err := build(r)
		if err != nil {
			refused = append(refused, RefusedRecord{Record: r, Err: err})
			continue
		}
		bodies, kept = append(bodies, body), append(kept, r)
	}
	for len(bodies) > 0 {
		_, err := s.appendWithIDs(ctx, tenant, typ, bodies, spoolKeys(kept))
		var oe *OpError
		if !errors.As(err, &oe) || oe.Index < 0 || oe.Index >= len(bodies) || errors.Is(err, ErrConflict) {
			return refused, err // left in the spool for the next round
		}
		refused = append(refused, RefusedRecord{Record: kept[oe.Index], Err: oe.Err})
		bodies = append(bodies[:oe.Index], bodies[oe.Index+1:]...)
		kept = append(kept[:oe.Index], kept[oe.Index+1:]...)
	}
	return refused, nil
}

// spoolKeys lists the keys of records.
func spoolKeys(records []SpoolRecord) []string {
	out := make([]string, len(records))
	for i, r := range records {
		out[i] = r.Key
	}
	return out
}

// byKeys is the filter of the documents whose _id is one of records' keys.
func byKeys(records []SpoolRecord) bson.D {
	return bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: spoolKeys(records)}}}}
}

// dropSpooled removes records from the tenant's spool.
func (s *Store) dropSpooled(ctx context.Context, tenant string, records []SpoolRecord) error {
	_, err := s.tenantDB(tenant).Collection(spoolCollection).DeleteMany(ctx, byKeys(records))
	return dbError("remove spooled records", err)
}

// DrainSpool turns the oldest records of the tenant's spool, at most
// limit, into audit rows (see Audit), convert reading each; a record
// convert refuses is listed in refused. The records leave the spool once
// their rows are stored; a row stored already (a drain stopped between
// the two) is not stored again. It returns how many records left the
// spool, 0 when it is empty. A tenant that no longer exists has its
// records dropped (ErrTenantNotFound).
func (s *Store) DrainSpool(ctx context.Context, tenant string, limit int, convert func(SpoolRecord) (AuditRecord, error)) (taken int, refused []RefusedRecord, err error) {
	records, gone, err := s.spoolHead(ctx, tenant, limit, "drain spool")
	if len(records) == 0 || gone || err != nil {
		return len(records), nil, err
	}
	rows := make([]AuditRecord, 0, len(records))
	for _, r := range records {
		rec, err := convert(r)
		if err != nil {
			refused = append(refused, RefusedRecord{Record: r, Err: err})
			continue
		}
		rec.Key = r.Key
		rows = append(rows, rec)
	}
	if err := s.Audit(ctx, tenant, rows); err != nil {
		return 0, nil, err
	}
	return len(records), refused, s.dropSpooled(ctx, tenant, records)
}

// spoolHead reads the oldest limit records of the tenant's spool. When
// the tenant no longer exists they are dropped, gone is set and the error
// is ErrTenantNotFound (joined with any failure to drop them), op naming
// the caller.
func (s *Store) spoolHead(ctx context.Context, tenant string, limit int, op string) (records []SpoolRecord, gone bool, err error) {
	cur, err := s.tenantDB(tenant).Collection(spoolCollection).Find(ctx, bson.D{}, &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}, Limit: int64(limit)})
	if err != nil {
		return nil, false, dbError("read spooled records", err)
	}
	if err := engine.All(ctx, cur, &records); err != nil {
		return nil, false, dbError("read spooled records", err)
	}
	if len(records) == 0 {
		return nil, false, nil
	}
	exists, err := s.TenantExists(ctx, tenant)
	if err != nil {
		return nil, false, err
	}
	if !exists {
		return records, true, errors.Join(fmt.Errorf("%s: %w: %s", op, ErrTenantNotFound, tenant), s.dropSpooled(ctx, tenant, records))
	}
	return records, false, nil
}
