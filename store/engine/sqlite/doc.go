// Package sqlite is the embedded engine: package engine's collections in
// SQLite files, with every scalar of every document indexed, so that the
// filters of package engine's grammar (see its documentation: this
// package compiles exactly that grammar, and refuses anything else with
// engine.ErrUnsupported) are answered by index lookups, not by reading
// documents.
//
// # Files and connections
//
// Each database is one file, <dir>/<database>.db (8 KiB pages: rows of
// a few KiB leave less of a page unused than in 4 KiB ones; a file keeps
// the page size it was made with), in WAL
// mode so that readers never wait for the writer and several processes
// can share it: busy_timeout makes writers of different processes take
// turns. A file has one writer connection and a pool of query_only
// readers. Writes queue for the writer, which commits every write queued
// at the moment it takes its turn in one BEGIN IMMEDIATE transaction
// (group commit): a write that fails fails alone, the others commit
// together in one append to the WAL (see commit.go). Writes to several
// collections commit together in a RunAtomic (atomic.go). The reader
// used last is taken first (its cache is the warmest); every read runs
// in a read transaction, so what it plans with and what it reads are one
// snapshot. Connections map the file into memory (mmap) and keep a
// modest page cache. A checkpointer of its own copies committed pages
// from the WAL into the file at most once a second while writes go on (a
// PASSIVE checkpoint: it waits for no reader or writer; a page that
// several transactions of that second wrote is copied once), so that
// the writer, which all writes queue behind, does not; past a quarter of
// Options.WALLimit (64 MiB by default) it starts the WAL over with a RESTART
// checkpoint that waits for readers a few milliseconds at most, so that
// the WAL stays bounded under load that never pauses (checkpoint.go); the
// writer checkpoints itself only when the WAL outgrows 1 GiB. The engine drives SQLite (modernc.org/sqlite, SQLite
// compiled to Go) through its C API rather than database/sql, whose
// driver prepares every statement anew on each execution: each connection
// keeps its statements prepared, keyed by their SQL, which depends on a
// filter's shape, not on its values.
//
// # Tables
//
// A collection C is two tables (and a word table, below), created on its
// first write:
//
//	"d_C" (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, doc BLOB NOT NULL, b INTEGER, k BLOB)
//	"x_C" (f INTEGER, v ANY, rid INTEGER, PRIMARY KEY (f, v, rid)) STRICT, WITHOUT ROWID
//
// d_C holds each document compressed, without its _id (the id column)
// and without its shared field (Options.SharedField, the store's
// "resource"), whose value is kept once per file in the table "_blobs"
// that b points to: the current row of a resource and its newest history
// row share it. Reads reassemble the document byte for byte as inserted;
// a damaged or torn part is an engine.CorruptError naming the document,
// never another document (codec.go). A file of the previous format
// (user_version 1: documents as inserted) is converted when opened, a
// collection per transaction (format.go). x_C holds its index
// entries: one row per scalar leaf, f the number of its dotted path
// (array elements share their array's path, as in MongoDB), v its value;
// it finds documents by value. What a plan asks of a document it holds
// (its other conditions, its sort values) is read from the row's k
// column, the document's row keys: its entries that are not text, the
// entries of the fields no query finds documents by (rowFields: the
// store's sort keys, versions' numbers, methods and transactions), which
// x_C does not hold, and which other paths hold text
// (rowkeys.go). A file of format 2 (user_version 2, with a second index
// of x_C on (rid, f, v) for those questions, 40% of the file) gets its
// row keys and loses that index when opened (format.go).
// The shared table "_fields" (id, path) numbers the paths: a number
// instead of the path makes the keys a third shorter, which at 100,000
// resources made ingest 10–17% faster. Statements look a path's number
// up in _fields themselves, so that every read sees the numbers of its
// snapshot; the writer keeps them in memory, read again when the schema
// changed (another process dropped the tables) and forgotten when a
// transaction that numbered new paths rolled back. A file whose x tables
// hold their paths as text (user_version 0) is converted when opened. Each kind of
// value has a range of SQLite values of its own, so that a comparison
// (an index range) never mixes kinds and no typeof() test is needed (it
// tripled the cost of counting): numbers are REAL (int32, int64 and
// double compare as numbers), strings TEXT, booleans the BLOB 0x10 0|1,
// datetimes the BLOB 0x20 followed by the big-endian milliseconds since
// the epoch with the sign bit flipped. That is also the order MongoDB
// sorts these kinds in. A null, an empty array or document and any other
// BSON type leave a marker (a BLOB from 0xF0, after every scalar) at
// their path, so that $exists and null equality are exact; markers never
// equal a filter value and never sort. The subtrees of "_id" (the id
// column), "resource" and "numText" (large, never filtered on) have no
// entries: filters on them are refused.
//
// Paths named in Options.WordPaths hold documents' word lists (the
// store's _content and _text): their strings are not x_C entries but
// tokens in the collection's FTS5 table "w_C", one row per document,
// which SQLite writes a transaction's worth at a time as one sorted
// segment instead of an entry at a time into x_C's B-trees; at 100,000
// resources that made ingest about a quarter faster. Filters on them
// are equalities, prefixes and $exists (MATCH queries); see words.go.
// The table "_words" records the file's word paths: a file opened with
// others is indexed again from its documents.
//
// The shared table "_paths" (c, f, n, e) counts, per collection and path,
// the documents holding a scalar there (n) and the scalar entries (e);
// f = "\x00" counts the documents. Writes keep it in their transactions.
// "_indexes" (c, name, keys) records what CreateIndexes was given: x_C
// already indexes every path. Drop drops every table of the file (the
// file stays: other processes may have it open).
//
// # Plans
//
// A filter compiles to conditions on paths (an index range of x_C's key
// (f, v) each; on _id, of d_C.id). The planner reads, in one statement,
// the path counts and a glance at each condition (its first 16 entries;
// for an equality on a boolean, the entries holding the other value,
// usually few: deleted: false matches all documents but the deleted);
// when none is that selective, it counts the conditions in order of
// likely selectivity, each only as far as the least before it (the
// engine remembers these counts: a query asked again, or its next page,
// is planned without counting while the collection's size holds within a
// tenth). Then:
//
//   - A Find with a sort and a limit either reads the matches of its most
//     selective condition, checks the others and sorts them (sort values
//     and rids first, then the page's documents), or walks the first sort
//     path's entries in order, checking the conditions on each document
//     until the page is full. It walks when no condition matches fewer
//     than max(2 limit, sqrt(limit × documents)) entries: a walk reads
//     about limit × documents / matches entries. The walk starts and stops
//     where the filter bounds the path (the keyset conditions of paging),
//     and checks conditions on the path on the walked value itself. Ties
//     are sorted as the walk goes. Documents without a value at the walked
//     path (they sort as null: first ascending, last descending) are read
//     by a second query only when the path counts say some document
//     lacks it.
//   - Driven by a condition, an order ending with _id (the store's:
//     lastUpdated, _id) reads the _id (a document row) of the page's
//     candidates only: the first matches by the other keys and those tied
//     with the last of them.
//   - The other conditions are checked on each candidate: an equality on
//     text outside the sort keys is a lookup of its entry's key in x_C
//     (f, v, rid); anything else is asked of the row keys by the SQL
//     function fs_row, sort values by fs_sort (funcs.go), which read the
//     stored document only for text the row keys do not hold (a prefix or
//     substring condition on a document holding text at its path). An equality that
//     every document but few satisfies (deleted: false) is checked as
//     "not one of those few", or not at all when there are none.
//   - Count drives from the most selective condition; such an equality is
//     counted as the count without it less the few documents without it.
//
// Writes compute a document's entries in Go; a replacement rewrites only
// the entries that changed.
package sqlite
