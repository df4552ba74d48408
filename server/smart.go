package server

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// smartScopes are the scopes a client can ask for, in SMART v2 and v1 form.
var smartScopes = []string{
	"system/*.cruds", "system/*.rs", "user/*.cruds", "user/*.rs", "patient/*.cruds", "patient/*.rs",
	"system/*.*", "system/*.read", "system/*.write", "user/*.*", "user/*.read", "user/*.write",
	"patient/*.*", "patient/*.read", "patient/*.write",
}

// serverRoot is the scheme and host the client addressed.
func serverRoot(c *gin.Context) string {
	return strings.TrimSuffix(baseURL(c), "/fhir/r4")
}

// smartConfiguration serves GET [base]/.well-known/smart-configuration:
// SMART App Launch discovery for backend services (client credentials).
// Like the CapabilityStatement it needs no token.
func (s *Server) smartConfiguration(c *gin.Context) {
	root := serverRoot(c)
	writeJSON(c, http.StatusOK, map[string]any{
		"issuer":                                root,
		"jwks_uri":                              root + "/oauth2/jwks",
		"token_endpoint":                        root + "/oauth2/token",
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "private_key_jwt"},
		"token_endpoint_auth_signing_alg_values_supported": []string{"RS384", "ES384", "RS256", "ES256"},
		"grant_types_supported":                            []string{"client_credentials"},
		"scopes_supported":                                 smartScopes,
		"response_types_supported":                         []string{"token"},
		"code_challenge_methods_supported":                 []string{"S256"},
		"capabilities": []string{
			"client-confidential-symmetric", "client-confidential-asymmetric",
			"permission-v1", "permission-v2", "permission-patient", "permission-user",
		},
	})
}

// securityStatement is the CapabilityStatement's rest.security: SMART on
// FHIR with the token endpoint in the oauth-uris extension.
func securityStatement(c *gin.Context) map[string]any {
	root := serverRoot(c)
	return map[string]any{
		"extension": []map[string]any{{
			"url": "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris",
			"extension": []map[string]any{
				{"url": "token", "valueUri": root + "/oauth2/token"},
			},
		}},
		"cors": false,
		"service": []map[string]any{{
			"coding": []map[string]any{{
				"system":  "http://terminology.hl7.org/CodeSystem/restful-security-service",
				"code":    "SMART-on-FHIR",
				"display": "SMART-on-FHIR",
			}},
			"text": "OAuth2 bearer tokens with SMART on FHIR scopes",
		}},
		"description": "Every request except this statement and " + smartConfigPath + " needs an OAuth2 bearer token (JWT) for the tenant of the host. " +
			"SMART v1 and v2 scopes decide each interaction; patient/ scopes reach the compartment of the token's patient only. " +
			"Clients get tokens from the token endpoint with client credentials (secret or private_key_jwt) or from a configured external authorization server.",
	}
}

// smartConfigPath is where the SMART configuration lives, under the FHIR base.
const smartConfigPath = "/.well-known/smart-configuration"
