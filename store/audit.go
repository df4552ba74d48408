package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// The audit trail's records. A request's record is one compact row in its
// tenant's AuditEvent collection: the record itself (who, what, when, the
// outcome, the request), kept as it was made, and the few search values
// AuditEvent's searches read (auditParams), without a history row, a
// journal entry or the index entries of every other parameter. The row is
// rendered as an R4 AuditEvent when it is read, searched, exported or
// shown: every reader of the collection sees an AuditEvent, version 1,
// like those a client writes, which live in the same collection as full
// resources (auditrender.go).
const auditType = "AuditEvent"

// AuditRecord is what the trail keeps of one request. Its JSON names are
// short: the row holds it as written.
type AuditRecord struct {
	// Key is the record's id, time-ordered (a UUIDv7): its AuditEvent's id.
	Key string `json:"-"`
	// At is when the request started (UnixNano).
	At int64 `json:"t"`
	// Site is the tenant whose request it was.
	Site      string `json:"si,omitempty"`
	RequestID string `json:"r,omitempty"`
	Method    string `json:"m"`
	Path      string `json:"p"`
	// Query is the query string of a search (rendered base64 in entity.query).
	Query  string `json:"q,omitempty"`
	Status int    `json:"s"`
	// Type and ID are the resource the request addressed (ID empty for a
	// type-level request).
	Type string `json:"ty,omitempty"`
	ID   string `json:"id,omitempty"`
	// Patient is the id of the patient the request concerned, when known
	// (its target, or the patient a search was limited to).
	Patient string `json:"pt,omitempty"`
	// Interaction is the restful-interaction code (empty for requests that
	// are not FHIR interactions), Action the AuditEvent action (C R U D E).
	Interaction string `json:"i,omitempty"`
	Action      string `json:"ac,omitempty"`
	Subject     string `json:"su,omitempty"`
	Issuer      string `json:"is,omitempty"`
	ClientID    string `json:"c,omitempty"`
	Address     string `json:"a,omitempty"`
}

// auditRow is a record's row in the AuditEvent collection: a current row
// (storedDoc) whose audit field holds the record instead of a resource.
type auditRow struct {
	ID          string    `bson:"_id"`
	VID         int       `bson:"vid"`
	LastUpdated time.Time `bson:"lastUpdated"`
	Deleted     bool      `bson:"deleted"`
	Method      string    `bson:"method"`
	Audit       []byte    `bson:"audit"`
	Idx         bson.D    `bson:"idx"`
}

// NewAuditKey is a new record's key: a time-ordered UUID.
func NewAuditKey() (string, error) {
	key, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("audit record key: %w", err)
	}
	return key.String(), nil
}

// Audit stores records in the tenant's AuditEvent collection in one
// write: each is durable when it returns nil. A record whose key is
// stored already (a write retried after its outcome was lost) is not
// stored again. Records without a key get one.
func (s *Store) Audit(ctx context.Context, tenant string, records []AuditRecord) error {
	if len(records) == 0 {
		return nil
	}
	if err := ValidateTenantName(tenant); err != nil {
		return err
	}
	if err := s.ensureSearchIndexes(ctx, tenant, auditType); err != nil {
		return err
	}
	rows := make([]any, len(records))
	for i := range records {
		r := &records[i]
		if r.Key == "" {
			key, err := NewAuditKey()
			if err != nil {
				return err
			}
			r.Key = key
		} else if err := ValidateID(r.Key); err != nil {
			return fmt.Errorf("audit record %q: %w", r.Key, err)
		}
		row, err := r.row()
		if err != nil {
			return err
		}
		rows[i] = row
	}
	defer s.beginWrite()()
	err := s.tenantDB(tenant).Collection(auditType).InsertMany(ctx, rows)
	if err != nil && engine.IsDuplicateKey(err) {
		err = nil
	}
	s.changed(tenant, auditType) // remembered counts of AuditEvent searches are stale
	return dbError("store audit records", err)
}

// row is r's row.
func (r *AuditRecord) row() (*auditRow, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode audit record %s: %w", r.Key, err)
	}
	at := r.time()
	return &auditRow{ID: r.Key, VID: 1, LastUpdated: at, Method: http.MethodPost, Audit: data, Idx: r.idx(at)}, nil
}

// time is when the record was made, to the millisecond (as FHIR instants
// and the store's lastUpdated).
func (r *AuditRecord) time() time.Time {
	return time.Unix(0, r.At).UTC().Truncate(time.Millisecond)
}

// auditParams are the AuditEvent search parameters a record's row holds
// values of: searches by others (agent-name, altid, site...) find the
// trail's records through these only. Each value is an index entry
// written per request, so they are few.
var auditParams = []string{"_lastUpdated", "action", "agent", "date", "entity", "outcome", "patient", "subtype", "type"}

// idx is the search values of r's AuditEvent (see package search for
// their shapes), as Extract makes them of the rendered resource for
// auditParams (the type's display text aside: every record's type is
// "rest").
func (r *AuditRecord) idx(at time.Time) bson.D {
	var idx bson.D
	token := func(code, system, value string) {
		idx = append(idx, bson.E{Key: code, Value: []string{system + "|" + value, value}})
	}
	if r.Action != "" {
		token("action", "http://hl7.org/fhir/audit-event-action", r.Action)
	}
	if r.Subject != "" {
		idx = append(idx, bson.E{Key: "agent:identifier", Value: []string{r.issuerOrLocal() + "|" + r.Subject, r.Subject}})
	}
	instant := bson.D{{Key: "lo", Value: at}, {Key: "hi", Value: at.Add(time.Millisecond - time.Nanosecond)}}
	idx = append(idx, bson.E{Key: "_lastUpdated", Value: bson.A{instant}}, bson.E{Key: "date", Value: instant})
	if refs := r.entityRefs(); len(refs) > 0 {
		idx = append(idx, bson.E{Key: "entity", Value: refs})
	}
	token("outcome", "http://hl7.org/fhir/audit-event-outcome", outcomeCode(r.Status))
	if r.Patient != "" {
		idx = append(idx, bson.E{Key: "patient", Value: []string{"Patient/" + r.Patient, r.Patient}})
	}
	if r.Interaction != "" {
		token("subtype", "http://hl7.org/fhir/restful-interaction", r.Interaction)
	}
	token("type", auditRESTType.System, auditRESTType.Code)
	return idx
}

// entityRefs are the reference search values of r's entities.
func (r *AuditRecord) entityRefs() []string {
	var out []string
	if ref := r.reference(); ref != "" {
		out = append(out, ref, r.ID)
	}
	if r.Patient != "" && !(r.Type == "Patient" && r.ID == r.Patient) {
		out = append(out, "Patient/"+r.Patient, r.Patient)
	}
	return out
}

// reference is the resource the request addressed (Type/id), if any.
func (r *AuditRecord) reference() string {
	if r.Type != "" && r.ID != "" {
		return r.Type + "/" + r.ID
	}
	return ""
}

func (r *AuditRecord) issuerOrLocal() string {
	if r.Issuer != "" {
		return r.Issuer
	}
	return "urn:fhirstore:subject"
}

// outcomeCode is the AuditEvent outcome of an HTTP status: 0 success, 4
// minor failure (the client's), 8 serious failure (the server's).
func outcomeCode(status int) string {
	switch {
	case status < 400:
		return "0"
	case status < 500:
		return "4"
	default:
		return "8"
	}
}

// statusText is an HTTP status as a response line says it.
func statusText(code int) string { return strconv.Itoa(code) + " " + http.StatusText(code) }

// isAuditRow reports whether a current row holds an audit record.
func isAuditRow(d *storedDoc) bool { return len(d.Audit) > 0 }

// errNotAuditRow: the row holds a resource, not a record.
var errNotAuditRow = errors.New("not an audit record")

// auditResource is the AuditEvent of an audit row.
func auditResource(d *storedDoc) (*Resource, error) {
	if !isAuditRow(d) {
		return nil, errNotAuditRow
	}
	var r AuditRecord
	if err := json.Unmarshal(d.Audit, &r); err != nil {
		return nil, fmt.Errorf("audit record %s: %w: %w", d.ID, engine.ErrCorrupt, err)
	}
	r.Key = d.ID
	body, err := r.render(d.LastUpdated)
	if err != nil {
		return nil, err
	}
	return &Resource{Type: auditType, ID: d.ID, VersionID: 1, LastUpdated: d.LastUpdated.UTC(), Method: http.MethodPost, JSON: body, idx: d.Idx}, nil
}

// DecodeAuditRecord reads a record in its JSON form (the form the trail's
// spool held records in).
func DecodeAuditRecord(key string, data []byte) (AuditRecord, error) {
	var r AuditRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("unreadable audit record %s: %w", key, err)
	}
	r.Key = key
	return r, nil
}

// encodeQuery is a search's query as AuditEvent.entity.query holds it.
func encodeQuery(q string) string { return base64.StdEncoding.EncodeToString([]byte(q)) }

// auditVersion is version vid of an audit row, which has no history row:
// its one version is the row itself. It is nil for anything else.
func (s *Store) auditVersion(ctx context.Context, tenant, typ, id string, vid int) *Resource {
	if typ != auditType || vid != 1 {
		return nil
	}
	cur, err := s.current(ctx, tenant, typ, id)
	if err != nil || !isAuditRow(cur) {
		return nil
	}
	res, err := auditResource(cur)
	if err != nil {
		return nil
	}
	return res
}

// auditHistory fills the empty history page of an instance with the one
// version of an audit row, when the instance is one.
func (s *Store) auditHistory(ctx context.Context, tenant string, q HistoryQuery, page *HistoryPage) {
	res := s.auditVersion(ctx, tenant, q.Type, q.ID, 1)
	if res == nil || q.After != nil || q.Before != nil || (q.Since != nil && res.LastUpdated.Before(*q.Since)) ||
		(q.Until != nil && res.LastUpdated.After(*q.Until)) {
		return
	}
	page.Entries, page.Total = []*Resource{res}, 1
}

// PurgeAudit removes the tenant's audit records made before before, batch
// at a time (each batch a write of its own, so that writes go on between
// them); it returns how many it removed. AuditEvents written by clients
// are resources and stay.
func (s *Store) PurgeAudit(ctx context.Context, tenant string, before time.Time, batch int) (int64, error) {
	coll := s.tenantDB(tenant).Collection(auditType)
	filter := bson.D{{Key: "audit", Value: bson.D{{Key: "$exists", Value: true}}}, {Key: "lastUpdated", Value: bson.D{{Key: "$lt", Value: before}}}}
	var purged int64
	for ctx.Err() == nil {
		cur, err := coll.Find(ctx, filter, &engine.FindOptions{Projection: bson.D{{Key: "_id", Value: 1}}, Limit: int64(batch)})
		if err != nil {
			return purged, dbError("find audit records to purge", err)
		}
		var ids []struct {
			ID string `bson:"_id"`
		}
		if err := engine.All(ctx, cur, &ids); err != nil {
			return purged, dbError("find audit records to purge", err)
		}
		if len(ids) == 0 {
			return purged, nil
		}
		keys := make([]string, len(ids))
		for i, d := range ids {
			keys[i] = d.ID
		}
		n, err := s.deleteAuditRows(ctx, tenant, coll, keys)
		purged += n
		if err != nil {
			return purged, err
		}
	}
	return purged, ctx.Err()
}

// deleteAuditRows removes the audit rows of keys.
func (s *Store) deleteAuditRows(ctx context.Context, tenant string, coll engine.Collection, keys []string) (int64, error) {
	defer s.beginWrite()()
	n, err := coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}, {Key: "audit", Value: bson.D{{Key: "$exists", Value: true}}}})
	s.changed(tenant, auditType)
	return n, dbError("purge audit records", err)
}

// SpoolRecord is r as it waits in its tenant's spool to become its row
// (see DrainSpool), keyed by its key (a new one when it has none).
func (r *AuditRecord) SpoolRecord() (SpoolRecord, error) {
	if r.Key == "" {
		key, err := NewAuditKey()
		if err != nil {
			return SpoolRecord{}, err
		}
		r.Key = key
	}
	data, err := json.Marshal(r)
	if err != nil {
		return SpoolRecord{}, fmt.Errorf("encode audit record %s: %w", r.Key, err)
	}
	return SpoolRecord{Key: r.Key, Data: data}, nil
}
