// Package sqlite is the embedded engine: package engine's collections in
// SQLite files (modernc.org/sqlite, pure Go), with every scalar of every
// document indexed, so that the filters of package engine's grammar are
// answered by index lookups rather than by reading documents.
//
// # Storage
//
// Each database is one file, <dir>/<database>.db, in WAL mode so that
// readers never wait for the writer and several processes can share it
// (busy_timeout makes writers of different processes take turns). A file
// has one writer connection (all writes, each in one transaction) and a
// pool of query_only reader connections.
//
// A collection C is two tables, created on its first write:
//
//	"d_C" (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, doc BLOB NOT NULL)
//	"x_C" (f TEXT, v ANY, rid INTEGER, PRIMARY KEY (f, v, rid)) STRICT, WITHOUT ROWID
//	index "r_C" ON "x_C" (rid, f, v)
//
// d_C holds each document as inserted (returned verbatim); x_C holds its
// index entries: one row per scalar leaf, f its dotted path (array
// elements share their array's path, as in MongoDB), v its value: strings
// as TEXT, numbers as REAL (so that they compare as numbers), booleans as
// INTEGER 0/1, datetimes as INTEGER milliseconds since the epoch. A null,
// an empty array or document and any other BSON type leave a marker BLOB
// at their path, so that $exists and null equality are exact; markers
// never equal a filter value and sort after every scalar. The subtrees of
// "_id" (the id column), "resource" and "numText" (large, never filtered
// on) have no entries; filters on them are refused.
//
// The shared table "_paths" (c, f, n) counts, per collection, the
// documents holding a scalar at each path (f = "\x00": all documents),
// kept in the writes' transactions; the planner uses it to size
// collections and to know when no document lacks a sort path. "_indexes"
// (c, name) records the names CreateIndexes was given: x_C already indexes
// every path.
//
// # Queries
//
// Filters (package engine's grammar; see its documentation) compile to SQL
// over d_C: every condition on a path is an index lookup in x_C (an EXISTS
// on (rid, f, v), or, for the condition that drives the query, a range of
// the (f, v, rid) key); conditions on _id use d_C.id. Anything outside the
// grammar is refused with engine.ErrUnsupported, never scanned for.
//
// A sorted Find with a limit is planned one of two ways: driven by its
// most selective condition, sorting the matches, or walking the first
// sort path's index entries in order and checking the conditions on each
// document until the page is full. The planner counts each condition's
// entries up to a cap (a bounded index range count) and picks the walk
// when no condition is selective enough for sorting its matches to be
// cheaper than walking limit×(documents/matches) entries. Documents
// without a value at a walked sort path (they sort as null) are read by
// a second query, before or after the walk, only when the path counts say
// some document lacks the path.
package sqlite
