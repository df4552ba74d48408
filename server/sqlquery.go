package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"fhirstore/fhirschema/view"
	"fhirstore/server/viewsql"
)

// sqlQueryParams are the parameters $sqlquery-run takes; resource, patient,
// group and _since select the data of its views as for $viewdefinition-run.
var sqlQueryParams = map[string]bool{
	"_format": true, "header": true, "queryReference": true, "queryResource": true, "parameters": true,
	"_limit": true, "resource": true, "patient": true, "group": true, "_since": true, "source": true, "_pretty": true,
}

// The SQLQuery profile of Library: its type, and the media type of its SQL.
const (
	libraryTypes = sqlOnFHIR + "CodeSystem/LibraryTypesCodes"
	sqlQueryCode = "sql-query"
	sqlMediaType = "application/sql"
)

// sqlQuery is a Library of the SQLQuery profile: its SQL, the views it
// reads as tables, and its declared parameters.
type sqlQuery struct {
	sql    string
	tables []sqlTable
	params map[string]string // name → FHIR type
}

// sqlTable is a view a query reads, under its table name.
type sqlTable struct {
	name, view, at string
}

// sqlQueryRun serves $sqlquery-run at the system, type (Library) and
// instance (Library/[id]) levels.
func (s *Server) sqlQueryRun(c *gin.Context, id string) {
	if err := s.runSQLQuery(c, id); err != nil {
		s.abort(c, sqlError(err))
	}
}

func (s *Server) runSQLQuery(c *gin.Context, id string) error {
	params, err := s.operationParameters(c)
	if err != nil {
		return err
	}
	if err := params.unknown(sqlRunOp, sqlQueryParams); err != nil {
		return err
	}
	q, err := s.queryOf(c, params, id)
	if err != nil {
		return err
	}
	args, err := queryArgs(params, q)
	if err != nil {
		return err
	}
	out, err := runOutputOf(c, params)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.SQL.WithDefaults().Timeout)
	defer cancel()
	db, err := viewsql.Open(ctx, "", s.cfg.SQL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := s.materialize(ctx, c, db, params, q); err != nil {
		return err
	}
	res, err := db.Query(ctx, q.sql, args)
	if err != nil {
		return err
	}
	if out.limit > 0 && len(res.Rows) > out.limit {
		res.Rows = res.Rows[:out.limit]
	}
	return writeResult(c, res, out)
}

// sqlError maps the errors of SQL over views to HTTP errors.
func sqlError(err error) error {
	switch {
	case errors.Is(err, viewsql.ErrNotAllowed):
		return fail(http.StatusForbidden, "forbidden", err.Error(), "")
	case errors.Is(err, viewsql.ErrBadQuery):
		return fail(http.StatusBadRequest, "invalid", err.Error(), "Library.content")
	case errors.Is(err, viewsql.ErrLimit):
		return fail(http.StatusBadRequest, "too-costly", err.Error(), "")
	}
	return viewError(err)
}

// queryOf is the SQLQuery a request runs: the instance, queryReference or
// queryResource, exactly one of them.
func (s *Server) queryOf(c *gin.Context, params opParams, id string) (*sqlQuery, error) {
	ref, err := params.one("queryReference")
	if err != nil {
		return nil, err
	}
	inline, err := params.one("queryResource")
	if err != nil {
		return nil, err
	}
	switch {
	case btoi(id != "")+btoi(ref != nil)+btoi(inline != nil) > 1:
		return nil, fail(http.StatusBadRequest, "structure", "give one query only: the instance, queryReference or queryResource", "")
	case inline != nil:
		if inline.resource == nil {
			return nil, fail(http.StatusBadRequest, "structure", "queryResource must carry the Library as its resource", inline.at)
		}
		return parseSQLQuery(inline.resource)
	case ref != nil:
		id = ref.value
	case id == "":
		return nil, fail(http.StatusBadRequest, "required", "name the query to run: queryResource (inline), queryReference, or Library/[id]/"+sqlRunOp, "")
	default:
		id = "Library/" + id
	}
	res, err := s.storedCanonical(c, "Library", id)
	if err != nil {
		return nil, err
	}
	lib, err := decodeResource(res.JSON)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", id, err)
	}
	return parseSQLQuery(lib)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseSQLQuery reads a Library of the SQLQuery profile; any other Library
// is a 400 naming what is missing.
func parseSQLQuery(lib map[string]any) (*sqlQuery, error) {
	bad := func(at, format string, args ...any) error {
		return fail(http.StatusBadRequest, "invalid", fmt.Sprintf(format, args...), "Library"+at)
	}
	if lib["resourceType"] != "Library" {
		return nil, bad("", "the query must be a Library of the SQLQuery profile, not a %v", lib["resourceType"])
	}
	if !isSQLQueryType(lib["type"]) {
		return nil, bad(".type", "the Library is not an SQLQuery: its type must be %s of %s", sqlQueryCode, libraryTypes)
	}
	q := &sqlQuery{params: map[string]string{}}
	for i, a := range asObjects(lib["content"]) {
		ct, _ := a["contentType"].(string)
		if !strings.HasPrefix(strings.ToLower(ct), sqlMediaType) {
			continue
		}
		data, _ := a["data"].(string)
		text, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, bad(fmt.Sprintf(".content[%d].data", i), "the SQL is not base64: %v", err)
		}
		q.sql = string(text)
		break
	}
	if strings.TrimSpace(q.sql) == "" {
		return nil, bad(".content", "the Library has no %s content with its SQL in data", sqlMediaType)
	}
	for i, ra := range asObjects(lib["relatedArtifact"]) {
		if ra["type"] != "depends-on" {
			continue
		}
		t := sqlTable{at: fmt.Sprintf("Library.relatedArtifact[%d]", i)}
		t.view, _ = ra["resource"].(string)
		t.name, _ = ra["label"].(string)
		if t.view == "" {
			return nil, bad(fmt.Sprintf(".relatedArtifact[%d].resource", i), "a depends-on artifact must name its ViewDefinition by canonical URL in resource")
		}
		q.tables = append(q.tables, t)
	}
	if len(q.tables) == 0 {
		return nil, bad(".relatedArtifact", "the query reads no view: name each in relatedArtifact (type depends-on, resource the view's URL, label the table's name)")
	}
	for _, p := range asObjects(lib["parameter"]) {
		name, _ := p["name"].(string)
		typ, _ := p["type"].(string)
		if use, _ := p["use"].(string); name != "" && use != "out" {
			q.params[name] = typ
		}
	}
	return q, nil
}

// isSQLQueryType tells a Library.type of the SQLQuery profile.
func isSQLQueryType(v any) bool {
	cc, _ := v.(map[string]any)
	for _, coding := range asObjects(cc["coding"]) {
		sys, _ := coding["system"].(string)
		if coding["code"] == sqlQueryCode && (sys == "" || sys == libraryTypes || sys == strings.Replace(libraryTypes, "https:", "http:", 1)) {
			return true
		}
	}
	return false
}

func asObjects(v any) []map[string]any {
	arr, _ := v.([]any)
	out := make([]map[string]any, 0, len(arr))
	for _, item := range arr {
		if m, ok := item.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// queryArgs binds the values of the parameters input (a Parameters
// resource) to the query's declared parameters.
func queryArgs(params opParams, q *sqlQuery) (map[string]any, error) {
	p, err := params.one("parameters")
	if err != nil || p == nil {
		return nil, err
	}
	if p.resource == nil || p.resource["resourceType"] != "Parameters" {
		return nil, fail(http.StatusBadRequest, "structure", "parameters must carry a Parameters resource with the query's values", p.at)
	}
	list, _ := p.resource["parameter"].([]any)
	values, err := readParams(list, p.at+".resource.parameter")
	if err != nil {
		return nil, err
	}
	args := map[string]any{}
	for _, v := range values {
		if _, declared := q.params[v.name]; !declared {
			return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("the query declares no parameter %s", v.name), v.at)
		}
		args[v.name] = sqlArg(v)
	}
	return args, nil
}

// sqlArg is a parameter value as SQL binds it: numbers as numbers,
// booleans as 1 and 0, everything else as text.
func sqlArg(p opParam) any {
	switch p.kind {
	case "Integer", "PositiveInt", "UnsignedInt", "Integer64":
		var n int64
		if _, err := fmt.Sscan(p.value, &n); err == nil {
			return n
		}
	case "Decimal":
		var f float64
		if _, err := fmt.Sscan(p.value, &f); err == nil {
			return f
		}
	case "Boolean":
		return btoi(p.value == "true")
	}
	return p.value
}

// materialize fills a table per view of the query with the view's rows
// over the run's resources.
func (s *Server) materialize(ctx context.Context, c *gin.Context, db *viewsql.DB, params opParams, q *sqlQuery) error {
	for _, t := range q.tables {
		res, err := s.storedView(c, t.view)
		if err != nil {
			return err
		}
		v, err := view.Compile(res.JSON, view.Options{Stored: true})
		if err != nil {
			return err
		}
		if t.name == "" {
			t.name = v.Name
		}
		if !sqlTableName(t.name) {
			return fail(http.StatusBadRequest, "value", fmt.Sprintf("table name %q must start with a letter and hold only letters, digits and _", t.name), t.at+".label")
		}
		sel, err := s.selectionOf(c, params, v.Resource)
		if err != nil {
			return err
		}
		sink, err := db.Table(ctx, t.name, v.Columns())
		if err != nil {
			return err
		}
		if err := s.fill(ctx, v, sink, s.rowsOf(c, v.Resource, sel)); err != nil {
			return err
		}
	}
	return nil
}

// fill writes the rows of v over src into sink.
func (s *Server) fill(ctx context.Context, v *view.View, sink view.Sink, src rowSource) error {
	err := src(ctx, v, sink.WriteRow)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: filling the views' tables ran longer than allowed", viewsql.ErrLimit)
		}
		return err
	}
	return sink.Close()
}

// sqlTableName is the IG's rule for table names.
func sqlTableName(s string) bool {
	if s == "" || !(s[0] >= 'A' && s[0] <= 'Z' || s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// writeResult writes a query's answer in the requested format.
func writeResult(c *gin.Context, res *viewsql.Result, out runOutput) error {
	w := &lazyBody{c: c, contentType: view.ContentType(out.format)}
	sink, err := view.NewSink(w, out.format, res.Columns, view.SinkOptions{NoHeader: !out.header})
	if err != nil {
		return err
	}
	for _, r := range res.Rows {
		if err := sink.WriteRow(r); err != nil {
			return err
		}
	}
	if err := sink.Close(); err != nil {
		return err
	}
	return w.finish()
}
