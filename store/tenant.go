package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
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

func (s *Store) systemDB() *mongo.Database {
	return s.client.Database(s.opts.DatabasePrefix + "system")
}

func (s *Store) tenantDB(name string) *mongo.Database {
	return s.client.Database(s.opts.DatabasePrefix + name)
}

func (s *Store) ensureSystem(ctx context.Context) error {
	// Creating the collection up front lets other processes on the same
	// embedded data dir see tenants they did not create.
	err := s.systemDB().CreateCollection(ctx, "tenants")
	if err != nil && !isNamespaceExists(err) {
		return dbError("create tenant registry", err)
	}
	return nil
}

func isNamespaceExists(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && (ce.Code == 48 || ce.Name == "NamespaceExists")
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
	_, err = s.systemDB().Collection("tenants").InsertOne(ctx, Tenant{Name: name, CreatedAt: s.opts.Now().UTC()})
	if mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("create tenant %s: %w", name, ErrTenantExists)
	}
	if err != nil {
		return dbError("create tenant "+name, err)
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
	err := s.systemDB().Collection("tenants").FindOne(ctx, bson.D{{Key: "_id", Value: name}}).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, dbError("look up tenant "+name, err)
	}
	return true, nil
}

// ListTenants returns every tenant sorted by name.
func (s *Store) ListTenants(ctx context.Context) ([]Tenant, error) {
	cur, err := s.systemDB().Collection("tenants").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, dbError("list tenants", err)
	}
	var out []Tenant
	if err := cur.All(ctx, &out); err != nil {
		return nil, dbError("list tenants", err)
	}
	return out, nil
}

// DeleteTenant removes a tenant and drops its database with all its data.
func (s *Store) DeleteTenant(ctx context.Context, name string) error {
	if err := ValidateTenantName(name); err != nil {
		return err
	}
	res, err := s.systemDB().Collection("tenants").DeleteOne(ctx, bson.D{{Key: "_id", Value: name}})
	if err != nil {
		return dbError("delete tenant "+name, err)
	}
	if res.DeletedCount == 0 {
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

// ensureTenantIndexes creates the missing history indexes. It asks first:
// the embedded engine fails when asked to create an index that exists.
func (s *Store) ensureTenantIndexes(ctx context.Context, name string) error {
	iv := s.tenantDB(name).Collection(historyCollection).Indexes()
	have := map[string]bool{}
	specs, err := iv.ListSpecifications(ctx)
	if err != nil && !isNamespaceNotFound(err) {
		return dbError("list history indexes of tenant "+name, err)
	}
	for _, sp := range specs {
		have[sp.Name] = true
	}
	var models []mongo.IndexModel
	for _, ix := range historyIndexes {
		if !have[ix.name] {
			models = append(models, mongo.IndexModel{Keys: ix.keys, Options: options.Index().SetName(ix.name)})
		}
	}
	if len(models) == 0 {
		return nil
	}
	if _, err := iv.CreateMany(ctx, models); err != nil {
		return dbError("create history indexes of tenant "+name, err)
	}
	for _, typ := range s.opts.EagerIndexTypes {
		if err := s.ensureSearchIndexes(ctx, name, typ); err != nil {
			return err
		}
	}
	return nil
}

func isNamespaceNotFound(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && (ce.Code == 26 || ce.Name == "NamespaceNotFound")
}

// ownerID is the document naming the process that serves this database.
const ownerID = "owner"

// SetOwner records a token naming the process that serves the database, so
// that other processes can tell it from another database at the same address.
func (s *Store) SetOwner(ctx context.Context, token string) error {
	_, err := s.systemDB().Collection("instance").ReplaceOne(ctx, bson.D{{Key: "_id", Value: ownerID}},
		bson.D{{Key: "_id", Value: ownerID}, {Key: "token", Value: token}}, options.Replace().SetUpsert(true))
	return dbError("record database owner", err)
}

// Owner returns the token recorded by SetOwner ("" when none).
func (s *Store) Owner(ctx context.Context) (string, error) {
	var doc struct {
		Token string `bson:"token"`
	}
	err := s.systemDB().Collection("instance").FindOne(ctx, bson.D{{Key: "_id", Value: ownerID}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "", nil
	}
	return doc.Token, dbError("read database owner", err)
}

// ensureSearchIndexes creates the missing indexes on the search fields of a
// type's collection, once per process and collection.
func (s *Store) ensureSearchIndexes(ctx context.Context, tenant, typ string) error {
	key := tenant + "/" + typ
	if s.opts.Registry == nil || s.opts.SkipSearchIndexes {
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
	iv := s.tenantDB(tenant).Collection(typ).Indexes()
	specs, err := iv.ListSpecifications(ctx)
	if err != nil && !isNamespaceNotFound(err) {
		return dbError("list search indexes of "+key, err)
	}
	have := map[string]bool{}
	for _, sp := range specs {
		have[sp.Name] = true
	}
	var models []mongo.IndexModel
	for _, field := range s.opts.Registry.IndexFields(typ) {
		if name := field + "_1"; !have[name] {
			models = append(models, mongo.IndexModel{Keys: bson.D{{Key: field, Value: 1}}, Options: options.Index().SetName(name)})
		}
	}
	if len(models) > 0 {
		if err := s.createIndexes(ctx, s.tenantDB(tenant).Collection(typ), models); err != nil {
			return dbError("create search indexes of "+key, err)
		}
	}
	s.indexed.Store(key, true)
	return nil
}

// createIndexes creates models on coll. The embedded engine can be left
// with an index its catalogue does not know when a process dies while
// creating it, and then refuses to create it again; a collection that holds
// no documents yet is dropped and its indexes created afresh.
func (s *Store) createIndexes(ctx context.Context, coll *mongo.Collection, models []mongo.IndexModel) error {
	_, err := coll.Indexes().CreateMany(ctx, models)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		return err
	}
	n, cerr := coll.CountDocuments(ctx, bson.D{})
	if cerr != nil || n > 0 {
		return err
	}
	s.log.Warn("recreating an empty collection with a half-created index", zap.String("collection", coll.Database().Name()+"."+coll.Name()), zap.Error(err))
	if derr := coll.Drop(ctx); derr != nil {
		return fmt.Errorf("%w (drop to recreate: %w)", err, derr)
	}
	_, err = coll.Indexes().CreateMany(ctx, models)
	return err
}

// forgetIndexes drops what this process remembers of a tenant's indexes.
func (s *Store) forgetIndexes(tenant string) {
	s.indexed.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), tenant+"/") {
			s.indexed.Delete(k)
		}
		return true
	})
}

// IndexNames lists the names of the indexes of a type's collection.
func (s *Store) IndexNames(ctx context.Context, tenant, typ string) ([]string, error) {
	specs, err := s.tenantDB(tenant).Collection(typ).Indexes().ListSpecifications(ctx)
	if err != nil && !isNamespaceNotFound(err) {
		return nil, dbError("list indexes of "+tenant+"/"+typ, err)
	}
	names := make([]string, 0, len(specs))
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	return names, nil
}
