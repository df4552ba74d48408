package restadapter

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"fhirstore/search"
	"fhirstore/store"
)

// FHIR names the visit and medication projections use where FHIR R4 has no
// element of its own. Ours live under https://fhirstore.dev/fhir/; the rest
// are published by HL7, LOINC and UCUM. docs/rest-mapping.md documents each.
const (
	fhirstoreBase = "https://fhirstore.dev/fhir/"

	// SystemVisitType codes a visit type in Encounter.type[0]: code is the
	// visitTypeId, display its name.
	SystemVisitType = fhirstoreBase + "CodeSystem/visit-type"
	// ExtVisitDiscipline (valueCode, on Encounter.type[0]) is the
	// discipline of the visit type, e.g. SN, PT, OT.
	ExtVisitDiscipline = fhirstoreBase + "StructureDefinition/visit-discipline"
	// ExtVisitMileage (valueQuantity in UCUM [mi_i], on Encounter) is the
	// distance the clinician drove for the visit.
	ExtVisitMileage = fhirstoreBase + "StructureDefinition/visit-mileage"
	// ExtVisitSummary (valueString, on Encounter) is the clinician's
	// summary of the completed visit.
	ExtVisitSummary = fhirstoreBase + "StructureDefinition/visit-summary"
	// ExtPlannedStartDate (valueDateTime, on Encounter) is when the visit is
	// scheduled: HL7's cross-version extension for R5's
	// Encounter.plannedStartDate, which R4 lacks.
	ExtPlannedStartDate = "http://hl7.org/fhir/5.0/StructureDefinition/extension-Encounter.plannedStartDate"

	// ExtMedicationClinicianReviewed, ExtMedicationHighRisk and
	// ExtMedicationMatchedToMedDB (valueBoolean, on MedicationStatement)
	// carry the flags of a REST medication entry.
	ExtMedicationClinicianReviewed = fhirstoreBase + "StructureDefinition/medication-clinician-reviewed"
	ExtMedicationHighRisk          = fhirstoreBase + "StructureDefinition/medication-high-risk"
	ExtMedicationMatchedToMedDB    = fhirstoreBase + "StructureDefinition/medication-matched-to-med-db"

	// SystemLOINC and CodeMedicationList code the List that holds a visit's
	// medications (LOINC 10160-0, History of Medication use Narrative).
	SystemLOINC           = "http://loinc.org"
	CodeMedicationList    = "10160-0"
	DisplayMedicationList = "History of Medication use Narrative"

	// SystemUCUM is the unit system of Encounter.length and the mileage.
	SystemUCUM = "http://unitsofmeasure.org"
	// SystemParticipationType codes Encounter.participant.type; PPRF, the
	// primary performer, marks the visit's clinician among several.
	SystemParticipationType = "http://terminology.hl7.org/CodeSystem/v3-ParticipationType"
)

// Visit is the REST projection of an Encounter (service contract 2.12).
type Visit struct {
	VisitID       string          `json:"visitId"`
	EpisodeID     string          `json:"episodeId,omitempty"`
	PatientID     string          `json:"patientId,omitempty"`
	ClinicianID   string          `json:"clinicianId,omitempty"`
	VisitTypeID   string          `json:"visitTypeId,omitempty"`
	VisitType     *VisitType      `json:"visitType,omitempty"`
	ScheduledDate string          `json:"scheduledDate,omitempty"`
	ActualDate    string          `json:"actualDate,omitempty"`
	Duration      *int            `json:"duration,omitempty"`
	Status        string          `json:"status"`
	Location      *VisitLocation  `json:"location,omitempty"`
	Patient       *VisitPatient   `json:"patient,omitempty"`
	Clinician     *VisitClinician `json:"clinician,omitempty"`
	CreatedAt     string          `json:"createdAt"`
	UpdatedAt     string          `json:"updatedAt"`
}

// VisitType is the kind of a visit, from Encounter.type[0].
type VisitType struct {
	VisitTypeID string `json:"visitTypeId,omitempty"`
	Name        string `json:"name,omitempty"`
	Discipline  string `json:"discipline,omitempty"`
	ServiceCode string `json:"serviceCode,omitempty"`
}

// VisitLocation summarises the Location of a visit.
type VisitLocation struct {
	LocationID string        `json:"locationId"`
	Name       string        `json:"name,omitempty"`
	Address    *VisitAddress `json:"address,omitempty"`
}

// VisitAddress is a Location's address, shaped like the REST patient address.
type VisitAddress struct {
	Street    string `json:"street,omitempty"`
	Apartment string `json:"apartment,omitempty"`
	City      string `json:"city,omitempty"`
	State     string `json:"state,omitempty"`
	ZipCode   string `json:"zipCode,omitempty"`
}

// VisitPatient summarises the Patient of a visit.
type VisitPatient struct {
	PatientID string `json:"patientId"`
	FirstName string `json:"firstName,omitempty"`
	LastName  string `json:"lastName,omitempty"`
}

// VisitClinician summarises the Practitioner of a visit.
type VisitClinician struct {
	ClinicianID string `json:"clinicianId"`
	FirstName   string `json:"firstName,omitempty"`
	LastName    string `json:"lastName,omitempty"`
}

// VisitPage is the R1 response.
type VisitPage struct {
	Data       []Visit    `json:"data"`
	Pagination Pagination `json:"pagination"`
}

// visitStatus pairs an Encounter.status with the Visit.status it shows as.
type visitStatus struct{ fhir, rest string }

// visitStatuses is the status table. Encounters that are entered-in-error or
// of unknown status are not visits: they are never listed or completed.
func visitStatuses() []visitStatus {
	return []visitStatus{
		{"planned", "scheduled"},
		{"arrived", "inProgress"},
		{"triaged", "inProgress"},
		{"in-progress", "inProgress"},
		{"onleave", "inProgress"},
		{"finished", "completed"},
		{"cancelled", "cancelled"},
	}
}

// restVisitStatus is the Visit.status of an Encounter.status ("" if none).
func restVisitStatus(fhir string) string {
	for _, s := range visitStatuses() {
		if s.fhir == fhir {
			return s.rest
		}
	}
	return ""
}

// fhirVisitStatuses are the Encounter statuses shown as rest ("" for all).
func fhirVisitStatuses(rest string) []string {
	var out []string
	for _, s := range visitStatuses() {
		if rest == "" || s.rest == rest {
			out = append(out, s.fhir)
		}
	}
	return out
}

// visitRecord is a stored Encounter on its way to becoming a Visit.
type visitRecord struct {
	res  *store.Resource
	body map[string]any
	// created is version 1's lastUpdated, zero until looked up.
	created time.Time
}

// newVisitRecord decodes a stored Encounter, keeping its numbers exact.
func newVisitRecord(res *store.Resource) (*visitRecord, error) {
	body, err := decodeExact(res.JSON)
	if err != nil {
		return nil, fmt.Errorf("decode Encounter/%s: %w", res.ID, err)
	}
	return &visitRecord{res: res, body: body}, nil
}

// scheduled is the instant a visit is planned to start, zero when unknown.
func (v *visitRecord) scheduled() time.Time {
	s := extensionValue(v.body, ExtPlannedStartDate, "valueDateTime")
	if s == "" {
		return time.Time{}
	}
	r, err := search.ParseDateRange(s)
	if err != nil {
		return time.Time{}
	}
	return r.Lo
}

// --- R1: list a clinician's visits ---

// visitQuery is the parsed query of R1.
type visitQuery struct {
	statuses    []string // Encounter statuses to list
	from, to    *time.Time
	page, limit int
}

// parseVisitQuery reads status, dateFrom, dateTo, page and limit.
func parseVisitQuery(q url.Values) (visitQuery, error) {
	var vq visitQuery
	var err error
	if vq.page, vq.limit, err = pageParams(q); err != nil {
		return vq, err
	}
	switch s := q.Get("status"); s {
	case "", "scheduled", "inProgress", "completed":
		vq.statuses = fhirVisitStatuses(s)
	default:
		return vq, badRequest("status", "must be scheduled, inProgress or completed, not %q", s)
	}
	if vq.from, err = parseDateBound(q, "dateFrom", false); err != nil {
		return vq, err
	}
	if vq.to, err = parseDateBound(q, "dateTo", true); err != nil {
		return vq, err
	}
	if vq.from != nil && vq.to != nil && vq.from.After(*vq.to) {
		return vq, badRequest("dateFrom", "is after dateTo")
	}
	return vq, nil
}

// parseDateBound reads a date (YYYY-MM-DD, a UTC day) or a date-time
// (RFC 3339) parameter: a date stands for its first instant, or with end
// its last, so that dateTo includes the whole day.
func parseDateBound(q url.Values, name string, end bool) (*time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	if d, err := time.Parse(time.DateOnly, v); err == nil {
		if end {
			d = d.AddDate(0, 0, 1).Add(-time.Nanosecond)
		}
		return &d, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, badRequest(name, "must be a date (YYYY-MM-DD) or a date-time with a zone (2024-05-01T09:30:00Z), not %q", v)
	}
	t = t.UTC()
	return &t, nil
}

// listClinicianVisits serves R1: the visits of a clinician, filtered by
// status and by when they were created or updated, ordered by scheduled
// date, then id.
func (h *Handler) listClinicianVisits(w http.ResponseWriter, r *http.Request) {
	ctx, tenant, id := r.Context(), h.tenant(r), r.PathValue("clinicianId")
	vq, err := parseVisitQuery(r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := h.cfg.Store.Read(ctx, tenant, "Practitioner", id); err != nil {
		h.fail(w, r, notFoundAs(err, "clinician", id))
		return
	}
	recs, err := h.clinicianVisits(ctx, tenant, id, vq)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	from, to, p := paginate(len(recs), vq.page, vq.limit)
	data, err := h.projectVisits(ctx, tenant, recs[from:to])
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, VisitPage{Data: data, Pagination: p})
}

// clinicianVisits finds the clinician's Encounters that pass vq, sorted.
// dateFrom keeps visits updated on or after it (_lastUpdated, in the
// search); dateTo keeps visits created on or before it, which needs version
// 1 only of those changed since dateTo.
func (h *Handler) clinicianVisits(ctx context.Context, tenant, clinicianID string, vq visitQuery) ([]*visitRecord, error) {
	params := url.Values{
		"participant": {"Practitioner/" + clinicianID},
		"status":      {strings.Join(vq.statuses, ",")},
	}
	if vq.from != nil {
		params.Set("_lastUpdated", "ge"+vq.from.Format(time.RFC3339Nano))
	}
	found, err := h.searchAll(ctx, tenant, "Encounter", params)
	if err != nil {
		return nil, fmt.Errorf("visits of clinician %s: %w", clinicianID, err)
	}
	var recs []*visitRecord
	for _, res := range found {
		rec, err := newVisitRecord(res)
		if err != nil {
			return nil, err
		}
		keep, err := h.createdBy(ctx, tenant, rec, vq.to)
		if err != nil {
			return nil, err
		}
		if keep {
			recs = append(recs, rec)
		}
	}
	sortVisits(recs)
	return recs, nil
}

// createdBy reports whether the visit was created at or before to (always
// when to is nil).
func (h *Handler) createdBy(ctx context.Context, tenant string, rec *visitRecord, to *time.Time) (bool, error) {
	if to == nil || !rec.res.LastUpdated.After(*to) {
		return true, nil
	}
	created, err := h.createdAt(ctx, tenant, rec)
	if err != nil {
		return false, err
	}
	return !created.After(*to), nil
}

// createdAt is when the visit's Encounter was created: version 1's
// lastUpdated, read from history only when there are later versions.
func (h *Handler) createdAt(ctx context.Context, tenant string, rec *visitRecord) (time.Time, error) {
	if !rec.created.IsZero() {
		return rec.created, nil
	}
	rec.created = rec.res.LastUpdated
	if rec.res.VersionID > 1 {
		first, err := h.cfg.Store.VRead(ctx, tenant, "Encounter", rec.res.ID, "1")
		if err != nil {
			return time.Time{}, fmt.Errorf("creation time of Encounter/%s: %w", rec.res.ID, err)
		}
		rec.created = first.LastUpdated
	}
	return rec.created, nil
}

// sortVisits orders visits by scheduled start (unscheduled last), then id.
func sortVisits(recs []*visitRecord) {
	slices.SortStableFunc(recs, func(a, b *visitRecord) int {
		sa, sb := a.scheduled(), b.scheduled()
		switch {
		case sa.IsZero() != sb.IsZero():
			if sa.IsZero() {
				return 1
			}
			return -1
		case !sa.Equal(sb):
			return sa.Compare(sb)
		}
		return cmp.Compare(a.res.ID, b.res.ID)
	})
}

// --- projection ---

// projectVisits turns Encounters into Visits, reading the patients,
// clinicians and locations they reference in one search per type.
func (h *Handler) projectVisits(ctx context.Context, tenant string, recs []*visitRecord) ([]Visit, error) {
	visits := make([]Visit, len(recs))
	for i, rec := range recs {
		created, err := h.createdAt(ctx, tenant, rec)
		if err != nil {
			return nil, err
		}
		visits[i] = projectVisit(rec)
		visits[i].CreatedAt = created.UTC().Format(store.InstantLayout)
	}
	if err := h.summarise(ctx, tenant, visits); err != nil {
		return nil, err
	}
	return visits, nil
}

// projectVisit maps the Encounter's own elements onto a Visit; the
// summaries carry ids only until summarise fills them in.
func projectVisit(rec *visitRecord) Visit {
	e := rec.body
	v := Visit{
		VisitID:       rec.res.ID,
		EpisodeID:     referencedID(jsonStr(jsonFirst(e["episodeOfCare"]), "reference"), "EpisodeOfCare"),
		PatientID:     referencedID(jsonStr(e["subject"], "reference"), "Patient"),
		ClinicianID:   encounterClinician(e),
		VisitType:     projectVisitType(e),
		ScheduledDate: extensionValue(e, ExtPlannedStartDate, "valueDateTime"),
		ActualDate:    jsonStr(e["period"], "start"),
		Duration:      lengthMinutes(e["length"]),
		Status:        restVisitStatus(jsonStr(e, "status")),
		UpdatedAt:     rec.res.LastUpdated.UTC().Format(store.InstantLayout),
	}
	if v.VisitType != nil {
		v.VisitTypeID = v.VisitType.VisitTypeID
	}
	if v.PatientID != "" {
		v.Patient = &VisitPatient{PatientID: v.PatientID}
	}
	if v.ClinicianID != "" {
		v.Clinician = &VisitClinician{ClinicianID: v.ClinicianID}
	}
	if id := referencedID(jsonStr(jsonGet(jsonFirst(e["location"]), "location"), "reference"), "Location"); id != "" {
		v.Location = &VisitLocation{LocationID: id}
	}
	return v
}

// encounterClinician is the id of the Practitioner participant typed
// primary performer (PPRF), else of the first Practitioner participant.
func encounterClinician(e map[string]any) string {
	parts, _ := e["participant"].([]any)
	var firstID string
	for _, p := range parts {
		id := referencedID(jsonStr(jsonGet(p, "individual"), "reference"), "Practitioner")
		if id == "" {
			continue
		}
		if isPrimaryPerformer(p) {
			return id
		}
		if firstID == "" {
			firstID = id
		}
	}
	return firstID
}

// isPrimaryPerformer reports whether an Encounter.participant is typed
// PPRF (v3 ParticipationType primary performer).
func isPrimaryPerformer(p any) bool {
	types, _ := jsonGet(p, "type").([]any)
	for _, t := range types {
		codings, _ := jsonGet(t, "coding").([]any)
		for _, c := range codings {
			if jsonStr(c, "code") == "PPRF" && jsonStr(c, "system") == SystemParticipationType {
				return true
			}
		}
	}
	return false
}

// projectVisitType reads Encounter.type[0]: the visit-type coding (or the
// first coding) gives id and name, the discipline extension the discipline,
// and Encounter.serviceType's first coding the service code.
func projectVisitType(e map[string]any) *VisitType {
	typ, _ := jsonFirst(e["type"]).(map[string]any)
	service := jsonStr(jsonFirst(jsonGet(e["serviceType"], "coding")), "code")
	if typ == nil && service == "" {
		return nil
	}
	codings, _ := typ["coding"].([]any)
	coding := jsonFirst(codings)
	for _, c := range codings {
		if jsonStr(c, "system") == SystemVisitType {
			coding = c
			break
		}
	}
	vt := &VisitType{
		VisitTypeID: jsonStr(coding, "code"),
		Name:        cmp.Or(jsonStr(coding, "display"), jsonStr(typ, "text")),
		Discipline:  extensionValue(typ, ExtVisitDiscipline, "valueCode"),
		ServiceCode: service,
	}
	return vt
}

// lengthMinutes converts a Duration (min, h, s or d in UCUM) to whole minutes.
func lengthMinutes(d any) *int {
	n, ok := jsonNumber(jsonGet(d, "value"))
	if !ok {
		return nil
	}
	perUnit := map[string]float64{"min": 1, "h": 60, "s": 1.0 / 60, "d": 1440}[cmp.Or(jsonStr(d, "code"), "min")]
	if perUnit == 0 {
		return nil
	}
	m := int(math.Round(n * perUnit))
	return &m
}

// summarise fills the patient, clinician and location summaries of visits,
// reading each referenced type in one search.
func (h *Handler) summarise(ctx context.Context, tenant string, visits []Visit) error {
	var patients, clinicians, locations []string
	for _, v := range visits {
		if v.Patient != nil {
			patients = append(patients, v.PatientID)
		}
		if v.Clinician != nil {
			clinicians = append(clinicians, v.ClinicianID)
		}
		if v.Location != nil {
			locations = append(locations, v.Location.LocationID)
		}
	}
	pats, err := h.readByID(ctx, tenant, "Patient", patients)
	if err != nil {
		return err
	}
	pracs, err := h.readByID(ctx, tenant, "Practitioner", clinicians)
	if err != nil {
		return err
	}
	locs, err := h.readByID(ctx, tenant, "Location", locations)
	if err != nil {
		return err
	}
	for i := range visits {
		fillSummaries(&visits[i], pats, pracs, locs)
	}
	return nil
}

// fillSummaries copies names and addresses into one visit's summaries.
func fillSummaries(v *Visit, pats, pracs, locs map[string]map[string]any) {
	if v.Patient != nil {
		v.Patient.FirstName, v.Patient.LastName = personName(pats[v.PatientID])
	}
	if v.Clinician != nil {
		v.Clinician.FirstName, v.Clinician.LastName = personName(pracs[v.ClinicianID])
	}
	if v.Location != nil {
		if loc := locs[v.Location.LocationID]; loc != nil {
			v.Location.Name = jsonStr(loc, "name")
			v.Location.Address = projectVisitAddress(loc["address"])
		}
	}
}

// readByID reads the current versions of ids of one type in one search,
// keyed by id; ids that are not valid FHIR ids are skipped.
func (h *Handler) readByID(ctx context.Context, tenant, typ string, ids []string) (map[string]map[string]any, error) {
	var valid []string
	for _, id := range ids {
		if store.ValidateID(id) == nil && !slices.Contains(valid, id) {
			valid = append(valid, id)
		}
	}
	out := map[string]map[string]any{}
	if len(valid) == 0 {
		return out, nil
	}
	found, err := h.searchAll(ctx, tenant, typ, url.Values{"_id": {strings.Join(valid, ",")}})
	if err != nil {
		return nil, fmt.Errorf("read %s summaries: %w", typ, err)
	}
	for _, res := range found {
		m, err := decodeExact(res.JSON)
		if err != nil {
			return nil, fmt.Errorf("decode %s/%s: %w", typ, res.ID, err)
		}
		out[res.ID] = m
	}
	return out, nil
}

// personName is the first given and the family name of the official name
// of a Patient or Practitioner (else the usual one, else the first).
func personName(person map[string]any) (firstName, lastName string) {
	name := officialName(person["name"])
	return jsonStr(jsonFirst(jsonGet(name, "given")), ""), jsonStr(name, "family")
}

// officialName is the first official HumanName, else the first usual one,
// else the first.
func officialName(v any) any {
	names, _ := v.([]any)
	for _, use := range []string{"official", "usual"} {
		for _, n := range names {
			if jsonStr(n, "use") == use {
				return n
			}
		}
	}
	return jsonFirst(names)
}

// projectVisitAddress maps a FHIR Address: line[0] is the street, line[1]
// the apartment.
func projectVisitAddress(a any) *VisitAddress {
	m, ok := a.(map[string]any)
	if !ok {
		return nil
	}
	lines, _ := m["line"].([]any)
	return &VisitAddress{
		Street:    jsonStr(jsonFirst(lines), ""),
		Apartment: jsonStr(jsonAt(lines, 1), ""),
		City:      jsonStr(m, "city"),
		State:     jsonStr(m, "state"),
		ZipCode:   jsonStr(m, "postalCode"),
	}
}

// --- R4: complete a visit ---

// CompleteVisitRequest is the R4 body.
type CompleteVisitRequest struct {
	EndTime  *string  `json:"endTime"`
	Duration *int     `json:"duration"`
	Mileage  *float64 `json:"mileage"`
	Summary  *string  `json:"summary"`
}

// completion is a checked CompleteVisitRequest.
type completion struct {
	end      time.Time
	endText  string
	duration *int
	mileage  *float64
	summary  *string
}

// checkCompletion validates the body; endTime defaults to now.
func checkCompletion(req CompleteVisitRequest, now time.Time) (completion, error) {
	c := completion{end: now, endText: now.Format(store.InstantLayout), duration: req.Duration, mileage: req.Mileage, summary: req.Summary}
	if req.EndTime != nil {
		t, err := time.Parse(time.RFC3339Nano, *req.EndTime)
		if err != nil {
			return c, badRequest("endTime", "must be a date-time with a zone (2024-05-01T10:30:00Z), not %q", *req.EndTime)
		}
		c.end, c.endText = t, *req.EndTime
	}
	if c.duration != nil && *c.duration < 0 {
		return c, badRequest("duration", "must be 0 or more minutes, not %d", *c.duration)
	}
	if c.mileage != nil && *c.mileage < 0 {
		return c, badRequest("mileage", "must be 0 or more, not %v", *c.mileage)
	}
	return c, nil
}

// completeVisit serves R4: the visit's Encounter becomes finished, with
// the end time, length, mileage and summary, as a new version written only
// if no one changed the Encounter since it was read.
func (h *Handler) completeVisit(w http.ResponseWriter, r *http.Request) {
	ctx, tenant, id := r.Context(), h.tenant(r), r.PathValue("visitId")
	var req CompleteVisitRequest
	if err := decodeBody(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	c, err := checkCompletion(req, time.Now().UTC())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.cfg.Store.Read(ctx, tenant, "Encounter", id)
	if err != nil {
		h.fail(w, r, notFoundAs(err, "visit", id))
		return
	}
	rec, err := newVisitRecord(res)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := complete(rec.body, c); err != nil {
		h.fail(w, r, err)
		return
	}
	visit, err := h.storeVisit(ctx, tenant, rec)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, visit)
}

// complete applies c to an Encounter: 409 unless it is planned or under
// way, 400 when it would end before it started.
func complete(e map[string]any, c completion) error {
	switch status := jsonStr(e, "status"); restVisitStatus(status) {
	case "scheduled", "inProgress":
	case "completed":
		return conflict("the visit is already completed")
	case "cancelled":
		return conflict("the visit is cancelled and cannot be completed")
	default:
		return conflict("a visit in FHIR status %q cannot be completed", status)
	}
	period, _ := e["period"].(map[string]any)
	if period == nil {
		period = map[string]any{}
	}
	if start, ok := period["start"].(string); ok {
		r, err := search.ParseDateRange(start)
		if err == nil && c.end.Before(r.Lo) {
			return badRequest("endTime", "%s is before the visit started (%s)", c.endText, start)
		}
		if err == nil && c.duration == nil {
			m := int(math.Round(c.end.Sub(r.Lo).Minutes()))
			c.duration = &m
		}
	} else if c.duration != nil {
		period["start"] = c.end.Add(-time.Duration(*c.duration) * time.Minute).Format(time.RFC3339Nano)
	}
	period["end"] = c.endText
	e["period"], e["status"] = period, "finished"
	if c.duration != nil {
		e["length"] = map[string]any{"value": *c.duration, "unit": "min", "system": SystemUCUM, "code": "min"}
	}
	if c.mileage != nil {
		setExtension(e, ExtVisitMileage, "valueQuantity", map[string]any{"value": *c.mileage, "unit": "mi", "system": SystemUCUM, "code": "[mi_i]"})
	}
	if c.summary != nil {
		setExtension(e, ExtVisitSummary, "valueString", *c.summary)
	}
	return nil
}

// storeVisit writes the changed Encounter of rec if its version is still
// current (409 otherwise) and returns the Visit it now is.
func (h *Handler) storeVisit(ctx context.Context, tenant string, rec *visitRecord) (*Visit, error) {
	body, err := encodeLike(rec.res.JSON, rec.body)
	if err != nil {
		return nil, fmt.Errorf("encode Encounter/%s: %w", rec.res.ID, err)
	}
	vid := rec.res.VersionID
	res, _, err := h.cfg.Store.Update(ctx, tenant, "Encounter", rec.res.ID, body, store.WriteOptions{IfMatch: &vid})
	if err != nil {
		return nil, err
	}
	updated, err := newVisitRecord(res)
	if err != nil {
		return nil, err
	}
	if vid == 1 { // the version just replaced was the first
		updated.created = rec.res.LastUpdated
	}
	visits, err := h.projectVisits(ctx, tenant, []*visitRecord{updated})
	if err != nil {
		return nil, err
	}
	return &visits[0], nil
}
