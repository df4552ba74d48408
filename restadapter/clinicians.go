package restadapter

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"fhirstore/store"
)

// systemNPI names US National Provider Identifiers.
const systemNPI = "http://hl7.org/fhir/sid/us-npi"

// practitionerBatch bounds the ids of one Practitioner _id search.
const practitionerBatch = 100

// clinicianRecord is the REST Clinician (service contract 2.12): a FHIR
// Practitioner in its PractitionerRole at one agency.
type clinicianRecord struct {
	ClinicianID string `json:"clinicianId"`
	AgencyID    string `json:"agencyId"`
	FirstName   string `json:"firstName,omitempty"`
	LastName    string `json:"lastName,omitempty"`
	Credentials string `json:"credentials,omitempty"`
	NPI         string `json:"npi,omitempty"`
	Role        string `json:"role,omitempty"`
	Email       string `json:"email,omitempty"`
	Status      string `json:"status"`
	CreatedAt   string `json:"createdAt"`

	practitioner *store.Resource // for createdAt, filled for the page only
}

// clinicianList is the R6 response.
type clinicianList struct {
	Data       []*clinicianRecord `json:"data"`
	Pagination Pagination         `json:"pagination"`
}

// listAgencyClinicians serves R6: the practitioners with a PractitionerRole
// at the agency (an Organization), sorted by name and paged.
func (h *Handler) listAgencyClinicians(w http.ResponseWriter, r *http.Request) {
	ctx, tenant, agency := r.Context(), h.tenant(r), r.PathValue("agencyId")
	page, limit, err := pageParams(r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := h.cfg.Store.Read(ctx, tenant, "Organization", agency); err != nil {
		h.fail(w, r, notFoundAs(err, "agency", agency))
		return
	}
	all, err := h.agencyClinicians(ctx, tenant, agency)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	from, to, p := paginate(len(all), page, limit)
	out := clinicianList{Data: all[from:to], Pagination: p}
	for _, c := range out.Data {
		if c.CreatedAt, err = h.firstVersionTime(ctx, tenant, c.practitioner); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// agencyClinicians projects every practitioner with a role at the agency,
// once each, sorted by last name, first name and id. Roles without a
// practitioner, or whose practitioner is missing, are left out.
func (h *Handler) agencyClinicians(ctx context.Context, tenant, agency string) ([]*clinicianRecord, error) {
	roles, err := h.searchAll(ctx, tenant, "PractitionerRole", url.Values{"organization": {"Organization/" + agency}})
	if err != nil {
		return nil, fmt.Errorf("roles at agency %s: %w", agency, err)
	}
	byPractitioner, err := rolesByPractitioner(roles)
	if err != nil {
		return nil, err
	}
	practitioners, err := h.practitioners(ctx, tenant, slices.Sorted(maps.Keys(byPractitioner)))
	if err != nil {
		return nil, err
	}
	out := []*clinicianRecord{}
	for _, res := range practitioners {
		p, err := decodeNode(res)
		if err != nil {
			return nil, err
		}
		out = append(out, projectClinician(agency, res, p, byPractitioner[res.ID]))
	}
	slices.SortFunc(out, compareClinicians)
	return out, nil
}

// rolesByPractitioner groups roles by the Practitioner they name, and picks
// each one's main role: an active one first, then the smallest id.
func rolesByPractitioner(roles []*store.Resource) (map[string]fhirNode, error) {
	out := map[string]fhirNode{}
	for _, res := range roles {
		role, err := decodeNode(res)
		if err != nil {
			return nil, err
		}
		id := role.node("practitioner").refID("Practitioner")
		if id == "" {
			continue
		}
		if cur, ok := out[id]; !ok || compareRoles(role, cur) < 0 {
			out[id] = role
		}
	}
	return out, nil
}

// compareRoles orders active roles first, then by id.
func compareRoles(a, b fhirNode) int {
	if isActive(a) != isActive(b) {
		if isActive(a) {
			return -1
		}
		return 1
	}
	return strings.Compare(a.str("id"), b.str("id"))
}

// isActive reads an optional active element, absent meaning active.
func isActive(n fhirNode) bool {
	b, ok := n["active"].(bool)
	return !ok || b
}

// practitioners reads the Practitioners with the ids, a batch of ids per
// search; missing or deleted ones are left out.
func (h *Handler) practitioners(ctx context.Context, tenant string, ids []string) ([]*store.Resource, error) {
	var out []*store.Resource
	for batch := range slices.Chunk(ids, practitionerBatch) {
		found, err := h.searchAll(ctx, tenant, "Practitioner", url.Values{"_id": {strings.Join(batch, ",")}})
		if err != nil {
			return nil, fmt.Errorf("practitioners: %w", err)
		}
		out = append(out, found...)
	}
	return out, nil
}

// projectClinician maps a Practitioner and its main role at the agency.
func projectClinician(agency string, res *store.Resource, p, role fhirNode) *clinicianRecord {
	name := preferredName(p, false)
	status := "inactive"
	if isActive(p) && isActive(role) {
		status = "active"
	}
	return &clinicianRecord{
		ClinicianID:  res.ID,
		AgencyID:     agency,
		FirstName:    name.first("given"),
		LastName:     name.str("family"),
		Credentials:  credentials(p, name),
		NPI:          identifierOfSystem(p, systemNPI),
		Role:         conceptText(firstNode(role.nodes("code"))),
		Email:        firstNonEmpty(emailOf(role), emailOf(p)),
		Status:       status,
		practitioner: res,
	}
}

// credentials are the name's suffixes (such as RN), else the codes of the
// qualifications, joined by ", ".
func credentials(p, name fhirNode) string {
	if s := joinNonEmpty(", ", name.strs("suffix")...); s != "" {
		return s
	}
	var quals []string
	for _, q := range p.nodes("qualification") {
		c := firstNode(q.node("code").nodes("coding"))
		quals = append(quals, firstNonEmpty(c.str("code"), q.node("code").str("text")))
	}
	return joinNonEmpty(", ", quals...)
}

// identifierOfSystem is the value of the first identifier of the system.
func identifierOfSystem(n fhirNode, system string) string {
	for _, id := range n.nodes("identifier") {
		if id.str("system") == system {
			return id.str("value")
		}
	}
	return ""
}

// emailOf is the best-ranked email of n's telecom.
func emailOf(n fhirNode) string {
	var best fhirNode
	for _, t := range n.nodes("telecom") {
		if t.str("system") == "email" && (best == nil || rankOf(t) < rankOf(best)) {
			best = t
		}
	}
	return best.str("value")
}

// compareClinicians orders by last name, first name (case-insensitively)
// and id.
func compareClinicians(a, b *clinicianRecord) int {
	return cmp.Or(
		strings.Compare(strings.ToLower(a.LastName), strings.ToLower(b.LastName)),
		strings.Compare(strings.ToLower(a.FirstName), strings.ToLower(b.FirstName)),
		strings.Compare(a.ClinicianID, b.ClinicianID),
	)
}
