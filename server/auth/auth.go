// Package auth turns bearer tokens into principals: who calls, for which
// tenant, with which scopes. Dev mode signs and checks HS256 tokens with a
// key kept in the data directory.
package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DevIssuer is the iss of tokens signed with the dev key.
const DevIssuer = "urn:fhirstore:dev"

// DevKeyFile is the name of the dev signing key inside the data directory.
const DevKeyFile = "dev-signing.key"

// ErrInvalidToken means the token is missing, malformed, expired or not ours (401).
var ErrInvalidToken = errors.New("invalid token")

// Principal is the authenticated caller.
type Principal struct {
	Subject string
	Tenant  string
	Scopes  []string
	// Patient is the SMART patient context, when the token carries one.
	Patient string
	// Issuer is the token's iss.
	Issuer string
	// ClientID is the OAuth client the token was issued to, when it says.
	ClientID string
}

// Authenticator checks a bearer token. Implementations return an error
// wrapping ErrInvalidToken for any token that must not be accepted.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// Claims are the JWT claims fhirstore reads.
type Claims struct {
	jwt.RegisteredClaims
	Tenant  string `json:"tenant"`
	Scope   string `json:"scope,omitempty"`
	Patient string `json:"patient,omitempty"`
	// ClientID is the OAuth client the token was issued to (RFC 9068).
	ClientID string `json:"client_id,omitempty"`
}

// HS256 verifies tokens signed with a shared key (dev mode only).
type HS256 struct {
	Key    []byte
	Issuer string
	// Leeway is the clock skew allowed on nbf and iat; exp is exact.
	Leeway time.Duration
}

// Authenticate implements Authenticator.
func (h HS256) Authenticate(_ context.Context, token string) (*Principal, error) {
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return h.Key, nil },
		jwt.WithValidMethods([]string{"HS256"}),
		jwt.WithIssuer(h.Issuer),
		jwt.WithLeeway(h.Leeway),
		jwt.WithExpirationRequired(),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if err := checkExpiry(&c, time.Now()); err != nil {
		return nil, err
	}
	if c.Tenant == "" {
		return nil, fmt.Errorf("%w: no tenant claim", ErrInvalidToken)
	}
	return &Principal{Subject: c.Subject, Tenant: c.Tenant, Scopes: strings.Fields(c.Scope), Patient: c.Patient, Issuer: c.Issuer, ClientID: c.ClientID}, nil
}

// TokenRequest describes a token to sign.
type TokenRequest struct {
	Tenant  string
	Scope   string
	Subject string
	TTL     time.Duration
	Now     time.Time
}

// SignHS256 issues a dev token.
func SignHS256(key []byte, r TokenRequest) (string, error) {
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	if r.Subject == "" {
		r.Subject = "dev"
	}
	c := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    DevIssuer,
			Subject:   r.Subject,
			IssuedAt:  jwt.NewNumericDate(r.Now),
			NotBefore: jwt.NewNumericDate(r.Now.Add(-time.Minute)),
			ExpiresAt: jwt.NewNumericDate(r.Now.Add(r.TTL)),
		},
		Tenant: r.Tenant,
		Scope:  r.Scope,
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return s, nil
}

// LoadOrCreateDevKey reads the dev signing key from dataDir, creating the
// directory and a fresh random key on first use.
func LoadOrCreateDevKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, DevKeyFile)
	if b, err := os.ReadFile(path); err == nil {
		key, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(key) < 32 {
			return nil, fmt.Errorf("dev signing key %s is corrupt", path)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read dev signing key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate dev signing key: %w", err)
	}
	// Write aside, then link into place: a concurrent reader sees no key or the whole key.
	tmp, err := os.CreateTemp(dataDir, ".dev-signing-*")
	if err != nil {
		return nil, fmt.Errorf("write dev signing key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("write dev signing key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write dev signing key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
		return LoadOrCreateDevKey(dataDir) // another process created it first
	} else if err != nil {
		return nil, fmt.Errorf("write dev signing key: %w", err)
	}
	return key, nil
}
