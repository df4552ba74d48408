package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
	"fhirstore/store/engine"
)

// tenantName is a DNS label: it is the first label of the host name and
// becomes part of a database name, so nothing else may pass.
var tenantName = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$`)

// reservedTenants would collide with the store's own databases.
var reservedTenants = map[string]bool{"system": true, "admin": true, "local": true, "config": true}

// ValidateTenantName reports whether name can be a tenant: 1–32 lowercase
// letters, digits and inner hyphens, not a reserved word.
func ValidateTenantName(name string) error {
	if !tenantName.MatchString(name) {
		return fmt.Errorf("%w %q: use 1-32 lowercase letters, digits or inner hyphens", ErrInvalidTenant, name)
	}
	if reservedTenants[name] {
		return fmt.Errorf("%w %q: the name is reserved", ErrInvalidTenant, name)
	}
	return nil
}

// Tenant is an entry of the tenant registry.
type Tenant struct {
	Name      string    `bson:"_id"`
	CreatedAt time.Time `bson:"createdAt"`
}

func (s *Store) systemDB() engine.Database {
	return s.eng.Database(s.opts.DatabasePrefix + "system")
}

func (s *Store) tenantDB(name string) engine.Database {
	return s.eng.Database(s.opts.DatabasePrefix + name)
}

// CreateTenant registers a tenant and prepares its database. A new tenant
// starts empty: leftovers of an earlier tenant of that name (writes that
// raced its deletion) are dropped first.
func (s *Store) CreateTenant(ctx context.Context, name string) error {
	if err := ValidateTenantName(name); err != nil {
		return err
	}
	exists, err := s.TenantExists(ctx, name)
	if err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("create tenant %s: %w", name, ErrTenantExists)
	}
	if err := s.tenantDB(name).Drop(ctx); err != nil {
		return dbError("clear database of tenant "+name, err)
	}
	s.forgetIndexes(name)
	s.matches.forget(name)
	err = s.systemDB().Collection("tenants").InsertOne(ctx, Tenant{Name: name, CreatedAt: s.opts.Now().UTC()})
	if engine.IsDuplicateKey(err) {
		return fmt.Errorf("create tenant %s: %w", name, ErrTenantExists)
	}
	if err != nil {
		return dbError("create tenant "+name, err)
	}
	if s.opts.Registry != nil { // a store without one writes no search values
		if err := s.recordIndexVersion(ctx, name); err != nil {
			return err
		}
	}
	return s.ensureTenantIndexes(ctx, name)
}

// EnsureTenant creates the tenant when it does not exist yet.
func (s *Store) EnsureTenant(ctx context.Context, name string) error {
	err := s.CreateTenant(ctx, name)
	if errors.Is(err, ErrTenantExists) {
		return s.ensureTenantIndexes(ctx, name)
	}
	return err
}

// TenantExists reports whether the tenant is registered.
func (s *Store) TenantExists(ctx context.Context, name string) (bool, error) {
	if ValidateTenantName(name) != nil {
		return false, nil
	}
	_, err := s.systemDB().Collection("tenants").FindOne(ctx, bson.D{{Key: "_id", Value: name}}, nil)
	if errors.Is(err, engine.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, dbError("look up tenant "+name, err)
	}
	return true, nil
}

// ListTenants returns every tenant sorted by name.
func (s *Store) ListTenants(ctx context.Context) ([]Tenant, error) {
	cur, err := s.systemDB().Collection("tenants").Find(ctx, bson.D{}, &engine.FindOptions{Sort: bson.D{{Key: "_id", Value: 1}}})
	if err != nil {
		return nil, dbError("list tenants", err)
	}
	var out []Tenant
	if err := engine.All(ctx, cur, &out); err != nil {
		return nil, dbError("list tenants", err)
	}
	return out, nil
}

// DeleteTenant removes a tenant and drops its database with all its data.
func (s *Store) DeleteTenant(ctx context.Context, name string) error {
	if err := ValidateTenantName(name); err != nil {
		return err
	}
	n, err := s.systemDB().Collection("tenants").DeleteOne(ctx, bson.D{{Key: "_id", Value: name}})
	if err != nil {
		return dbError("delete tenant "+name, err)
	}
	if n == 0 {
		return fmt.Errorf("delete tenant %s: %w", name, ErrTenantNotFound)
	}
	// A tenant created again under the name must not inherit its clients.
	if err := s.DeleteTenantClients(ctx, name); err != nil {
		return err
	}
	if err := s.tenantDB(name).Drop(ctx); err != nil {
		return dbError("drop database of tenant "+name, err)
	}
	s.forgetIndexes(name)
	s.matches.forget(name)
	return nil
}

// historyIndexes serve instance history (type, id, vid) and type and system
// history in newest-first order with the _id tie-break of the paging keys.
var historyIndexes = []struct {
	name string
	keys bson.D
}{
	{"type_id_vid", bson.D{{Key: "type", Value: 1}, {Key: "id", Value: 1}, {Key: "vid", Value: -1}}},
	{"lastUpdated_id", bson.D{{Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}}},
	{"type_lastUpdated_id", bson.D{{Key: "type", Value: 1}, {Key: "lastUpdated", Value: -1}, {Key: "_id", Value: -1}}},
}

// ensureTenantIndexes creates the missing history indexes.
func (s *Store) ensureTenantIndexes(ctx context.Context, name string) error {
	indexes := make([]engine.Index, len(historyIndexes))
	for i, ix := range historyIndexes {
		indexes[i] = engine.Index{Name: ix.name, Keys: ix.keys}
	}
	if err := s.tenantDB(name).Collection(historyCollection).CreateIndexes(ctx, indexes); err != nil {
		return dbError("create history indexes of tenant "+name, err)
	}
	for _, typ := range s.opts.EagerIndexTypes {
		if err := s.ensureSearchIndexes(ctx, name, typ); err != nil {
			return err
		}
	}
	return nil
}

// ownerID is the document naming the process that serves this database.
const ownerID = "owner"

// SetOwner records a token naming the process that serves the database, so
// that other processes can tell it from another database at the same address.
func (s *Store) SetOwner(ctx context.Context, token string) error {
	_, err := s.systemDB().Collection("instance").ReplaceOne(ctx, bson.D{{Key: "_id", Value: ownerID}},
		bson.D{{Key: "_id", Value: ownerID}, {Key: "token", Value: token}}, true)
	return dbError("record database owner", err)
}

// Owner returns the token recorded by SetOwner ("" when none).
func (s *Store) Owner(ctx context.Context) (string, error) {
	var doc struct {
		Token string `bson:"token"`
	}
	raw, err := s.systemDB().Collection("instance").FindOne(ctx, bson.D{{Key: "_id", Value: ownerID}}, nil)
	err = engine.Decode(raw, err, &doc)
	if errors.Is(err, engine.ErrNoDocuments) {
		return "", nil
	}
	return doc.Token, dbError("read database owner", err)
}

// ensureSearchIndexes creates the missing indexes on the search fields of a
// type's collection, once per process and collection.
func (s *Store) ensureSearchIndexes(ctx context.Context, tenant, typ string) error {
	key := tenant + "/" + typ
	if s.opts.Registry == nil {
		return nil
	}
	if _, done := s.indexed.Load(key); done {
		return nil
	}
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	if _, done := s.indexed.Load(key); done {
		return nil
	}
	var indexes []engine.Index
	for _, field := range s.indexFields(typ) {
		indexes = append(indexes, engine.Index{Name: field + "_1", Keys: bson.D{{Key: field, Value: 1}}})
	}
	if err := s.tenantDB(tenant).Collection(typ).CreateIndexes(ctx, indexes); err != nil {
		return dbError("create search indexes of "+key, err)
	}
	s.indexed.Store(key, true)
	return nil
}

// indexFields are the fields of a type's collection that get an index. An
// engine that indexes an array as one key (FerretDB) gets none on the word
// lists, which outgrow its key size with the text of any resource; it
// answers no search from an index anyway (package mongodb).
func (s *Store) indexFields(typ string) []string {
	fields := s.opts.Registry.IndexFields(typ)
	if !s.limits.WholeArrayKeys {
		return fields
	}
	return slices.DeleteFunc(fields, search.IsWordList)
}

// forgetIndexes drops what this process remembers of a tenant's indexes
// and search registry.
func (s *Store) forgetIndexes(tenant string) {
	s.registries.Delete(tenant)
	s.indexed.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), tenant+"/") {
			s.indexed.Delete(k)
		}
		return true
	})
}

// IndexNames lists the names of the indexes of a type's collection.
func (s *Store) IndexNames(ctx context.Context, tenant, typ string) ([]string, error) {
	names, err := s.tenantDB(tenant).Collection(typ).IndexNames(ctx)
	if err != nil {
		return nil, dbError("list indexes of "+tenant+"/"+typ, err)
	}
	return names, nil
}
