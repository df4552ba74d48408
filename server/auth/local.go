package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// LocalAlg signs the tokens of the server's own token endpoint.
const LocalAlg = "ES256"

// DefaultTokenTTL is the lifetime of tokens from the token endpoint.
const DefaultTokenTTL = 5 * time.Minute

// LocalIssuer is the server's own authorization server: it signs the
// tokens of /oauth2/token with one ES256 key shared by every instance.
type LocalIssuer struct {
	key *ecdsa.PrivateKey
	kid string
	// URL is the iss of its tokens; empty derives it from the request (its origin).
	URL string
	// TTL is the lifetime of its tokens (default DefaultTokenTTL).
	TTL time.Duration
	// clientKeys caches the key sets of clients registered with a JWKS URL.
	clientKeys sync.Map // url -> *RemoteKeys
}

// ClientKeys is the cached key set at a client's JWKS URL.
func (l *LocalIssuer) ClientKeys(url string) *RemoteKeys {
	if k, ok := l.clientKeys.Load(url); ok {
		return k.(*RemoteKeys)
	}
	k, _ := l.clientKeys.LoadOrStore(url, NewRemoteKeys(url))
	return k.(*RemoteKeys)
}

// GenerateLocalKey makes a new signing key, PKCS #8 encoded.
func GenerateLocalKey() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode signing key: %w", err)
	}
	return der, nil
}

// NewLocalIssuer uses a key from GenerateLocalKey.
func NewLocalIssuer(pkcs8 []byte, url string, ttl time.Duration) (*LocalIssuer, error) {
	k, err := x509.ParsePKCS8PrivateKey(pkcs8)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("signing key is a %T, want an ECDSA P-256 key", k)
	}
	// The kid is a digest of the public key: the same on every instance and after restarts.
	pub, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	sum := sha256.Sum256(pub)
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	return &LocalIssuer{key: ec, kid: base64.RawURLEncoding.EncodeToString(sum[:16]), URL: url, TTL: ttl}, nil
}

// IssuerURL is the iss of tokens issued at ep.
func (l *LocalIssuer) IssuerURL(ep Endpoint) string {
	if l.URL != "" {
		return l.URL
	}
	return ep.Origin
}

// Key implements KeySet with the issuer's one public key.
func (l *LocalIssuer) Key(_ context.Context, kid string) (crypto.PublicKey, error) {
	if kid != l.kid {
		return nil, fmt.Errorf("%w %q", ErrUnknownKey, kid)
	}
	return &l.key.PublicKey, nil
}

// JWKS publishes the public key.
func (l *LocalIssuer) JWKS() JWKS {
	k, _ := PublicJWK(l.kid, &l.key.PublicKey) // a P-256 key always encodes
	return JWKS{Keys: []JWK{k}}
}

// Grant is what a token of the token endpoint says.
type Grant struct {
	Tenant   string
	ClientID string
	Scope    string
}

// Issue signs an access token for a client at ep and returns it with its lifetime.
func (l *LocalIssuer) Issue(ep Endpoint, g Grant, now time.Time) (string, time.Duration, error) {
	c := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    l.IssuerURL(ep),
			Subject:   g.ClientID,
			Audience:  jwt.ClaimStrings{ep.FHIRBase()},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(l.TTL)),
			ID:        rand.Text(),
		},
		Tenant:   g.Tenant,
		Scope:    g.Scope,
		ClientID: g.ClientID,
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	t.Header["kid"] = l.kid
	t.Header["typ"] = "at+jwt"
	s, err := t.SignedString(l.key)
	if err != nil {
		return "", 0, fmt.Errorf("sign access token: %w", err)
	}
	return s, l.TTL, nil
}
