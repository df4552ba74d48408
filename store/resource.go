package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"fhirstore/search"
	"fhirstore/store/document"
	"fhirstore/store/engine"
)

const historyCollection = "history"

// Resource is one version of a resource as stored.
type Resource struct {
	Type        string
	ID          string
	VersionID   int
	LastUpdated time.Time
	// Method is the interaction that produced the version: POST, PUT or DELETE.
	Method string
	// Deleted marks a deletion; JSON is then nil.
	Deleted bool
	// JSON is the resource as the client sent it, with id and meta set.
	JSON []byte
	// Warnings are non-fatal validation issues of the write that produced it.
	Warnings []Issue

	idx bson.Raw // search values, when read by a search (for _include)
}

// WriteOptions carry the preconditions of a write.
type WriteOptions struct {
	// IfMatch, when set, is the version the resource must currently have.
	IfMatch *int
	// IfExists requires a current (not deleted) version, whatever it is
	// (HTTP If-Match: *).
	IfExists bool
	// Lenient accepts unknown elements with a warning instead of rejecting them.
	Lenient bool
	// Guard, when set, approves every version before it is written; its
	// error aborts the write (the whole transaction, in a transaction).
	Guard Guard
	// Profiles are checked besides those the resource claims in
	// meta.profile ($validate's profile parameter).
	Profiles []string
	// bundle is the batch or transaction the write is an entry of.
	bundle *Bundle
}

// Guard approves a change of a resource: current is the version it
// replaces (nil for a create), next the version about to be written
// (Deleted for a delete). Authorization checks use it to see both.
type Guard func(current, next *Resource) error

// idPattern is the FHIR id datatype.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)

// ValidateID reports whether id is a valid FHIR logical id.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%w %q: use 1-64 letters, digits, '-' or '.'", ErrInvalidID, id)
	}
	return nil
}

// storedDoc is the current-collection document.
type storedDoc struct {
	ID          string             `bson:"_id"`
	VID         int                `bson:"vid"`
	LastUpdated time.Time          `bson:"lastUpdated"`
	Deleted     bool               `bson:"deleted"`
	Method      string             `bson:"method,omitempty"`
	Resource    bson.Raw           `bson:"resource,omitempty"`
	NumText     []document.NumText `bson:"numText,omitempty"`
	// Idx holds the search parameter values, Sort the _sort keys (package search).
	Idx  bson.Raw `bson:"idx,omitempty"`
	Sort bson.Raw `bson:"sort,omitempty"`
	// Audit holds an audit record in place of a resource (audit.go).
	Audit []byte `bson:"audit,omitempty"`
}

// historyDoc is a row of the history collection.
type historyDoc struct {
	Key         string             `bson:"_id"`
	Type        string             `bson:"type"`
	ID          string             `bson:"id"`
	VID         int                `bson:"vid"`
	LastUpdated time.Time          `bson:"lastUpdated"`
	Method      string             `bson:"method"`
	Resource    bson.Raw           `bson:"resource,omitempty"`
	NumText     []document.NumText `bson:"numText,omitempty"`
	// Txn names the transaction that wrote the row; the row is hidden while
	// that transaction's journal entry exists (see journal.go).
	Txn string `bson:"txn,omitempty"`
}

// MarshalBSON encodes the row as bson.Marshal encodes its fields, without
// reflection.
func (d storedDoc) MarshalBSON() ([]byte, error) {
	doc := bson.D{{Key: "_id", Value: d.ID}, {Key: "vid", Value: d.VID}, {Key: "lastUpdated", Value: d.LastUpdated}, {Key: "deleted", Value: d.Deleted}}
	doc = appendUnlessEmpty(doc, "method", d.Method, len(d.Method))
	doc = appendUnlessEmpty(doc, "resource", d.Resource, len(d.Resource))
	doc = appendUnlessEmpty(doc, "numText", d.NumText, len(d.NumText))
	doc = appendUnlessEmpty(doc, "idx", d.Idx, len(d.Idx))
	doc = appendUnlessEmpty(doc, "sort", d.Sort, len(d.Sort))
	doc = appendUnlessEmpty(doc, "audit", d.Audit, len(d.Audit))
	return document.MarshalAppend(make([]byte, 0, 96+len(d.ID)+len(d.Method)+len(d.Resource)+len(d.Idx)+len(d.Sort)+len(d.Audit)+rowTextBytes(d.NumText)), doc)
}

// MarshalBSON encodes the row as bson.Marshal encodes its fields, without
// reflection.
func (d historyDoc) MarshalBSON() ([]byte, error) {
	doc := bson.D{{Key: "_id", Value: d.Key}, {Key: "type", Value: d.Type}, {Key: "id", Value: d.ID}, {Key: "vid", Value: d.VID},
		{Key: "lastUpdated", Value: d.LastUpdated}, {Key: "method", Value: d.Method}}
	doc = appendUnlessEmpty(doc, "resource", d.Resource, len(d.Resource))
	doc = appendUnlessEmpty(doc, "numText", d.NumText, len(d.NumText))
	doc = appendUnlessEmpty(doc, "txn", d.Txn, len(d.Txn))
	return document.MarshalAppend(make([]byte, 0, 96+len(d.Key)+len(d.Type)+len(d.ID)+len(d.Method)+len(d.Resource)+len(d.Txn)+rowTextBytes(d.NumText)), doc)
}

// rowTextBytes is about what texts take in a row's BSON.
func rowTextBytes(texts []document.NumText) int {
	n := 0
	for _, t := range texts {
		n += 32 + len(t.Path) + len(t.Text)
	}
	return n
}

// appendUnlessEmpty appends key: v to doc unless v, of length n, is empty
// (a field tagged omitempty).
func appendUnlessEmpty(doc bson.D, key string, v any, n int) bson.D {
	if n == 0 {
		return doc
	}
	return append(doc, bson.E{Key: key, Value: v})
}

func historyKey(typ, id string, vid int) string { return typ + "/" + id + "/" + strconv.Itoa(vid) }

func (s *Store) checkType(typ string) error {
	if !s.opts.ResourceTypes(typ) {
		return fmt.Errorf("%w %q", ErrUnknownType, typ)
	}
	return nil
}

// Create stores body as a new resource of type typ with a server-assigned id.
func (s *Store) Create(ctx context.Context, tenant, typ string, body []byte, opts WriteOptions) (*Resource, error) {
	if err := s.checkType(typ); err != nil {
		return nil, err
	}
	in, err := s.prepare(ctx, tenant, typ, "", body, opts, false)
	if err != nil {
		return nil, err
	}
	id := uuid.NewString()
	res, err := s.write(ctx, tenant, in, id, nil, "POST", opts.Guard)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", typ, err)
	}
	return res, nil
}

// Update stores body as the next version of typ/id, creating the resource
// when it does not exist (created reports which happened).
func (s *Store) Update(ctx context.Context, tenant, typ, id string, body []byte, opts WriteOptions) (res *Resource, created bool, err error) {
	if err := s.checkType(typ); err != nil {
		return nil, false, err
	}
	if err := ValidateID(id); err != nil {
		return nil, false, err
	}
	in, err := s.prepare(ctx, tenant, typ, id, body, opts, false)
	if err != nil {
		return nil, false, err
	}
	if err := s.checkHeld(tenant, typ, id); err != nil {
		return nil, false, fmt.Errorf("update %s/%s: %w", typ, id, err)
	}
	cur, err := s.current(ctx, tenant, typ, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, false, fmt.Errorf("update %s/%s: %w", typ, id, err)
	}
	if err := checkIfMatch(opts, cur); err != nil {
		return nil, false, fmt.Errorf("update %s/%s: %w", typ, id, err)
	}
	res, err = s.write(ctx, tenant, in, id, cur, "PUT", opts.Guard)
	if err != nil {
		return nil, false, fmt.Errorf("update %s/%s: %w", typ, id, s.conflict(err, opts))
	}
	return res, cur == nil, nil
}

// Delete records the deletion of typ/id as a new version. Deleting a deleted
// resource changes nothing and returns ErrGone; an unknown one ErrNotFound.
func (s *Store) Delete(ctx context.Context, tenant, typ, id string, opts WriteOptions) (*Resource, error) {
	if err := s.checkType(typ); err != nil {
		return nil, err
	}
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	if err := s.checkHeld(tenant, typ, id); err != nil {
		return nil, fmt.Errorf("delete %s/%s: %w", typ, id, err)
	}
	cur, err := s.current(ctx, tenant, typ, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("delete %s/%s: %w", typ, id, err)
	}
	if err := checkIfMatch(opts, cur); err != nil {
		return nil, fmt.Errorf("delete %s/%s: %w", typ, id, err)
	}
	if cur == nil {
		return nil, fmt.Errorf("delete %s/%s: %w", typ, id, ErrNotFound)
	}
	if cur.Deleted {
		return nil, fmt.Errorf("delete %s/%s: %w", typ, id, ErrGone)
	}
	res, err := s.write(ctx, tenant, &prepared{typ: typ}, id, cur, "DELETE", opts.Guard)
	if err != nil {
		return nil, fmt.Errorf("delete %s/%s: %w", typ, id, s.conflict(err, opts))
	}
	return res, nil
}

func (s *Store) conflict(err error, opts WriteOptions) error {
	if errors.Is(err, ErrConflict) && (opts.IfMatch != nil || opts.IfExists) {
		return fmt.Errorf("%w: changed concurrently", ErrPreconditionFailed)
	}
	return err
}

func checkIfMatch(opts WriteOptions, cur *storedDoc) error {
	if opts.IfExists && (cur == nil || cur.Deleted) {
		return fmt.Errorf("%w: If-Match * but the resource does not exist", ErrPreconditionFailed)
	}
	want := opts.IfMatch
	if want == nil {
		return nil
	}
	if cur == nil {
		return fmt.Errorf("%w: If-Match W/\"%d\" but the resource does not exist", ErrPreconditionFailed, *want)
	}
	if cur.VID != *want {
		return fmt.Errorf("%w: If-Match W/\"%d\" but the current version is %d", ErrPreconditionFailed, *want, cur.VID)
	}
	return nil
}

// Read returns the current version of typ/id. A deleted resource yields
// ErrGone together with the deletion's version (JSON nil).
func (s *Store) Read(ctx context.Context, tenant, typ, id string) (*Resource, error) {
	if err := s.checkType(typ); err != nil {
		return nil, err
	}
	if ValidateID(id) != nil {
		return nil, fmt.Errorf("read %s/%s: %w", typ, id, ErrNotFound)
	}
	if err := s.checkHeld(tenant, typ, id); err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", typ, id, err)
	}
	cur, err := s.current(ctx, tenant, typ, id)
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", typ, id, err)
	}
	res, err := cur.toResource(typ)
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", typ, id, err)
	}
	if cur.Deleted {
		return res, fmt.Errorf("read %s/%s: %w", typ, id, ErrGone)
	}
	return res, nil
}

// VRead returns version vid of typ/id; a deletion version yields ErrGone.
func (s *Store) VRead(ctx context.Context, tenant, typ, id string, vid string) (*Resource, error) {
	if err := s.checkType(typ); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(vid)
	if err != nil || n < 1 || strconv.Itoa(n) != vid || ValidateID(id) != nil {
		return nil, fmt.Errorf("vread %s/%s/_history/%s: %w", typ, id, vid, ErrNotFound)
	}
	var h historyDoc
	err = engine.FindOneInto(ctx, s.tenantDB(tenant).Collection(historyCollection), bson.D{{Key: "_id", Value: historyKey(typ, id, n)}}, nil, &h)
	if errors.Is(err, engine.ErrNoDocuments) {
		if res := s.auditVersion(ctx, tenant, typ, id, n); res != nil {
			return res, nil
		}
		return nil, fmt.Errorf("vread %s/%s/_history/%d: %w", typ, id, n, ErrNotFound)
	}
	if err != nil {
		return nil, dbError(fmt.Sprintf("vread %s/%s/_history/%d", typ, id, n), s.damaged(ctx, tenant, err))
	}
	if pending, err := s.pendingTxns(ctx, tenant, []*historyDoc{&h}); err != nil {
		return nil, err
	} else if pending[h.Txn] {
		return nil, fmt.Errorf("vread %s/%s/_history/%d: %w", typ, id, n, ErrNotFound)
	}
	res, err := h.toResource()
	if err != nil {
		return nil, err
	}
	if res.Deleted {
		return res, fmt.Errorf("vread %s/%s/_history/%d: %w", typ, id, n, ErrGone)
	}
	return res, nil
}

func (s *Store) current(ctx context.Context, tenant, typ, id string) (*storedDoc, error) {
	var d storedDoc
	noIndex := &engine.FindOptions{Projection: bson.D{{Key: "idx", Value: 0}, {Key: "sort", Value: 0}}}
	err := engine.FindOneInto(ctx, s.tenantDB(tenant).Collection(typ), bson.D{{Key: "_id", Value: id}}, noIndex, &d)
	if errors.Is(err, engine.ErrNoDocuments) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, dbError("find current version", s.damaged(ctx, tenant, err))
	}
	return &d, nil
}

// version is one planned version of a resource: its history row, its
// current row and what the client sees.
type version struct {
	hist historyDoc
	doc  storedDoc
	res  *Resource
	// reg is the search registry doc.Idx was extracted with.
	reg *search.Registry
	// histRow and docRow are hist and doc as the database prepared them
	// ahead of an atomic write (engine.Atomic.Prepare), nil until then.
	histRow, docRow any
}

// historyRow is what the history row's write stores: hist, or its
// prepared form.
func (v *version) historyRow() any {
	if v.histRow != nil {
		return v.histRow
	}
	return &v.hist
}

// currentRow is what the current row's write stores: doc, or its
// prepared form.
func (v *version) currentRow() any {
	if v.docRow != nil {
		return v.docRow
	}
	return &v.doc
}

// prepareRows has the database prepare the rows of versions ahead of the
// atomic write that stores them, on up to GOMAXPROCS goroutines: their
// encoding then runs beside other requests rather than in the writer's
// turn.
func prepareRows(a engine.Atomic, versions []*version) error {
	errs := make([]error, len(versions))
	inParallel(len(versions), func(i int) {
		v := versions[i]
		if v.histRow, errs[i] = a.Prepare(&v.hist); errs[i] == nil {
			v.docRow, errs[i] = a.Prepare(&v.doc)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return dbError("prepare rows", err)
	}
	return nil
}

// buildVersion plans the version after cur (nil for a new resource) written
// by method at ts, moved past cur's time to keep versions ordered.
func (s *Store) buildVersion(in *prepared, id string, cur *storedDoc, method string, ts time.Time, guard Guard) (*version, error) {
	vid := 1
	if cur != nil {
		vid = cur.VID + 1
		if !ts.After(cur.LastUpdated) { // keep one resource's versions strictly ordered in time
			ts = cur.LastUpdated.Add(time.Millisecond)
		}
	}
	var doc bson.D
	var raw bson.Raw
	var out []byte
	if method != "DELETE" {
		var err error
		if doc, raw, out, err = in.finish(id, vid, ts); err != nil {
			return nil, err
		}
	}
	v := &version{
		hist: historyDoc{Key: historyKey(in.typ, id, vid), Type: in.typ, ID: id, VID: vid, LastUpdated: ts, Method: method, Resource: raw, NumText: in.numText},
		doc:  storedDoc{ID: id, VID: vid, LastUpdated: ts, Deleted: method == "DELETE", Method: method, Resource: raw, NumText: in.numText},
		res:  &Resource{Type: in.typ, ID: id, VersionID: vid, LastUpdated: ts, Method: method, Deleted: method == "DELETE", JSON: out, Warnings: in.warnings},
	}
	if err := approve(guard, in.typ, cur, v.res); err != nil {
		return nil, err
	}
	if !v.doc.Deleted {
		var err error
		if v.doc.Idx, v.doc.Sort, err = s.indexParsed(in.reg, in.typ, doc, in.numText, out); err != nil {
			return nil, err
		}
		v.reg = in.reg
	}
	if err := s.checkLimits(v); err != nil {
		return nil, err
	}
	return v, nil
}

// approve asks guard, when set, to approve next as the successor of cur.
func approve(guard Guard, typ string, cur *storedDoc, next *Resource) error {
	if guard == nil {
		return nil
	}
	var current *Resource
	if cur != nil && !cur.Deleted {
		var err error
		if current, err = cur.toResource(typ); err != nil {
			return err
		}
	}
	return guard(current, next)
}

// write is the one path a single change takes: next version and timestamp,
// history row (its unique _id is the optimistic lock), then current row.
func (s *Store) write(ctx context.Context, tenant string, in *prepared, id string, cur *storedDoc, method string, guard Guard) (*Resource, error) {
	defer s.beginWrite()()
	v, err := s.buildVersion(in, id, cur, method, s.now(), guard)
	if err != nil {
		return nil, err
	}
	if err := s.ensureSearchIndexes(ctx, tenant, in.typ); err != nil {
		return nil, err
	}
	if _, atomic := s.tenantDB(tenant).(engine.Atomic); atomic {
		// The outbox row commits with the change: no write of its own.
		rows, o := s.outboxRows(tenant, []*version{v})
		if err := s.writeOne(ctx, tenant, v, cur != nil, rows); err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			o.Recorded(tenant)
		}
	} else {
		recorded, err := s.recordChanges(ctx, tenant, []*version{v})
		if err != nil {
			return nil, err
		}
		defer recorded()
		if err := s.writeOne(ctx, tenant, v, cur != nil, nil); err != nil {
			return nil, err
		}
	}
	s.recheckIndex(ctx, tenant, []*version{v})
	return v.res, nil
}

// writeOne stores one version: history row, then current row, and on an
// atomic engine the version's outbox rows in the same write.
func (s *Store) writeOne(ctx context.Context, tenant string, v *version, exists bool, outbox []any) error {
	db := s.tenantDB(tenant)
	a, atomic := db.(engine.Atomic)
	if !atomic {
		if err := db.Collection(historyCollection).InsertOne(ctx, v.hist); err != nil {
			return s.historyError(ctx, tenant, v, err)
		}
		return s.putCurrent(ctx, tenant, v.hist.Type, &v.doc, exists)
	}
	// Both rows in one transaction: one commit, and no half-done write
	// for repair to finish.
	if err := prepareRows(a, []*version{v}); err != nil {
		return err
	}
	var histErr error
	err := a.RunAtomic(ctx, func(ctx context.Context) error {
		if histErr = db.Collection(historyCollection).InsertOne(ctx, v.historyRow()); histErr != nil {
			return histErr
		}
		if err := s.putCurrentRow(ctx, tenant, v.hist.Type, &v.doc, v.currentRow(), exists); err != nil {
			return err
		}
		if len(outbox) == 0 {
			return nil
		}
		return s.insertOutboxRows(ctx, tenant, outbox)
	})
	if histErr != nil {
		return s.historyError(ctx, tenant, v, histErr)
	}
	if err == nil {
		s.changedRow(ctx, tenant, v.hist.Type)
	}
	return err
}

// historyError is the error of inserting version v's history row: a
// conflict when another writer took that version number first (after
// rolling the current row forward, should a writer have stopped between
// its two rows).
func (s *Store) historyError(ctx context.Context, tenant string, v *version, err error) error {
	if engine.IsDuplicateKey(err) {
		s.repair(ctx, tenant, v.hist.Type, v.hist.ID)
		return fmt.Errorf("%w: version %d of %s/%s was written concurrently", ErrConflict, v.hist.VID, v.hist.Type, v.hist.ID)
	}
	return dbError("insert history row", err)
}

// putCurrent makes doc the current row unless a newer version got there first.
func (s *Store) putCurrent(ctx context.Context, tenant, typ string, doc *storedDoc, exists bool) error {
	defer s.changedRow(ctx, tenant, typ)
	return s.putCurrentRow(ctx, tenant, typ, doc, doc, exists)
}

// changedRow tells the caches that a row of typ changed: the tenant's
// definitions first, which a change of its search parameters re-indexes by.
func (s *Store) changedRow(ctx context.Context, tenant, typ string) {
	s.conformanceChanged(ctx, tenant, typ)
	s.changed(tenant, typ)
}

// putCurrentRow writes doc as the current row unless a newer version got
// there first; row is what is written: doc or its prepared form.
func (s *Store) putCurrentRow(ctx context.Context, tenant, typ string, doc *storedDoc, row any, exists bool) error {
	coll := s.tenantDB(tenant).Collection(typ)
	if !exists {
		err := coll.InsertOne(ctx, row)
		if err == nil || !engine.IsDuplicateKey(err) {
			return dbError("insert current row", err)
		}
	}
	filter := bson.D{{Key: "_id", Value: doc.ID}, {Key: "vid", Value: bson.D{{Key: "$lt", Value: doc.VID}}}}
	_, err := coll.ReplaceOne(ctx, filter, row, false)
	return dbError("replace current row", err)
}

// repair rolls the current row forward when history holds a newer version,
// which happens when a writer stopped between the two inserts.
func (s *Store) repair(ctx context.Context, tenant, typ, id string) {
	var h historyDoc
	opts := &engine.FindOptions{Sort: bson.D{{Key: "vid", Value: -1}}}
	filter := bson.D{{Key: "type", Value: typ}, {Key: "id", Value: id}}
	if err := engine.FindOneInto(ctx, s.tenantDB(tenant).Collection(historyCollection), filter, opts, &h); err != nil {
		return
	}
	if pending, err := s.pendingTxns(ctx, tenant, []*historyDoc{&h}); err != nil || pending[h.Txn] {
		return // a transaction still deciding owns that row
	}
	cur, err := s.current(ctx, tenant, typ, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return
	}
	if cur != nil && cur.VID >= h.VID {
		return
	}
	doc := storedDoc{ID: id, VID: h.VID, LastUpdated: h.LastUpdated, Deleted: h.Method == "DELETE", Method: h.Method, Resource: h.Resource, NumText: h.NumText}
	if res, err := h.toResource(); err == nil && !doc.Deleted {
		doc.Idx, doc.Sort, _ = s.indexWith(s.indexRegistry(ctx, tenant), typ, res.JSON)
	}
	if err := s.putCurrent(ctx, tenant, typ, &doc, cur != nil); err != nil {
		s.log.Warn("repair current row", zap.String("tenant", tenant), zap.String("type", typ), zap.String("id", id), zap.Error(err))
		return
	}
	// Usually a concurrent writer that won the version and had not yet
	// written its current row; after a crash, the write it left half done.
	s.log.Debug("current row caught up with the newest history version", zap.String("tenant", tenant), zap.String("type", typ), zap.String("id", id), zap.Int("vid", h.VID))
}

func (s *Store) now() time.Time { return s.opts.Now().UTC().Truncate(time.Millisecond) }

func (d *storedDoc) toResource(typ string) (*Resource, error) {
	if isAuditRow(d) && !d.Deleted {
		return auditResource(d)
	}
	res := &Resource{Type: typ, ID: d.ID, VersionID: d.VID, LastUpdated: d.LastUpdated.UTC(), Method: d.Method, Deleted: d.Deleted, idx: d.Idx}
	if d.Deleted || len(d.Resource) == 0 {
		return res, nil
	}
	out, err := document.ToJSON(d.Resource, d.NumText)
	if err != nil {
		return nil, fmt.Errorf("render %s/%s: %w", typ, d.ID, err)
	}
	res.JSON = out
	return res, nil
}

func (h *historyDoc) toResource() (*Resource, error) {
	d := storedDoc{ID: h.ID, VID: h.VID, LastUpdated: h.LastUpdated, Deleted: h.Method == "DELETE", Method: h.Method, Resource: h.Resource, NumText: h.NumText}
	return d.toResource(h.Type)
}
