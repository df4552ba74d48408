package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"fhirstore/search"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// access is what a caller's SMART scopes let it do.
type access struct {
	scopes  []auth.Scope
	patient string
	reg     *search.Registry
	// topicTypes lists the resource types a topic's notifications carry;
	// nil when the server has no topic-based subscriptions.
	topicTypes func(canonical string) (types []string, found bool, err error)
}

func newAccess(p *auth.Principal, reg *search.Registry) *access {
	return &access{scopes: auth.ParseScopes(p.Scopes), patient: p.Patient, reg: reg}
}

// grant is the caller's grant for interaction i on typ ("*" for every type).
func (a *access) grant(typ string, i auth.Interaction) auth.Reach {
	return auth.Decide(a.scopes, a.patient, typ, i)
}

// inCompartmentType tells whether resources of typ can belong to a patient.
func inCompartmentType(typ string) bool {
	_, ok := search.PatientCompartmentParams(typ)
	return ok
}

// restricted tells whether a PatientOnly grant limits resources of typ:
// those of Patient-compartment types must be the token patient's; the
// others (Practitioner, Organization, Medication…) are no one's record.
func restricted(g auth.Reach, typ string) bool {
	return g == auth.PatientOnly && inCompartmentType(typ)
}

// member tells whether the resource JSON of typ is in the token patient's compartment.
func (a *access) member(typ string, body []byte) bool {
	if a.reg == nil || len(body) == 0 {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return false
	}
	return a.reg.InPatientCompartment(typ, m, a.patient)
}

// canSee tells whether the caller may receive res in a read, search,
// include or history answer.
func (a *access) canSee(res *store.Resource) bool {
	g := max(a.grant(res.Type, auth.Read), a.grant(res.Type, auth.Search))
	switch {
	case g == auth.Denied:
		return false
	case !restricted(g, res.Type):
		return true
	case res.Deleted:
		return false // judged by the version it deleted, see Server.visible
	default:
		return a.member(res.Type, res.JSON)
	}
}

// denied is the 403 of an interaction the token's scopes do not grant.
func denied(typ string, i auth.Interaction) *httpError {
	what := typ
	if typ == "*" {
		what = "all resource types"
	}
	return fail(http.StatusForbidden, "forbidden", fmt.Sprintf("the token's scopes do not grant %s on %s", i, what), "")
}

// outsideCompartment is the 403 of a resource outside the token patient's compartment.
func outsideCompartment(typ, id string) *httpError {
	return fail(http.StatusForbidden, "forbidden", fmt.Sprintf("%s/%s is not in the compartment of the token's patient", typ, id), "")
}

// guard approves each version a write stores: the interaction it
// amounts to (create, update or delete) must be granted on its type and,
// under a patient scope, the version it replaces and the version it writes
// must both be in the token patient's compartment.
func (a *access) guard(current, next *store.Resource) error {
	i := auth.Update
	switch {
	case next.Deleted:
		i = auth.Delete
	case current == nil:
		i = auth.Create
	}
	g := a.grant(next.Type, i)
	if g == auth.Denied {
		return denied(next.Type, i)
	}
	if g == auth.PatientOnly && !inCompartmentType(next.Type) {
		return fail(http.StatusForbidden, "forbidden", fmt.Sprintf("a patient scope cannot %s %s resources", i, next.Type), "")
	}
	if next.Type == "Subscription" && !next.Deleted {
		if err := a.canSubscribe(next.JSON); err != nil {
			return err
		}
	}
	if !restricted(g, next.Type) {
		return nil
	}
	if current != nil && !a.member(current.Type, current.JSON) {
		return outsideCompartment(current.Type, current.ID)
	}
	if !next.Deleted && !a.member(next.Type, next.JSON) {
		return outsideCompartment(next.Type, next.ID)
	}
	return nil
}

// authorizeOp checks a write before it runs and attaches the guard that
// checks each version it stores. Conditional writes need search as well,
// and a patient-scoped caller cannot make them: their criteria would match
// across patients.
func (a *access) authorizeOp(op *store.Op) error {
	if a == nil {
		return denied(op.Type, writeInteraction(op.Method))
	}
	need := []auth.Interaction{writeInteraction(op.Method)}
	if op.Condition != "" {
		need = append(need, auth.Search)
	}
	for _, i := range need {
		switch g := a.grant(op.Type, i); {
		case g == auth.Denied:
			return denied(op.Type, i)
		case g == auth.PatientOnly && op.Condition != "":
			return fail(http.StatusForbidden, "forbidden", "conditional interactions need a user/ or system/ scope; a patient scope cannot run them", "")
		}
	}
	op.Options.Guard = a.guard
	return nil
}

// writeInteraction is the permission a write method needs up front.
func writeInteraction(method string) auth.Interaction {
	switch method {
	case http.MethodPost:
		return auth.Create
	case http.MethodDelete:
		return auth.Delete
	default:
		return auth.Update
	}
}

// accessOf is the access of the request's caller; nil when unauthenticated.
func accessOf(ctx context.Context) *access {
	if c, ok := CallerFrom(ctx); ok {
		return c.access
	}
	return nil
}

// permit checks the caller's grant for interaction i on typ: 403 when
// denied, else the grant (PatientOnly narrows what the handler returns).
func (s *Server) permit(c *gin.Context, typ string, i auth.Interaction) (auth.Reach, error) {
	a := accessOf(c.Request.Context())
	if a == nil {
		return auth.Denied, denied(typ, i)
	}
	g := a.grant(typ, i)
	if g == auth.Denied {
		return g, denied(typ, i)
	}
	return g, nil
}

// interactionOf is the permission a FHIR route needs before it runs; ok
// false for routes that check per entry or per resource (bundles,
// $validate) or need more than one.
func interactionOf(shape, method string) (auth.Interaction, bool) {
	switch shape {
	case "T":
		switch method {
		case http.MethodGet:
			return auth.Search, true
		case http.MethodPost:
			return auth.Create, true
		case http.MethodPut, http.MethodPatch:
			return auth.Update, true
		case http.MethodDelete:
			return auth.Delete, true
		}
	case "T/_search", "T/_history", "T/I/T2":
		return auth.Search, true
	case "T/I", "T/I/_history", "T/I/_history/V":
		switch method {
		case http.MethodGet:
			return auth.Read, true
		case http.MethodPut, http.MethodPatch:
			return auth.Update, true
		case http.MethodDelete:
			return auth.Delete, true
		}
	case "_history":
		return auth.Search, true
	}
	if op := shape[strings.LastIndexByte(shape, '/')+1:]; terminologyOps[op].typ != "" {
		return auth.Read, true // an operation reading stored terminology, GET or POST
	}
	return 0, false
}

// permitRoute checks the permission a FHIR route needs on its type before
// the handler runs (403 when not granted); handlers narrow further.
func (s *Server) permitRoute(c *gin.Context, shape string, segs []string) error {
	i, ok := interactionOf(shape, c.Request.Method)
	if !ok {
		if shape == "T/$validate" || shape == "T/I/$validate" {
			return s.permitValidate(c, segs[0])
		}
		return nil
	}
	typ := "*"
	switch {
	case shape == "T/I/T2":
		typ = segs[2]
	case len(segs) > 0 && shape != "_history":
		typ = segs[0]
	}
	_, err := s.permit(c, typ, i)
	return err
}

// permitValidate lets $validate run for callers that may create or update
// the type: it reads no data but says what a write would accept.
func (s *Server) permitValidate(c *gin.Context, typ string) error {
	if _, err := s.permit(c, typ, auth.Create); err == nil {
		return nil
	}
	_, err := s.permit(c, typ, auth.Update)
	return err
}

// checkVisible answers 403 when res (read or vread, possibly a deletion)
// is outside what the caller may see; nil res passes (the read's own
// error answers).
func (s *Server) checkVisible(c *gin.Context, res *store.Resource) error {
	if res == nil || s.visible(c.Request.Context(), c.GetString(tenantKey), res) {
		return nil
	}
	return outsideCompartment(res.Type, res.ID)
}

// visible tells whether the caller may see res. A deletion under a patient
// scope is judged by the version it deleted.
func (s *Server) visible(ctx context.Context, tenant string, res *store.Resource) bool {
	a := accessOf(ctx)
	if a == nil {
		return false
	}
	if !res.Deleted || res.VersionID < 2 {
		return a.canSee(res)
	}
	g := max(a.grant(res.Type, auth.Read), a.grant(res.Type, auth.Search))
	if !restricted(g, res.Type) {
		return g != auth.Denied
	}
	prev, err := s.store.VRead(ctx, tenant, res.Type, res.ID, strconv.Itoa(res.VersionID-1))
	return err == nil && a.canSee(prev)
}

// visibleOnly keeps the resources the caller may see.
func (s *Server) visibleOnly(c *gin.Context, list []*store.Resource) []*store.Resource {
	ctx, tenant := c.Request.Context(), c.GetString(tenantKey)
	return slices.DeleteFunc(list, func(r *store.Resource) bool { return !s.visible(ctx, tenant, r) })
}

// searchesCompartment tells whether the caller may search typ in the
// compartment of patient id: with a user or system scope, or a patient
// scope when id is the token's patient.
func (a *access) searchesCompartment(typ, id string) bool {
	if a == nil {
		return false
	}
	switch a.grant(typ, auth.Search) {
	case auth.Full:
		return true
	case auth.PatientOnly:
		return a.patient == id
	}
	return false
}

// canSubscribe checks that the caller may read every resource a
// Subscription's criteria can match, since its notifications carry them:
// read access to the criteria's type, not limited to a patient's records.
func (a *access) canSubscribe(body []byte) error {
	var sub struct {
		Criteria string `json:"criteria"`
	}
	if json.Unmarshal(body, &sub) != nil {
		return nil // not readable: validation answers it
	}
	types := []string{}
	if typ, _, _ := strings.Cut(sub.Criteria, "?"); typ != "" {
		types = []string{typ}
	}
	if strings.Contains(sub.Criteria, "://") { // a topic's canonical
		if a.topicTypes == nil {
			return nil // validation answers it
		}
		list, found, err := a.topicTypes(sub.Criteria)
		if err != nil {
			return err
		}
		if !found {
			return nil // validation refuses the unknown topic
		}
		types = list
	}
	for _, typ := range types {
		g := max(a.grant(typ, auth.Read), a.grant(typ, auth.Search))
		if g == auth.Denied {
			return fail(http.StatusForbidden, "forbidden", fmt.Sprintf("the token's scopes do not grant read on %s, which the subscription's notifications carry", typ), "Subscription.criteria")
		}
		if restricted(g, typ) {
			return fail(http.StatusForbidden, "forbidden", fmt.Sprintf("a patient scope cannot subscribe to %s resources: notifications would not be limited to the patient's records", typ), "Subscription.criteria")
		}
	}
	return nil
}
