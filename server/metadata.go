package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"fhirstore/fhirschema"
	"fhirstore/search"
	sdcop "fhirstore/server/sdc"
)

// capabilities serves the CapabilityStatement. It needs no token so that
// clients can discover the server before they authenticate; with a token
// of the host's tenant it shows the tenant's profiles too.
func (s *Server) capabilities(c *gin.Context) {
	cs := s.capabilityStatement(baseURL(c), s.publicRegistry(c))
	cs["rest"].([]map[string]any)[0]["security"] = securityStatement(c)
	s.exportCapabilities(cs)
	if tenant, ok := s.capabilityTenant(c); ok {
		s.addSupportedProfiles(c.Request.Context(), cs, tenant)
		s.addTopicCapabilities(c.Request.Context(), cs, tenant)
	}
	s.viewCapabilities(cs)
	writeJSON(c, http.StatusOK, cs)
}

// capabilitySearchParams lists the built-in search parameters of a type
// for the statement.
func (s *Server) capabilitySearchParams(typ string) []map[string]string {
	return searchParamsOf(s.cfg.Registry, typ)
}

// searchParamsOf lists the search parameters of a type in reg (a tenant's
// registry) for the statement, each with the URL of its definition when
// it has one.
func searchParamsOf(reg *search.Registry, typ string) []map[string]string {
	if reg == nil {
		return nil
	}
	var out []map[string]string
	for _, p := range reg.Params(typ) {
		param := map[string]string{"name": p.Code, "type": p.Type}
		if p.URL != "" {
			param["definition"] = p.URL
		}
		if p.Description != "" {
			param["documentation"] = p.Description
		}
		out = append(out, param)
	}
	for _, name := range search.Aliases(typ) {
		out = append(out, map[string]string{"name": name, "type": "token", "documentation": "reverse chain: see _has"})
	}
	return append(out, filterParam)
}

// filterParam advertises _filter, which every type takes.
var filterParam = map[string]string{"name": "_filter", "type": "special", "documentation": "the FHIR filter grammar over this type's search parameters"}

// validateOperation advertises $validate on every type.
var validateOperation = []map[string]string{{"name": "validate", "definition": "http://hl7.org/fhir/OperationDefinition/Resource-validate"}}

// graphqlOperation advertises $graphql, at [base] and at [type]/[id].
var graphqlOperation = map[string]string{"name": "graphql", "definition": "http://hl7.org/fhir/OperationDefinition/Resource-graphql"}

// sdcOperations advertises the Structured Data Capture operations on the
// types that have them.
var sdcOperations = map[string][]map[string]string{
	"Questionnaire": {
		{"name": "populate", "definition": sdcop.PopulateDefinition},
		{"name": "assemble", "definition": sdcop.AssembleDefinition},
	},
	"QuestionnaireResponse": {{"name": "extract", "definition": sdcop.ExtractDefinition}},
}

func (s *Server) capabilityStatement(base string, reg *search.Registry) map[string]any {
	interactions := []map[string]string{}
	for _, code := range []string{"read", "vread", "update", "patch", "delete", "history-instance", "history-type", "create"} {
		interactions = append(interactions, map[string]string{"code": code})
	}
	var resources []map[string]any
	for _, t := range fhirschema.ResourceTypes() {
		r := map[string]any{
			"type":              t,
			"profile":           "http://hl7.org/fhir/StructureDefinition/" + t,
			"interaction":       interactions,
			"versioning":        "versioned-update",
			"readHistory":       true,
			"updateCreate":      true,
			"conditionalCreate": true,
			"conditionalRead":   "not-supported",
			"conditionalUpdate": true,
			"conditionalDelete": "single",
			"operation":         append(append(validateOperation[:1:1], terminologyOperations(t)...), sdcOperations[t]...),
		}
		if t == "Observation" {
			r["operation"] = append(validateOperation[:len(validateOperation):len(validateOperation)], lastnOperation)
		}
		if params := searchParamsOf(reg, t); len(params) > 0 {
			r["interaction"] = append(interactions[:len(interactions):len(interactions)], map[string]string{"code": "search-type"})
			r["searchParam"] = params
		}
		if t == "Subscription" && len(s.cfg.SubscriptionChannels) > 0 {
			r["documentation"] = "Subscriptions are delivered over the channel types: " + strings.Join(s.cfg.SubscriptionChannels, ", ") +
				". A Subscription written with status requested is checked and set to active (or error)."
		}
		resources = append(resources, r)
	}
	return map[string]any{
		"resourceType": "CapabilityStatement",
		"status":       "active",
		"date":         time.Now().UTC().Format("2006-01-02"),
		"publisher":    "fhirstore",
		"kind":         "instance",
		"software":     map[string]any{"name": "fhirstore", "version": s.cfg.Version},
		"implementation": map[string]any{
			"description": "fhirstore FHIR R4 server",
			"url":         base,
		},
		"fhirVersion": fhirschema.FHIRVersion,
		"format":      []string{"application/fhir+json", "json", "application/fhir+xml", "xml"},
		"patchFormat": []string{FHIRJSON, FHIRXML, jsonPatchType},
		"rest": []map[string]any{{
			"mode":        "server",
			"resource":    resources,
			"interaction": []map[string]string{{"code": "transaction"}, {"code": "batch"}, {"code": "search-system"}, {"code": "history-system"}},
			"searchParam": systemSearchParams,
			"operation":   append(validateOperation[:1:1], graphqlOperation),
		}},
	}
}

// systemSearchParams are the parameters of the system search (GET [base]?).
var systemSearchParams = []map[string]string{
	{"name": "_id", "type": "token", "definition": "http://hl7.org/fhir/SearchParameter/Resource-id"},
	{"name": "_lastUpdated", "type": "date", "definition": "http://hl7.org/fhir/SearchParameter/Resource-lastUpdated"},
	{"name": "_tag", "type": "token", "definition": "http://hl7.org/fhir/SearchParameter/Resource-tag"},
	{"name": "_profile", "type": "uri", "definition": "http://hl7.org/fhir/SearchParameter/Resource-profile"},
	{"name": "_security", "type": "token", "definition": "http://hl7.org/fhir/SearchParameter/Resource-security"},
	{"name": "_source", "type": "uri", "definition": "http://hl7.org/fhir/SearchParameter/Resource-source"},
	{"name": "_list", "type": "token", "documentation": "the items of the List of that id"},
	{"name": "_has", "type": "special", "documentation": "_has:Type:reference:parameter=value, resources of Type referring to the match"},
	{"name": "_type", "type": "token", "documentation": "the resource types searched (default: every type the token may search)"},
}
