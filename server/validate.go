package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
)

// validateOp serves POST [type]/$validate and [type]/[id]/$validate: the
// resource (sent as is, or as the "resource" parameter of a Parameters) gets
// every check of a create, or of an update of id, and nothing is stored.
func (s *Server) validateOp(c *gin.Context, typ, id string) {
	opts, body, err := s.writeInput(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	body, mode, err := validateInput(typ, body)
	if err != nil {
		s.abort(c, err)
		return
	}
	if mode == "create" {
		id = ""
	}
	warnings, err := s.store.Check(c.Request.Context(), typ, id, body, opts)
	if err != nil {
		s.abort(c, err)
		return
	}
	writeJSON(c, http.StatusOK, informational("the resource is valid", warnings))
}

// validateInput unwraps a Parameters body ("resource" and "mode" parameters).
func validateInput(typ string, body []byte) ([]byte, string, error) {
	var in struct {
		ResourceType string `json:"resourceType"`
		Parameter    []struct {
			Name      string          `json:"name"`
			Resource  json.RawMessage `json:"resource"`
			ValueCode string          `json:"valueCode"`
		} `json:"parameter"`
	}
	if typ == "Parameters" || json.Unmarshal(body, &in) != nil || in.ResourceType != "Parameters" {
		return body, "", nil
	}
	var resource []byte
	mode := ""
	for _, p := range in.Parameter {
		switch p.Name {
		case "resource":
			resource = bytes.TrimSpace(p.Resource)
		case "mode":
			mode = p.ValueCode
		}
	}
	if len(resource) == 0 {
		return nil, "", fail(http.StatusBadRequest, "required", "the Parameters have no \"resource\" parameter to validate", "Parameters.parameter")
	}
	return resource, mode, nil
}
