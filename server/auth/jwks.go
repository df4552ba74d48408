package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"sync"
	"time"
)

// ErrUnknownKey means no key of the set has the token's kid.
var ErrUnknownKey = errors.New("unknown signing key")

// KeySet finds the public key that signed a token by the token's kid.
type KeySet interface {
	Key(ctx context.Context, kid string) (crypto.PublicKey, error)
}

// JWK is one JSON Web Key (RFC 7517) of type RSA or EC; only public
// members are read or written.
type JWK struct {
	Kty string `json:"kty"`
	Kid string `json:"kid,omitempty"`
	Use string `json:"use,omitempty"`
	Alg string `json:"alg,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
}

// JWKS is a JSON Web Key Set.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// curves are the EC curves accepted in a JWK, by crv.
var curves = map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}

// PublicKey decodes the key; private members, if any, are ignored.
func (k JWK) PublicKey() (crypto.PublicKey, error) {
	b64 := func(name, s string) (*big.Int, error) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("jwk %q: bad %s", k.Kid, name)
		}
		return new(big.Int).SetBytes(b), nil
	}
	switch k.Kty {
	case "RSA":
		n, err := b64("n", k.N)
		if err != nil {
			return nil, err
		}
		e, err := b64("e", k.E)
		if err != nil {
			return nil, err
		}
		if n.BitLen() < 2048 {
			return nil, fmt.Errorf("jwk %q: RSA keys shorter than 2048 bits are not accepted", k.Kid)
		}
		if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 {
			return nil, fmt.Errorf("jwk %q: bad RSA exponent", k.Kid)
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		curve, ok := curves[k.Crv]
		if !ok {
			return nil, fmt.Errorf("jwk %q: unsupported curve %q", k.Kid, k.Crv)
		}
		x, err := b64("x", k.X)
		if err != nil {
			return nil, err
		}
		y, err := b64("y", k.Y)
		if err != nil {
			return nil, err
		}
		// Rebuild through the uncompressed point encoding: ecdh refuses points off the curve.
		size := (curve.Params().BitSize + 7) / 8
		if len(x.Bytes()) > size || len(y.Bytes()) > size {
			return nil, fmt.Errorf("jwk %q: bad EC point", k.Kid)
		}
		point := make([]byte, 1+2*size)
		point[0] = 4
		x.FillBytes(point[1 : 1+size])
		y.FillBytes(point[1+size:])
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return nil, fmt.Errorf("jwk %q: bad EC point", k.Kid)
		}
		return pub, nil
	default:
		return nil, fmt.Errorf("jwk %q: unsupported key type %q", k.Kid, k.Kty)
	}
}

// PublicJWK describes a public key as a JWK for signatures.
func PublicJWK(kid string, pub crypto.PublicKey) (JWK, error) {
	enc := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return JWK{Kty: "RSA", Kid: kid, Use: "sig", N: enc(k.N.Bytes()), E: enc(big.NewInt(int64(k.E)).Bytes())}, nil
	case *ecdsa.PublicKey:
		raw, err := k.Bytes()
		if err != nil {
			return JWK{}, err
		}
		size := (len(raw) - 1) / 2
		alg := map[string]string{"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}[k.Curve.Params().Name]
		return JWK{Kty: "EC", Kid: kid, Use: "sig", Alg: alg, Crv: k.Curve.Params().Name, X: enc(raw[1 : 1+size]), Y: enc(raw[1+size:])}, nil
	default:
		return JWK{}, fmt.Errorf("unsupported public key type %T", pub)
	}
}

// StaticKeys is a key set that never changes, by kid.
type StaticKeys map[string]crypto.PublicKey

// ParseJWKS reads a JSON Web Key Set. Keys meant for encryption are
// skipped; a key that cannot be decoded fails the whole set, so that a
// typo in a configured file is not silently ignored.
func ParseJWKS(b []byte) (StaticKeys, error) { return parseJWKS(b, true) }

// parseJWKS skips keys it cannot use unless strict: a provider's set may
// hold key types this server does not verify with (Ed25519, say), which
// must not make its other keys unusable.
func parseJWKS(b []byte, strict bool) (StaticKeys, error) {
	var set JWKS
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("JWKS is not JSON: %w", err)
	}
	keys := StaticKeys{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.PublicKey()
		if err != nil && !strict {
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, dup := keys[k.Kid]; dup {
			if !strict {
				continue
			}
			return nil, fmt.Errorf("JWKS has two keys with kid %q", k.Kid)
		}
		keys[k.Kid] = pub
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS has no signing keys")
	}
	return keys, nil
}

// LoadJWKSFile reads a key set from a file.
func LoadJWKSFile(path string) (StaticKeys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read JWKS file: %w", err)
	}
	keys, err := ParseJWKS(b)
	if err != nil {
		return nil, fmt.Errorf("JWKS file %s: %w", path, err)
	}
	return keys, nil
}

// Key implements KeySet. A token without kid is accepted only when the set
// holds exactly one key.
func (s StaticKeys) Key(_ context.Context, kid string) (crypto.PublicKey, error) {
	if k, ok := s[kid]; ok {
		return k, nil
	}
	if kid == "" && len(s) == 1 {
		for _, k := range s {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownKey, kid)
}

// Defaults of RemoteKeys.
const (
	DefaultJWKSTimeout    = 5 * time.Second
	DefaultJWKSMinRefresh = 30 * time.Second
	DefaultJWKSMaxAge     = time.Hour
	maxJWKSBytes          = 1 << 20
)

// RemoteKeys is a key set fetched from a URL and cached. An unknown kid
// refetches the set (a rotated key), but at most once per MinRefresh, so
// that a flood of tokens with invented kids cannot hammer the identity
// provider. When a fetch fails the keys fetched before stay in use.
type RemoteKeys struct {
	URL string
	// Client fetches the set; nil means an http.Client with DefaultJWKSTimeout.
	Client *http.Client
	// MinRefresh is the least time between two fetches (default DefaultJWKSMinRefresh).
	MinRefresh time.Duration
	// MaxAge is how long a fetched set is used before it is fetched again
	// (default DefaultJWKSMaxAge).
	MaxAge time.Duration

	mu      sync.Mutex // guards keys, fetched, tried
	keys    StaticKeys
	fetched time.Time  // last successful fetch
	tried   time.Time  // last attempt
	fetch   sync.Mutex // one fetch at a time
}

// NewRemoteKeys is a key set at url with the default timeout and intervals.
func NewRemoteKeys(url string) *RemoteKeys { return &RemoteKeys{URL: url} }

// Key implements KeySet.
func (r *RemoteKeys) Key(ctx context.Context, kid string) (crypto.PublicKey, error) {
	keys, fresh := r.cached()
	if keys != nil && fresh {
		if k, err := keys.Key(ctx, kid); err == nil {
			return k, nil
		}
	}
	if err := r.refresh(ctx); err != nil {
		if keys == nil {
			return nil, err
		}
		// Stale keys still verify tokens while the provider is unreachable.
	}
	keys, _ = r.cached()
	if keys == nil {
		return nil, fmt.Errorf("%w %q: the key set at %s could not be fetched", ErrUnknownKey, kid, r.URL)
	}
	return keys.Key(ctx, kid)
}

func (r *RemoteKeys) cached() (StaticKeys, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys, time.Since(r.fetched) < r.maxAge()
}

func (r *RemoteKeys) maxAge() time.Duration {
	if r.MaxAge > 0 {
		return r.MaxAge
	}
	return DefaultJWKSMaxAge
}

// refresh fetches the set unless a fetch was tried within MinRefresh.
func (r *RemoteKeys) refresh(ctx context.Context) error {
	r.fetch.Lock()
	defer r.fetch.Unlock()
	minGap := r.MinRefresh
	if minGap <= 0 {
		minGap = DefaultJWKSMinRefresh
	}
	r.mu.Lock()
	recent := !r.tried.IsZero() && time.Since(r.tried) < minGap
	if !recent {
		r.tried = time.Now()
	}
	r.mu.Unlock()
	if recent {
		return nil // rate limited: whatever is cached is what there is
	}
	keys, err := r.get(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.keys, r.fetched = keys, time.Now()
	r.mu.Unlock()
	return nil
}

func (r *RemoteKeys) get(ctx context.Context) (StaticKeys, error) {
	client := r.Client
	if client == nil {
		client = &http.Client{Timeout: DefaultJWKSTimeout}
	}
	// The fetch serves every waiting request, so one caller's cancellation must not end it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultJWKSTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS %s: status %d", r.URL, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	keys, err := parseJWKS(b, false)
	if err != nil {
		return nil, fmt.Errorf("JWKS at %s: %w", r.URL, err)
	}
	return keys, nil
}
