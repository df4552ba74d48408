// Package mongodb is the engine on the MongoDB Go driver: a MongoDB replica
// set or sharded cluster for deployments that outgrow one machine, or
// anything else that speaks the wire protocol (FerretDB). The filters the
// store sends (package engine's grammar) are passed through unchanged.
package mongodb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"

	"fhirstore/store/engine"
)

// Options configure the connection.
type Options struct {
	// ServerSelectionTimeout bounds how long an operation waits for a
	// reachable server (default 5s).
	ServerSelectionTimeout time.Duration
	// Monitor, when set, observes every database command.
	Monitor *event.CommandMonitor
	// Limits, when set, are the server's limits as whoever started it
	// knows them (the embedded FerretDB on SQLite); otherwise the engine
	// asks the server which one it is.
	Limits *engine.Limits
}

// Engine is a connection to a MongoDB deployment.
type Engine struct {
	client *mongo.Client
	limits *engine.Limits
	mu     sync.Mutex  // guards info
	info   *serverInfo // the server's buildInfo, once it answered
}

// serverInfo is what buildInfo says about the server.
type serverInfo struct {
	VersionArray    []int32 `bson:"versionArray"`
	FerretDBVersion string  `bson:"ferretdbVersion"`
}

// Open connects to the MongoDB at uri; it does not wait for it to answer
// (see Ping).
func Open(uri string, opts Options) (*Engine, error) {
	if opts.ServerSelectionTimeout == 0 {
		opts.ServerSelectionTimeout = 5 * time.Second
	}
	clientOpts := options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(opts.ServerSelectionTimeout).
		SetConnectTimeout(opts.ServerSelectionTimeout).
		SetAppName("fhirstore")
	if opts.Monitor != nil {
		clientOpts.SetMonitor(opts.Monitor)
	}
	client, err := mongo.Connect(clientOpts)
	if err != nil {
		return nil, fmt.Errorf("connect to MongoDB: %w", err)
	}
	return &Engine{client: client, limits: opts.Limits}, nil
}

// Name is "mongodb".
func (e *Engine) Name() string { return "mongodb" }

// Ping checks that the primary answers.
func (e *Engine) Ping(ctx context.Context) error {
	return wrap("ping MongoDB", e.client.Ping(ctx, readpref.Primary()))
}

// Close disconnects.
func (e *Engine) Close(ctx context.Context) error {
	return wrap("disconnect from MongoDB", e.client.Disconnect(ctx))
}

// Database is the MongoDB database of that name.
func (e *Engine) Database(name string) engine.Database {
	return database{e.client.Database(name), e}
}

type database struct {
	db *mongo.Database
	e  *Engine
}

func (d database) Collection(name string) engine.Collection {
	return collection{d.db.Collection(name), d.e}
}

func (d database) Drop(ctx context.Context) error {
	return wrap("drop database "+d.db.Name(), d.db.Drop(ctx))
}

func (d database) CollectionNames(ctx context.Context) ([]string, error) {
	names, err := d.db.ListCollectionNames(ctx, bson.D{})
	return names, wrap("list collections of "+d.db.Name(), err)
}

type collection struct {
	c *mongo.Collection
	e *Engine
}

func (c collection) op(verb string) string {
	return verb + " " + c.c.Database().Name() + "." + c.c.Name()
}

func (c collection) InsertOne(ctx context.Context, doc any) error {
	_, err := c.c.InsertOne(ctx, doc)
	return wrap(c.op("insert into"), err)
}

func (c collection) InsertMany(ctx context.Context, docs []any) error {
	_, err := c.c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err == nil {
		return nil
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) && len(bwe.WriteErrors) > 0 && bwe.WriteConcernError == nil {
		be := &engine.BulkError{}
		for _, we := range bwe.WriteErrors {
			werr := error(we)
			if isDuplicateCode(we.Code) {
				werr = fmt.Errorf("%w: %s", engine.ErrDuplicateKey, we.Message)
			}
			be.Errors = append(be.Errors, engine.WriteError{Index: we.Index, Err: werr})
		}
		return be
	}
	return wrap(c.op("insert into"), err)
}

func (c collection) ReplaceOne(ctx context.Context, filter bson.D, doc any, upsert bool) (bool, error) {
	res, err := c.c.ReplaceOne(ctx, orEmpty(filter), doc, options.Replace().SetUpsert(upsert))
	if err != nil {
		return false, wrap(c.op("replace in"), err)
	}
	return res.MatchedCount > 0, nil
}

func (c collection) DeleteOne(ctx context.Context, filter bson.D) (int64, error) {
	res, err := c.c.DeleteOne(ctx, orEmpty(filter))
	if err != nil {
		return 0, wrap(c.op("delete from"), err)
	}
	return res.DeletedCount, nil
}

func (c collection) DeleteMany(ctx context.Context, filter bson.D) (int64, error) {
	res, err := c.c.DeleteMany(ctx, orEmpty(filter))
	if err != nil {
		return 0, wrap(c.op("delete from"), err)
	}
	return res.DeletedCount, nil
}

func (c collection) Find(ctx context.Context, filter bson.D, opts *engine.FindOptions) (engine.Cursor, error) {
	fo := options.Find()
	if opts != nil {
		if opts.Sort != nil {
			fo.SetSort(opts.Sort)
		}
		if opts.Skip > 0 {
			fo.SetSkip(opts.Skip)
		}
		if opts.Limit > 0 {
			fo.SetLimit(opts.Limit)
		}
		if opts.Projection != nil {
			fo.SetProjection(opts.Projection)
		}
	}
	cur, err := c.c.Find(ctx, orEmpty(filter), fo)
	if err != nil {
		return nil, wrap(c.op("find in"), err)
	}
	return &cursor{cur: cur, op: c.op("find in")}, nil
}

func (c collection) FindOne(ctx context.Context, filter bson.D, opts *engine.FindOptions) (bson.Raw, error) {
	fo := options.FindOne()
	if opts != nil {
		if opts.Sort != nil {
			fo.SetSort(opts.Sort)
		}
		if opts.Skip > 0 {
			fo.SetSkip(opts.Skip)
		}
		if opts.Projection != nil {
			fo.SetProjection(opts.Projection)
		}
	}
	raw, err := c.c.FindOne(ctx, orEmpty(filter), fo).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("%s: %w", c.op("find one in"), engine.ErrNoDocuments)
	}
	if err != nil {
		return nil, wrap(c.op("find one in"), err)
	}
	return raw, nil
}

func (c collection) Count(ctx context.Context, filter bson.D) (int64, error) {
	n, err := c.c.CountDocuments(ctx, orEmpty(filter))
	return n, wrap(c.op("count in"), err)
}

func (c collection) CountDistinct(ctx context.Context, filter bson.D, fields ...string) (int64, error) {
	group := bson.D{}
	for _, f := range fields {
		group = append(group, bson.E{Key: f, Value: "$" + f})
	}
	pipeline := mongo.Pipeline{
		{{Key: "$match", Value: orEmpty(filter)}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: group}}}},
		{{Key: "$count", Value: "n"}},
	}
	cur, err := c.c.Aggregate(ctx, pipeline)
	if err != nil {
		return 0, wrap(c.op("count distinct in"), err)
	}
	var res []struct {
		N int64 `bson:"n"`
	}
	if err := cur.All(ctx, &res); err != nil {
		return 0, wrap(c.op("count distinct in"), err)
	}
	if len(res) == 0 {
		return 0, nil
	}
	return res[0].N, nil
}

// CreateIndexes asks for the existing indexes first: FerretDB fails when
// asked to create an index that exists. FerretDB can also be left with an
// index its catalogue does not know when a process dies while creating it,
// and then refuses to create it again; a collection that holds no
// documents yet is dropped and its indexes created afresh.
func (c collection) CreateIndexes(ctx context.Context, indexes []engine.Index) error {
	if c.e.wildcards(ctx) {
		indexes = foldWildcards(indexes)
	}
	have, err := c.IndexNames(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, n := range have {
		known[n] = true
	}
	var models []mongo.IndexModel
	for _, ix := range indexes {
		if !known[ix.Name] {
			models = append(models, mongo.IndexModel{Keys: ix.Keys, Options: options.Index().SetName(ix.Name)})
		}
	}
	if len(models) == 0 {
		return nil
	}
	_, err = c.c.Indexes().CreateMany(ctx, models)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		return wrap(c.op("create indexes of"), err)
	}
	n, cerr := c.c.CountDocuments(ctx, bson.D{})
	if cerr != nil || n > 0 {
		return wrap(c.op("create indexes of"), err)
	}
	if derr := c.c.Drop(ctx); derr != nil {
		return fmt.Errorf("%s: %w (drop to recreate: %w)", c.op("create indexes of"), err, derr)
	}
	_, err = c.c.Indexes().CreateMany(ctx, models)
	return wrap(c.op("create indexes of"), err)
}

func (c collection) IndexNames(ctx context.Context) ([]string, error) {
	specs, err := c.c.Indexes().ListSpecifications(ctx)
	if err != nil && !isNamespaceNotFound(err) {
		return nil, wrap(c.op("list indexes of"), err)
	}
	names := make([]string, 0, len(specs))
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	return names, nil
}

// orEmpty is filter, or the empty filter for nil (the driver cannot
// marshal a nil document).
func orEmpty(filter bson.D) bson.D {
	if filter == nil {
		return bson.D{}
	}
	return filter
}

type cursor struct {
	cur *mongo.Cursor
	op  string
}

func (c *cursor) Next(ctx context.Context) bool   { return c.cur.Next(ctx) }
func (c *cursor) Current() bson.Raw               { return c.cur.Current }
func (c *cursor) Err() error                      { return wrap(c.op, c.cur.Err()) }
func (c *cursor) Close(ctx context.Context) error { return wrap(c.op, c.cur.Close(ctx)) }

// wrap adds op to err and marks the errors that mean the database is out
// of reach (engine.ErrUnavailable) and duplicate keys (engine.ErrDuplicateKey).
func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case mongo.IsDuplicateKeyError(err):
		return fmt.Errorf("%s: %w: %w", op, engine.ErrDuplicateKey, err)
	case unreachable(err):
		return fmt.Errorf("%s: %w: %w", op, engine.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func unreachable(err error) bool {
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || errors.Is(err, mongo.ErrClientDisconnected) {
		return true
	}
	// A network error on another connection cleared the pool: the database
	// is out of reach as surely as for a network error of its own.
	var pe driver.RetryablePoolError
	if errors.As(err, &pe) && pe.Retryable() {
		return true
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "server selection error")
}

func isDuplicateCode(code int) bool { return code == 11000 || code == 11001 || code == 12582 }

func isNamespaceNotFound(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && (ce.Code == 26 || ce.Name == "NamespaceNotFound")
}

// Limits of the servers the driver may reach. MongoDB refuses documents
// over 16 MiB; before 4.2 it also refused index keys over 1024 bytes.
// FerretDB 1.x on PostgreSQL indexes the whole JSON value at an indexed
// path as one B-tree row, which PostgreSQL caps at 2704 bytes; 2400 bytes
// of BSON leaves room for its own encoding. FerretDB does not say which
// backend it runs on, so FerretDB 1.x gets that bound on every backend.
const (
	legacyIndexKeyBytes   = 1024
	ferretDBIndexKeyBytes = 2400
)

// Limits asks the server which one it is (buildInfo) and returns its
// limits; without an answer, the strictest of those it knows.
func (e *Engine) Limits(ctx context.Context) engine.Limits {
	if e.limits != nil {
		return *e.limits
	}
	info, ok := e.server(ctx)
	if !ok {
		return limitsOf(false, nil, "")
	}
	return limitsOf(true, info.VersionArray, info.FerretDBVersion)
}

// server asks the server which one it is (buildInfo), once it answers.
func (e *Engine) server(ctx context.Context) (*serverInfo, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.info != nil {
		return e.info, true
	}
	var info serverInfo
	if err := e.client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return nil, false
	}
	e.info = &info
	return e.info, true
}

// wildcards tells whether the server is a MongoDB with wildcard indexes
// (4.2 or later). Limits given at Open name a FerretDB, which has none.
func (e *Engine) wildcards(ctx context.Context) bool {
	if e.limits != nil {
		return false
	}
	info, ok := e.server(ctx)
	if !ok || info.FerretDBVersion != "" || len(info.VersionArray) < 2 {
		return false
	}
	v := info.VersionArray
	return v[0] > 4 || v[0] == 4 && v[1] >= 2
}

// ferretDBMajor is the major version of a FerretDB version ("v1.24.2"),
// 0 when it does not say ("unknown" when FerretDB is embedded).
func ferretDBMajor(v string) int {
	major, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0
	}
	return n
}

// limitsOf picks the limits of a server from its buildInfo (known false:
// no answer).
func limitsOf(known bool, versionArray []int32, ferretDB string) engine.Limits {
	l := engine.Limits{MaxDocumentBytes: 16 * engine.MiB, Source: "MongoDB"}
	switch {
	case !known || ferretDB != "" && ferretDBMajor(ferretDB) < 2:
		l.MaxIndexKeyBytes, l.WholeArrayKeys, l.Source = ferretDBIndexKeyBytes, true, "FerretDB 1.x (on PostgreSQL)"
		if !known {
			l.Source = "the database (limits of FerretDB 1.x on PostgreSQL assumed)"
		}
	case ferretDB != "":
		l.Source = "FerretDB"
	case len(versionArray) >= 2 && (versionArray[0] < 4 || versionArray[0] == 4 && versionArray[1] < 2):
		l.MaxIndexKeyBytes = legacyIndexKeyBytes
	}
	return l
}

// foldWildcards replaces the ascending single-field indexes on paths under
// one top-level field ("idx.code", "idx.date.lo"...) by one wildcard
// index on that field ("idx.$**"): MongoDB holds at most 64 indexes a
// collection, fewer than the search parameters of some types, and a
// wildcard index serves equality, $in, ranges and prefixes on any path
// under it as single-field indexes do.
func foldWildcards(indexes []engine.Index) []engine.Index {
	under := map[string]int{}
	for _, ix := range indexes {
		if top, ok := nestedAscending(ix); ok {
			under[top]++
		}
	}
	var out []engine.Index
	folded := map[string]bool{}
	for _, ix := range indexes {
		top, ok := nestedAscending(ix)
		if !ok || under[top] < 2 {
			out = append(out, ix)
			continue
		}
		if !folded[top] {
			folded[top] = true
			field := top + ".$**"
			out = append(out, engine.Index{Name: field + "_1", Keys: bson.D{{Key: field, Value: 1}}})
		}
	}
	return out
}

// nestedAscending reports the top-level field of an ascending index on one
// dotted path.
func nestedAscending(ix engine.Index) (string, bool) {
	if len(ix.Keys) != 1 || ix.Keys[0].Value != 1 {
		return "", false
	}
	top, _, nested := strings.Cut(ix.Keys[0].Key, ".")
	return top, nested
}
