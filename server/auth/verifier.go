package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultLeeway is the clock skew allowed on nbf and iat: an issuer whose
// clock runs ahead must not have its fresh tokens refused. Expiry is exact
// (see checkExpiry).
const DefaultLeeway = 60 * time.Second

// AnyTenant in TrustedIssuer.Tenants trusts an issuer for every tenant; its
// tokens must then carry a tenant claim.
const AnyTenant = "*"

// externalAlgs are the signature algorithms accepted from an identity
// provider: asymmetric only, so a public key can never serve as an HMAC
// secret (key confusion).
var externalAlgs = []string{"RS256", "RS384", "RS512", "PS256", "ES256", "ES384"}

// TrustedIssuer is an authorization server whose tokens are accepted.
type TrustedIssuer struct {
	// URL is the iss of its tokens.
	URL string
	// Keys verify its signatures (a JWKS URL or file).
	Keys KeySet
	// Tenants the issuer may issue tokens for; a token without tenant
	// claim is for the only one when there is exactly one. AnyTenant
	// trusts it for every tenant.
	Tenants []string
	// Audiences accepted besides the tenant's FHIR base URL.
	Audiences []string
}

// Verifier is the Authenticator of a deployment: tokens of trusted
// issuers, of the server's own token endpoint, and — in dev mode only —
// HS256 tokens signed with the dev key.
type Verifier struct {
	Issuers []TrustedIssuer
	// Local, when set, is the server's own token endpoint: its tokens are
	// always trusted.
	Local *LocalIssuer
	// Dev, when set, accepts HS256 tokens of DevIssuer (dev mode).
	Dev *HS256
	// Leeway is the clock skew allowed on nbf and iat (default DefaultLeeway).
	Leeway time.Duration
}

// Authenticate implements Authenticator.
func (v *Verifier) Authenticate(ctx context.Context, token string) (*Principal, error) {
	// The unverified claims only choose which keys verify the token.
	var peek jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &peek); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	ep, _ := EndpointFrom(ctx)
	switch {
	case peek.Issuer == "":
		return nil, fmt.Errorf("%w: no iss claim", ErrInvalidToken)
	case peek.Issuer == DevIssuer:
		if v.Dev == nil {
			return nil, fmt.Errorf("%w: dev tokens are accepted in dev mode only", ErrInvalidToken)
		}
		return v.Dev.Authenticate(ctx, token)
	case v.Local != nil && peek.Issuer == v.Local.IssuerURL(ep):
		return v.verify(ctx, token, TrustedIssuer{URL: peek.Issuer, Keys: v.Local, Tenants: []string{AnyTenant}}, []string{LocalAlg}, ep)
	}
	for _, iss := range v.Issuers {
		if iss.URL == peek.Issuer {
			return v.verify(ctx, token, iss, externalAlgs, ep)
		}
	}
	return nil, fmt.Errorf("%w: issuer %q is not trusted", ErrInvalidToken, peek.Issuer)
}

func (v *Verifier) verify(ctx context.Context, token string, iss TrustedIssuer, algs []string, ep Endpoint) (*Principal, error) {
	leeway := v.Leeway
	if leeway <= 0 {
		leeway = DefaultLeeway
	}
	audiences := append([]string(nil), iss.Audiences...)
	if ep.Origin != "" {
		audiences = append(audiences, ep.FHIRBase(), ep.FHIRBase()+"/")
	}
	if len(audiences) == 0 {
		return nil, fmt.Errorf("%w: no audience to check the token against", ErrInvalidToken)
	}
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return iss.Keys.Key(ctx, kid)
	},
		jwt.WithValidMethods(algs),
		jwt.WithIssuer(iss.URL),
		jwt.WithAudience(audiences...),
		jwt.WithLeeway(leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if err := checkExpiry(&c, time.Now()); err != nil {
		return nil, err
	}
	tenant, err := iss.tenant(c.Tenant)
	if err != nil {
		return nil, err
	}
	return &Principal{Subject: c.Subject, Tenant: tenant, Scopes: strings.Fields(c.Scope), Patient: c.Patient, Issuer: c.Issuer, ClientID: c.ClientID}, nil
}

// tenant is the tenant a verified token of the issuer is for.
func (iss TrustedIssuer) tenant(claim string) (string, error) {
	if claim == "" {
		if len(iss.Tenants) == 1 && iss.Tenants[0] != AnyTenant {
			return iss.Tenants[0], nil
		}
		return "", fmt.Errorf("%w: no tenant claim", ErrInvalidToken)
	}
	if slices.Contains(iss.Tenants, claim) || slices.Contains(iss.Tenants, AnyTenant) {
		return claim, nil
	}
	return "", fmt.Errorf("%w: issuer %q is not trusted for tenant %q", ErrInvalidToken, iss.URL, claim)
}

// Endpoint is where a request arrived, as the client addressed it.
type Endpoint struct {
	// Origin is scheme://host[:port].
	Origin string
}

// FHIRBase is the tenant's FHIR base URL: the audience of its tokens.
func (e Endpoint) FHIRBase() string { return e.Origin + "/fhir/r4" }

// TokenURL is the token endpoint: the audience of client assertions.
func (e Endpoint) TokenURL() string { return e.Origin + "/oauth2/token" }

type endpointKey struct{}

// WithEndpoint records where the request of ctx arrived; Verifier checks
// aud against the FHIR base URL there.
func WithEndpoint(ctx context.Context, e Endpoint) context.Context {
	return context.WithValue(ctx, endpointKey{}, e)
}

// EndpointFrom returns the Endpoint recorded by WithEndpoint.
func EndpointFrom(ctx context.Context) (Endpoint, bool) {
	e, ok := ctx.Value(endpointKey{}).(Endpoint)
	return e, ok
}

// IssuerConfig is the JSON file of trusted issuers (--issuer-config).
type IssuerConfig struct {
	Issuers []IssuerEntry `json:"issuers"`
}

// IssuerEntry configures one trusted issuer: exactly one of JWKSURL and JWKSFile.
type IssuerEntry struct {
	Issuer    string   `json:"issuer"`
	JWKSURL   string   `json:"jwks_url,omitempty"`
	JWKSFile  string   `json:"jwks_file,omitempty"`
	Tenants   []string `json:"tenants"`
	Audiences []string `json:"audiences,omitempty"`
}

// LoadIssuerConfig reads an issuer configuration file.
func LoadIssuerConfig(path string) ([]IssuerEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read issuer config: %w", err)
	}
	var cfg IssuerConfig
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("issuer config %s: %w", path, err)
	}
	return cfg.Issuers, nil
}

// Trusted checks the entry and builds its TrustedIssuer; a JWKS file is
// read now, a JWKS URL on the first token.
func (e IssuerEntry) Trusted() (TrustedIssuer, error) {
	if e.Issuer == "" {
		return TrustedIssuer{}, errors.New("an issuer needs its iss URL")
	}
	if e.Issuer == DevIssuer {
		return TrustedIssuer{}, fmt.Errorf("issuer %s is reserved for dev tokens", DevIssuer)
	}
	if len(e.Tenants) == 0 {
		return TrustedIssuer{}, fmt.Errorf("issuer %s: name the tenants it is trusted for (or %q for all)", e.Issuer, AnyTenant)
	}
	t := TrustedIssuer{URL: e.Issuer, Tenants: e.Tenants, Audiences: e.Audiences}
	switch {
	case e.JWKSURL != "" && e.JWKSFile != "":
		return TrustedIssuer{}, fmt.Errorf("issuer %s: give a JWKS URL or a JWKS file, not both", e.Issuer)
	case e.JWKSURL != "":
		if !strings.HasPrefix(e.JWKSURL, "https://") && !strings.HasPrefix(e.JWKSURL, "http://") {
			return TrustedIssuer{}, fmt.Errorf("issuer %s: JWKS URL %q is not an http(s) URL", e.Issuer, e.JWKSURL)
		}
		t.Keys = NewRemoteKeys(e.JWKSURL)
	case e.JWKSFile != "":
		keys, err := LoadJWKSFile(e.JWKSFile)
		if err != nil {
			return TrustedIssuer{}, fmt.Errorf("issuer %s: %w", e.Issuer, err)
		}
		t.Keys = keys
	default:
		return TrustedIssuer{}, fmt.Errorf("issuer %s: give its JWKS URL or JWKS file", e.Issuer)
	}
	return t, nil
}

// checkExpiry refuses a token whose exp has passed by this server's clock.
// The leeway covers an issuer's clock running ahead (nbf, iat in the
// future); it does not extend a token's life: an issuer whose clock runs
// behind only makes its tokens end early, which clients handle by asking
// for a new one.
func checkExpiry(c *Claims, now time.Time) error {
	if c.ExpiresAt == nil || !now.Before(c.ExpiresAt.Time) {
		return fmt.Errorf("%w: the token has expired", ErrInvalidToken)
	}
	return nil
}
