package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"

	"fhirstore/fhirschema/view"
	"fhirstore/server/auth"
	"fhirstore/server/bulkexport"
)

// viewExportParams are the parameters $viewdefinition-export takes.
var viewExportParams = map[string]bool{
	"view": true, "viewReference": true, "viewResource": true, "_format": true, "header": true,
	"patient": true, "group": true, "_since": true, "clientTrackingId": true, "source": true, "_pretty": true,
}

// viewExport starts a $viewdefinition-export: the views' rows written to
// files by a job of the bulk export machinery, polled at $export-status
// like an $export.
func (s *Server) viewExport(c *gin.Context, id string) {
	if s.cfg.Export == nil {
		s.notSupported(c, viewExportOp+" needs the bulk export jobs, which this server does not run")
		return
	}
	if err := s.kickoffViews(c, id); err != nil {
		s.abort(c, exportError(viewError(err)))
	}
}

func (s *Server) kickoffViews(c *gin.Context, id string) error {
	params, err := s.operationParameters(c)
	if err != nil {
		return err
	}
	if err := params.unknown(viewExportOp, viewExportParams); err != nil {
		return err
	}
	if err := ownSource(c, params); err != nil {
		return err
	}
	req := &bulkexport.Request{URL: requestURL(c), Level: bulkexport.LevelSystem, Format: view.FormatNDJSON}
	if err := s.exportedViews(c, params, id, req); err != nil {
		return err
	}
	if err := exportFormat(c, params, req); err != nil {
		return err
	}
	if err := s.exportScope(c, params, req); err != nil {
		return err
	}
	job, err := s.cfg.Export.Kickoff(c.Request.Context(), c.GetString(tenantKey), *req)
	if err != nil {
		return err
	}
	c.Header("Content-Location", baseURL(c)+"/"+exportStatus+"/"+job.ID)
	writeJSON(c, http.StatusAccepted, informational("view export accepted; poll the Content-Location URL for its status", nil))
	return nil
}

// exportedViews reads the views to export: the instance's, each view
// parameter (parts name, viewReference, viewResource), or a viewReference
// or viewResource of its own; each must compile, and the caller read its
// resource type.
func (s *Server) exportedViews(c *gin.Context, params opParams, id string, req *bulkexport.Request) error {
	type named struct {
		name string
		ps   opParams
		at   string
	}
	var list []named
	if id != "" || params.all("viewReference") != nil || params.all("viewResource") != nil {
		list = append(list, named{ps: params, at: "view"})
	}
	for _, p := range params.all("view") {
		name, _ := opParams(p.parts).text("name")
		list = append(list, named{name: name, ps: p.parts, at: p.at})
	}
	if len(list) == 0 {
		return fail(http.StatusBadRequest, "required", "name the views to export: view (parts name, viewReference or viewResource), or ViewDefinition/[id]/"+viewExportOp, "view")
	}
	seen := map[string]bool{}
	for i, n := range list {
		instance := ""
		if i == 0 && n.at == "view" {
			instance = id
		}
		v, def, err := s.exportedView(c, n.ps, instance)
		if err != nil {
			return err
		}
		name := n.name
		if name == "" {
			name = v.Name
		}
		if name == "" {
			name = fmt.Sprintf("view_%d", i+1)
		}
		if !sqlTableName(name) || seen[name] {
			return fail(http.StatusBadRequest, "value", fmt.Sprintf("view name %q must be unique, start with a letter and hold only letters, digits and _", name), n.at)
		}
		seen[name] = true
		if a := accessOf(c.Request.Context()); a == nil || a.grant(v.Resource, auth.Read) != auth.Full {
			return fail(http.StatusForbidden, "forbidden", fmt.Sprintf("the token's scopes do not grant read (system or user level) on %s, which view %s reads", v.Resource, name), n.at)
		}
		req.Views = append(req.Views, bulkexport.View{Name: name, Definition: def})
		req.Types = append(req.Types, v.Resource)
	}
	return nil
}

// exportedView compiles one view of an export and returns its definition.
func (s *Server) exportedView(c *gin.Context, params opParams, id string) (*view.View, string, error) {
	if inline, err := params.one("viewResource"); err != nil || inline != nil {
		if err != nil {
			return nil, "", err
		}
		v, err := view.CompileMap(inline.resource, view.Options{})
		if err != nil {
			return nil, "", err
		}
		def, err := json.Marshal(inline.resource)
		return v, string(def), err
	}
	ref := view.ResourceType + "/" + id
	if p, err := params.one("viewReference"); err != nil {
		return nil, "", err
	} else if p != nil {
		ref = p.value
	}
	res, err := s.storedView(c, ref)
	if err != nil {
		return nil, "", err
	}
	v, err := view.Compile(res.JSON, view.Options{Stored: true})
	return v, string(res.JSON), err
}

// exportFormat reads _format (ndjson by default) and header.
func exportFormat(c *gin.Context, params opParams, req *bulkexport.Request) error {
	out, err := runOutputOf(c, params)
	if err != nil {
		return err
	}
	if f, _ := params.text("_format"); f != "" {
		req.Format = out.format
	}
	req.NoHeader = !out.header
	return nil
}

// exportScope reads _since, patient and group: a patient or group export
// covers the Patient compartments of its patients.
func (s *Server) exportScope(c *gin.Context, params opParams, req *bulkexport.Request) error {
	if err := exportSince(asQuery(params, "_since"), req); err != nil {
		return err
	}
	patients, groups := params.values("patient"), params.values("group")
	switch {
	case len(patients) > 0 && len(groups) > 0:
		return fail(http.StatusBadRequest, "structure", "give patient or group, not both", "group")
	case len(groups) > 1:
		return fail(http.StatusBadRequest, "structure", "give one group", "group")
	case len(groups) == 1:
		req.Level, req.Group = bulkexport.LevelGroup, strings.TrimPrefix(groups[0], "Group/")
		_, err := s.storedCanonical(c, "Group", "Group/"+req.Group)
		return err
	case len(patients) > 0:
		req.Level = bulkexport.LevelPatient
		for i := range patients {
			if !strings.HasPrefix(patients[i], "Patient/") {
				patients[i] = "Patient/" + patients[i]
			}
		}
		return exportPatients(map[string][]string{"patient": patients}, bulkexport.LevelPatient, req)
	}
	return nil
}

// asQuery is the first value of a parameter as query values, for the
// $export parameter readers.
func asQuery(params opParams, name string) map[string][]string {
	if v := params.values(name); len(v) > 0 {
		return map[string][]string{name: v[:1]}
	}
	return map[string][]string{}
}

// exportFileType is the media type of an export file: ndjson for
// resources, the view's format for a view's rows.
func exportFileType(f *bulkexport.File) string {
	if f.View == "" {
		return ndjsonType
	}
	format, ok := view.ParseFormat(strings.TrimPrefix(path.Ext(f.Name), "."))
	if !ok {
		return "application/octet-stream"
	}
	return view.ContentType(format)
}
