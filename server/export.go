package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"fhirstore/fhirschema"
	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/server/bulkexport"
)

// Paths of the Bulk Data export, after the FHIR base.
const (
	exportOp     = "$export"
	exportStatus = "$export-status" // $export-status/<job>
	exportFile   = "$export-file"   // $export-file/<job>/<name>
)

// ndjsonType is the media type of export files.
const ndjsonType = "application/fhir+ndjson"

// outputFormats are the _outputFormat values meaning ndjson.
var outputFormats = map[string]bool{"application/fhir+ndjson": true, "application/ndjson": true, "ndjson": true}

// exportParams are the kick-off parameters this server understands.
var exportParams = map[string]bool{"_outputFormat": true, "_since": true, "_type": true, "_typeFilter": true, "_elements": true, "patient": true}

// ignoredExportParams are the FHIR request parameters a kick-off may carry
// besides the export's own (they only shape the HTTP answer).
var ignoredExportParams = map[string]bool{"_format": true, "_pretty": true}

// excludedByDefault are the types an export without _type leaves out: the
// audit trail, which grows with every request (ask for it by _type).
var excludedByDefault = map[string]bool{"AuditEvent": true}

// isExportFile tells whether a FHIR path downloads an export file: such a
// request asks for ndjson, which the FHIR content negotiation refuses.
func isExportFile(path string) bool {
	return strings.HasPrefix(strings.TrimPrefix(path, "/"), exportFile+"/")
}

// serveExport answers the Bulk Data routes, reporting whether segs is one.
func (s *Server) serveExport(c *gin.Context, segs []string) bool {
	if s.cfg.Export == nil {
		return false
	}
	method, n := c.Request.Method, len(segs)
	switch {
	case n == 1 && segs[0] == exportOp:
		s.routeKickoff(c, bulkexport.LevelSystem, "")
	case n == 2 && segs[0] == "Patient" && segs[1] == exportOp:
		s.routeKickoff(c, bulkexport.LevelPatient, "")
	case n == 3 && segs[0] == "Group" && segs[2] == exportOp:
		s.routeKickoff(c, bulkexport.LevelGroup, segs[1])
	case n == 2 && segs[0] == exportStatus && method == http.MethodGet:
		s.exportStatus(c, segs[1])
	case n == 2 && segs[0] == exportStatus && method == http.MethodDelete:
		s.exportCancel(c, segs[1])
	case n == 2 && segs[0] == exportStatus:
		c.Header("Allow", "DELETE, GET")
		s.abort(c, fail(http.StatusMethodNotAllowed, "not-supported", method+" is not allowed on "+c.Request.URL.Path, ""))
	case n == 3 && segs[0] == exportFile && method == http.MethodGet:
		s.exportDownload(c, segs[1], segs[2])
	default:
		return false
	}
	return true
}

// routeKickoff accepts GET and POST kick-offs.
func (s *Server) routeKickoff(c *gin.Context, level, group string) {
	if m := c.Request.Method; m != http.MethodGet && m != http.MethodPost {
		c.Header("Allow", "GET, POST")
		s.abort(c, fail(http.StatusMethodNotAllowed, "not-supported", m+" is not allowed on "+c.Request.URL.Path, ""))
		return
	}
	if err := s.kickoff(c, level, group); err != nil {
		s.abort(c, exportError(err))
	}
}

// kickoff starts an export: 202 with the status URL in Content-Location.
func (s *Server) kickoff(c *gin.Context, level, group string) error {
	prefer := parsePrefer(c.Request.Header.Values("Prefer"))
	if !prefer["respond-async"] {
		return fail(http.StatusBadRequest, "invalid", "$export runs asynchronously: send the header Prefer: respond-async", "")
	}
	params, err := s.exportParameters(c)
	if err != nil {
		return err
	}
	req, err := s.exportRequest(c, level, group, params, prefer["handling=lenient"])
	if err != nil {
		return err
	}
	job, err := s.cfg.Export.Kickoff(c.Request.Context(), c.GetString(tenantKey), *req)
	if err != nil {
		return err
	}
	c.Header("Content-Location", baseURL(c)+"/"+exportStatus+"/"+job.ID)
	writeJSON(c, http.StatusAccepted, informational("export accepted; poll the Content-Location URL for its status", nil))
	return nil
}

// parsePrefer lists the preferences of Prefer headers, as "token" or
// "token=value" (lower case, spaces removed).
func parsePrefer(headers []string) map[string]bool {
	out := map[string]bool{}
	for _, h := range headers {
		for _, p := range strings.FieldsFunc(h, func(r rune) bool { return r == ',' || r == ';' }) {
			out[strings.ToLower(strings.ReplaceAll(strings.TrimSpace(p), " ", ""))] = true
		}
	}
	return out
}

// exportParameters are the kick-off parameters: the query string, and for
// a POST the Parameters resource of the body.
func (s *Server) exportParameters(c *gin.Context) (url.Values, error) {
	params := c.Request.URL.Query()
	if c.Request.Method != http.MethodPost || (c.Request.ContentLength == 0 && c.GetHeader("Content-Type") == "") {
		return params, nil
	}
	body, err := s.readBody(c)
	if err != nil {
		return nil, err
	}
	var p struct {
		ResourceType string `json:"resourceType"`
		Parameter    []struct {
			Name           string  `json:"name"`
			ValueString    *string `json:"valueString"`
			ValueInstant   *string `json:"valueInstant"`
			ValueCode      *string `json:"valueCode"`
			ValueReference *struct {
				Reference string `json:"reference"`
			} `json:"valueReference"`
		} `json:"parameter"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.ResourceType != "Parameters" {
		return nil, fail(http.StatusBadRequest, "structure", "the body of a POST $export must be a Parameters resource", "Parameters")
	}
	for i, e := range p.Parameter {
		var v string
		switch {
		case e.ValueString != nil:
			v = *e.ValueString
		case e.ValueInstant != nil:
			v = *e.ValueInstant
		case e.ValueCode != nil:
			v = *e.ValueCode
		case e.ValueReference != nil:
			v = e.ValueReference.Reference
		default:
			return nil, fail(http.StatusBadRequest, "structure", fmt.Sprintf("parameter %q has no value this operation reads", e.Name), fmt.Sprintf("Parameters.parameter[%d]", i))
		}
		params.Add(e.Name, v)
	}
	return params, nil
}

// exportRequest validates the parameters of a kick-off against the
// caller's scopes: 400 for a bad or (unless lenient) unsupported
// parameter, 403 when no requested type may be read.
func (s *Server) exportRequest(c *gin.Context, level, group string, params url.Values, lenient bool) (*bulkexport.Request, error) {
	req := &bulkexport.Request{URL: requestURL(c), Level: level, Group: group}
	for name := range params {
		if exportParams[name] || ignoredExportParams[name] {
			continue
		}
		if !lenient {
			return nil, fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("parameter %s is not supported by $export (send Prefer: handling=lenient to ignore it)", name), name)
		}
		req.Notes = append(req.Notes, fmt.Sprintf("parameter %s is not supported and was ignored", name))
	}
	for _, f := range params["_outputFormat"] {
		// An unescaped "+" in the query (fhir+ndjson) arrives as a space.
		if !outputFormats[strings.ReplaceAll(strings.TrimSpace(f), " ", "+")] {
			return nil, fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("_outputFormat %q is not supported; use %s", f, ndjsonType), "_outputFormat")
		}
	}
	if err := exportSince(params, req); err != nil {
		return nil, err
	}
	if err := exportPatients(params, level, req); err != nil {
		return nil, err
	}
	req.TypeFilters = params["_typeFilter"]
	req.Elements = commaList(params["_elements"])
	return req, s.exportTypes(c, params, level, lenient, req)
}

// requestURL is the URL the client called.
func requestURL(c *gin.Context) string {
	base := baseURL(c)
	return strings.TrimSuffix(base, "/fhir/r4") + c.Request.URL.RequestURI()
}

// exportSince reads _since: a FHIR instant.
func exportSince(params url.Values, req *bulkexport.Request) error {
	v := params.Get("_since")
	if v == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, strings.ReplaceAll(v, " ", "+"))
	if err != nil {
		return fail(http.StatusBadRequest, "value", fmt.Sprintf("_since %q is not an instant such as 2024-01-02T15:04:05Z", v), "_since")
	}
	t = t.UTC()
	req.Since = &t
	return nil
}

// exportPatients reads the patient parameter of a Patient-level export.
func exportPatients(params url.Values, level string, req *bulkexport.Request) error {
	refs := commaList(params["patient"])
	if len(refs) > 0 && level != bulkexport.LevelPatient {
		return fail(http.StatusBadRequest, "not-supported", "the patient parameter applies to Patient/$export only", "patient")
	}
	for _, ref := range refs {
		id, ok := strings.CutPrefix(ref, "Patient/")
		if !ok || id == "" || strings.Contains(id, "/") {
			return fail(http.StatusBadRequest, "value", fmt.Sprintf("patient %q is not a reference such as Patient/123", ref), "patient")
		}
		req.Patients = append(req.Patients, id)
	}
	return nil
}

// exportTypes decides the types to export: those asked for by _type (or
// every type of the level), narrowed to what the caller may read.
func (s *Server) exportTypes(c *gin.Context, params url.Values, level string, lenient bool, req *bulkexport.Request) error {
	asked := commaList(params["_type"])
	for _, t := range asked {
		if !fhirschema.IsResourceType(t) {
			return fail(http.StatusBadRequest, "value", fmt.Sprintf("_type %q is not a resource type", t), "_type")
		}
		if level != bulkexport.LevelSystem && !inCompartmentType(t) {
			if !lenient {
				return fail(http.StatusBadRequest, "value", fmt.Sprintf("_type %s is not in the Patient compartment, which a %s-level export covers", t, level), "_type")
			}
			req.Notes = append(req.Notes, fmt.Sprintf("%s is not in the Patient compartment and was left out", t))
		}
	}
	types := asked
	if len(types) == 0 {
		types = fhirschema.ResourceTypes()
		if level != bulkexport.LevelSystem {
			types = search.PatientCompartmentTypes()
		}
		types = slices.DeleteFunc(slices.Clone(types), func(t string) bool { return excludedByDefault[t] })
	}
	a := accessOf(c.Request.Context())
	for _, t := range dedupe(types) {
		switch {
		case level != bulkexport.LevelSystem && !inCompartmentType(t):
		case a != nil && a.grant(t, auth.Read) == auth.Full:
			req.Types = append(req.Types, t)
		case len(asked) > 0:
			req.Notes = append(req.Notes, fmt.Sprintf("the token's scopes do not grant read on %s; it was left out", t))
		}
	}
	if len(req.Types) == 0 {
		return fail(http.StatusForbidden, "forbidden", "the token's scopes grant read (system or user level) on none of the types to export", "")
	}
	return nil
}

// commaList splits comma-separated parameter values.
func commaList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool {
		dup := seen[s]
		seen[s] = true
		return dup
	})
}

// exportError maps job manager errors to HTTP errors.
func exportError(err error) error {
	var pe *bulkexport.ParamError
	switch {
	case errors.As(err, &pe):
		return fail(http.StatusBadRequest, "value", pe.Msg, pe.Param)
	case errors.Is(err, bulkexport.ErrNotFound):
		return fail(http.StatusNotFound, "not-found", "no such export: it finished long ago, was cancelled or never existed", "")
	case errors.Is(err, bulkexport.ErrTooManyJobs):
		e := fail(http.StatusTooManyRequests, "throttled", "this tenant already runs as many exports as allowed; try again once one has finished", "")
		e.header = http.Header{"Retry-After": {"30"}}
		return e
	}
	return err
}

// exportStatus answers a poll: 202 with X-Progress while the job runs, 200
// with the manifest when it is complete, an OperationOutcome when it failed.
func (s *Server) exportStatus(c *gin.Context, id string) {
	tenant := c.GetString(tenantKey)
	job, err := s.cfg.Export.Status(c.Request.Context(), tenant, id)
	if err != nil {
		s.abort(c, exportError(err))
		return
	}
	if err := readsAny(c, job.Types); err != nil {
		s.abort(c, err)
		return
	}
	retry := s.cfg.Export.RetryAfter()
	retrySecs := strconv.Itoa(int(retry.Seconds()))
	switch {
	case job.Active():
		if !s.cfg.Export.Poll(tenant, id, retry/4) {
			e := fail(http.StatusTooManyRequests, "throttled", "polling faster than Retry-After asks", "")
			e.header = http.Header{"Retry-After": {retrySecs}}
			s.abort(c, e)
			return
		}
		c.Header("X-Progress", job.Progress())
		c.Header("Retry-After", retrySecs)
		c.Status(http.StatusAccepted)
	case job.State == bulkexport.StateFailed:
		s.abort(c, fail(http.StatusInternalServerError, "exception", "the export failed: "+job.Failure, ""))
	default:
		c.Header("Expires", job.ExpiresAt.UTC().Format(http.TimeFormat))
		body, err := json.Marshal(manifest(baseURL(c), job))
		if err != nil {
			s.abort(c, err)
			return
		}
		c.Data(http.StatusOK, "application/json", body)
	}
}

// manifestFile is an entry of output or error in a manifest.
type manifestFile struct {
	Type string `json:"type"`
	// Name is the view of a $viewdefinition-export file.
	Name  string `json:"name,omitempty"`
	URL   string `json:"url"`
	Count *int64 `json:"count,omitempty"`
}

// manifest is the completion manifest of a job.
func manifest(base string, job *bulkexport.Job) map[string]any {
	files := func(list []bulkexport.File, counted bool) []manifestFile {
		out := make([]manifestFile, 0, len(list))
		for _, f := range list {
			m := manifestFile{Type: f.Type, Name: f.View, URL: base + "/" + exportFile + "/" + job.ID + "/" + f.Name}
			if counted {
				n := f.Count
				m.Count = &n
			}
			out = append(out, m)
		}
		return out
	}
	return map[string]any{
		"transactionTime":     job.TransactionTime.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		"request":             job.Request,
		"requiresAccessToken": true,
		"output":              files(job.Output, true),
		"error":               files(job.Errors, false),
	}
}

// readsAny is 403 unless the caller may read one of types.
func readsAny(c *gin.Context, types []string) error {
	a := accessOf(c.Request.Context())
	for _, t := range types {
		if a != nil && a.grant(t, auth.Read) == auth.Full {
			return nil
		}
	}
	return fail(http.StatusForbidden, "forbidden", "the token's scopes grant read on none of the export's types", "")
}

// exportCancel deletes a job, stopping it if it runs, with its files.
func (s *Server) exportCancel(c *gin.Context, id string) {
	tenant := c.GetString(tenantKey)
	job, err := s.cfg.Export.Status(c.Request.Context(), tenant, id)
	if err == nil {
		err = readsAny(c, job.Types)
	}
	if err == nil {
		err = s.cfg.Export.Cancel(c.Request.Context(), tenant, id)
	}
	if err != nil {
		s.abort(c, exportError(err))
		return
	}
	writeJSON(c, http.StatusAccepted, informational("export deleted with its files", nil))
}

// exportDownload serves one file of a completed job to a caller who may
// read its type.
func (s *Server) exportDownload(c *gin.Context, id, name string) {
	tenant := c.GetString(tenantKey)
	path, f, err := s.cfg.Export.FilePath(c.Request.Context(), tenant, id, name)
	if err != nil {
		s.abort(c, exportError(err))
		return
	}
	if f.Type == "OperationOutcome" {
		job, err := s.cfg.Export.Status(c.Request.Context(), tenant, id)
		if err == nil {
			err = readsAny(c, job.Types)
		}
		if err != nil {
			s.abort(c, exportError(err))
			return
		}
	} else if err := readsAny(c, []string{f.Type}); err != nil {
		s.abort(c, err)
		return
	}
	file, err := os.Open(path)
	if err != nil {
		s.abort(c, fmt.Errorf("open export file: %w", err))
		return
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		s.abort(c, fmt.Errorf("open export file: %w", err))
		return
	}
	c.Header("Content-Type", exportFileType(f))
	http.ServeContent(c.Writer, c.Request, "", st.ModTime(), file)
}

// exportCapabilities adds the export operations to a CapabilityStatement.
func (s *Server) exportCapabilities(cs map[string]any) {
	if s.cfg.Export == nil {
		return
	}
	const ig = "http://hl7.org/fhir/uv/bulkdata/"
	cs["instantiates"] = []string{ig + "CapabilityStatement/bulk-data"}
	rest := cs["rest"].([]map[string]any)[0]
	sys, _ := rest["operation"].([]map[string]string)
	rest["operation"] = append(sys[:len(sys):len(sys)], map[string]string{"name": "export", "definition": ig + "OperationDefinition/export"})
	for _, r := range rest["resource"].([]map[string]any) {
		def := map[string]string{"Patient": "patient-export", "Group": "group-export"}[r["type"].(string)]
		if def == "" {
			continue
		}
		ops, _ := r["operation"].([]map[string]string)
		r["operation"] = append(ops[:len(ops):len(ops)], map[string]string{"name": "export", "definition": ig + "OperationDefinition/" + def})
	}
}
