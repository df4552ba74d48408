package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"fhirstore/search"
	"fhirstore/store/document"
	"fhirstore/store/engine"
)

// exportJobs is the tenant collection of bulk export jobs.
const exportJobs = "exportjobs"

// SnapshotQuery selects what Snapshot reads of one resource type.
type SnapshotQuery struct {
	Type string
	// At is the snapshot's instant: every resource as it was at At, those
	// created later left out, those deleted at or before it too.
	At time.Time
	// Since, when set, keeps only the versions written at or after it.
	Since *time.Time
	// Match, when not empty, keeps the resources that match any of the
	// queries. The queries run on the current search index: a resource
	// changed after At is judged by its current version, and one deleted
	// after At (which has no search values left) is left out.
	Match []*search.Query
	// After resumes a snapshot after this id: ids come in ascending order.
	After string
}

// Snapshot calls fn with each resource of q.Type as it was at q.At, in
// ascending id order, from one cursor over the current rows sorted by id
// (an index walk: concurrent writes neither hide a resource nor show one
// twice, and memory stays bounded whatever the collection's size).
// Resources written after q.At are taken from history at their version
// current at q.At. It first waits for this process's writes that may be
// stamped at or before q.At, so none of them is still on its way to the
// current rows; writes of other processes sharing a MongoDB database are
// not waited for. fn must not keep res.JSON after it returns: its memory
// is reused. A non-nil error from fn stops the snapshot and is returned.
func (s *Store) Snapshot(ctx context.Context, tenant string, q SnapshotQuery, fn func(*Resource) error) error {
	if err := s.checkType(q.Type); err != nil {
		return err
	}
	if err := s.awaitWritesUpTo(ctx, q.At); err != nil {
		return fmt.Errorf("export %s: wait for the writes up to %s: %w", q.Type, q.At.Format(time.RFC3339Nano), err)
	}
	match, post, err := s.snapshotMatch(ctx, tenant, q.Match)
	if err != nil {
		return err
	}
	coll := s.tenantDB(tenant).Collection(q.Type)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}, Projection: snapshotFields}
	if post != nil {
		opts.Projection = append(slices.Clip(snapshotFields), bson.E{Key: "idx", Value: 1})
	}
	cur, err := coll.Find(rctx, snapshotFilter(match, q.Since, q.After), opts)
	if err != nil {
		return dbError("export "+q.Type, err)
	}
	// The cursor is read on a goroutine of its own, a batch of rows at a
	// time, while this one renders and calls fn: the two halves of the
	// work take about as long each.
	full, free := make(chan *snapshotBatch, snapshotBatches-1), make(chan *snapshotBatch, snapshotBatches)
	batches := make([]*snapshotBatch, snapshotBatches)
	for i := range batches {
		b, _ := s.batches.Get().(*snapshotBatch)
		if b == nil {
			b = &snapshotBatch{}
		}
		batches[i] = b
		free <- b
	}
	read := make(chan error, 1)
	go func() { read <- readSnapshot(rctx, cur, q, post, free, full) }()
	defer func() { // every return below has waited for the reader
		for _, b := range batches {
			s.batches.Put(b)
		}
	}()
	var buf bytes.Buffer
	for b := range full {
		for i := range b.rows {
			if err := s.emitAt(ctx, tenant, q, &b.rows[i], &buf, fn); err != nil {
				cancel()
				for range full {
				}
				<-read
				return err
			}
		}
		free <- b
	}
	return dbError("export "+q.Type, <-read)
}

// SnapshotSize estimates how many bytes a snapshot of typ reads: its
// current rows times the size of one of them (the first by id, which
// for random ids is any). Exports start the largest types first.
func (s *Store) SnapshotSize(ctx context.Context, tenant, typ string) (int64, error) {
	if err := s.checkType(typ); err != nil {
		return 0, err
	}
	coll := s.tenantDB(tenant).Collection(typ)
	n, err := coll.Count(ctx, bson.D{})
	if err != nil || n == 0 {
		return 0, dbError("size of "+typ, err)
	}
	row, err := coll.FindOne(ctx, bson.D{}, &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}, Projection: snapshotFields})
	if errors.Is(err, engine.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, dbError("size of "+typ, err)
	}
	return n * int64(len(row)), nil
}

// snapshotFields are the fields of a current row a snapshot reads (and
// idx when it filters on it): not the search and sort values, which are
// most of a row.
var snapshotFields = bson.D{{Key: "vid", Value: 1}, {Key: "lastUpdated", Value: 1}, {Key: "deleted", Value: 1},
	{Key: "resource", Value: 1}, {Key: "numText", Value: 1}, {Key: "audit", Value: 1}}

// snapshotBatches is how many batches of rows a snapshot has in flight;
// snapshotBatchRows how many rows each holds at most.
const (
	snapshotBatches   = 3
	snapshotBatchRows = 128
)

// snapshotBatch is rows of a snapshot, their resources copied out of the
// cursor into one buffer.
type snapshotBatch struct {
	rows  []storedDoc
	ends  []int
	arena []byte
}

// readSnapshot steps cur through the rows of a snapshot that pass post
// and may be in it, copying them into batches taken from free and sent on
// full, which it closes at the end. It closes cur.
func readSnapshot(ctx context.Context, cur engine.Cursor, q SnapshotQuery, post func(bson.Raw) bool, free <-chan *snapshotBatch, full chan<- *snapshotBatch) error {
	defer close(full)
	defer cur.Close(ctx)
	for {
		var b *snapshotBatch
		select {
		case b = <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
		b.rows, b.ends, b.arena = b.rows[:0], b.ends[:0], b.arena[:0]
		for len(b.rows) < snapshotBatchRows && cur.Next(ctx) {
			d, err := snapshotRow(cur.Current())
			if err != nil {
				return fmt.Errorf("export %s: %w", q.Type, err)
			}
			if (post != nil && !post(d.Idx)) || (d.Deleted && !d.LastUpdated.After(q.At)) {
				continue
			}
			b.arena = append(b.arena, d.Resource...)
			d.Resource, d.Idx = nil, nil
			if d.Audit != nil { // an audit record, rendered when emitted
				d.Audit = slices.Clone(d.Audit)
			}
			b.rows, b.ends = append(b.rows, d), append(b.ends, len(b.arena))
		}
		if len(b.rows) == 0 {
			return cur.Err()
		}
		start := 0
		for i, end := range b.ends {
			b.rows[i].Resource, start = b.arena[start:end:end], end
		}
		full <- b
	}
}

// snapshotRow reads the fields a snapshot needs of a current row without
// copying its resource: the row is only valid until the cursor moves.
func snapshotRow(raw bson.Raw) (storedDoc, error) {
	var d storedDoc
	if len(raw) < 5 {
		return d, errors.New("decode row: truncated document")
	}
	for rest := []byte(raw[4 : len(raw)-1]); len(rest) > 0; {
		e, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return d, fmt.Errorf("decode row %s: malformed document", d.ID)
		}
		rest = next
		v := e.Value()
		switch e.Key() {
		case "_id":
			d.ID, _ = v.StringValueOK()
		case "vid":
			n, _ := v.AsInt64OK()
			d.VID = int(n)
		case "lastUpdated":
			if ms, ok := v.DateTimeOK(); ok {
				d.LastUpdated = time.UnixMilli(ms)
			}
		case "deleted":
			d.Deleted, _ = v.BooleanOK()
		case "resource":
			doc, _ := v.DocumentOK()
			d.Resource = bson.Raw(doc)
		case "numText":
			arr, _ := v.ArrayOK()
			nums, err := document.ReadNumText(arr)
			if err != nil {
				return d, fmt.Errorf("decode row %s: %w", d.ID, err)
			}
			d.NumText = nums
		case "idx":
			doc, _ := v.DocumentOK()
			d.Idx = bson.Raw(doc)
		case "audit":
			_, d.Audit, _ = v.BinaryOK()
		}
	}
	return d, nil
}

// snapshotFilter is a snapshot's filter: the match, written at or after
// since, ids past after.
func snapshotFilter(match bson.D, since *time.Time, after string) bson.D {
	all := bson.A{}
	if len(match) > 0 {
		all = append(all, match)
	}
	if since != nil {
		all = append(all, bson.D{{Key: "lastUpdated", Value: bson.D{{Key: "$gte", Value: since.UTC()}}}})
	}
	if after != "" {
		all = append(all, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}}})
	}
	if len(all) == 0 {
		return bson.D{}
	}
	return bson.D{{Key: "$and", Value: all}}
}

// snapshotMatch ORs the filters of queries, and their post-filters.
func (s *Store) snapshotMatch(ctx context.Context, tenant string, queries []*search.Query) (bson.D, func(bson.Raw) bool, error) {
	if len(queries) == 0 {
		return nil, nil, nil
	}
	alts := bson.A{}
	var posts []func(bson.Raw) bool
	for _, q := range queries {
		f, err := s.searchFilter(ctx, tenant, q)
		if err != nil {
			return nil, nil, err
		}
		alts = append(alts, f)
		if q.PostFilter != nil {
			posts = append(posts, q.PostFilter)
		}
	}
	var post func(bson.Raw) bool
	if len(posts) == len(queries) {
		post = func(idx bson.Raw) bool {
			for _, p := range posts {
				if p(idx) {
					return true
				}
			}
			return false
		}
	}
	if len(alts) == 1 {
		return alts[0].(bson.D), post, nil
	}
	return bson.D{{Key: "$or", Value: alts}}, post, nil
}

// emitAt passes fn the version of row d that was current at q.At, if any;
// a current row is rendered into buf.
func (s *Store) emitAt(ctx context.Context, tenant string, q SnapshotQuery, d *storedDoc, buf *bytes.Buffer, fn func(*Resource) error) error {
	if !d.LastUpdated.After(q.At) {
		if d.Deleted {
			return nil
		}
		if isAuditRow(d) {
			res, err := auditResource(d)
			if err != nil {
				return err
			}
			return fn(res)
		}
		buf.Reset()
		if err := document.AppendJSON(buf, d.Resource, d.NumText); err != nil {
			return fmt.Errorf("render %s/%s: %w", q.Type, d.ID, err)
		}
		return fn(&Resource{Type: q.Type, ID: d.ID, VersionID: d.VID, LastUpdated: d.LastUpdated.UTC(), JSON: buf.Bytes()})
	}
	res, err := s.versionAt(ctx, tenant, q.Type, d.ID, q.At)
	if err != nil || res == nil || res.Deleted || (q.Since != nil && res.LastUpdated.Before(*q.Since)) {
		return err
	}
	return fn(res)
}

// versionAt is the version of typ/id current at t, from history; nil when
// the resource did not exist yet.
func (s *Store) versionAt(ctx context.Context, tenant, typ, id string, t time.Time) (*Resource, error) {
	filter := bson.D{{Key: "type", Value: typ}, {Key: "id", Value: id}, {Key: "lastUpdated", Value: bson.D{{Key: "$lte", Value: t}}}}
	cur, err := s.tenantDB(tenant).Collection(historyCollection).Find(ctx, filter, &engine.FindOptions{Sort: bson.D{{Key: "vid", Value: -1}}, Limit: 4})
	if err != nil {
		return nil, dbError("export: history of "+typ+"/"+id, err)
	}
	var rows []*historyDoc
	if err := engine.All(ctx, cur, &rows); err != nil {
		return nil, dbError("export: history of "+typ+"/"+id, err)
	}
	if rows, err = s.dropPending(ctx, tenant, rows); err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0].toResource()
}

// PutExportJob stores the state of a bulk export job (a document with a
// string _id) in the tenant's database, replacing an earlier state.
func (s *Store) PutExportJob(ctx context.Context, tenant, id string, job any) error {
	_, err := s.tenantDB(tenant).Collection(exportJobs).ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, job, true)
	return dbError("save export job "+id, err)
}

// ExportJob decodes the state of job id into out; ErrNotFound when none.
func (s *Store) ExportJob(ctx context.Context, tenant, id string, out any) error {
	err := engine.FindOneInto(ctx, s.tenantDB(tenant).Collection(exportJobs), bson.D{{Key: "_id", Value: id}}, nil, out)
	if errors.Is(err, engine.ErrNoDocuments) {
		return fmt.Errorf("export job %s: %w", id, ErrNotFound)
	}
	return dbError("read export job "+id, err)
}

// ExportJobs decodes every export job of the tenant into out, a pointer to
// a slice.
func (s *Store) ExportJobs(ctx context.Context, tenant string, out any) error {
	cur, err := s.tenantDB(tenant).Collection(exportJobs).Find(ctx, bson.D{}, &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}})
	if err != nil {
		return dbError("list export jobs", err)
	}
	return dbError("list export jobs", engine.All(ctx, cur, out))
}

// DeleteExportJob removes the state of job id.
func (s *Store) DeleteExportJob(ctx context.Context, tenant, id string) error {
	_, err := s.tenantDB(tenant).Collection(exportJobs).DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	return dbError("delete export job "+id, err)
}
