package restadapter

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"fhirstore/store"
)

// Code systems the patient projection matches on.
const (
	systemV2IdentifierType = "http://terminology.hl7.org/CodeSystem/v2-0203"
	systemV2ContactRole    = "http://terminology.hl7.org/CodeSystem/v2-0131"
)

// patientRecord is the REST Patient (service contract 2.12): a projection of
// a FHIR Patient and its Coverages. A field without a FHIR value is omitted.
type patientRecord struct {
	PatientID           string            `json:"patientId"`
	AgencyID            string            `json:"agencyId,omitempty"`
	FirstName           string            `json:"firstName,omitempty"`
	LastName            string            `json:"lastName,omitempty"`
	DateOfBirth         string            `json:"dateOfBirth,omitempty"`
	Gender              string            `json:"gender,omitempty"`
	MedicalRecordNumber string            `json:"medicalRecordNumber,omitempty"`
	Status              string            `json:"status"`
	Address             *patientAddress   `json:"address,omitempty"`
	PhoneNumbers        *patientPhones    `json:"phoneNumbers,omitempty"`
	EmergencyContact    *emergencyContact `json:"emergencyContact,omitempty"`
	InsuranceInfo       *insuranceInfo    `json:"insuranceInfo,omitempty"`
	CreatedAt           string            `json:"createdAt"`
	UpdatedAt           string            `json:"updatedAt"`
}

// patientAddress is the patient's home (else first) FHIR address.
type patientAddress struct {
	Street    string `json:"street,omitempty"`
	Apartment string `json:"apartment,omitempty"`
	City      string `json:"city,omitempty"`
	State     string `json:"state,omitempty"`
	ZipCode   string `json:"zipCode,omitempty"`
}

// patientPhones are the patient's two best-ranked phone numbers.
type patientPhones struct {
	Primary   string `json:"primary,omitempty"`
	Secondary string `json:"secondary,omitempty"`
}

// emergencyContact is the patient's first contact coded C (v2-0131).
type emergencyContact struct {
	Name         string `json:"name,omitempty"`
	Relationship string `json:"relationship,omitempty"`
	Phone        string `json:"phone,omitempty"`
}

// coverageInfo is one FHIR Coverage of the patient.
type coverageInfo struct {
	CoverageID  string `json:"coverageId"`
	Payer       string `json:"payer,omitempty"`
	MemberID    string `json:"memberId,omitempty"`
	GroupNumber string `json:"groupNumber,omitempty"`
	PlanName    string `json:"planName,omitempty"`
	Status      string `json:"status,omitempty"`
}

// insuranceInfo is the patient's primary coverage, with every coverage
// (the primary first) in coverages.
type insuranceInfo struct {
	coverageInfo
	Coverages []coverageInfo `json:"coverages"`
}

// getPatient serves R3: the REST projection of a FHIR Patient.
func (h *Handler) getPatient(w http.ResponseWriter, r *http.Request) {
	ctx, tenant, id := r.Context(), h.tenant(r), r.PathValue("patientId")
	res, p, err := h.readNode(ctx, tenant, "Patient", id)
	if err != nil {
		h.fail(w, r, notFoundAs(err, "patient", id))
		return
	}
	rec, err := h.patientRecord(ctx, tenant, res, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// putPatient serves R2: it applies the fields present in the body to the
// FHIR Patient and stores the result as its next version.
func (h *Handler) putPatient(w http.ResponseWriter, r *http.Request) {
	ctx, tenant, id := r.Context(), h.tenant(r), r.PathValue("patientId")
	var change patientChange
	if err := decodeBody(r, &change); err != nil {
		h.fail(w, r, err)
		return
	}
	res, p, err := h.readNode(ctx, tenant, "Patient", id)
	if err != nil {
		h.fail(w, r, notFoundAs(err, "patient", id))
		return
	}
	res, p, err = h.updatePatient(ctx, tenant, res, p, &change)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rec, err := h.patientRecord(ctx, tenant, res, p)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// updatePatient applies change to the Patient p read as res and writes it
// if anything changed, on condition that res is still the current version.
func (h *Handler) updatePatient(ctx context.Context, tenant string, res *store.Resource, p fhirNode, change *patientChange) (*store.Resource, fhirNode, error) {
	before, err := encodeNode(p)
	if err != nil {
		return nil, nil, err
	}
	if err := change.apply(p); err != nil {
		return nil, nil, err
	}
	after, err := encodeNode(p)
	if err != nil {
		return nil, nil, err
	}
	if bytes.Equal(before, after) {
		return res, p, nil // nothing to change: no new version
	}
	body, err := encodeLike(res.JSON, p)
	if err != nil {
		return nil, nil, err
	}
	vid := res.VersionID
	written, _, err := h.cfg.Store.Update(ctx, tenant, "Patient", res.ID, body, store.WriteOptions{IfMatch: &vid})
	if err != nil {
		return nil, nil, fmt.Errorf("update patient %s: %w", res.ID, err)
	}
	p, err = decodeNode(written)
	return written, p, err
}

// patientRecord projects the Patient p (version res) with its Coverages.
func (h *Handler) patientRecord(ctx context.Context, tenant string, res *store.Resource, p fhirNode) (*patientRecord, error) {
	created, err := h.firstVersionTime(ctx, tenant, res)
	if err != nil {
		return nil, err
	}
	ins, err := h.insurance(ctx, tenant, res.ID)
	if err != nil {
		return nil, err
	}
	name := preferredName(p, false)
	return &patientRecord{
		PatientID:           res.ID,
		AgencyID:            p.node("managingOrganization").refID("Organization"),
		FirstName:           name.first("given"),
		LastName:            name.str("family"),
		DateOfBirth:         p.str("birthDate"),
		Gender:              p.str("gender"),
		MedicalRecordNumber: identifierOfType(p, systemV2IdentifierType, "MR"),
		Status:              patientStatus(p),
		Address:             projectAddress(homeAddress(p, false)),
		PhoneNumbers:        projectPhones(p),
		EmergencyContact:    projectEmergencyContact(p),
		InsuranceInfo:       ins,
		CreatedAt:           created,
		UpdatedAt:           formatInstant(res),
	}, nil
}

// patientStatus is deceased, inactive (active false) or active.
func patientStatus(p fhirNode) string {
	if b, _ := p["deceasedBoolean"].(bool); b || p.str("deceasedDateTime") != "" {
		return "deceased"
	}
	if b, ok := p["active"].(bool); ok && !b {
		return "inactive"
	}
	return "active"
}

// preferredName is the official HumanName, else the usual one, else the
// first; with create, a new official name when there is none.
func preferredName(n fhirNode, create bool) fhirNode {
	names := n.nodes("name")
	for _, use := range []string{"official", "usual"} {
		if i := slices.IndexFunc(names, func(m fhirNode) bool { return m.str("use") == use }); i >= 0 {
			return names[i]
		}
	}
	if len(names) > 0 {
		return names[0]
	}
	if !create {
		return fhirNode{}
	}
	return n.appendNode("name", fhirNode{"use": "official"})
}

// identifierOfType is the value of the first identifier whose type has the
// coding system|code.
func identifierOfType(n fhirNode, system, code string) string {
	for _, id := range n.nodes("identifier") {
		if hasCoding(id.node("type"), system, code) {
			return id.str("value")
		}
	}
	return ""
}

// hasCoding reports whether the CodeableConcept cc has the coding
// system|code (any system when system is empty).
func hasCoding(cc fhirNode, system, code string) bool {
	return codingOf(cc, system, code) != nil
}

// codingOf is the coding system|code of the CodeableConcept cc, or nil.
func codingOf(cc fhirNode, system, code string) fhirNode {
	for _, c := range cc.nodes("coding") {
		if c.str("code") == code && (system == "" || c.str("system") == system) {
			return c
		}
	}
	return nil
}

// homeAddress is the address with use home, else the first; with create, a
// new home address when there is none.
func homeAddress(p fhirNode, create bool) fhirNode {
	addrs := p.nodes("address")
	if i := slices.IndexFunc(addrs, func(a fhirNode) bool { return a.str("use") == "home" }); i >= 0 {
		return addrs[i]
	}
	if len(addrs) > 0 {
		return addrs[0]
	}
	if !create {
		return nil
	}
	return p.appendNode("address", fhirNode{"use": "home"})
}

// projectAddress maps a FHIR Address, nil for none.
func projectAddress(a fhirNode) *patientAddress {
	if a == nil {
		return nil
	}
	line := a.strs("line")
	return &patientAddress{Street: nth(line, 0), Apartment: nth(line, 1), City: a.str("city"), State: a.str("state"), ZipCode: a.str("postalCode")}
}

// phoneIndexes are the positions of the phones in n's telecom ordered by
// rank, unranked ones last in their original order.
func phoneIndexes(n fhirNode) []int {
	telecom := n.nodes("telecom")
	var idx []int
	for i, t := range telecom {
		if t.str("system") == "phone" {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return rankOf(telecom[a]) - rankOf(telecom[b]) })
	return idx
}

// phoneValues are the numbers of n's phones ordered by rank.
func phoneValues(n fhirNode) []string {
	telecom := n.nodes("telecom")
	var out []string
	for _, i := range phoneIndexes(n) {
		out = append(out, telecom[i].str("value"))
	}
	return out
}

// rankOf is a ContactPoint's rank, unranked sorting after every rank.
func rankOf(t fhirNode) int {
	if r, ok := t.int("rank"); ok {
		return r
	}
	return 1 << 30
}

// projectPhones maps the patient's two best-ranked phones, nil without any.
func projectPhones(p fhirNode) *patientPhones {
	ph := phoneValues(p)
	if len(ph) == 0 {
		return nil
	}
	return &patientPhones{Primary: ph[0], Secondary: nth(ph, 1)}
}

// emergencyContactOf is the first contact with the relationship C
// (v2-0131) and that relationship, or nils.
func emergencyContactOf(p fhirNode) (contact, relationship fhirNode) {
	for _, c := range p.nodes("contact") {
		for _, rel := range c.nodes("relationship") {
			if hasCoding(rel, systemV2ContactRole, "C") {
				return c, rel
			}
		}
	}
	return nil, nil
}

// projectEmergencyContact maps contact C, nil without one.
func projectEmergencyContact(p fhirNode) *emergencyContact {
	c, rel := emergencyContactOf(p)
	if c == nil {
		return nil
	}
	out := &emergencyContact{Name: nameText(c.node("name")), Relationship: relationshipText(rel)}
	out.Phone = nth(phoneValues(c), 0)
	return out
}

// nameText is a HumanName's text, else its given names and family.
func nameText(n fhirNode) string {
	if t := n.str("text"); t != "" {
		return t
	}
	return joinNonEmpty(" ", append(n.strs("given"), n.str("family"))...)
}

// relationshipText is the relationship's text, else the display of its C
// coding, else "Emergency Contact".
func relationshipText(rel fhirNode) string {
	if t := rel.str("text"); t != "" {
		return t
	}
	if d := codingOf(rel, systemV2ContactRole, "C").str("display"); d != "" {
		return d
	}
	return "Emergency Contact"
}

// firstVersionTime is when the resource was created: the lastUpdated of its
// version 1.
func (h *Handler) firstVersionTime(ctx context.Context, tenant string, res *store.Resource) (string, error) {
	if res.VersionID == 1 {
		return formatInstant(res), nil
	}
	v1, err := h.cfg.Store.VRead(ctx, tenant, res.Type, res.ID, "1")
	if v1 == nil {
		return "", fmt.Errorf("creation time of %s/%s: %w", res.Type, res.ID, err)
	}
	return formatInstant(v1), nil // a deleted version 1 (ErrGone) still has its time
}

// formatInstant renders when a version was written, as meta.lastUpdated.
func formatInstant(res *store.Resource) string {
	return res.LastUpdated.UTC().Format(store.InstantLayout)
}

// notFoundAs turns a missing or deleted resource into a 404 naming the REST
// patientChange is the R2 body. Every field is optional: an omitted (or
// null) field keeps its FHIR value, a present one replaces just that part.
type patientChange struct {
	FirstName *string `json:"firstName"`
	LastName  *string `json:"lastName"`
	Address   struct {
		Street    *string `json:"street"`
		Apartment *string `json:"apartment"`
		City      *string `json:"city"`
		State     *string `json:"state"`
		ZipCode   *string `json:"zipCode"`
	} `json:"address"`
	PhoneNumbers struct {
		Primary   *string `json:"primary"`
		Secondary *string `json:"secondary"`
	} `json:"phoneNumbers"`
	EmergencyContact struct {
		Name         *string `json:"name"`
		Relationship *string `json:"relationship"`
		Phone        *string `json:"phone"`
	} `json:"emergencyContact"`
}

// patientSetter is one writable REST field: its value in the body, whether
// an empty value is allowed (it removes the FHIR value) and how it changes
// the FHIR Patient.
type patientSetter struct {
	field     string
	clearable bool
	value     func(c *patientChange) *string
	set       func(p fhirNode, v string) error
}

// patientSetters map the R2 body onto the FHIR Patient, in the order they
// apply: a street before its apartment, a contact's name before the rest.
var patientSetters = []patientSetter{
	{"firstName", false, func(c *patientChange) *string { return c.FirstName }, setGivenName},
	{"lastName", false, func(c *patientChange) *string { return c.LastName }, setFamilyName},
	{"address.street", false, func(c *patientChange) *string { return c.Address.Street }, setAddressLine("address.street", 0)},
	{"address.apartment", true, func(c *patientChange) *string { return c.Address.Apartment }, setAddressLine("address.apartment", 1)},
	{"address.city", false, func(c *patientChange) *string { return c.Address.City }, setAddressPart("city")},
	{"address.state", false, func(c *patientChange) *string { return c.Address.State }, setAddressPart("state")},
	{"address.zipCode", false, func(c *patientChange) *string { return c.Address.ZipCode }, setAddressPart("postalCode")},
	{"phoneNumbers.primary", false, func(c *patientChange) *string { return c.PhoneNumbers.Primary }, setPatientPhone("phoneNumbers.primary", 0)},
	{"phoneNumbers.secondary", true, func(c *patientChange) *string { return c.PhoneNumbers.Secondary }, setPatientPhone("phoneNumbers.secondary", 1)},
	{"emergencyContact.name", false, func(c *patientChange) *string { return c.EmergencyContact.Name }, setContactName},
	{"emergencyContact.relationship", false, func(c *patientChange) *string { return c.EmergencyContact.Relationship }, setContactRelationship},
	{"emergencyContact.phone", false, func(c *patientChange) *string { return c.EmergencyContact.Phone }, setContactPhone},
}

// apply changes the FHIR Patient p by every field present in c; the first
// invalid field is a 400 naming it.
func (c *patientChange) apply(p fhirNode) error {
	for _, s := range patientSetters {
		v := s.value(c)
		if v == nil {
			continue
		}
		val := strings.TrimSpace(*v)
		if val == "" && !s.clearable {
			return badRequest(s.field, "must not be empty")
		}
		if err := s.set(p, val); err != nil {
			return err
		}
	}
	return nil
}

// setGivenName replaces the first given name of the preferred name, keeping
// middle names.
func setGivenName(p fhirNode, v string) error {
	if n := preferredName(p, true); n.first("given") != v {
		listSet(n, "given", 0, v)
		refreshNameText(n)
	}
	return nil
}

// setFamilyName replaces the family name of the preferred name.
func setFamilyName(p fhirNode, v string) error {
	if n := preferredName(p, true); n.str("family") != v {
		n["family"] = v
		refreshNameText(n)
	}
	return nil
}

// refreshNameText rewrites a name's text, when it has one, so that it does
// not contradict the parts just changed.
func refreshNameText(n fhirNode) {
	if _, ok := n["text"]; ok {
		parts := append(append(n.strs("prefix"), n.strs("given")...), n.str("family"))
		n["text"] = joinNonEmpty(" ", append(parts, n.strs("suffix")...)...)
	}
}

// setAddressLine sets line i of the home address; an empty value removes it.
func setAddressLine(field string, i int) func(p fhirNode, v string) error {
	return func(p fhirNode, v string) error {
		a := homeAddress(p, v != "")
		line := a.strs("line")
		switch {
		case nth(line, i) == v:
			return nil // unchanged, or nothing to remove
		case v == "":
			listDelete(a, "line", i)
		case len(line) < i:
			return badRequest(field, "needs address.street: the patient's address has no street line")
		default:
			listSet(a, "line", i, v)
		}
		delete(a, "text") // the free-text rendering would contradict the change
		return nil
	}
}

// setAddressPart sets one element of the home address.
func setAddressPart(key string) func(p fhirNode, v string) error {
	return func(p fhirNode, v string) error {
		if a := homeAddress(p, true); a.str(key) != v {
			a[key] = v
			delete(a, "text")
		}
		return nil
	}
}

// setPatientPhone sets the i-th ranked phone of the patient; an empty value
// removes it.
func setPatientPhone(field string, i int) func(p fhirNode, v string) error {
	return func(p fhirNode, v string) error { return setPhone(p, field, i, v) }
}

// setPhone sets the value of the i-th ranked phone of n's telecom, appends a
// phone when i is the next one, or removes it for an empty value.
func setPhone(n fhirNode, field string, i int, v string) error {
	idx := phoneIndexes(n)
	telecom := n.nodes("telecom")
	switch {
	case v == "":
		if i < len(idx) {
			listDelete(n, "telecom", idx[i])
		}
	case i < len(idx):
		telecom[idx[i]]["value"] = v
	case i == len(idx):
		n.appendNode("telecom", fhirNode{"system": "phone", "value": v})
	default:
		return badRequest(field, "needs phoneNumbers.primary: there is no primary phone")
	}
	return nil
}

// setContactName names the emergency contact, adding one (coded C) when the
// patient has none. The REST name is one string, so it replaces the whole
// HumanName by its text.
func setContactName(p fhirNode, v string) error {
	c, _ := emergencyContactOf(p)
	if c != nil && nameText(c.node("name")) == v {
		return nil
	}
	if c == nil {
		c = p.appendNode("contact", fhirNode{"relationship": []any{map[string]any{
			"coding": []any{map[string]any{"system": systemV2ContactRole, "code": "C", "display": "Emergency Contact"}},
		}}})
	}
	c["name"] = map[string]any{"text": v}
	return nil
}

// setContactRelationship sets the text of the emergency contact's C
// relationship, keeping its coding.
func setContactRelationship(p fhirNode, v string) error {
	c, rel := emergencyContactOf(p)
	if c == nil {
		return badRequest("emergencyContact.relationship", "needs emergencyContact.name: the patient has no emergency contact")
	}
	if relationshipText(rel) != v {
		rel["text"] = v
	}
	return nil
}

// setContactPhone sets the emergency contact's first phone.
func setContactPhone(p fhirNode, v string) error {
	c, _ := emergencyContactOf(p)
	if c == nil {
		return badRequest("emergencyContact.phone", "needs emergencyContact.name: the patient has no emergency contact")
	}
	return setPhone(c, "emergencyContact.phone", 0, v)
}

// insurance summarises the patient's Coverages (entered-in-error ones left
// out): the primary one first, nil when there are none.
func (h *Handler) insurance(ctx context.Context, tenant, patientID string) (*insuranceInfo, error) {
	found, err := h.searchAll(ctx, tenant, "Coverage", url.Values{"beneficiary": {"Patient/" + patientID}})
	if err != nil {
		return nil, fmt.Errorf("coverages of patient %s: %w", patientID, err)
	}
	var covs []fhirNode
	for _, res := range found {
		c, err := decodeNode(res)
		if err != nil {
			return nil, err
		}
		if c.str("status") != "entered-in-error" {
			covs = append(covs, c)
		}
	}
	if len(covs) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(covs, compareCoverages)
	payers, err := h.payerNames(ctx, tenant, covs)
	if err != nil {
		return nil, err
	}
	out := &insuranceInfo{}
	for _, c := range covs {
		out.Coverages = append(out.Coverages, projectCoverage(c, payers))
	}
	out.coverageInfo = out.Coverages[0]
	return out, nil
}

// compareCoverages orders active coverages first, then by Coverage.order
// (unordered last), then by id.
func compareCoverages(a, b fhirNode) int {
	activeA, activeB := a.str("status") == "active", b.str("status") == "active"
	if activeA != activeB {
		if activeA {
			return -1
		}
		return 1
	}
	if d := orderOf(a) - orderOf(b); d != 0 {
		return d
	}
	return strings.Compare(a.str("id"), b.str("id"))
}

// orderOf is a Coverage's order, unordered sorting after every order.
func orderOf(c fhirNode) int {
	if n, ok := c.int("order"); ok {
		return n
	}
	return 1 << 30
}

// payerNames are the names of the Organizations that pay the coverages
// whose first payor has no display, by id.
func (h *Handler) payerNames(ctx context.Context, tenant string, covs []fhirNode) (map[string]string, error) {
	var ids []string
	for _, c := range covs {
		payor := firstNode(c.nodes("payor"))
		if id := payor.refID("Organization"); payor.str("display") == "" && id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	names := map[string]string{}
	if len(ids) == 0 {
		return names, nil
	}
	orgs, err := h.searchAll(ctx, tenant, "Organization", url.Values{"_id": {strings.Join(ids, ",")}})
	if err != nil {
		return nil, fmt.Errorf("payers: %w", err)
	}
	for _, res := range orgs {
		o, err := decodeNode(res)
		if err != nil {
			return nil, err
		}
		names[res.ID] = o.str("name")
	}
	return names, nil
}

// projectCoverage is one Coverage in REST form; payers names the paying
// Organizations whose reference has no display.
func projectCoverage(c fhirNode, payers map[string]string) coverageInfo {
	payor := firstNode(c.nodes("payor"))
	payer := payor.str("display")
	if payer == "" {
		payer = payers[payor.refID("Organization")]
	}
	member := c.str("subscriberId")
	if member == "" {
		member = identifierOfType(c, systemV2IdentifierType, "MB")
	}
	plan := classOfType(c, "plan")
	planName := plan.str("name")
	if planName == "" {
		planName = plan.str("value")
	}
	return coverageInfo{
		CoverageID:  c.str("id"),
		Payer:       payer,
		MemberID:    member,
		GroupNumber: classOfType(c, "group").str("value"),
		PlanName:    planName,
		Status:      c.str("status"),
	}
}

// classOfType is the Coverage class whose type has the code, or nil.
func classOfType(c fhirNode, code string) fhirNode {
	for _, cl := range c.nodes("class") {
		if hasCoding(cl.node("type"), "", code) {
			return cl
		}
	}
	return nil
}
