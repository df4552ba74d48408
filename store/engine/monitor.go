package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
)

// Monitored wraps e so that every collection operation is reported to m
// as the MongoDB command it stands for ("find", "insert", "update",
// "delete", "count", "aggregate", "createIndexes", "listIndexes",
// "dropDatabase"), whatever the engine: metrics and tests count commands
// the same way on every engine. A nil m returns e.
func Monitored(e Engine, m *event.CommandMonitor) Engine {
	if m == nil {
		return e
	}
	return &monitored{Engine: e, m: m}
}

type monitored struct {
	Engine
	m   *event.CommandMonitor
	ids atomic.Int64
}

func (e *monitored) Database(name string) Database {
	db := monitoredDB{db: e.Engine.Database(name), e: e, name: name}
	if a, ok := db.db.(Atomic); ok {
		return monitoredAtomicDB{monitoredDB: db, a: a}
	}
	return db
}

// monitoredAtomicDB is a monitored database whose engine commits writes
// together: it stays an Atomic, each write inside reported on its own.
type monitoredAtomicDB struct {
	monitoredDB
	a Atomic
}

// RunAtomic runs fn as the engine's database does (Atomic).
func (d monitoredAtomicDB) RunAtomic(ctx context.Context, fn func(ctx context.Context) error) error {
	return d.a.RunAtomic(ctx, fn)
}

// Prepare prepares doc as the engine's database does (Atomic).
func (d monitoredAtomicDB) Prepare(doc any) (any, error) { return d.a.Prepare(doc) }

// observe reports one command around run; body, when the monitor has a
// Started hook, is the command's document (for finds and counts: the
// collection, filter, sort, skip, limit and projection).
func (e *monitored) observe(ctx context.Context, db, command string, body func() bson.D, run func() error) error {
	id := e.ids.Add(1)
	if e.m.Started != nil {
		doc := bson.Raw{}
		if body != nil {
			doc, _ = bson.Marshal(body())
		}
		e.m.Started(ctx, &event.CommandStartedEvent{DatabaseName: db, CommandName: command, RequestID: id, Command: doc})
	}
	start := time.Now()
	err := run()
	fin := event.CommandFinishedEvent{DatabaseName: db, CommandName: command, RequestID: id, Duration: time.Since(start)}
	if err != nil && !isOutcome(err) {
		if e.m.Failed != nil {
			e.m.Failed(ctx, &event.CommandFailedEvent{CommandFinishedEvent: fin, Failure: err})
		}
		return err
	}
	if e.m.Succeeded != nil {
		e.m.Succeeded(ctx, &event.CommandSucceededEvent{CommandFinishedEvent: fin})
	}
	return err
}

// isOutcome tells answers from failures: finding nothing and a duplicate
// key are what the command reported, not errors of the command.
func isOutcome(err error) bool { return IsDuplicateKey(err) || isNoDocuments(err) }

func isNoDocuments(err error) bool { return errors.Is(err, ErrNoDocuments) }

type monitoredDB struct {
	db   Database
	e    *monitored
	name string
}

func (d monitoredDB) Collection(name string) Collection {
	return monitoredColl{c: d.db.Collection(name), e: d.e, db: d.name, name: name}
}

func (d monitoredDB) Drop(ctx context.Context) error {
	return d.e.observe(ctx, d.name, "dropDatabase", nil, func() error { return d.db.Drop(ctx) })
}

func (d monitoredDB) CollectionNames(ctx context.Context) ([]string, error) {
	var names []string
	err := d.e.observe(ctx, d.name, "listCollections", nil, func() error {
		var err error
		names, err = d.db.CollectionNames(ctx)
		return err
	})
	return names, err
}

type monitoredColl struct {
	c    Collection
	e    *monitored
	db   string
	name string
}

func (c monitoredColl) run(ctx context.Context, command string, f func() error) error {
	return c.e.observe(ctx, c.db, command, func() bson.D { return bson.D{{Key: command, Value: c.name}} }, f)
}

// query reports a read with its filter and options, as MongoDB's find
// and count commands carry them.
func (c monitoredColl) query(ctx context.Context, command string, filter bson.D, opts *FindOptions, f func() error) error {
	body := func() bson.D {
		d := bson.D{{Key: command, Value: c.name}, {Key: "filter", Value: filter}}
		if opts != nil {
			d = append(d, bson.E{Key: "sort", Value: opts.Sort}, bson.E{Key: "skip", Value: opts.Skip},
				bson.E{Key: "limit", Value: opts.Limit}, bson.E{Key: "projection", Value: opts.Projection})
		}
		return d
	}
	return c.e.observe(ctx, c.db, command, body, f)
}

func (c monitoredColl) InsertOne(ctx context.Context, doc any) error {
	return c.run(ctx, "insert", func() error { return c.c.InsertOne(ctx, doc) })
}

func (c monitoredColl) InsertMany(ctx context.Context, docs []any) error {
	return c.run(ctx, "insert", func() error { return c.c.InsertMany(ctx, docs) })
}

func (c monitoredColl) ReplaceOne(ctx context.Context, filter bson.D, doc any, upsert bool) (matched bool, err error) {
	err = c.run(ctx, "update", func() error { matched, err = c.c.ReplaceOne(ctx, filter, doc, upsert); return err })
	return matched, err
}

func (c monitoredColl) DeleteOne(ctx context.Context, filter bson.D) (n int64, err error) {
	err = c.run(ctx, "delete", func() error { n, err = c.c.DeleteOne(ctx, filter); return err })
	return n, err
}

func (c monitoredColl) DeleteMany(ctx context.Context, filter bson.D) (n int64, err error) {
	err = c.run(ctx, "delete", func() error { n, err = c.c.DeleteMany(ctx, filter); return err })
	return n, err
}

func (c monitoredColl) Find(ctx context.Context, filter bson.D, opts *FindOptions) (cur Cursor, err error) {
	err = c.query(ctx, "find", filter, opts, func() error { cur, err = c.c.Find(ctx, filter, opts); return err })
	return cur, err
}

func (c monitoredColl) FindOne(ctx context.Context, filter bson.D, opts *FindOptions) (raw bson.Raw, err error) {
	one := FindOptions{Limit: 1}
	if opts != nil {
		one = *opts
		one.Limit = 1
	}
	err = c.query(ctx, "find", filter, &one, func() error { raw, err = c.c.FindOne(ctx, filter, opts); return err })
	return raw, err
}

func (c monitoredColl) Count(ctx context.Context, filter bson.D) (n int64, err error) {
	err = c.query(ctx, "count", filter, nil, func() error { n, err = c.c.Count(ctx, filter); return err })
	return n, err
}

func (c monitoredColl) CountDistinct(ctx context.Context, filter bson.D, fields ...string) (n int64, err error) {
	err = c.run(ctx, "aggregate", func() error { n, err = c.c.CountDistinct(ctx, filter, fields...); return err })
	return n, err
}

func (c monitoredColl) CreateIndexes(ctx context.Context, indexes []Index) error {
	return c.run(ctx, "createIndexes", func() error { return c.c.CreateIndexes(ctx, indexes) })
}

func (c monitoredColl) IndexNames(ctx context.Context) (names []string, err error) {
	err = c.run(ctx, "listIndexes", func() error { names, err = c.c.IndexNames(ctx); return err })
	return names, err
}
