package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"fhirstore/store"
)

// conditionalWrite serves PUT, PATCH and DELETE on [type]?[criteria] and
// PATCH on [type]/[id]: the interactions that resolve their target (or
// patch its current version) inside the store's transaction path.
func (s *Server) conditionalWrite(c *gin.Context, typ, id string) {
	op := store.Op{Method: c.Request.Method, Type: typ, ID: id}
	if id == "" {
		if op.Condition = criteria(c); op.Condition == "" {
			msg := fmt.Sprintf("%s %s needs search criteria, e.g. %s?identifier=system|value", op.Method, typ, typ)
			s.abort(c, fail(http.StatusBadRequest, "required", msg, ""))
			return
		}
	}
	opts, err := writeOptions(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	op.Options = opts
	switch op.Method {
	case http.MethodPut:
		op.Body, err = s.readBody(c)
	case http.MethodPatch:
		op.Body, err = s.readPatch(c)
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	s.runOp(c, op)
}

// criteria is the request's query string without the parameters that only
// shape the response.
func criteria(c *gin.Context) string {
	q := c.Request.URL.Query()
	q.Del("_format")
	q.Del("_pretty")
	return q.Encode()
}

// runOp runs one write through the store's transaction path and answers it.
func (s *Server) runOp(c *gin.Context, op store.Op) {
	if a := accessOf(c.Request.Context()); a != nil {
		if err := a.authorizeOp(&op); err != nil {
			s.abort(c, err)
			return
		}
	}
	results, err := s.store.Transaction(c.Request.Context(), c.GetString(tenantKey), []store.Op{op})
	if err != nil {
		var oe *store.OpError
		if errors.As(err, &oe) {
			err = oe.Err
		}
		s.abort(c, err)
		return
	}
	r := results[0]
	switch r.Outcome {
	case store.Created:
		s.respondWrite(c, http.StatusCreated, r.Resource)
	case store.Updated, store.Existing:
		s.respondWrite(c, http.StatusOK, r.Resource)
	case store.Deleted:
		versionHeaders(c, r.Resource)
		s.respondDeleted(c, fmt.Sprintf("%s/%s deleted (version %d)", r.Resource.Type, r.Resource.ID, r.Resource.VersionID))
	case store.NoChange:
		s.respondDeleted(c, "nothing to delete: no current resource matches")
	}
}

// respondDeleted answers a delete: 204, or 200 with an OperationOutcome
// when the client prefers one.
func (s *Server) respondDeleted(c *gin.Context, msg string) {
	if preferReturn(c) == "OperationOutcome" {
		writeJSON(c, http.StatusOK, informational(msg, nil))
		return
	}
	c.Status(http.StatusNoContent)
	c.Writer.WriteHeaderNow()
}
