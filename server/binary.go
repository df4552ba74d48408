package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"fhirstore/store"
)

// binaryAcceptKey is the gin context key holding the Accept header of a
// Binary read that asked for neither FHIR JSON nor XML: content
// negotiation is then decided by the Binary itself, once it is found.
const binaryAcceptKey = "fhirstore.binaryAccept"

// isBinaryRead tells whether the request reads a Binary by id (GET
// Binary/{id}), the one interaction whose answer may be the raw content.
func isBinaryRead(c *gin.Context) bool {
	segs := strings.Split(strings.Trim(c.Param("path"), "/"), "/")
	return c.Request.Method == http.MethodGet && len(segs) == 2 && segs[0] == "Binary" && !strings.HasPrefix(segs[1], "_") && !strings.HasPrefix(segs[1], "$")
}

// respondBinary answers a Binary read whose Accept names no FHIR format:
// the decoded content with the Binary's contentType when Accept allows
// it (R4 Binary's RESTful rule), 406 otherwise.
func (s *Server) respondBinary(c *gin.Context, res *store.Resource, accept string) {
	var bin struct {
		ContentType string `json:"contentType"`
		Data        string `json:"data"`
	}
	if err := json.Unmarshal(res.JSON, &bin); err != nil {
		s.abort(c, fmt.Errorf("read stored Binary/%s: %w", res.ID, err))
		return
	}
	if !accepts(accept, bin.ContentType) {
		s.abort(c, fail(http.StatusNotAcceptable, "not-supported",
			fmt.Sprintf("Binary/%s is %s; Accept %q allows neither it nor %s or %s", res.ID, quote(bin.ContentType), accept, FHIRJSON, FHIRXML), ""))
		return
	}
	data, err := base64.StdEncoding.DecodeString(bin.Data)
	if err != nil {
		s.abort(c, fmt.Errorf("read stored Binary/%s data: %w", res.ID, err))
		return
	}
	versionHeaders(c, res)
	c.Data(http.StatusOK, bin.ContentType, data)
}

// accepts tells whether an Accept header allows the media type mt.
func accepts(accept, mt string) bool {
	want, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return false
	}
	major, _, _ := strings.Cut(want, "/")
	for _, part := range strings.Split(accept, ",") {
		got, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || params["q"] == "0" {
			continue
		}
		if got == want || got == "*/*" || got == major+"/*" {
			return true
		}
	}
	return false
}
