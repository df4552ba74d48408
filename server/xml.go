package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"fhirstore/fhirschema/fhirxml"
)

// xmlToJSON converts an XML request body to FHIR JSON at the boundary; XML
// that is not a FHIR resource is a 400 naming the element.
func xmlToJSON(body []byte) ([]byte, error) {
	out, err := fhirxml.ToJSON(body)
	var xe *fhirxml.Error
	if errors.As(err, &xe) {
		return nil, fail(http.StatusBadRequest, "structure", xe.Error(), xe.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("convert XML body: %w", err)
	}
	return out, nil
}

// writeXML renders a FHIR JSON body as FHIR XML and reports whether it
// did: a JSON document that is no resource (SMART discovery) has no XML
// form and is left to the JSON writer. A resource the converter cannot
// render is a 500 whose OperationOutcome is itself XML.
func writeXML(c *gin.Context, status int, body []byte) bool {
	var left []string
	opts := fhirxml.WriteOptions{Indent: c.Query("_pretty") == "true", OnUnknown: func(path string) { left = append(left, path) }}
	out, err := fhirxml.FromJSON(body, opts)
	for _, path := range left { // elements stored under lenient handling have no XML form
		c.Writer.Header().Add("Warning", "299 fhirstore "+strconv.Quote(path+": unknown element left out of the XML"))
	}
	if errors.Is(err, fhirxml.ErrNotResource) {
		return false
	}
	if err != nil {
		_ = c.Error(fmt.Errorf("render XML: %w", err)) // kept on the gin context for middleware
		status = http.StatusInternalServerError
		oo, _ := json.Marshal(operationOutcome([]Issue{{Severity: "error", Code: "exception", Diagnostics: "the response could not be rendered as XML"}}))
		if out, err = fhirxml.FromJSON(oo, opts); err != nil {
			c.Status(status)
			return true
		}
	}
	c.Data(status, FHIRXML+"; charset=utf-8", out)
	return true
}
