package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// FHIRJSON is the media type of every FHIR response.
const FHIRJSON = "application/fhir+json"

// jsonFormats are the _format values and media types that mean FHIR JSON.
var jsonFormats = map[string]bool{
	"json": true, "application/json": true, "application/fhir+json": true, "application/json+fhir": true,
}

// xmlFormats are understood but not served yet.
var xmlFormats = map[string]bool{
	"xml": true, "text/xml": true, "application/xml": true, "application/fhir+xml": true, "application/xml+fhir": true,
}

// negotiate checks that the client accepts FHIR JSON, from _format first and
// the Accept header otherwise (406 when it does not).
func negotiate(c *gin.Context) error {
	if f := c.Query("_format"); f != "" {
		mt, _, err := mime.ParseMediaType(f)
		if err != nil {
			mt = strings.ToLower(strings.TrimSpace(f))
		}
		if jsonFormats[mt] {
			return nil
		}
		return fail(http.StatusNotAcceptable, "not-supported", fmt.Sprintf("_format %q is not supported; this server answers application/fhir+json", f), "_format")
	}
	accept := c.GetHeader("Accept")
	if accept == "" || acceptsJSON(accept) {
		return nil
	}
	return fail(http.StatusNotAcceptable, "not-supported", fmt.Sprintf("cannot answer Accept %q; this server answers application/fhir+json", accept), "")
}

func acceptsJSON(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || params["q"] == "0" {
			continue
		}
		if jsonFormats[mt] || mt == "*/*" || mt == "application/*" {
			return true
		}
	}
	return false
}

// jsonPatchType is the media type of a JSON Patch body.
const jsonPatchType = "application/json-patch+json"

// readBody reads a FHIR JSON request body, enforcing the media type (415)
// and the size limit (413).
func (s *Server) readBody(c *gin.Context) ([]byte, error) {
	for _, ct := range c.Request.Header.Values("Content-Type") {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !jsonFormats[mt] {
			what := "is not supported"
			if xmlFormats[mt] {
				what = "is not supported yet (send application/fhir+json)"
			}
			return nil, fail(http.StatusUnsupportedMediaType, "not-supported", fmt.Sprintf("Content-Type %q %s", ct, what), "")
		}
	}
	return s.readLimited(c)
}

// readPatch reads a JSON Patch request body (Content-Type
// application/json-patch+json).
func (s *Server) readPatch(c *gin.Context) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != jsonPatchType {
		msg := fmt.Sprintf("PATCH needs Content-Type %s, not %q", jsonPatchType, c.GetHeader("Content-Type"))
		return nil, fail(http.StatusUnsupportedMediaType, "not-supported", msg, "")
	}
	return s.readLimited(c)
}

// readLimited reads a non-empty body within the size limit (413).
func (s *Server) readLimited(c *gin.Context) ([]byte, error) {
	if c.Request.ContentLength > s.cfg.MaxBodyBytes {
		return nil, s.tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.MaxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, s.tooLarge()
	}
	if err != nil {
		return nil, fail(http.StatusBadRequest, "structure", "could not read the request body", "")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fail(http.StatusBadRequest, "structure", "the request body is empty", "")
	}
	return body, nil
}

func (s *Server) tooLarge() error {
	return fail(http.StatusRequestEntityTooLarge, "too-costly", fmt.Sprintf("the request body is larger than %d bytes", s.cfg.MaxBodyBytes), "")
}

// writeJSON writes v as FHIR JSON without HTML escaping.
func writeJSON(c *gin.Context, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		c.Status(http.StatusInternalServerError)
		return
	}
	writeRaw(c, status, bytes.TrimRight(buf.Bytes(), "\n"))
}

// writeRaw writes an already rendered FHIR JSON body, indented on _pretty=true.
func writeRaw(c *gin.Context, status int, body []byte) {
	if c.Query("_pretty") == "true" {
		var buf bytes.Buffer
		if json.Indent(&buf, body, "", "  ") == nil {
			body = buf.Bytes()
		}
	}
	c.Data(status, FHIRJSON+"; charset=utf-8", body)
}
