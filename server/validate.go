package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"
)

// validateOp serves POST [base]/$validate, [type]/$validate and
// [type]/[id]/$validate: the resource (sent as is, or as the "resource"
// parameter of a Parameters with "mode" and "profile") gets every check of
// a create, or of an update of id, and nothing is stored; a profile named
// by the request (profile in the query or the Parameters) is checked
// besides those the resource claims. At the base the resource names its
// own type.
func (s *Server) validateOp(c *gin.Context, typ, id string) {
	opts, body, err := s.writeInput(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	in, err := validateInput(typ, body)
	if err != nil {
		s.abort(c, err)
		return
	}
	if profile := c.Query("profile"); profile != "" {
		in.profile = profile
	}
	if typ == "" {
		if typ, err = resourceTypeOf(in.resource); err != nil {
			s.abort(c, err)
			return
		}
		if err := s.permitValidate(c, typ); err != nil {
			s.abort(c, err)
			return
		}
	}
	if in.profile != "" {
		opts.Profiles = []string{in.profile}
	}
	switch in.mode {
	case "create":
		id = ""
	case "update":
		if id == "" {
			if id = bodyID(in.resource); id == "" {
				s.abort(c, fail(http.StatusBadRequest, "required", "an update needs the resource's id", typ+".id"))
				return
			}
		}
	case "delete":
		writeJSON(c, http.StatusOK, informational("the server checks no rule before a delete", nil))
		return
	}
	warnings, err := s.store.Check(c.Request.Context(), c.GetString(tenantKey), typ, id, in.resource, opts)
	if err != nil {
		s.abort(c, err)
		return
	}
	writeJSON(c, http.StatusOK, informational("the resource is valid", warnings))
}

// validation is what $validate was asked.
type validation struct {
	resource []byte
	mode     string // create, update, delete or "" (create or update by the URL)
	profile  string
}

// parameter is what $validate reads of a parameter of its input.
type parameter struct {
	Name           string          `json:"name"`
	Resource       json.RawMessage `json:"resource"`
	ValueCode      string          `json:"valueCode"`
	ValueURI       string          `json:"valueUri"`
	ValueCanonical string          `json:"valueCanonical"`
}

// validateModes are the values of the mode parameter.
var validateModes = map[string]bool{"create": true, "update": true, "delete": true}

// validateInput unwraps a Parameters body ("resource", "mode" and "profile"
// parameters); any other body is the resource itself. At
// Parameters/$validate too a Parameters holding a "resource" parameter is
// the operation's input; one without is the resource to validate.
func validateInput(typ string, body []byte) (*validation, error) {
	var in struct {
		ResourceType string      `json:"resourceType"`
		Parameter    []parameter `json:"parameter"`
	}
	if json.Unmarshal(body, &in) != nil || in.ResourceType != "Parameters" {
		return &validation{resource: body}, nil
	}
	if typ == "Parameters" && !slices.ContainsFunc(in.Parameter, func(p parameter) bool { return p.Name == "resource" }) {
		return &validation{resource: body}, nil
	}
	out := &validation{}
	for i, p := range in.Parameter {
		at := "Parameters.parameter[" + strconv.Itoa(i) + "]"
		switch p.Name {
		case "resource":
			out.resource = bytes.TrimSpace(p.Resource)
		case "mode":
			if !validateModes[p.ValueCode] {
				return nil, fail(http.StatusBadRequest, "value", "mode must be create, update or delete (valueCode)", at)
			}
			out.mode = p.ValueCode
		case "profile":
			out.profile = p.ValueURI + p.ValueCanonical
		}
	}
	if len(out.resource) == 0 && out.mode != "delete" {
		return nil, fail(http.StatusBadRequest, "required", "the Parameters have no \"resource\" parameter to validate", "Parameters.parameter")
	}
	return out, nil
}

// bodyID reads the id of a resource, "" when it has none.
func bodyID(body []byte) string {
	var head struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &head) != nil {
		return ""
	}
	return head.ID
}

// resourceTypeOf reads the resourceType of a resource sent to the base.
func resourceTypeOf(body []byte) (string, error) {
	var head struct {
		ResourceType string `json:"resourceType"`
	}
	if err := json.Unmarshal(body, &head); err != nil || head.ResourceType == "" {
		return "", fail(http.StatusBadRequest, "structure", "the body is not a resource with a resourceType", "")
	}
	if !isResourceType(head.ResourceType) {
		return "", fail(http.StatusBadRequest, "not-supported", "unknown resource type "+quote(head.ResourceType), "resourceType")
	}
	return head.ResourceType, nil
}
