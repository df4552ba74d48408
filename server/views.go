package server

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"fhirstore/fhirschema/view"
)

// The SQL on FHIR operations, after the FHIR base.
const (
	viewRunOp    = "$viewdefinition-run"
	viewExportOp = "$viewdefinition-export"
	sqlRunOp     = "$sqlquery-run"
)

// sqlOnFHIR is the canonical base of the SQL on FHIR v2 implementation guide.
const sqlOnFHIR = "https://sql-on-fhir.org/ig/"

// isViewOperation tells whether a FHIR path names a SQL on FHIR operation:
// its _format names a table format (csv, ndjson, parquet), not FHIR JSON
// or XML, so the FHIR content negotiation leaves it alone.
func isViewOperation(path string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch segs[len(segs)-1] {
	case viewRunOp, viewExportOp, sqlRunOp:
		return true
	}
	return false
}

// viewRoute is one SQL on FHIR operation at one level.
type viewRoute struct {
	op      string
	typ     string // the type of the type and instance levels
	methods string // allowed methods, for Allow
	serve   func(s *Server, c *gin.Context, id string)
}

// viewRoutes are the SQL on FHIR operations, by name.
var viewRoutes = []viewRoute{
	{viewRunOp, view.ResourceType, "GET, POST", (*Server).viewRun},
	{viewExportOp, view.ResourceType, "POST", (*Server).viewExport},
	{sqlRunOp, "Library", "GET, POST", (*Server).sqlQueryRun},
}

// serveViews answers the SQL on FHIR operations at the system, type and
// instance levels, reporting whether segs names one.
func (s *Server) serveViews(c *gin.Context, segs []string) bool {
	n := len(segs)
	if n == 0 || n > 3 {
		return false
	}
	for _, r := range viewRoutes {
		if segs[n-1] != r.op || (n > 1 && segs[0] != r.typ) {
			continue
		}
		id := ""
		if n == 3 {
			id = segs[1]
		}
		if !strings.Contains(r.methods, c.Request.Method) {
			c.Header("Allow", r.methods)
			s.abort(c, fail(http.StatusMethodNotAllowed, "not-supported", c.Request.Method+" is not allowed on "+c.Request.URL.Path, ""))
			return true
		}
		r.serve(s, c, id)
		return true
	}
	return false
}

// viewCapabilities adds ViewDefinition and the SQL on FHIR operations to
// a CapabilityStatement.
func (s *Server) viewCapabilities(cs map[string]any) {
	rest := cs["rest"].([]map[string]any)[0]
	ops := []map[string]string{
		{"name": "viewdefinition-run", "definition": sqlOnFHIR + "OperationDefinition/$viewdefinition-run"},
		{"name": "viewdefinition-export", "definition": sqlOnFHIR + "OperationDefinition/$viewdefinition-export"},
	}
	sqlOp := map[string]string{"name": "sqlquery-run", "definition": sqlOnFHIR + "OperationDefinition/$sqlquery-run"}
	sys, _ := rest["operation"].([]map[string]string)
	rest["operation"] = append(append(sys[:len(sys):len(sys)], ops...), sqlOp)
	resources, _ := rest["resource"].([]map[string]any)
	interactions := []map[string]string{}
	for _, code := range []string{"read", "vread", "update", "delete", "history-instance", "history-type", "create", "search-type"} {
		interactions = append(interactions, map[string]string{"code": code})
	}
	vd := map[string]any{
		"type":        view.ResourceType,
		"profile":     sqlOnFHIR + "StructureDefinition/ViewDefinition",
		"interaction": interactions,
		"versioning":  "versioned-update",
		"readHistory": true,
		"operation":   ops,
		"searchParam": s.capabilitySearchParams(view.ResourceType),
	}
	for _, r := range resources {
		if r["type"] == "Library" {
			libOps, _ := r["operation"].([]map[string]string)
			r["operation"] = append(libOps[:len(libOps):len(libOps)], sqlOp)
		}
	}
	rest["resource"] = append(resources, vd)
}
