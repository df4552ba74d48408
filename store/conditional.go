package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// locksCollection holds the criteria locks of conditional writes.
const locksCollection = "locks"

// matchCondition returns the current resources of typ matching the search
// query condition; at most two are read, enough to tell one from several.
// Unknown parameters are an error: ignoring one would match everything.
func (s *Store) matchCondition(ctx context.Context, tenant, typ, condition string) ([]*Resource, error) {
	if s.opts.Registry == nil {
		return nil, errors.New("conditional interactions need a search registry")
	}
	values, err := url.ParseQuery(condition)
	if err != nil || len(values) == 0 {
		return nil, syntaxIssue("invalid", fmt.Sprintf("search criteria %q are not a query string", condition), "")
	}
	for name := range values {
		if strings.HasPrefix(name, "_") && resultParam(name) {
			return nil, syntaxIssue("invalid", fmt.Sprintf("%s cannot be part of search criteria", name), "")
		}
	}
	reg, err := s.Registry(ctx, tenant)
	if err != nil {
		return nil, err
	}
	q, err := reg.Parse(typ, values, search.ParseOptions{Strict: true})
	if err != nil {
		var se *search.Error
		if errors.As(err, &se) {
			return nil, syntaxIssue("invalid", "search criteria: "+se.Error(), "")
		}
		return nil, err
	}
	q.Count, q.Total = 2, "none"
	// Chains, _has and deferred parts (value sets, _filter sub-searches)
	// depend on other types' writes, which the cache does not follow.
	cacheable := s.opts.Exclusive && len(q.Chains) == 0 && len(q.Has) == 0 && !q.Deferred()
	key, gen := tenant+"/"+typ+"?"+condition, s.matches.generation(tenant, typ)
	if cacheable {
		if hit, ok := s.matches.get(key, gen); ok && s.stillCurrent(ctx, tenant, typ, hit) {
			return hit, nil
		}
	}
	page, err := s.Search(ctx, tenant, q)
	var se *search.Error
	if errors.As(err, &se) { // a value set or code system the criteria name is not usable
		return nil, syntaxIssue("invalid", "search criteria: "+se.Error(), "")
	}
	if err != nil {
		return nil, err
	}
	if cacheable {
		s.matches.put(key, gen, page.Entries)
	}
	return page.Entries, nil
}

// stillCurrent checks that cached matches are still the current versions,
// in case a tenant was dropped and created again by another process.
func (s *Store) stillCurrent(ctx context.Context, tenant, typ string, matches []*Resource) bool {
	for _, m := range matches {
		cur, err := s.current(ctx, tenant, typ, m.ID)
		if err != nil || cur.Deleted || cur.VID != m.VersionID {
			return false
		}
	}
	return true
}

func resultParam(name string) bool {
	switch name {
	case "_count", "_sort", "_summary", "_elements", "_total", "_include", "_revinclude", "_cursor":
		return true
	}
	return false
}

// conditionKey names the criteria of a conditional write independent of
// parameter order.
func conditionKey(typ, condition string) string {
	values, err := url.ParseQuery(condition)
	if err != nil {
		return typ + "?" + condition
	}
	for _, v := range values {
		sort.Strings(v)
	}
	return typ + "?" + values.Encode()
}

// lockDoc is a held criteria lock.
type lockDoc struct {
	Key   string    `bson:"_id"`
	Owner string    `bson:"owner"`
	At    time.Time `bson:"at"`
}

// lockConditions takes the criteria lock of every conditional create and
// update, so two writers with the same criteria cannot both create: the
// second waits and then finds the first one's resource. Locks are taken in
// key order, which rules out deadlocks between transactions.
func (t *txn) lockConditions(ctx context.Context) (func(), error) {
	var keys []string
	seen := map[string]bool{}
	for _, o := range t.ops {
		if o.Condition == "" || (o.Method != "POST" && o.Method != "PUT") || o.result.Outcome == Existing {
			continue
		}
		k := conditionKey(o.Type, o.Condition)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	owner := uuid.NewString()
	var held []string
	unlock := func() { t.s.unlock(context.WithoutCancel(ctx), t.tenant, owner, held) }
	for _, k := range keys {
		if err := t.s.lock(ctx, t.tenant, owner, k); err != nil {
			unlock()
			return nil, err
		}
		held = append(held, k)
	}
	return unlock, nil
}

// lock inserts the lock document of key, waiting while another owner holds
// it; a lock older than LockLease is taken as abandoned by a crash.
func (s *Store) lock(ctx context.Context, tenant, owner, key string) error {
	coll := s.tenantDB(tenant).Collection(locksCollection)
	ctx, cancel := context.WithTimeout(ctx, s.opts.LockTimeout)
	defer cancel()
	wait := 2 * time.Millisecond
	for {
		err := coll.InsertOne(ctx, lockDoc{Key: key, Owner: owner, At: s.opts.Now().UTC()})
		if err == nil {
			return nil
		}
		if !engine.IsDuplicateKey(err) {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: another conditional write with criteria %s is still running", ErrConflict, key)
			}
			return dbError("lock search criteria", err)
		}
		s.breakStaleLock(ctx, coll, key)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: another conditional write with criteria %s is still running", ErrConflict, key)
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait)))):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// breakStaleLock deletes the lock of key when its holder is older than the
// lease.
func (s *Store) breakStaleLock(ctx context.Context, coll engine.Collection, key string) {
	var held lockDoc
	if err := engine.FindOneInto(ctx, coll, bson.D{{Key: "_id", Value: key}}, nil, &held); err != nil {
		return
	}
	if s.opts.Now().Sub(held.At) > s.opts.LockLease {
		_, _ = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "owner", Value: held.Owner}})
	}
}

// unlock releases the locks owner holds.
func (s *Store) unlock(ctx context.Context, tenant, owner string, keys []string) {
	if len(keys) == 0 {
		return
	}
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}, {Key: "owner", Value: owner}}
	_, _ = s.tenantDB(tenant).Collection(locksCollection).DeleteMany(ctx, filter)
}
