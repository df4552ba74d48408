package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// Errors of the OAuth client registry.
var (
	ErrClientNotFound = errors.New("client not found")                  // invalid_client
	ErrReplayed       = errors.New("client assertion was used already") // invalid_client
)

// Client is an OAuth client of one tenant, allowed the client-credentials
// grant. It authenticates with a secret (only its hash is kept) or with
// JWTs signed by keys of its JWKS (inline or at a URL).
type Client struct {
	ID         string    `bson:"_id"`
	Tenant     string    `bson:"tenant"`
	Name       string    `bson:"name,omitempty"`
	Scopes     []string  `bson:"scopes"`
	SecretHash string    `bson:"secretHash,omitempty"`
	JWKS       string    `bson:"jwks,omitempty"`
	JWKSURL    string    `bson:"jwksUrl,omitempty"`
	CreatedAt  time.Time `bson:"createdAt"`
}

func (s *Store) clients() engine.Collection { return s.systemDB().Collection("clients") }

// CreateClient registers a client of an existing tenant.
func (s *Store) CreateClient(ctx context.Context, c Client) error {
	if c.ID == "" {
		return errors.New("create client: no client id")
	}
	if (c.SecretHash == "") == (c.JWKS == "" && c.JWKSURL == "") {
		return errors.New("create client: give it either a secret or public keys")
	}
	exists, err := s.TenantExists(ctx, c.Tenant)
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("create client: %w: %s", ErrTenantNotFound, c.Tenant)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.opts.Now().UTC()
	}
	if err := s.clients().InsertOne(ctx, c); err != nil {
		if engine.IsDuplicateKey(err) {
			return fmt.Errorf("create client %s: %w", c.ID, ErrConflict)
		}
		return dbError("create client", err)
	}
	return nil
}

// Client returns a registered client.
func (s *Store) Client(ctx context.Context, id string) (*Client, error) {
	var c Client
	err := engine.FindOneInto(ctx, s.clients(), bson.D{{Key: "_id", Value: id}}, nil, &c)
	if errors.Is(err, engine.ErrNoDocuments) {
		return nil, fmt.Errorf("client %q: %w", id, ErrClientNotFound)
	}
	if err != nil {
		return nil, dbError("look up client", err)
	}
	return &c, nil
}

// ListClients returns the clients of a tenant (every tenant when tenant is
// empty), by tenant and creation time.
func (s *Store) ListClients(ctx context.Context, tenant string) ([]Client, error) {
	filter := bson.D{}
	if tenant != "" {
		filter = bson.D{{Key: "tenant", Value: tenant}}
	}
	cur, err := s.clients().Find(ctx, filter, &engine.FindOptions{Sort: bson.D{{Key: "tenant", Value: 1}, {Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}})
	if err != nil {
		return nil, dbError("list clients", err)
	}
	var out []Client
	if err := engine.All(ctx, cur, &out); err != nil {
		return nil, dbError("list clients", err)
	}
	return out, nil
}

// DeleteClient removes a client; tokens it already holds stay valid until
// they expire.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	res, err := s.clients().DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	if err != nil {
		return dbError("delete client", err)
	}
	if res == 0 {
		return fmt.Errorf("delete client %q: %w", id, ErrClientNotFound)
	}
	return nil
}

// DeleteTenantClients removes every client of a tenant (for DeleteTenant:
// a tenant created again later must not inherit them).
func (s *Store) DeleteTenantClients(ctx context.Context, tenant string) error {
	if _, err := s.clients().DeleteMany(ctx, bson.D{{Key: "tenant", Value: tenant}}); err != nil {
		return dbError("delete clients of tenant "+tenant, err)
	}
	return nil
}

// UseAssertion records the jti of a client assertion until it expires;
// ErrReplayed when it was recorded already. The unique _id makes the check
// hold across server instances.
func (s *Store) UseAssertion(ctx context.Context, clientID, jti string, expires time.Time) error {
	coll := s.systemDB().Collection("assertions")
	now := s.opts.Now().UTC()
	// Expired jtis can never be replayed (their assertions fail on exp), so they may go.
	if _, err := coll.DeleteMany(ctx, bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lt", Value: now.Add(-time.Hour)}}}}); err != nil {
		return dbError("expire client assertions", err)
	}
	err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: clientID + " " + jti}, {Key: "expiresAt", Value: expires.UTC()}})
	if engine.IsDuplicateKey(err) {
		return fmt.Errorf("client %s jti %q: %w", clientID, jti, ErrReplayed)
	}
	if err != nil {
		return dbError("record client assertion", err)
	}
	return nil
}

// signingKeyID is the _id of the token signing key in the keys collection.
const signingKeyID = "oauth-signing-key"

// SigningKey returns the key every server instance signs its access
// tokens with, storing one from generate on first use. Concurrent first
// uses agree: the unique _id lets one insert win and the others read it.
func (s *Store) SigningKey(ctx context.Context, generate func() ([]byte, error)) ([]byte, error) {
	coll := s.systemDB().Collection("keys")
	var doc struct {
		Key []byte `bson:"key"`
	}
	err := engine.FindOneInto(ctx, coll, bson.D{{Key: "_id", Value: signingKeyID}}, nil, &doc)
	if err == nil {
		return doc.Key, nil
	}
	if !errors.Is(err, engine.ErrNoDocuments) {
		return nil, dbError("read signing key", err)
	}
	key, err := generate()
	if err != nil {
		return nil, err
	}
	err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: signingKeyID}, {Key: "key", Value: key}, {Key: "createdAt", Value: s.opts.Now().UTC()}})
	if engine.IsDuplicateKey(err) {
		if err := engine.FindOneInto(ctx, coll, bson.D{{Key: "_id", Value: signingKeyID}}, nil, &doc); err != nil {
			return nil, dbError("read signing key", err)
		}
		return doc.Key, nil
	}
	if err != nil {
		return nil, dbError("store signing key", err)
	}
	return key, nil
}
