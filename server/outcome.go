package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"fhirstore/server/auth"
	"fhirstore/store"
)

// Issue is one entry of an OperationOutcome.
type Issue = store.Issue

// httpError carries a status and the issues to report.
type httpError struct {
	status int
	issues []Issue
	header http.Header
}

func (e *httpError) Error() string {
	if len(e.issues) > 0 {
		return e.issues[0].Diagnostics
	}
	return http.StatusText(e.status)
}

// fail builds an error with one issue.
func fail(status int, code, msg, expr string) *httpError {
	return &httpError{status: status, issues: []Issue{{Severity: "error", Code: code, Diagnostics: msg, Expression: expr}}}
}

// errorTable maps store errors to statuses and issue codes, first match wins.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{store.ErrSnapshotExpired, http.StatusGone, "processing"},
	{store.ErrNotFound, http.StatusNotFound, "not-found"},
	{store.ErrGone, http.StatusGone, "deleted"},
	{store.ErrPreconditionFailed, http.StatusPreconditionFailed, "conflict"},
	{store.ErrConflict, http.StatusConflict, "conflict"},
	{store.ErrPatchFailed, http.StatusUnprocessableEntity, "processing"},
	{store.ErrUnknownType, http.StatusNotFound, "not-supported"},
	{store.ErrInvalidID, http.StatusBadRequest, "value"},
	{store.ErrTenantNotFound, http.StatusNotFound, "not-found"},
	{store.ErrUnavailable, http.StatusServiceUnavailable, "transient"},
	{store.ErrRecovering, http.StatusServiceUnavailable, "transient"},
	{store.ErrQuarantined, http.StatusInternalServerError, "exception"},
	{store.ErrCorrupt, http.StatusInternalServerError, "exception"},
	{auth.ErrInvalidToken, http.StatusUnauthorized, "login"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "timeout"},
}

// toHTTPError classifies any error; unknown ones are internal (500) and
// their text never reaches the client.
func toHTTPError(err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	var inv *store.InvalidError
	if errors.As(err, &inv) {
		status := http.StatusUnprocessableEntity
		if inv.Syntax {
			status = http.StatusBadRequest
		}
		return &httpError{status: status, issues: inv.Issues}
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			msg := err.Error()
			if row.status >= 500 && !held(err) { // driver messages name internal addresses
				msg = "the database did not answer in time; try again later"
			}
			return fail(row.status, row.code, msg, "")
		}
	}
	return fail(http.StatusInternalServerError, "exception", "internal server error", "")
}

// held tells the errors of resources held by an unapplied transaction or
// damaged in storage, whose messages the store writes for clients.
func held(err error) bool {
	var ce *store.CorruptError
	if errors.As(err, &ce) {
		return true
	}
	return errors.Is(err, store.ErrRecovering) || errors.Is(err, store.ErrQuarantined)
}

// abort answers the request with an error for err: an OperationOutcome on
// FHIR paths, the REST error JSON on /api paths.
func (s *Server) abort(c *gin.Context, err error) {
	he := toHTTPError(err)
	if he.status >= 500 && !errors.Is(err, context.Canceled) {
		s.log.Error("request failed", zap.String("request_id", requestID(c)), zap.Error(err))
	}
	for k, vs := range he.header {
		for _, v := range vs {
			c.Writer.Header().Add(k, v)
		}
	}
	if strings.HasPrefix(c.Request.URL.Path, restPrefix+"/") {
		c.JSON(he.status, restError(he))
	} else {
		writeJSON(c, he.status, operationOutcome(he.issues))
	}
	c.Abort()
}

// restError is the /api error body: {"error": {"code", "message", "details"}}.
func restError(he *httpError) gin.H {
	body := gin.H{"code": strings.ReplaceAll(strings.ToLower(http.StatusText(he.status)), " ", "_"), "message": he.Error()}
	if len(he.issues) > 1 {
		var details []string
		for _, is := range he.issues[1:] {
			details = append(details, is.Diagnostics)
		}
		body["details"] = details
	}
	return gin.H{"error": body}
}

// operationOutcome renders issues as an OperationOutcome resource.
func operationOutcome(issues []Issue) map[string]any {
	out := make([]map[string]any, 0, len(issues))
	for _, is := range issues {
		m := map[string]any{"severity": is.Severity, "code": is.Code}
		if is.Diagnostics != "" {
			m["diagnostics"] = is.Diagnostics
		}
		if is.Key != "" {
			m["details"] = invariantDetails(is)
		}
		if is.Expression != "" {
			m["expression"] = []string{is.Expression}
		}
		out = append(out, m)
	}
	return map[string]any{"resourceType": "OperationOutcome", "issue": out}
}

// invariantDetails names the invariant an issue reports: the constraint key
// as a code of the StructureDefinition that defines it (the key alone is
// unique only there: Task, Parameters and TestReport each have an inv-1),
// and the key with its human text.
func invariantDetails(is Issue) map[string]any {
	coding := map[string]any{"code": is.Key}
	if is.Source != "" {
		coding["system"] = is.Source
	}
	return map[string]any{"coding": []any{coding}, "text": is.Diagnostics}
}

// informational is an OperationOutcome for a successful interaction.
func informational(msg string, warnings []Issue) map[string]any {
	issues := append([]Issue{{Severity: "information", Code: "informational", Diagnostics: msg}}, warnings...)
	return operationOutcome(issues)
}
