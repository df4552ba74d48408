// Package engine is the seam between the store and its database: the few
// collection operations the store really uses, over documents and filters
// written as BSON. Two engines implement it: package mongodb (the MongoDB
// Go driver: MongoDB, or anything that speaks its wire protocol) and
// package sqlite (the embedded default, SQLite with real indexes).
//
// # Documents
//
// A document is anything bson.Marshal accepts that has a string "_id".
// Engines return documents as bson.Raw, as they were inserted.
//
// # Filters
//
// Filters are the subset of MongoDB's query language below; an engine
// refuses anything else with an error wrapping ErrUnsupported, never
// answering it by a different meaning. A field is a dotted path; a path
// through an array matches when any element matches (MongoDB semantics).
//
//	filter    = {}                                   every document
//	          | {clause, clause...}                  all clauses hold
//	clause    = "$and": [filter...]  | "$or": [filter...]
//	          | path: value                          equality (any element)
//	          | path: {op: value, ...}               every operator holds
//	          | path: regex                          ^literal prefix, or a literal
//	                                                 substring (QuoteMeta'd, no flags)
//	op        = $eq $ne $gt $gte $lt $lte            value: string, number, bool, time
//	          | $in $nin                             value: array of those
//	          | $exists                              value: bool
//	          | $not                                 value: regex; no element matches
//
// Values compare within their kind only: strings with strings (byte
// order), numbers with numbers, times with times, bools with bools.
// Equality with nil matches a missing or null field; $gt, $lt and the
// other comparisons with nil match nothing. So keyset paging cannot step
// past documents that lack a sort value: the store reads those with and
// those without a value of a sort key separately (see package store's
// sortedRows).
//
// # Sorts, projections
//
// Find sorts by top-level or dotted scalar paths (1 ascending, -1
// descending); a sort path holds one value per document. Projections
// name top-level fields (or dotted ones, which keep their top-level
// field) to include, or top-level fields to exclude; "_id" is always
// kept. A cursor holds a connection until it is exhausted or closed:
// close every cursor.
package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Errors engines return (wrapped); the store maps them to its own.
var (
	// ErrNoDocuments: FindOne found nothing.
	ErrNoDocuments = errors.New("no documents")
	// ErrDuplicateKey: an insert collided with an existing _id (or another unique key).
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrUnavailable: the database could not be reached.
	ErrUnavailable = errors.New("database unavailable")
	// ErrUnsupported: a filter, sort or projection outside the grammar above.
	ErrUnsupported = errors.New("unsupported by the engine")
	// ErrCorrupt: a stored document cannot be read back as it was written
	// (a damaged or torn file); the error names the document.
	ErrCorrupt = errors.New("stored document is corrupt")
)

// CorruptError is a stored document that cannot be read back as it was
// written; it is ErrCorrupt.
type CorruptError struct {
	Database, Collection, ID string
	Err                      error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("document %q of %s.%s: %v", e.ID, e.Database, e.Collection, e.Err)
}

// Unwrap returns the cause (which wraps ErrCorrupt).
func (e *CorruptError) Unwrap() error { return e.Err }

// Engine is an open database server: named databases of named collections.
type Engine interface {
	// Database is the database of that name (created on first write).
	Database(name string) Database
	// Ping checks that the server answers.
	Ping(ctx context.Context) error
	// Close releases the engine's connections and files.
	Close(ctx context.Context) error
	// Name says which engine this is ("sqlite", "mongodb"), for logs and metrics.
	Name() string
	// Limits are the refusals of the database known in advance (it may
	// ask the server which one it is; it falls back to the strictest
	// limits it knows when the server does not answer).
	Limits(ctx context.Context) Limits
}

// Database is a namespace of collections.
type Database interface {
	// Collection is the collection of that name (created on first write).
	Collection(name string) Collection
	// Drop removes every collection of the database.
	Drop(ctx context.Context) error
	// CollectionNames lists the collections that may hold documents: every
	// collection holding one is listed, an empty one may be.
	CollectionNames(ctx context.Context) ([]string, error)
}

// Atomic is implemented by the databases of engines that can commit
// writes to several of a database's collections together (the embedded
// engine; MongoDB without a replica set cannot). RunAtomic runs fn: the
// writes fn makes with the context it is given, to the database's
// collections, commit together when fn returns nil and not at all when it
// returns an error. A write inside fn that fails for a duplicate _id has
// written nothing, and fn may go on; after any other failure the atomic
// write fails whatever fn returns. Reads inside fn do not see its writes;
// fn must not start writes on other goroutines with its context.
//
// Prepare does ahead of a write, on the caller's goroutine, what writing
// doc costs besides the database's own work (encoding, index entries):
// the database's collections accept what it returns in place of doc, so
// that a RunAtomic, whose fn runs in the database's one writer's turn,
// spends that turn writing.
type Atomic interface {
	RunAtomic(ctx context.Context, fn func(ctx context.Context) error) error
	Prepare(doc any) (any, error)
}

// Collection is a set of documents keyed by a unique string "_id".
type Collection interface {
	// InsertOne adds doc; an existing _id is ErrDuplicateKey.
	InsertOne(ctx context.Context, doc any) error
	// InsertMany adds docs, each on its own (unordered): the failures are
	// a *BulkError naming their indexes; the others are inserted.
	InsertMany(ctx context.Context, docs []any) error
	// ReplaceOne replaces the first document matching filter with doc
	// (which keeps its _id), inserting doc when nothing matches and upsert
	// is set. It reports whether a document matched.
	ReplaceOne(ctx context.Context, filter bson.D, doc any, upsert bool) (bool, error)
	// DeleteOne removes the first document matching filter.
	DeleteOne(ctx context.Context, filter bson.D) (int64, error)
	// DeleteMany removes every document matching filter.
	DeleteMany(ctx context.Context, filter bson.D) (int64, error)
	// Find returns the documents matching filter.
	Find(ctx context.Context, filter bson.D, opts *FindOptions) (Cursor, error)
	// FindOne returns the first document matching filter (in opts.Sort
	// order), or ErrNoDocuments.
	FindOne(ctx context.Context, filter bson.D, opts *FindOptions) (bson.Raw, error)
	// Count counts the documents matching filter.
	Count(ctx context.Context, filter bson.D) (int64, error)
	// CountDistinct counts the distinct combinations of the values of
	// fields (top-level scalars) among the documents matching filter.
	CountDistinct(ctx context.Context, filter bson.D, fields ...string) (int64, error)
	// CreateIndexes creates the indexes not there yet (by name).
	CreateIndexes(ctx context.Context, indexes []Index) error
	// IndexNames lists the names of the collection's indexes.
	IndexNames(ctx context.Context) ([]string, error)
}

// FindOptions shape a Find; nil means none.
type FindOptions struct {
	Sort       bson.D // path: 1 or -1
	Skip       int64
	Limit      int64 // 0: no limit
	Projection bson.D
}

// Index is a secondary index: its name and its keys (path: 1 or -1).
type Index struct {
	Name string
	Keys bson.D
}

// Cursor iterates over the documents of a Find.
type Cursor interface {
	// Next advances to the next document, reporting whether there is one.
	Next(ctx context.Context) bool
	// Current is the document Next moved to; valid until the next call.
	Current() bson.Raw
	// Err is the error that stopped the iteration, if any.
	Err() error
	// Close releases the cursor.
	Close(ctx context.Context) error
}

// WriteError is the failure of one document of an InsertMany.
type WriteError struct {
	Index int
	Err   error
}

// BulkError lists the documents of an InsertMany that were not inserted.
type BulkError struct {
	Errors []WriteError
}

func (e *BulkError) Error() string {
	if len(e.Errors) == 0 {
		return "bulk insert failed"
	}
	return fmt.Sprintf("bulk insert: %d of the documents failed, the first (#%d): %v", len(e.Errors), e.Errors[0].Index, e.Errors[0].Err)
}

// All decodes every remaining document of cur into *results (a pointer
// to a slice) and closes cur.
func All(ctx context.Context, cur Cursor, results any) error {
	defer cur.Close(ctx)
	sv := reflect.ValueOf(results)
	if sv.Kind() != reflect.Pointer || sv.Elem().Kind() != reflect.Slice {
		return fmt.Errorf("engine.All: results must be a pointer to a slice, not %T", results)
	}
	slice := sv.Elem()
	elemType := slice.Type().Elem()
	for cur.Next(ctx) {
		var target reflect.Value
		if elemType.Kind() == reflect.Pointer {
			target = reflect.New(elemType.Elem())
		} else {
			target = reflect.New(elemType)
		}
		if err := bson.Unmarshal(cur.Current(), target.Interface()); err != nil {
			return fmt.Errorf("decode document: %w", err)
		}
		if elemType.Kind() != reflect.Pointer {
			target = target.Elem()
		}
		slice = reflect.Append(slice, target)
	}
	sv.Elem().Set(slice)
	return cur.Err()
}

// Decode unmarshals a document found by FindOne, passing its error on.
func Decode(raw bson.Raw, err error, v any) error {
	if err != nil {
		return err
	}
	if err := bson.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode document: %w", err)
	}
	return nil
}

// IsDuplicateKey reports whether err is, or holds only, duplicate-key failures.
func IsDuplicateKey(err error) bool {
	if errors.Is(err, ErrDuplicateKey) {
		return true
	}
	var be *BulkError
	if errors.As(err, &be) && len(be.Errors) > 0 {
		for _, we := range be.Errors {
			if !errors.Is(we.Err, ErrDuplicateKey) {
				return false
			}
		}
		return true
	}
	return false
}

// FindOneInto runs c.FindOne and decodes the document into out.
func FindOneInto(ctx context.Context, c Collection, filter bson.D, opts *FindOptions, out any) error {
	raw, err := c.FindOne(ctx, filter, opts)
	return Decode(raw, err, out)
}
