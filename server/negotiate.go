package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// FHIRJSON is the media type of FHIR JSON responses, the default.
const FHIRJSON = "application/fhir+json"

// FHIRXML is the media type of FHIR XML responses.
const FHIRXML = "application/fhir+xml"

// jsonFormats are the _format values and media types that mean FHIR JSON.
var jsonFormats = map[string]bool{
	"json": true, "application/json": true, "application/fhir+json": true, "application/json+fhir": true,
}

// xmlFormats are the _format values and media types that mean FHIR XML.
var xmlFormats = map[string]bool{
	"xml": true, "text/xml": true, "application/xml": true, "application/fhir+xml": true, "application/xml+fhir": true,
}

// formatKey is the gin context key set to formatXML when the response of
// the request is FHIR XML; absent, it is JSON.
const formatKey = "fhirstore.format"

const formatXML = "xml"

// nestedRequest marks the context of every FHIR request once its format is
// decided: the GET entries of a batch run as nested requests with a context
// derived from it, and answer JSON to the bundle code whatever their URL asks.
type nestedRequest struct{}

// negotiate decides the response format, from _format first and the Accept
// header otherwise (406 when the client accepts neither JSON nor XML), and
// records it under formatKey.
func negotiate(c *gin.Context) error {
	ctx := c.Request.Context()
	if ctx.Value(nestedRequest{}) != nil {
		return nil
	}
	format, err := responseFormat(c)
	if err != nil {
		return err
	}
	if format == formatXML {
		c.Set(formatKey, formatXML)
	}
	c.Request = c.Request.WithContext(context.WithValue(ctx, nestedRequest{}, true))
	return nil
}

// responseFormat is "json" or "xml" as the client asks.
func responseFormat(c *gin.Context) (string, error) {
	if f := c.Query("_format"); f != "" {
		// An unescaped "+" in the query (fhir+xml) arrives as a space.
		f = strings.ReplaceAll(strings.TrimSpace(f), " ", "+")
		mt, _, err := mime.ParseMediaType(f)
		if err != nil {
			mt = strings.ToLower(strings.TrimSpace(f))
		}
		switch {
		case jsonFormats[mt]:
			return "json", nil
		case xmlFormats[mt]:
			return formatXML, nil
		}
		return "", fail(http.StatusNotAcceptable, "not-supported", fmt.Sprintf("_format %q is not supported; this server answers %s or %s", f, FHIRJSON, FHIRXML), "_format")
	}
	accept := c.GetHeader("Accept")
	if accept == "" {
		return "json", nil
	}
	if f := acceptedFormat(accept); f != "" {
		return f, nil
	}
	return "", fail(http.StatusNotAcceptable, "not-supported", fmt.Sprintf("cannot answer Accept %q; this server answers %s or %s", accept, FHIRJSON, FHIRXML), "")
}

// acceptedFormat picks the format of the highest quality in an Accept
// header, the first listed on a tie, "" when none is acceptable.
func acceptedFormat(accept string) string {
	best, bestQ := "", 0.0
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		}
		f := ""
		switch {
		case jsonFormats[mt] || mt == "*/*" || mt == "application/*" || mt == graphqlResponseType:
			f = "json"
		case xmlFormats[mt]:
			f = formatXML
		}
		if f != "" && q > bestQ {
			best, bestQ = f, q
		}
	}
	return best
}

// jsonPatchType is the media type of a JSON Patch body.
const jsonPatchType = "application/json-patch+json"

// readBody reads a FHIR request body as JSON, enforcing the media type
// (415) and the size limit (413); an XML body is converted to FHIR JSON
// here, so everything after sees JSON only.
func (s *Server) readBody(c *gin.Context) ([]byte, error) {
	isXML := false
	for _, ct := range c.Request.Header.Values("Content-Type") {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(jsonFormats[mt] || xmlFormats[mt]) {
			msg := fmt.Sprintf("Content-Type %q is not supported; send %s or %s", ct, FHIRJSON, FHIRXML)
			return nil, fail(http.StatusUnsupportedMediaType, "not-supported", msg, "")
		}
		isXML = isXML || xmlFormats[mt]
	}
	body, err := s.readLimited(c)
	if err != nil || !isXML {
		return body, err
	}
	return xmlToJSON(body)
}

// readPatch reads a PATCH body: a JSON Patch (Content-Type
// application/json-patch+json) or a FHIRPath Patch, a Parameters resource
// in FHIR JSON or XML (converted to JSON here).
func (s *Server) readPatch(c *gin.Context) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	switch {
	case err == nil && mt == jsonPatchType:
		body, err := s.readLimited(c)
		if err != nil {
			return nil, err
		}
		return body, checkJSONPatch(body, "")
	case err == nil && (jsonFormats[mt] || xmlFormats[mt]):
		body, err := s.readBody(c)
		if err != nil {
			return nil, err
		}
		return body, checkPatchResource(body)
	}
	msg := fmt.Sprintf("PATCH needs Content-Type %s, %s or %s, not %q", jsonPatchType, FHIRJSON, FHIRXML, c.GetHeader("Content-Type"))
	return nil, fail(http.StatusUnsupportedMediaType, "not-supported", msg, "")
}

// checkJSONPatch refuses a JSON Patch body that is not a JSON array: the
// store takes a JSON object for a FHIRPath Patch.
func checkJSONPatch(body []byte, expr string) error {
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		return nil
	}
	return fail(http.StatusBadRequest, "structure", "the body is not a JSON Patch document: a JSON Patch is an array of operations", expr)
}

// checkPatchResource refuses a FHIR resource other than Parameters as a
// PATCH body (415: FHIR JSON and XML patch only as FHIRPath Patch); a JSON
// array sent as JSON is a JSON Patch.
func checkPatchResource(body []byte) error {
	var r struct {
		ResourceType string `json:"resourceType"`
	}
	if json.Unmarshal(body, &r) != nil || r.ResourceType == "" || r.ResourceType == "Parameters" {
		return nil // the patch reports what is wrong with it
	}
	msg := fmt.Sprintf("a PATCH body in FHIR JSON or XML is a Parameters resource (FHIRPath Patch), not a %s", r.ResourceType)
	return fail(http.StatusUnsupportedMediaType, "not-supported", msg, "")
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
	// Windows tools and integration engines start UTF-8 with a byte order
	// mark, which neither JSON nor the resource itself holds.
	body = bytes.TrimPrefix(body, utf8BOM)
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fail(http.StatusBadRequest, "structure", "the request body is empty", "")
	}
	return body, nil
}

// utf8BOM is the byte order mark in UTF-8.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

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

// writeRaw writes an already rendered FHIR JSON body, indented on
// _pretty=true, as FHIR XML when the request asked for XML.
func writeRaw(c *gin.Context, status int, body []byte) {
	if c.GetString(formatKey) == formatXML && writeXML(c, status, body) {
		return
	}
	if c.Query("_pretty") == "true" {
		var buf bytes.Buffer
		if json.Indent(&buf, body, "", "  ") == nil {
			body = buf.Bytes()
		}
	}
	c.Data(status, FHIRJSON+"; charset=utf-8", body)
}
