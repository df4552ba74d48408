package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/store"
)

// DefaultMaxBundleEntries bounds the entries of a batch or transaction.
const DefaultMaxBundleEntries = 10000

// bundleIn is what the server reads of a posted Bundle; resources stay raw.
type bundleIn struct {
	ResourceType string          `json:"resourceType"`
	Type         string          `json:"type"`
	Entry        []bundleEntryIn `json:"entry"`
}

type bundleEntryIn struct {
	FullURL  string          `json:"fullUrl"`
	Resource json.RawMessage `json:"resource"`
	Request  *entryRequest   `json:"request"`
}

type entryRequest struct {
	Method          string `json:"method"`
	URL             string `json:"url"`
	IfNoneMatch     string `json:"ifNoneMatch"`
	IfModifiedSince string `json:"ifModifiedSince"`
	IfMatch         string `json:"ifMatch"`
	IfNoneExist     string `json:"ifNoneExist"`
}

// bundleOut is a batch-response or transaction-response.
type bundleOut struct {
	ResourceType string           `json:"resourceType"`
	ID           string           `json:"id,omitempty"`
	Type         string           `json:"type"`
	Timestamp    string           `json:"timestamp,omitempty"`
	Entry        []bundleEntryOut `json:"entry,omitempty"` // FHIR JSON has no empty arrays
}

type bundleEntryOut struct {
	FullURL  string         `json:"fullUrl,omitempty"`
	Resource bsonJSON       `json:"resource,omitempty"`
	Response *entryResponse `json:"response"`
}

type entryResponse struct {
	Status       string         `json:"status"`
	Location     string         `json:"location,omitempty"`
	Etag         string         `json:"etag,omitempty"`
	LastModified string         `json:"lastModified,omitempty"`
	Outcome      map[string]any `json:"outcome,omitempty"`
}

// entry is one parsed Bundle entry.
type entry struct {
	index int
	in    bundleEntryIn
	// op is the write of a POST, PUT, PATCH or DELETE entry.
	op *store.Op
	// read is the path and query of a GET or HEAD entry.
	read string
	// err is why the entry could not be parsed (batch only).
	err error
}

// bundleCall carries what processing a Bundle needs of its request.
type bundleCall struct {
	tenant string
	base   string
	// header is copied onto the nested requests of GET entries.
	header http.Header
	host   string
	prefer string
}

// postBundle serves POST [base]: a batch or transaction Bundle.
func (s *Server) postBundle(c *gin.Context) {
	body, err := s.readBody(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	call := &bundleCall{tenant: c.GetString(tenantKey), base: baseURL(c), header: c.Request.Header, host: c.Request.Host, prefer: preferReturnBundle(c)}
	out, err := s.processBundle(c.Request.Context(), call, body, prefer(c, "handling") == "lenient")
	if err != nil {
		s.abort(c, err)
		return
	}
	writeJSON(c, http.StatusOK, out)
}

// preferReturnBundle is the return preference for bundle entries: minimal
// unless the client asks for more.
func preferReturnBundle(c *gin.Context) string {
	if v := prefer(c, "return"); v != "" {
		return v
	}
	return "minimal"
}

// processBundle runs a batch or transaction and builds its response.
func (s *Server) processBundle(ctx context.Context, call *bundleCall, body []byte, lenient bool) (*bundleOut, error) {
	var b bundleIn
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fail(http.StatusBadRequest, "structure", "the body is not a JSON Bundle: "+err.Error(), "")
	}
	if b.ResourceType != "Bundle" {
		return nil, fail(http.StatusBadRequest, "invalid", fmt.Sprintf("POST to the base needs a Bundle, not %q", b.ResourceType), "resourceType")
	}
	if b.Type != "batch" && b.Type != "transaction" {
		return nil, fail(http.StatusBadRequest, "invalid", fmt.Sprintf("Bundle type %q cannot be processed; send a batch or transaction", b.Type), "Bundle.type")
	}
	if len(b.Entry) > s.cfg.MaxBundleEntries {
		return nil, fail(http.StatusRequestEntityTooLarge, "too-costly", fmt.Sprintf("the Bundle has %d entries; at most %d are accepted", len(b.Entry), s.cfg.MaxBundleEntries), "Bundle.entry")
	}
	entries := make([]*entry, len(b.Entry))
	for i, in := range b.Entry {
		e, err := parseEntry(i, in, call.base, lenient)
		if err != nil {
			if b.Type == "transaction" {
				return nil, err
			}
			e = &entry{index: i, in: in, err: err}
		}
		entries[i] = e
	}
	if err := authorizeEntries(ctx, entries, b.Type == "transaction"); err != nil {
		return nil, err
	}
	out := &bundleOut{ResourceType: "Bundle", Type: b.Type + "-response", Timestamp: time.Now().UTC().Format(store.InstantLayout), Entry: make([]bundleEntryOut, len(entries))}
	if b.Type == "transaction" {
		if err := s.transaction(ctx, call, entries, out); err != nil {
			return nil, err
		}
	} else {
		s.batch(ctx, call, entries, out)
	}
	s.cfg.Metrics.countBundle(b.Type, entries)
	return out, nil
}

// authorizeEntries checks each write entry against the caller's scopes
// and attaches the guard that checks what it stores. A denied entry fails
// a transaction whole, or that entry of a batch.
func authorizeEntries(ctx context.Context, entries []*entry, transaction bool) error {
	a := accessOf(ctx)
	for _, e := range entries {
		if e.op == nil {
			continue
		}
		if err := a.authorizeOp(e.op); err != nil {
			err = entryError(e.index, e.op.Type, err)
			if transaction {
				return err
			}
			e.op, e.err = nil, err
		}
	}
	return nil
}

// writeOps are the writes of the entries, with the entry each comes from.
func writeOps(entries []*entry) ([]store.Op, []*entry) {
	var ops []store.Op
	var owners []*entry
	for _, e := range entries {
		if e.op != nil {
			ops = append(ops, *e.op)
			owners = append(owners, e)
		}
	}
	return ops, owners
}

// transaction commits every write entry at once, then serves the reads.
func (s *Server) transaction(ctx context.Context, call *bundleCall, entries []*entry, out *bundleOut) error {
	ops, owners := writeOps(entries)
	results, err := s.store.Transaction(ctx, call.tenant, ops)
	if err != nil {
		var oe *store.OpError
		if errors.As(err, &oe) {
			return entryError(owners[oe.Index].index, owners[oe.Index].op.Type, oe.Err)
		}
		return err
	}
	for i, r := range results {
		out.Entry[owners[i].index] = writeEntry(call, owners[i], r)
	}
	for _, e := range entries {
		if e.op == nil {
			out.Entry[e.index] = s.readEntry(ctx, call, e)
		}
	}
	return nil
}

// batch processes each entry on its own; a failure is that entry's response.
func (s *Server) batch(ctx context.Context, call *bundleCall, entries []*entry, out *bundleOut) {
	for _, e := range entries {
		if e.err != nil {
			out.Entry[e.index] = failedEntry(e.err)
		}
	}
	ops, owners := writeOps(entries)
	results, errs := s.store.Batch(ctx, call.tenant, ops)
	for i, e := range owners {
		if err := errs[i]; err != nil {
			var oe *store.OpError
			if errors.As(err, &oe) {
				err = oe.Err
			}
			if toHTTPError(err).status >= http.StatusInternalServerError {
				s.log.Error("batch entry failed", zap.String("tenant", call.tenant), zap.Int("entry", e.index), zap.Error(err))
			}
			out.Entry[e.index] = failedEntry(entryError(e.index, e.op.Type, err))
			continue
		}
		out.Entry[e.index] = writeEntry(call, e, results[i])
	}
	for _, e := range entries {
		if e.read != "" {
			out.Entry[e.index] = s.readEntry(ctx, call, e)
		}
	}
}

// failedEntry is the batch-response entry of a failed entry.
func failedEntry(err error) bundleEntryOut {
	he := toHTTPError(err)
	return bundleEntryOut{Response: &entryResponse{Status: statusLine(he.status), Outcome: operationOutcome(he.issues)}}
}

func statusLine(code int) string { return strconv.Itoa(code) + " " + http.StatusText(code) }

// writeEntry is the response entry of a write.
func writeEntry(call *bundleCall, e *entry, r store.Result) bundleEntryOut {
	status := map[store.Outcome]int{store.Created: 201, store.Updated: 200, store.Deleted: 204, store.Existing: 200, store.NoChange: 204}[r.Outcome]
	resp := &entryResponse{Status: statusLine(status)}
	out := bundleEntryOut{Response: resp}
	res := r.Resource
	if res == nil {
		return out
	}
	resp.Etag = etag(res.VersionID)
	resp.LastModified = res.LastUpdated.UTC().Format(store.InstantLayout)
	if res.Deleted {
		return out
	}
	out.FullURL = call.base + "/" + res.Type + "/" + res.ID
	resp.Location = fmt.Sprintf("%s/%s/%s/_history/%d", call.base, res.Type, res.ID, res.VersionID)
	switch call.prefer {
	case "representation":
		out.Resource = res.JSON
	case "OperationOutcome":
		resp.Outcome = informational(fmt.Sprintf("%s/%s version %d", res.Type, res.ID, res.VersionID), res.Warnings)
	}
	return out
}

// entryError turns the failure of entry i into an OperationOutcome error
// whose expressions point into the Bundle.
func entryError(i int, typ string, err error) error {
	he := toHTTPError(err)
	prefix := fmt.Sprintf("Bundle.entry[%d]", i)
	issues := make([]Issue, len(he.issues))
	for k, is := range he.issues {
		switch {
		case is.Expression == "":
			is.Expression = prefix
		case is.Expression == typ: // the resource itself (dom-3)
			is.Expression = prefix + ".resource"
		case strings.HasPrefix(is.Expression, typ+"."), strings.HasPrefix(is.Expression, "Parameters."): // a PATCH entry's resource is its Parameters
			_, rest, _ := strings.Cut(is.Expression, ".")
			is.Expression = prefix + ".resource." + rest
		case strings.HasPrefix(is.Expression, "request.") || is.Expression == "fullUrl":
			is.Expression = prefix + "." + is.Expression
		default:
			is.Expression = prefix + ".resource." + is.Expression
		}
		is.Diagnostics = fmt.Sprintf("entry %d: %s", i, is.Diagnostics)
		issues[k] = is
	}
	return &httpError{status: he.status, issues: issues}
}

// parseEntry reads the request of entry i.
func parseEntry(i int, in bundleEntryIn, base string, lenient bool) (*entry, error) {
	at := func(field string) string { return fmt.Sprintf("Bundle.entry[%d].%s", i, field) }
	if in.Request == nil {
		return nil, fail(http.StatusBadRequest, "required", fmt.Sprintf("entry %d has no request", i), at("request"))
	}
	r := in.Request
	method := strings.ToUpper(r.Method)
	path, query, err := entryURL(r.URL, base)
	if err != nil {
		return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("entry %d: %v", i, err), at("request.url"))
	}
	e := &entry{index: i, in: in}
	if method == http.MethodGet || method == http.MethodHead {
		e.read = path
		if query != "" {
			e.read += "?" + query
		}
		return e, nil
	}
	segs := strings.Split(path, "/")
	if !isResourceType(segs[0]) {
		return nil, fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("entry %d: unknown resource type %q in request.url", i, segs[0]), at("request.url"))
	}
	op := &store.Op{Method: method, Type: segs[0], FullURL: in.FullURL, Options: store.WriteOptions{Lenient: lenient}}
	switch {
	case len(segs) == 1 && method == http.MethodPost && query == "":
		op.Condition = strings.TrimPrefix(strings.TrimPrefix(r.IfNoneExist, segs[0]), "?")
	case len(segs) == 1 && query != "" && method != http.MethodPost:
		op.Condition = query
	case len(segs) == 2 && query == "" && method != http.MethodPost:
		op.ID = segs[1]
	default:
		return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("entry %d: %s %s is not a FHIR interaction", i, method, r.URL), at("request.url"))
	}
	if r.IfMatch != "" {
		n, err := parseIfMatch(r.IfMatch)
		if err != nil {
			return nil, fail(http.StatusBadRequest, "value", fmt.Sprintf("entry %d: %v", i, err), at("request.ifMatch"))
		}
		op.Options.IfMatch, op.Options.IfExists = n, n == nil
	}
	if err := entryBody(i, method, in.Resource, op); err != nil {
		return nil, err
	}
	e.op = op
	return e, nil
}

// entryBody sets the body of a write entry: the resource, or for PATCH the
// FHIRPath Patch (a Parameters resource) or the JSON Patch carried in a
// Binary.
func entryBody(i int, method string, resource json.RawMessage, op *store.Op) error {
	at := fmt.Sprintf("Bundle.entry[%d].resource", i)
	switch method {
	case http.MethodDelete:
		return nil
	case http.MethodPost, http.MethodPut:
		if len(resource) == 0 || string(resource) == "null" {
			return fail(http.StatusBadRequest, "required", fmt.Sprintf("entry %d: %s needs a resource", i, method), at)
		}
		op.Body = resource
		return nil
	case "PATCH":
		var bin struct {
			ResourceType string `json:"resourceType"`
			ContentType  string `json:"contentType"`
			Data         string `json:"data"`
		}
		if json.Unmarshal(resource, &bin) == nil && bin.ResourceType == "Parameters" { // a FHIRPath Patch
			op.Body = resource
			return nil
		}
		if json.Unmarshal(resource, &bin) != nil || bin.ResourceType != "Binary" || !strings.HasPrefix(bin.ContentType, jsonPatchType) {
			return fail(http.StatusBadRequest, "not-supported", fmt.Sprintf("entry %d: PATCH needs a Parameters resource (FHIRPath Patch) or a Binary resource with contentType %s", i, jsonPatchType), at)
		}
		patch, err := base64.StdEncoding.DecodeString(bin.Data)
		if err != nil {
			return fail(http.StatusBadRequest, "value", fmt.Sprintf("entry %d: Binary.data is not base64", i), at+".data")
		}
		op.Body = patch
		return checkJSONPatch(patch, at+".data")
	}
	return fail(http.StatusBadRequest, "value", fmt.Sprintf("entry %d: unknown request method %q", i, method), fmt.Sprintf("Bundle.entry[%d].request.method", i))
}

// entryURL splits a request.url, relative or under this server's base, into
// path and query.
func entryURL(raw, base string) (string, string, error) {
	if raw == "" {
		return "", "", errors.New("request.url is empty")
	}
	// Only the path says whether the URL is absolute: criteria such as
	// identifier=http://...|v carry "://" in the query.
	if strings.HasPrefix(raw, base+"/") {
		raw = strings.TrimPrefix(raw, base+"/")
	} else if p, _, _ := strings.Cut(raw, "?"); strings.Contains(p, "://") {
		return "", "", fmt.Errorf("request.url %s is not under this server's base %s", raw, base)
	}
	path, query, _ := strings.Cut(strings.TrimPrefix(raw, "/"), "?")
	if path == "" {
		return "", "", fmt.Errorf("request.url %q names no resource type", raw)
	}
	return path, query, nil
}

// readEntry serves a GET or HEAD entry as a nested request through the
// server's own routes, with the caller's credentials.
func (s *Server) readEntry(ctx context.Context, call *bundleCall, e *entry) bundleEntryOut {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/fhir/r4/"+e.read, nil)
	if err != nil {
		return failedEntry(fail(http.StatusBadRequest, "value", "invalid request.url", ""))
	}
	req.Host = call.host
	if v := call.header.Get("Authorization"); v != "" {
		req.Header.Set("Authorization", v)
	}
	if strings.HasPrefix(call.base, "https://") { // links in the answer name the client's base
		req.Header.Set("X-Forwarded-Proto", "https")
	}
	for _, h := range []string{"If-None-Match", "If-Modified-Since"} {
		if v := map[string]string{"If-None-Match": e.in.Request.IfNoneMatch, "If-Modified-Since": e.in.Request.IfModifiedSince}[h]; v != "" {
			req.Header.Set(h, v)
		}
	}
	rec := httptest.NewRecorder()
	s.engine.ServeHTTP(rec, req)
	resp := &entryResponse{Status: statusLine(rec.Code), Etag: rec.Header().Get("ETag")}
	if lm, err := http.ParseTime(rec.Header().Get("Last-Modified")); err == nil {
		resp.LastModified = lm.UTC().Format(store.InstantLayout)
	}
	out := bundleEntryOut{Response: resp}
	body := bytes.TrimSpace(rec.Body.Bytes())
	switch {
	case rec.Code >= 400:
		var oo map[string]any
		if json.Unmarshal(body, &oo) == nil {
			resp.Outcome = oo
		}
	case strings.EqualFold(e.in.Request.Method, http.MethodHead) || len(body) == 0:
	default:
		out.Resource = body
	}
	return out
}

// parseIfMatch reads W/"n", "n" or * (nil: any existing version).
func parseIfMatch(h string) (*int, error) {
	h = strings.TrimSpace(h)
	if h == "*" {
		return nil, nil
	}
	n, err := strconv.Atoi(strings.Trim(strings.TrimPrefix(h, "W/"), `"`))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("If-Match %q is not a version ETag such as W/\"1\"", h)
	}
	return &n, nil
}
