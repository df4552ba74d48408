package server

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/server/auth"
	"fhirstore/store"
)

// maxTokenRequestBytes bounds a token request's form body.
const maxTokenRequestBytes = 64 << 10

// secretChecks bounds the argon2id hashes computed at once: each takes
// 19 MiB and a CPU for tens of milliseconds, so a burst of token requests
// queues instead of exhausting memory.
var secretChecks = make(chan struct{}, max(2, runtime.NumCPU()/2))

// withEndpoint records where the request arrived, so the Verifier can
// check a token's aud against the tenant's FHIR base URL.
func (s *Server) withEndpoint(c *gin.Context) {
	origin := strings.TrimSuffix(baseURL(c), "/fhir/r4")
	c.Request = c.Request.WithContext(auth.WithEndpoint(c.Request.Context(), auth.Endpoint{Origin: origin}))
}

// localIssuer is the server's own token endpoint, when the Authenticator has one.
func (s *Server) localIssuer() (*auth.Verifier, bool) {
	v, ok := s.auth.(*auth.Verifier)
	return v, ok && v.Local != nil
}

// oauthError is an error response of RFC 6749 §5.2.
type oauthError struct {
	status      int
	code        string
	description string
	basic       bool // challenge for HTTP Basic (invalid_client)
}

func (e *oauthError) Error() string { return e.code + ": " + e.description }

func invalidRequest(msg string) *oauthError {
	return &oauthError{status: http.StatusBadRequest, code: "invalid_request", description: msg}
}

func invalidClient(msg string, basic bool) *oauthError {
	return &oauthError{status: http.StatusUnauthorized, code: "invalid_client", description: msg, basic: basic}
}

func (s *Server) oauthFail(c *gin.Context, err error) {
	var oe *oauthError
	if !errors.As(err, &oe) {
		oe = &oauthError{status: http.StatusInternalServerError, code: "server_error", description: "internal server error"}
		if errors.Is(err, store.ErrUnavailable) {
			oe = &oauthError{status: http.StatusServiceUnavailable, code: "temporarily_unavailable", description: "the database did not answer in time; try again later"}
		}
		s.log.Error("token request failed", zap.String("request_id", requestID(c)), zap.Error(err))
	}
	if oe.basic {
		c.Header("WWW-Authenticate", `Basic realm="fhirstore", charset="UTF-8"`)
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Pragma", "no-cache")
	c.AbortWithStatusJSON(oe.status, gin.H{"error": oe.code, "error_description": oe.description})
}

// oauthJWKS publishes the public key of the server's own tokens.
func (s *Server) oauthJWKS(c *gin.Context) {
	v, ok := s.localIssuer()
	if !ok {
		s.abort(c, fail(http.StatusNotFound, "not-found", "this server issues no tokens", ""))
		return
	}
	c.Header("Cache-Control", "public, max-age=300")
	c.JSON(http.StatusOK, v.Local.JWKS())
}

// oauthToken is the client-credentials token endpoint of RFC 6749 §4.4,
// with client_secret_basic, client_secret_post and SMART Backend
// Services' private_key_jwt client authentication.
func (s *Server) oauthToken(c *gin.Context) {
	v, ok := s.localIssuer()
	if !ok {
		s.abort(c, fail(http.StatusNotFound, "not-found", "this server issues no tokens", ""))
		return
	}
	tenant, ok := tenantFromHost(c.Request.Host, s.cfg.BaseDomain, s.cfg.DefaultTenant)
	if !ok {
		s.oauthFail(c, &oauthError{status: http.StatusNotFound, code: "invalid_request", description: "no tenant is addressed by host " + quote(c.Request.Host)})
		return
	}
	c.Set(tenantKey, tenant) // for the audit trail
	form, err := tokenForm(c)
	if err != nil {
		s.oauthFail(c, err)
		return
	}
	switch gt := form.Get("grant_type"); gt {
	case "client_credentials":
	case "":
		s.oauthFail(c, invalidRequest("grant_type is required"))
		return
	default:
		s.oauthFail(c, &oauthError{status: http.StatusBadRequest, code: "unsupported_grant_type", description: "only client_credentials is supported"})
		return
	}
	client, err := s.authenticateClient(c, v, tenant, form)
	if err != nil {
		s.oauthFail(c, err)
		return
	}
	c.Set(auditClientKey, client.ID)
	// Clients outlive a deleted tenant in the registry; they get nothing for it.
	if exists, err := s.store.TenantExists(c.Request.Context(), tenant); err != nil || !exists {
		if err == nil {
			err = invalidClient("unknown client or bad credentials", false)
		}
		s.oauthFail(c, err)
		return
	}
	scope, err := grantScope(form.Get("scope"), client.Scopes)
	if err != nil {
		s.oauthFail(c, err)
		return
	}
	ep, _ := auth.EndpointFrom(c.Request.Context())
	tok, ttl, err := v.Local.Issue(ep, auth.Grant{Tenant: tenant, ClientID: client.ID, Scope: scope}, time.Now())
	if err != nil {
		s.oauthFail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Header("Pragma", "no-cache")
	c.JSON(http.StatusOK, gin.H{"access_token": tok, "token_type": "Bearer", "expires_in": int(ttl / time.Second), "scope": scope})
}

// tokenForm reads the form body; every parameter may appear once (RFC 6749 §3.2).
func tokenForm(c *gin.Context) (url.Values, error) {
	if c.Request.Method != http.MethodPost {
		return nil, invalidRequest("use POST")
	}
	ct := strings.ToLower(strings.TrimSpace(strings.Split(c.GetHeader("Content-Type"), ";")[0]))
	if ct != "application/x-www-form-urlencoded" {
		return nil, invalidRequest("the body must be application/x-www-form-urlencoded")
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxTokenRequestBytes)
	if err := c.Request.ParseForm(); err != nil {
		return nil, invalidRequest("the body is not a valid form")
	}
	form := c.Request.PostForm
	for k, vs := range form {
		if len(vs) > 1 {
			return nil, invalidRequest("parameter " + k + " is repeated")
		}
	}
	return form, nil
}

// authenticateClient finds the client and checks its credentials: exactly
// one of HTTP Basic, client_secret in the body, or a client assertion.
func (s *Server) authenticateClient(c *gin.Context, v *auth.Verifier, tenant string, form url.Values) (*store.Client, error) {
	ctx := c.Request.Context()
	id, secret, basic, err := basicCredentials(c.GetHeader("Authorization"))
	if err != nil {
		return nil, invalidClient(err.Error(), true)
	}
	assertion, assertionType := form.Get("client_assertion"), form.Get("client_assertion_type")
	methods := 0
	for _, used := range []bool{basic, form.Has("client_secret"), assertion != "" || assertionType != ""} {
		if used {
			methods++
		}
	}
	switch {
	case methods > 1:
		return nil, invalidRequest("use exactly one client authentication method")
	case methods == 0:
		return nil, invalidClient("client authentication is required", true)
	case basic:
		if fid := form.Get("client_id"); fid != "" && fid != id {
			return nil, invalidRequest("client_id differs from the Basic credentials")
		}
		return s.secretClient(c, tenant, id, secret, true)
	case form.Has("client_secret"):
		return s.secretClient(c, tenant, form.Get("client_id"), form.Get("client_secret"), false)
	}
	if assertionType != auth.ClientAssertionType {
		return nil, invalidRequest("client_assertion_type must be " + auth.ClientAssertionType)
	}
	if assertion == "" {
		return nil, invalidRequest("client_assertion is required")
	}
	claimed, err := auth.PeekAssertionClient(assertion)
	if err != nil {
		return nil, invalidClient("the client assertion is not valid", false)
	}
	if fid := form.Get("client_id"); fid != "" && fid != claimed {
		return nil, invalidClient("the client assertion is not valid", false)
	}
	client, err := s.store.Client(ctx, claimed)
	if errors.Is(err, store.ErrClientNotFound) {
		return nil, invalidClient("unknown client or bad credentials", false)
	}
	if err != nil {
		return nil, err
	}
	if client.Tenant != tenant || (client.JWKS == "" && client.JWKSURL == "") {
		return nil, invalidClient("unknown client or bad credentials", false)
	}
	var keys auth.KeySet
	if client.JWKS != "" {
		if keys, err = auth.ParseJWKS([]byte(client.JWKS)); err != nil {
			return nil, err
		}
	} else {
		keys = v.Local.ClientKeys(client.JWKSURL)
	}
	ep, _ := auth.EndpointFrom(ctx)
	leeway := v.Leeway
	if leeway <= 0 {
		leeway = auth.DefaultLeeway
	}
	a, err := auth.VerifyClientAssertion(ctx, assertion, client.ID, keys, ep.TokenURL(), leeway, time.Now())
	if err != nil {
		return nil, invalidClient("the client assertion is not valid", false)
	}
	if err := s.store.UseAssertion(ctx, client.ID, a.ID, a.Expires); errors.Is(err, store.ErrReplayed) {
		return nil, invalidClient("the client assertion was used before", false)
	} else if err != nil {
		return nil, err
	}
	return client, nil
}

// secretClient authenticates a client by its secret; unknown clients cost
// a hash too, so timing tells nothing about which client ids exist.
func (s *Server) secretClient(c *gin.Context, tenant, id, secret string, basic bool) (*store.Client, error) {
	if id == "" {
		return nil, invalidRequest("client_id is required")
	}
	client, err := s.store.Client(c.Request.Context(), id)
	if err != nil && !errors.Is(err, store.ErrClientNotFound) {
		return nil, err
	}
	select {
	case secretChecks <- struct{}{}:
	case <-c.Request.Context().Done():
		return nil, c.Request.Context().Err()
	}
	defer func() { <-secretChecks }()
	if client == nil || client.SecretHash == "" {
		auth.BurnSecretCheck(secret)
		return nil, invalidClient("unknown client or bad credentials", basic)
	}
	if !auth.CheckSecret(client.SecretHash, secret) || client.Tenant != tenant {
		return nil, invalidClient("unknown client or bad credentials", basic)
	}
	return client, nil
}

// basicCredentials decodes HTTP Basic client credentials, which RFC 6749
// §2.3.1 form-encodes before base64. ok is false without a Basic header.
func basicCredentials(h string) (id, secret string, ok bool, err error) {
	scheme, value, found := strings.Cut(strings.TrimSpace(h), " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false, nil
	}
	raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
	if derr != nil {
		return "", "", true, errors.New("the Basic credentials are not base64")
	}
	id, secret, found = strings.Cut(string(raw), ":")
	if !found {
		return "", "", true, errors.New("the Basic credentials have no secret")
	}
	if u, err := url.QueryUnescape(id); err == nil {
		id = u
	}
	if u, err := url.QueryUnescape(secret); err == nil {
		secret = u
	}
	return id, secret, true, nil
}

// grantScope is the requested scopes the client is registered for (all of
// them when none are requested); invalid_scope when that leaves none.
func grantScope(requested string, registered []string) (string, error) {
	if strings.TrimSpace(requested) == "" {
		if len(registered) == 0 {
			return "", &oauthError{status: http.StatusBadRequest, code: "invalid_scope", description: "the client has no scopes"}
		}
		return strings.Join(registered, " "), nil
	}
	var granted []string
	for _, sc := range strings.Fields(requested) {
		if slices.Contains(registered, sc) && !slices.Contains(granted, sc) {
			granted = append(granted, sc)
		}
	}
	if len(granted) == 0 {
		return "", &oauthError{status: http.StatusBadRequest, code: "invalid_scope", description: "none of the requested scopes is granted to the client (" + strconv.Quote(strings.Join(registered, " ")) + ")"}
	}
	return strings.Join(granted, " "), nil
}
