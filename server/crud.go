package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"fhirstore/store"
)

// baseURL is the FHIR base the client addressed, for Location and links.
func baseURL(c *gin.Context) string {
	scheme := "http"
	if c.Request.TLS != nil || strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host + "/fhir/r4"
}

func etag(vid int) string { return fmt.Sprintf(`W/"%d"`, vid) }

// versionHeaders sets ETag and Last-Modified of a version.
func versionHeaders(c *gin.Context, r *store.Resource) {
	c.Header("ETag", etag(r.VersionID))
	c.Header("Last-Modified", r.LastUpdated.UTC().Format(http.TimeFormat))
}

func (s *Server) create(c *gin.Context, typ string) {
	body, err := s.readBody(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	opts, err := writeOptions(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	opts.IfMatch, opts.IfExists = nil, false // If-Match means nothing to a create
	if cond := c.GetHeader("If-None-Exist"); cond != "" {
		s.runOp(c, store.Op{Method: http.MethodPost, Type: typ, Condition: strings.TrimPrefix(strings.TrimPrefix(cond, typ), "?"), Body: body, Options: opts})
		return
	}
	res, err := s.store.Create(c.Request.Context(), c.GetString(tenantKey), typ, body, opts)
	if err != nil {
		s.abort(c, err)
		return
	}
	s.respondWrite(c, http.StatusCreated, res)
}

// writeInput reads a write's preconditions and preferences, then its body.
func (s *Server) writeInput(c *gin.Context) (store.WriteOptions, []byte, error) {
	opts, err := writeOptions(c)
	if err != nil {
		return opts, nil, err
	}
	body, err := s.readBody(c)
	return opts, body, err
}

func (s *Server) update(c *gin.Context, typ, id string) {
	opts, body, err := s.writeInput(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	res, created, err := s.store.Update(c.Request.Context(), c.GetString(tenantKey), typ, id, body, opts)
	if err != nil {
		s.abort(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.respondWrite(c, status, res)
}

// respondWrite answers a create or update as the Prefer header asks:
// return=representation (default), minimal or OperationOutcome.
func (s *Server) respondWrite(c *gin.Context, status int, res *store.Resource) {
	versionHeaders(c, res)
	c.Header("Location", fmt.Sprintf("%s/%s/%s/_history/%d", baseURL(c), res.Type, res.ID, res.VersionID))
	switch preferReturn(c) {
	case "minimal":
		c.Status(status)
		c.Writer.WriteHeaderNow()
	case "OperationOutcome":
		msg := fmt.Sprintf("%s/%s version %d stored", res.Type, res.ID, res.VersionID)
		writeJSON(c, status, informational(msg, res.Warnings))
	default:
		warningHeaders(c, res.Warnings)
		writeRaw(c, status, res.JSON)
	}
}

// warningHeaders reports validation warnings beside a resource body, one
// Warning header (code 299, "miscellaneous persistent warning") per issue.
func warningHeaders(c *gin.Context, issues []store.Issue) {
	for _, is := range issues {
		msg := is.Diagnostics
		if is.Expression != "" {
			msg = is.Expression + ": " + msg
		}
		c.Writer.Header().Add("Warning", "299 fhirstore "+strconv.Quote(msg))
	}
}

func (s *Server) read(c *gin.Context, typ, id string) {
	res, err := s.store.Read(c.Request.Context(), c.GetString(tenantKey), typ, id)
	if err := s.checkVisible(c, res); err != nil {
		s.abort(c, err)
		return
	}
	if err != nil {
		s.abortVersion(c, res, err)
		return
	}
	if accept, ok := c.Get(binaryAcceptKey); ok {
		s.respondBinary(c, res, accept.(string))
		return
	}
	s.respondRead(c, res)
}

func (s *Server) vread(c *gin.Context, typ, id, vid string) {
	res, err := s.store.VRead(c.Request.Context(), c.GetString(tenantKey), typ, id, vid)
	if err := s.checkVisible(c, res); err != nil {
		s.abort(c, err)
		return
	}
	if err != nil {
		s.abortVersion(c, res, err)
		return
	}
	s.respondRead(c, res)
}

// abortVersion reports a read error; a deleted resource's 410 carries the
// ETag of its deletion.
func (s *Server) abortVersion(c *gin.Context, res *store.Resource, err error) {
	if errors.Is(err, store.ErrGone) && res != nil {
		versionHeaders(c, res)
		err = fail(http.StatusGone, "deleted", fmt.Sprintf("%s/%s was deleted (version %d)", res.Type, res.ID, res.VersionID), "")
	}
	s.abort(c, err)
}

// respondRead answers a read, honouring If-None-Match and If-Modified-Since.
func (s *Server) respondRead(c *gin.Context, res *store.Resource) {
	versionHeaders(c, res)
	if inm := c.GetHeader("If-None-Match"); inm != "" && matchesETag(inm, res.VersionID) {
		c.Status(http.StatusNotModified)
		c.Writer.WriteHeaderNow()
		return
	}
	if ims := c.GetHeader("If-Modified-Since"); ims != "" && c.GetHeader("If-None-Match") == "" {
		if t, err := http.ParseTime(ims); err == nil && !res.LastUpdated.Truncate(time.Second).After(t) {
			c.Status(http.StatusNotModified)
			c.Writer.WriteHeaderNow()
			return
		}
	}
	writeRaw(c, http.StatusOK, res.JSON)
}

func (s *Server) delete(c *gin.Context, typ, id string) {
	opts, err := writeOptions(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	res, err := s.store.Delete(c.Request.Context(), c.GetString(tenantKey), typ, id, opts)
	msg := ""
	switch {
	case errors.Is(err, store.ErrGone): // deleting twice is not an error
		msg = fmt.Sprintf("%s/%s was already deleted", typ, id)
	case errors.Is(err, store.ErrNotFound): // nor is deleting what never existed (R4 delete); no version is written
		msg = fmt.Sprintf("%s/%s does not exist; nothing was deleted", typ, id)
	case err != nil:
		s.abort(c, err)
		return
	default:
		versionHeaders(c, res)
		msg = fmt.Sprintf("%s/%s deleted (version %d)", typ, id, res.VersionID)
	}
	s.respondDeleted(c, msg)
}

// writeOptions reads If-Match: W/"n" (or "n") or * (any current version),
// and Prefer: handling=lenient|strict; a malformed If-Match is a 400.
func writeOptions(c *gin.Context) (store.WriteOptions, error) {
	opts := store.WriteOptions{Lenient: prefer(c, "handling") == "lenient"}
	if a := accessOf(c.Request.Context()); a != nil {
		opts.Guard = a.guard
	}
	h := c.GetHeader("If-Match")
	if strings.TrimSpace(h) == "" {
		return opts, nil
	}
	n, err := parseIfMatch(h)
	if err != nil {
		return opts, fail(http.StatusBadRequest, "value", err.Error(), "")
	}
	opts.IfMatch, opts.IfExists = n, n == nil
	return opts, nil
}

func matchesETag(header string, vid int) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.Trim(strings.TrimPrefix(t, "W/"), `"`) == strconv.Itoa(vid) {
			return true
		}
	}
	return false
}

// preferReturn is the return= preference of the Prefer header.
func preferReturn(c *gin.Context) string {
	if v := prefer(c, "return"); v != "" {
		return v
	}
	return "representation"
}

// prefer is the value of one preference of the Prefer header ("" if absent).
func prefer(c *gin.Context, name string) string {
	for _, h := range c.Request.Header.Values("Prefer") {
		for _, part := range strings.FieldsFunc(h, func(r rune) bool { return r == ';' || r == ',' }) {
			if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok && strings.EqualFold(k, name) {
				return strings.Trim(v, `"`)
			}
		}
	}
	return ""
}
