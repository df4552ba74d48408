package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/fhirschema/view"
	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// viewRunParams are the parameters $viewdefinition-run takes.
var viewRunParams = map[string]bool{
	"_format": true, "header": true, "viewReference": true, "viewResource": true, "resource": true,
	"patient": true, "group": true, "_since": true, "_limit": true, "source": true, "_pretty": true,
}

// maxRunLimit bounds _limit: a larger one is a mistake, not a request.
const maxRunLimit = 10_000_000

// commitBytes is how much of a run's output is held back before the
// answer is committed: an error within it still gets its OperationOutcome.
const commitBytes = 64 << 10

// errLimitReached stops a run at its _limit.
var errLimitReached = errors.New("row limit reached")

// runOutput is how a run writes its rows.
type runOutput struct {
	format string
	header bool
	limit  int
}

// selection is which resources a run reads: the inline ones, or the
// tenant's, since a time and in the compartments of patients.
type selection struct {
	inline    []map[string]any
	hasInline bool
	since     *time.Time
	// patients is nil for every resource; otherwise the resources must be
	// in the compartment of one of them (none: no resource).
	patients []string
}

// viewRun serves $viewdefinition-run at the system, type (id "") and
// instance levels.
func (s *Server) viewRun(c *gin.Context, id string) {
	if err := s.runView(c, id); err != nil {
		s.abort(c, viewError(err))
	}
}

func (s *Server) runView(c *gin.Context, id string) error {
	params, err := s.operationParameters(c)
	if err != nil {
		return err
	}
	if err := params.unknown(viewRunOp, viewRunParams); err != nil {
		return err
	}
	if err := ownSource(c, params); err != nil {
		return err
	}
	v, err := s.viewOf(c, params, id)
	if err != nil {
		return err
	}
	out, err := runOutputOf(c, params)
	if err != nil {
		return err
	}
	sel, err := s.selectionOf(c, params, v.Resource)
	if err != nil {
		return err
	}
	return s.streamRows(c, v, out, s.rowsOf(c, v.Resource, sel))
}

// ownSource checks the source parameter of $viewdefinition-run and
// -export: views run over this server's data (or the inline resources),
// so a source may only name this server's FHIR base; another one is
// refused rather than ignored.
func ownSource(c *gin.Context, params opParams) error {
	p, err := params.one("source")
	if err != nil || p == nil {
		return err
	}
	src, err := params.text("source")
	if err != nil {
		return err
	}
	if strings.TrimSuffix(src, "/") == baseURL(c) {
		return nil
	}
	return fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("source %q: views run over this server's data (%s) or the resources given inline; another data source is not read", src, baseURL(c)), p.at)
}

// viewError maps the view engine's errors to HTTP errors: a view the
// rules refuse is a bad request, one the data cannot be evaluated with
// unprocessable.
func viewError(err error) error {
	var ie *view.InvalidError
	if errors.As(err, &ie) {
		issues := make([]Issue, len(ie.Issues))
		for i, is := range ie.Issues {
			issues[i] = Issue{Severity: is.Severity, Code: is.Code, Diagnostics: is.Diagnostics, Expression: is.Expression}
		}
		return &httpError{status: http.StatusBadRequest, issues: issues}
	}
	var ee *view.EvalError
	if errors.As(err, &ee) {
		return fail(http.StatusUnprocessableEntity, "processing", ee.Error(), ee.Expression)
	}
	var pe *search.Error
	if errors.As(err, &pe) {
		return fail(http.StatusBadRequest, "value", pe.Error(), "")
	}
	return err
}

// viewOf is the view a request runs: the instance's, viewReference's or
// viewResource, exactly one of them.
func (s *Server) viewOf(c *gin.Context, params opParams, id string) (*view.View, error) {
	ref, err := params.one("viewReference")
	if err != nil {
		return nil, err
	}
	inline, err := params.one("viewResource")
	if err != nil {
		return nil, err
	}
	n := 0
	for _, given := range []bool{id != "", ref != nil, inline != nil} {
		if given {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, fail(http.StatusBadRequest, "required", "name the view to run: viewResource (inline), viewReference, or ViewDefinition/[id]/"+viewRunOp, "")
	case n > 1:
		return nil, fail(http.StatusBadRequest, "structure", "give one view only: the instance, viewReference or viewResource", "")
	case inline != nil:
		if inline.resource == nil {
			return nil, fail(http.StatusBadRequest, "structure", "viewResource must carry the ViewDefinition as its resource", inline.at)
		}
		return view.CompileMap(inline.resource, view.Options{})
	case ref != nil:
		res, err := s.storedView(c, ref.value)
		if err != nil {
			return nil, err
		}
		return view.Compile(res.JSON, view.Options{Stored: true})
	}
	res, err := s.storedView(c, view.ResourceType+"/"+id)
	if err != nil {
		return nil, err
	}
	return view.Compile(res.JSON, view.Options{Stored: true})
}

// storedView reads a ViewDefinition by reference (ViewDefinition/[id]) or
// canonical URL (with an optional |version).
func (s *Server) storedView(c *gin.Context, ref string) (*store.Resource, error) {
	return s.storedCanonical(c, view.ResourceType, ref)
}

// storedCanonical reads a resource of typ by reference (typ/[id]) or
// canonical URL, which must name exactly one; the caller must be allowed
// to read it.
func (s *Server) storedCanonical(c *gin.Context, typ, ref string) (*store.Resource, error) {
	if _, err := s.permit(c, typ, auth.Read); err != nil {
		return nil, err
	}
	ctx, tenant := c.Request.Context(), c.GetString(tenantKey)
	if id, ok := strings.CutPrefix(ref, typ+"/"); ok && !strings.Contains(id, "/") {
		res, err := s.store.Read(ctx, tenant, typ, id)
		if err != nil {
			return nil, err
		}
		return res, s.checkVisible(c, res)
	}
	if !strings.Contains(ref, ":") {
		return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("%q is neither %s/[id] nor a canonical URL", ref, typ), "")
	}
	if s.cfg.Registry == nil {
		return nil, fail(http.StatusNotImplemented, "not-supported", "canonical references need search, which is off", "")
	}
	u, version, _ := strings.Cut(ref, "|")
	query := url.Values{"url": {u}}
	if version != "" {
		query.Set("version", version)
	}
	q, err := s.cfg.Registry.Parse(typ, query, search.ParseOptions{})
	if err != nil {
		return nil, err
	}
	page, err := s.store.Search(ctx, tenant, q)
	if err != nil {
		return nil, err
	}
	switch len(page.Entries) {
	case 0:
		return nil, fail(http.StatusNotFound, "not-found", fmt.Sprintf("no %s has the url %s", typ, ref), "")
	case 1:
		return page.Entries[0], s.checkVisible(c, page.Entries[0])
	}
	return nil, fail(http.StatusConflict, "multiple-matches", fmt.Sprintf("%d %ss have the url %s: name one by id", len(page.Entries), typ, ref), "")
}

// runOutputOf reads _format (else what Accept names, else json), header
// and _limit.
func runOutputOf(c *gin.Context, params opParams) (runOutput, error) {
	out := runOutput{format: view.FormatJSON, header: true}
	f, err := params.text("_format")
	if err != nil {
		return out, err
	}
	if f == "" {
		if accepted, ok := view.ParseFormat(c.GetHeader("Accept")); ok {
			out.format = accepted
		}
	} else if format, ok := view.ParseFormat(f); ok {
		out.format = format
	} else {
		return out, fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("_format %q is not one of json, ndjson, csv and parquet", f), "_format")
	}
	h, err := params.text("header")
	if err != nil {
		return out, err
	}
	switch h {
	case "", "true":
	case "false":
		out.header = false
	default:
		return out, fail(http.StatusBadRequest, "value", fmt.Sprintf("header %q is not true or false", h), "header")
	}
	lim, err := params.text("_limit")
	if err != nil || lim == "" {
		return out, err
	}
	n, err := strconv.Atoi(lim)
	if err != nil || n < 1 || n > maxRunLimit {
		return out, fail(http.StatusBadRequest, "value", fmt.Sprintf("_limit %q is not a number of rows from 1 to %d", lim, maxRunLimit), "_limit")
	}
	out.limit = n
	return out, nil
}

// selectionOf reads the inline resources, _since, patient and group, and
// narrows them to what the caller may read of typ.
func (s *Server) selectionOf(c *gin.Context, params opParams, typ string) (*selection, error) {
	sel := &selection{}
	for _, p := range params.all("resource") {
		if p.resource == nil {
			return nil, fail(http.StatusBadRequest, "structure", "a resource parameter must carry a resource", p.at)
		}
		sel.inline, sel.hasInline = append(sel.inline, p.resource), true
	}
	since, err := params.text("_since")
	if err != nil {
		return nil, err
	}
	if since != "" {
		t, err := time.Parse(time.RFC3339Nano, strings.ReplaceAll(since, " ", "+"))
		if err != nil {
			return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("_since %q is not an instant such as 2024-01-02T15:04:05Z", since), "_since")
		}
		sel.since = &t
	}
	if sel.patients, err = s.compartmentsOf(c, params); err != nil {
		return nil, err
	}
	if sel.hasInline {
		return sel, nil // the caller's own resources: nothing of the tenant's is read
	}
	return sel, s.narrowToAccess(c, typ, sel)
}

// compartmentsOf are the patients of the patient and group parameters;
// nil when neither is given.
func (s *Server) compartmentsOf(c *gin.Context, params opParams) ([]string, error) {
	patients, groups := params.values("patient"), params.values("group")
	if len(patients) == 0 && len(groups) == 0 {
		return nil, nil
	}
	ids := []string{}
	for _, p := range patients {
		id := strings.TrimPrefix(p, "Patient/")
		if store.ValidateID(id) != nil {
			return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("patient %q is not a reference such as Patient/123", p), "patient")
		}
		ids = append(ids, id)
	}
	for _, g := range groups {
		members, err := s.groupMembers(c, strings.TrimPrefix(g, "Group/"))
		if err != nil {
			return nil, err
		}
		ids = append(ids, members...)
	}
	return dedupe(ids), nil
}

// groupMembers are the ids of the Patients a Group lists as members.
func (s *Server) groupMembers(c *gin.Context, id string) ([]string, error) {
	if store.ValidateID(id) != nil {
		return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("group %q is not a reference such as Group/123", id), "group")
	}
	res, err := s.storedCanonical(c, "Group", "Group/"+id)
	if err != nil {
		return nil, err
	}
	var g struct {
		Member []struct {
			Entity struct {
				Reference string `json:"reference"`
			} `json:"entity"`
		} `json:"member"`
	}
	if err := json.Unmarshal(res.JSON, &g); err != nil {
		return nil, fmt.Errorf("read Group/%s: %w", id, err)
	}
	var ids []string
	for _, m := range g.Member {
		if pid, ok := strings.CutPrefix(m.Entity.Reference, "Patient/"); ok && store.ValidateID(pid) == nil {
			ids = append(ids, pid)
		}
	}
	return ids, nil
}

// narrowToAccess checks that the caller may read typ (403) and, under a
// patient scope, keeps only the token's patient.
func (s *Server) narrowToAccess(c *gin.Context, typ string, sel *selection) error {
	a := accessOf(c.Request.Context())
	if a == nil {
		return denied(typ, auth.Read)
	}
	g := max(a.grant(typ, auth.Read), a.grant(typ, auth.Search))
	if g == auth.Denied {
		return denied(typ, auth.Read)
	}
	if !restricted(g, typ) {
		return nil
	}
	if sel.patients == nil {
		sel.patients = []string{a.patient}
		return nil
	}
	for _, id := range sel.patients {
		if id != a.patient {
			return fail(http.StatusForbidden, "forbidden", fmt.Sprintf("the token's patient scope reaches only Patient/%s, not Patient/%s", a.patient, id), "patient")
		}
	}
	return nil
}

// rowSource evaluates a view over the resources a run reads, handing
// each row to emit in the order of the resources.
type rowSource func(ctx context.Context, v *view.View, emit func(row []any) error) error

// rowsOf is the source of a run: its inline resources, or a snapshot of
// the tenant's resources of typ, decoded and evaluated on every CPU.
func (s *Server) rowsOf(c *gin.Context, typ string, sel *selection) rowSource {
	if sel.hasInline {
		return func(ctx context.Context, v *view.View, emit func(row []any) error) error {
			for _, r := range sel.inline {
				if s.inlineSelected(typ, r, sel) {
					if err := v.Eval(ctx, r, emit); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	tenant := c.GetString(tenantKey)
	return func(ctx context.Context, v *view.View, emit func(row []any) error) error {
		q, err := s.snapshotQuery(typ, sel)
		if err != nil || q == nil {
			return err
		}
		stream := v.NewStream(ctx, 0, emit)
		err = s.store.Snapshot(ctx, tenant, *q, func(res *store.Resource) error { return stream.Add(res.JSON) })
		if cerr := stream.Close(); cerr != nil || errors.Is(err, view.ErrStopped) {
			return cerr
		}
		return err
	}
}

// snapshotQuery selects the resources of typ a run reads from the store;
// nil when it reads none (an empty group).
func (s *Server) snapshotQuery(typ string, sel *selection) (*store.SnapshotQuery, error) {
	q := &store.SnapshotQuery{Type: typ, At: time.Now().UTC(), Since: sel.since}
	if sel.patients == nil {
		return q, nil
	}
	if len(sel.patients) == 0 {
		return nil, nil
	}
	if s.cfg.Registry == nil {
		return nil, fail(http.StatusNotImplemented, "not-supported", "patient and group need search, which is off", "")
	}
	pop, err := s.cfg.Registry.PatientPopulation(typ, sel.patients)
	if err != nil {
		return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("patient and group select by compartment: %v", err), "patient")
	}
	q.Match = []*search.Query{pop}
	return q, nil
}

// inlineSelected applies _since and the compartments to an inline resource.
func (s *Server) inlineSelected(typ string, r map[string]any, sel *selection) bool {
	if sel.since != nil {
		meta, _ := r["meta"].(map[string]any)
		lu, _ := meta["lastUpdated"].(string)
		t, err := time.Parse(time.RFC3339Nano, lu)
		if err != nil || t.Before(*sel.since) {
			return false
		}
	}
	if sel.patients == nil {
		return true
	}
	for _, p := range sel.patients {
		if s.cfg.Registry != nil && s.cfg.Registry.InPatientCompartment(typ, r, p) {
			return true
		}
	}
	return false
}

func decodeResource(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}

// streamRows evaluates v over src and streams its rows in out's format.
// The first commitBytes are held back: an error before then is answered
// with an OperationOutcome; after, the connection is cut so that the
// client cannot take a partial answer for a whole one.
func (s *Server) streamRows(c *gin.Context, v *view.View, out runOutput, src rowSource) error {
	ctx := c.Request.Context()
	w := &lazyBody{c: c, contentType: view.ContentType(out.format)}
	sink, err := view.NewSink(w, out.format, v.Columns(), view.SinkOptions{NoHeader: !out.header})
	if err != nil {
		return err
	}
	rows := 0
	err = src(ctx, v, func(row []any) error {
		if err := sink.WriteRow(row); err != nil {
			return err
		}
		rows++
		if out.limit > 0 && rows >= out.limit {
			return errLimitReached
		}
		return nil
	})
	if errors.Is(err, errLimitReached) {
		err = nil
	}
	if err == nil {
		err = sink.Close()
	}
	if err == nil {
		err = w.finish()
	}
	if err == nil || !w.committed {
		return err
	}
	s.log.Warn("view run cut short", zap.String("request_id", requestID(c)), zap.Int("rows", rows), zap.Error(err))
	panic(http.ErrAbortHandler)
}

// lazyBody holds back the first commitBytes of an answer, then streams.
type lazyBody struct {
	c           *gin.Context
	contentType string
	buf         bytes.Buffer
	committed   bool
}

func (w *lazyBody) Write(p []byte) (int, error) {
	if w.committed {
		return w.c.Writer.Write(p)
	}
	w.buf.Write(p)
	if w.buf.Len() >= commitBytes {
		return len(p), w.commit()
	}
	return len(p), nil
}

// commit sends the status, headers and what is held back.
func (w *lazyBody) commit() error {
	w.committed = true
	h := w.c.Writer.Header()
	h.Set("Content-Type", w.contentType)
	w.c.Status(http.StatusOK)
	_, err := w.c.Writer.Write(w.buf.Bytes())
	w.buf = bytes.Buffer{}
	return err
}

// finish sends what is still held back.
func (w *lazyBody) finish() error {
	if w.committed {
		w.c.Writer.Flush()
		return nil
	}
	w.c.Header("Content-Length", strconv.Itoa(w.buf.Len()))
	return w.commit()
}
