package server

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"fhirstore/search"
	"fhirstore/server/auth"
)

// lastnOperation advertises Observation/$lastn.
var lastnOperation = map[string]string{"name": "lastn", "definition": "http://hl7.org/fhir/OperationDefinition/Observation-lastn"}

// maxLastN bounds the max parameter of $lastn.
const maxLastN = 1000

// namesSubject tells whether params name a patient or subject, as $lastn
// requires (it also bounds what the operation reads).
func namesSubject(params url.Values) bool {
	for k := range params {
		code, _, _ := strings.Cut(k, ":")
		code, _, _ = strings.Cut(code, ".")
		if code == "patient" || code == "subject" {
			return true
		}
	}
	return false
}

// lastn serves Observation/$lastn (GET, or POST with a form body): the
// max most recent Observations of each code for each patient among those
// the other parameters (patient or subject, required; category, code,
// date, and any Observation search parameter) match, as a searchset Bundle.
func (s *Server) lastn(c *gin.Context, typ string) {
	if typ != "Observation" {
		s.abort(c, fail(http.StatusNotFound, "not-supported", "$lastn is an operation of Observation, not of "+typ, ""))
		return
	}
	params, ok := s.searchRequest(c)
	if !ok {
		return
	}
	max := 1
	if v := params.Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLastN {
			s.abort(c, fail(http.StatusBadRequest, "value", "max must be an integer from 1 to "+strconv.Itoa(maxLastN)+", not "+quote(v), "max"))
			return
		}
		max = n
	}
	params.Del("max")
	if !namesSubject(params) {
		s.abort(c, fail(http.StatusBadRequest, "required", "$lastn needs the patient or subject parameter", "patient"))
		return
	}
	g, err := s.permit(c, typ, auth.Search)
	if err != nil {
		s.abort(c, err)
		return
	}
	if restricted(g, typ) { // a patient scope sees its own observations only
		params = cloneValues(params)
		params.Add("patient", "Patient/"+accessOf(c.Request.Context()).patient)
	}
	reg, err := s.registry(c)
	if err != nil {
		s.abort(c, err)
		return
	}
	q, err := reg.Parse(typ, params, search.ParseOptions{Strict: prefer(c, "handling") == "strict"})
	if err != nil {
		s.abort(c, searchError(err))
		return
	}
	page, err := s.store.LastN(c.Request.Context(), c.GetString(tenantKey), q, max)
	if err != nil {
		s.abort(c, searchError(err))
		return
	}
	page.Included = s.visibleOnly(c, page.Included)
	b, err := searchBundle(c, typ+"/$lastn", c.Request.URL.Query(), q, page)
	if err != nil {
		s.abort(c, err)
		return
	}
	writeJSON(c, http.StatusOK, b)
}
