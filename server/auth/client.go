package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/argon2"
)

// Client secrets are hashed with argon2id (RFC 9106) using OWASP's
// minimum parameters: 19 MiB, 2 passes, 1 lane. argon2id is memory-hard,
// and unlike bcrypt it does not cut secrets at 72 bytes; 19 MiB keeps a
// burst of token requests from exhausting memory.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// NewClientSecret returns a random secret (128 bits, base32).
func NewClientSecret() string { return rand.Text() }

// HashSecret hashes a client secret in the PHC string format.
func HashSecret(secret string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash secret: %w", err)
	}
	sum := argon2.IDKey([]byte(secret), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding.EncodeToString
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads, enc(salt), enc(sum)), nil
}

// CheckSecret reports whether secret matches a HashSecret hash; the
// comparison takes constant time. An empty or malformed hash never matches.
func CheckSecret(hash, secret string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		_ = argon2.IDKey([]byte(secret), dummySalt, argonTime, argonMemory, argonThreads, argonKeyLen)
		return false
	}
	var version int
	var memory, passes uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &passes, &threads); err != nil ||
		memory == 0 || memory > 256*1024 || passes == 0 || passes > 10 || threads == 0 {
		return false
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(secret), salt, passes, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummySalt lets a failed lookup cost as much as a wrong secret.
var dummySalt = make([]byte, argonSaltLen)

// BurnSecretCheck spends the time of one secret check, so that unknown
// clients cannot be told from wrong secrets by timing.
func BurnSecretCheck(secret string) {
	_ = argon2.IDKey([]byte(secret), dummySalt, argonTime, argonMemory, argonThreads, argonKeyLen)
}

// ClientAssertionType is the client_assertion_type of private_key_jwt.
const ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// MaxAssertionLifetime bounds exp - now of a client assertion (SMART
// Backend Services: no more than five minutes in the future).
const MaxAssertionLifetime = 5 * time.Minute

// assertionAlgs are the algorithms SMART Backend Services clients sign with.
var assertionAlgs = []string{"RS384", "ES384", "RS256", "ES256"}

// ErrInvalidAssertion means a client assertion must not be accepted.
var ErrInvalidAssertion = errors.New("invalid client assertion")

// Assertion is a verified client assertion.
type Assertion struct {
	ClientID string
	ID       string // jti
	Expires  time.Time
}

// PeekAssertionClient returns the unverified iss of an assertion: which
// client's keys to verify it with.
func PeekAssertionClient(assertion string) (string, error) {
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(assertion, &c); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidAssertion, err)
	}
	if c.Issuer == "" {
		return "", fmt.Errorf("%w: no iss", ErrInvalidAssertion)
	}
	return c.Issuer, nil
}

// VerifyClientAssertion checks a private_key_jwt assertion of clientID
// signed with one of keys for the token endpoint tokenURL: iss = sub =
// clientID, aud = tokenURL, exp at most five minutes ahead, a jti. The
// caller still has to refuse a jti seen before.
func VerifyClientAssertion(ctx context.Context, assertion, clientID string, keys KeySet, tokenURL string, leeway time.Duration, now time.Time) (*Assertion, error) {
	var c jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(assertion, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return keys.Key(ctx, kid)
	},
		jwt.WithValidMethods(assertionAlgs),
		jwt.WithIssuer(clientID),
		jwt.WithSubject(clientID),
		jwt.WithAudience(tokenURL),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidAssertion, err)
	}
	if c.ExpiresAt.Sub(now) > MaxAssertionLifetime+leeway {
		return nil, fmt.Errorf("%w: exp is more than %s ahead", ErrInvalidAssertion, MaxAssertionLifetime)
	}
	if c.ID == "" {
		return nil, fmt.Errorf("%w: no jti", ErrInvalidAssertion)
	}
	return &Assertion{ClientID: clientID, ID: c.ID, Expires: c.ExpiresAt.Time}, nil
}
