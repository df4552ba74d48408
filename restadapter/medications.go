package restadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"fhirstore/store"
)

// MedicationEntry is one medication of a visit's list (service contract
// 2.12), projected from a MedicationStatement.
type MedicationEntry struct {
	// MedicationID is the MedicationStatement id. Sent back in a later
	// replace, it keeps that statement (as a new version) instead of
	// creating another.
	MedicationID      string `json:"medicationId,omitempty"`
	Medication        string `json:"medication"`
	UsageStatus       string `json:"usageStatus"`
	ClinicianReviewed *bool  `json:"clinicianReviewed,omitempty"`
	Source            string `json:"source,omitempty"`
	Dose              string `json:"dose,omitempty"`
	UnitOfMeasurement string `json:"unitOfMeasurement,omitempty"`
	Frequency         string `json:"frequency,omitempty"`
	Route             string `json:"route,omitempty"`
	Instructions      string `json:"instructions,omitempty"`
	HighRisk          *bool  `json:"highRisk,omitempty"`
	MatchedToMedDB    *bool  `json:"matchedToMedDb,omitempty"`
}

// VisitMedications is the R7 response: the visit's medication list as
// stored.
type VisitMedications struct {
	VisitID     string            `json:"visitId"`
	Medications []MedicationEntry `json:"medications"`
	UpdatedAt   string            `json:"updatedAt"`
}

// medicationUsageStatuses are the MedicationStatement.status codes a
// usageStatus may take.
func medicationUsageStatuses() []string {
	return []string{"active", "on-hold", "completed", "stopped", "not-taken", "intended", "entered-in-error", "unknown"}
}

// defaultUsageStatus stands in for a usageStatus left out: FHIR requires a
// status, and claiming more than "unknown" would invent a fact.
const defaultUsageStatus = "unknown"

// medicationFlags maps the boolean fields of an entry to their extensions.
func medicationFlags(e *MedicationEntry) []struct {
	url string
	val **bool
} {
	return []struct {
		url string
		val **bool
	}{
		{ExtMedicationClinicianReviewed, &e.ClinicianReviewed},
		{ExtMedicationHighRisk, &e.HighRisk},
		{ExtMedicationMatchedToMedDB, &e.MatchedToMedDB},
	}
}

// Dose forms stored as a Quantity or a Range (FHIR decimals, no sign).
var (
	doseNumber = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]+)?$`)
	doseRange  = regexp.MustCompile(`^((?:0|[1-9][0-9]*)(?:\.[0-9]+)?)\s*-\s*((?:0|[1-9][0-9]*)(?:\.[0-9]+)?)$`)
)

// putVisitMedications serves R7: it replaces the visit's medication list —
// a List of MedicationStatements — in one transaction.
func (h *Handler) putVisitMedications(w http.ResponseWriter, r *http.Request) {
	ctx, tenant, id := r.Context(), h.tenant(r), r.PathValue("visitId")
	entries, err := decodeMedications(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out, err := h.replaceMedications(ctx, tenant, id, entries)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// decodeMedications reads and checks the R7 body, naming the entry of
// each problem (medications[i].field).
func decodeMedications(r *http.Request) ([]MedicationEntry, error) {
	var body struct {
		Medications *[]json.RawMessage `json:"medications"`
	}
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	if body.Medications == nil {
		return nil, badRequest("medications", "is required (an empty array clears the list)")
	}
	entries := make([]MedicationEntry, len(*body.Medications))
	seen := map[string]int{}
	for i, raw := range *body.Medications {
		if err := decodeMedication(i, raw, &entries[i]); err != nil {
			return nil, err
		}
		if err := checkMedication(i, &entries[i]); err != nil {
			return nil, err
		}
		if mid := entries[i].MedicationID; mid != "" {
			if j, dup := seen[mid]; dup {
				return nil, badRequest(entryField(i, "medicationId"), "is also the medicationId of medications[%d]", j)
			}
			seen[mid] = i
		}
	}
	return entries, nil
}

// entryField names field of medication entry i.
func entryField(i int, field string) string {
	if field == "" {
		return fmt.Sprintf("medications[%d]", i)
	}
	return fmt.Sprintf("medications[%d].%s", i, field)
}

// decodeMedication decodes entry i strictly: unknown fields and wrong types
// are 400s naming the entry's field.
func decodeMedication(i int, raw json.RawMessage, e *MedicationEntry) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(e)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return badRequest(entryField(i, te.Field), "must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badRequest(entryField(i, field), "is not a field of a medication entry")
	default:
		return badRequest(entryField(i, ""), "cannot be read: %v", err)
	}
}

// checkMedication checks entry i and normalises it.
func checkMedication(i int, e *MedicationEntry) error {
	e.Medication = strings.TrimSpace(e.Medication)
	if e.Medication == "" {
		return badRequest(entryField(i, "medication"), "is required and must not be empty")
	}
	if e.UsageStatus == "" {
		e.UsageStatus = defaultUsageStatus
	}
	if !slices.Contains(medicationUsageStatuses(), e.UsageStatus) {
		return badRequest(entryField(i, "usageStatus"), "must be one of %s, not %q", strings.Join(medicationUsageStatuses(), ", "), e.UsageStatus)
	}
	e.Dose = strings.TrimSpace(e.Dose)
	if e.Dose != "" && !doseNumber.MatchString(e.Dose) && !doseRange.MatchString(e.Dose) {
		return badRequest(entryField(i, "dose"), "must be a number such as \"500\" or \"0.5\", or a range such as \"1-2\", not %q", e.Dose)
	}
	if e.MedicationID != "" && store.ValidateID(e.MedicationID) != nil {
		return badRequest(entryField(i, "medicationId"), "%q is not a medication of this visit", e.MedicationID)
	}
	return nil
}

// medicationList is a visit's current medication List, if it has one.
type medicationList struct {
	res  *store.Resource
	body map[string]any
	// statements are the ids of the MedicationStatements it lists.
	statements []string
}

// replaceMedications stores entries as the visit's medication list in one
// transaction: kept statements (by medicationId) get a new version, the
// others are created, those no longer listed are deleted, and the List
// is written (If-Match its version) to list exactly these.
func (h *Handler) replaceMedications(ctx context.Context, tenant, visitID string, entries []MedicationEntry) (*VisitMedications, error) {
	res, err := h.cfg.Store.Read(ctx, tenant, "Encounter", visitID)
	if err != nil {
		return nil, notFoundAs(err, "visit", visitID)
	}
	enc, err := newVisitRecord(res)
	if err != nil {
		return nil, err
	}
	patient := jsonStr(jsonGet(enc.body, "subject"), "reference")
	if referencedID(patient, "Patient") == "" {
		return nil, conflict("visit %s has no patient to record medications for", visitID)
	}
	list, err := h.medicationList(ctx, tenant, visitID)
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		if e.MedicationID != "" && !slices.Contains(list.statements, e.MedicationID) {
			return nil, badRequest(entryField(i, "medicationId"), "%q is not a medication of this visit", e.MedicationID)
		}
	}
	plan, err := planMedications(enc, list, entries, time.Now().UTC().Format(store.InstantLayout))
	if err != nil {
		return nil, err
	}
	results, err := h.cfg.Store.Transaction(ctx, tenant, plan.ops)
	if err != nil {
		return nil, plan.blame(fmt.Errorf("replace medications of visit %s: %w", visitID, err))
	}
	return plan.response(visitID, results)
}

// blame names the entry whose MedicationStatement the store found invalid,
// so the 400 says medications[i] rather than an op of the transaction.
func (p *medicationPlan) blame(err error) error {
	var opErr *store.OpError
	var inv *store.InvalidError
	if !errors.As(err, &opErr) || !errors.As(err, &inv) {
		return err
	}
	i := slices.Index(p.entryOps, opErr.Index)
	if i < 0 {
		return err
	}
	var issues []string
	for _, is := range inv.Issues {
		issues = append(issues, strings.TrimSpace(is.Expression+": "+is.Diagnostics))
	}
	return badRequest(entryField(i, ""), "would be an invalid FHIR MedicationStatement: %s", strings.Join(issues, "; "))
}

// medicationList finds the visit's medication List: 409 if there are
// several, an empty medicationList if there is none.
func (h *Handler) medicationList(ctx context.Context, tenant, visitID string) (*medicationList, error) {
	found, err := h.searchAll(ctx, tenant, "List", medicationListQuery(visitID))
	if err != nil {
		return nil, fmt.Errorf("medication list of visit %s: %w", visitID, err)
	}
	switch len(found) {
	case 0:
		return &medicationList{}, nil
	case 1:
	default:
		return nil, conflict("visit %s has %d medication lists; merge them through FHIR first", visitID, len(found))
	}
	body, err := decodeExact(found[0].JSON)
	if err != nil {
		return nil, fmt.Errorf("decode List/%s: %w", found[0].ID, err)
	}
	l := &medicationList{res: found[0], body: body}
	entries, _ := body["entry"].([]any)
	for _, e := range entries {
		id := referencedID(jsonStr(jsonGet(e, "item"), "reference"), "MedicationStatement")
		if id != "" && jsonGet(e, "deleted") != true && !slices.Contains(l.statements, id) {
			l.statements = append(l.statements, id)
		}
	}
	return l, nil
}

// medicationListQuery selects the medication List of a visit.
func medicationListQuery(visitID string) url.Values {
	return url.Values{"encounter": {"Encounter/" + visitID}, "code": {SystemLOINC + "|" + CodeMedicationList}}
}

// medicationPlan is the transaction of one replace and where its results
// land.
type medicationPlan struct {
	ops []store.Op
	// listOp and entryOps index ops: the List and each entry's statement.
	listOp   int
	entryOps []int
}

// planMedications builds the ops of a replace.
func planMedications(enc *visitRecord, list *medicationList, entries []MedicationEntry, now string) (*medicationPlan, error) {
	p := &medicationPlan{}
	var items []any
	kept := map[string]bool{}
	for _, e := range entries {
		op := store.Op{Method: "POST", Type: "MedicationStatement", FullURL: "urn:uuid:" + uuid.NewString()}
		ref := op.FullURL
		if e.MedicationID != "" {
			op = store.Op{Method: "PUT", Type: "MedicationStatement", ID: e.MedicationID}
			ref, kept[e.MedicationID] = "MedicationStatement/"+e.MedicationID, true
		}
		body, err := json.Marshal(medicationStatement(enc, e, now))
		if err != nil {
			return nil, fmt.Errorf("encode MedicationStatement: %w", err)
		}
		op.Body = body
		p.entryOps = append(p.entryOps, len(p.ops))
		p.ops = append(p.ops, op)
		items = append(items, map[string]any{"item": map[string]any{"reference": ref}})
	}
	for _, id := range list.statements {
		if !kept[id] {
			// Conditional on the context, so a statement of another visit
			// that a FHIR client listed here is never deleted.
			cond := url.Values{"_id": {id}, "context": {"Encounter/" + enc.res.ID}}
			p.ops = append(p.ops, store.Op{Method: "DELETE", Type: "MedicationStatement", Condition: cond.Encode()})
		}
	}
	op, err := listOp(enc, list, items, now)
	if err != nil {
		return nil, err
	}
	p.listOp = len(p.ops)
	p.ops = append(p.ops, op)
	return p, nil
}

// listOp writes the List: an update (If-Match) of the current one, keeping
// elements this adapter does not manage, or the visit's first.
func listOp(enc *visitRecord, list *medicationList, items []any, now string) (store.Op, error) {
	body := list.body
	if body == nil {
		body = map[string]any{"resourceType": "List", "title": "Medication list"}
	}
	body["status"], body["mode"], body["date"] = "current", "working", now
	body["code"] = map[string]any{"coding": []any{map[string]any{"system": SystemLOINC, "code": CodeMedicationList, "display": DisplayMedicationList}}}
	body["subject"] = map[string]any{"reference": jsonStr(jsonGet(enc.body, "subject"), "reference")}
	body["encounter"] = map[string]any{"reference": "Encounter/" + enc.res.ID}
	if c := encounterClinician(enc.body); c != "" {
		body["source"] = map[string]any{"reference": "Practitioner/" + c}
	}
	delete(body, "entry")
	delete(body, "emptyReason")
	if len(items) > 0 {
		body["entry"] = items
	} else { // a reconciled empty list: the patient takes no medications
		body["emptyReason"] = map[string]any{"coding": []any{map[string]any{
			"system": "http://terminology.hl7.org/CodeSystem/list-empty-reason", "code": "nilknown", "display": "Nil Known"}}}
	}
	var original []byte
	if list.res != nil {
		original = list.res.JSON
	}
	b, err := encodeLike(original, body)
	if err != nil {
		return store.Op{}, fmt.Errorf("encode List: %w", err)
	}
	if list.res == nil { // conditional, so that racing first writes make one List
		return store.Op{Method: "PUT", Type: "List", Condition: medicationListQuery(enc.res.ID).Encode(), Body: b}, nil
	}
	vid := list.res.VersionID
	return store.Op{Method: "PUT", Type: "List", ID: list.res.ID, Body: b, Options: store.WriteOptions{IfMatch: &vid}}, nil
}

// medicationStatement is the MedicationStatement of entry e on the visit.
func medicationStatement(enc *visitRecord, e MedicationEntry, now string) map[string]any {
	ms := map[string]any{
		"resourceType":              "MedicationStatement",
		"status":                    e.UsageStatus,
		"medicationCodeableConcept": map[string]any{"text": e.Medication},
		"subject":                   map[string]any{"reference": jsonStr(jsonGet(enc.body, "subject"), "reference")},
		"context":                   map[string]any{"reference": "Encounter/" + enc.res.ID},
		"dateAsserted":              now,
	}
	if e.MedicationID != "" {
		ms["id"] = e.MedicationID
	}
	if e.Source != "" {
		ms["informationSource"] = map[string]any{"display": e.Source}
	}
	if d := dosage(e); len(d) > 0 {
		ms["dosage"] = []any{d}
	}
	for _, f := range medicationFlags(&e) {
		if *f.val != nil {
			setExtension(ms, f.url, "valueBoolean", **f.val)
		}
	}
	return ms
}

// dosage is the Dosage of an entry: the dose as a Quantity or Range in
// unitOfMeasurement, frequency as timing.code.text, route as route.text,
// instructions as patientInstruction.
func dosage(e MedicationEntry) map[string]any {
	d := map[string]any{}
	if e.Instructions != "" {
		d["patientInstruction"] = e.Instructions
	}
	if e.Frequency != "" {
		d["timing"] = map[string]any{"code": map[string]any{"text": e.Frequency}}
	}
	if e.Route != "" {
		d["route"] = map[string]any{"text": e.Route}
	}
	if dr := doseAndRate(e.Dose, e.UnitOfMeasurement); dr != nil {
		d["doseAndRate"] = []any{dr}
	}
	return d
}

// doseAndRate holds a dose ("500", "1-2") and its unit.
func doseAndRate(dose, unit string) map[string]any {
	quantity := func(v string) map[string]any {
		q := map[string]any{}
		if v != "" {
			q["value"] = json.Number(v)
		}
		if unit != "" {
			q["unit"] = unit
		}
		return q
	}
	if m := doseRange.FindStringSubmatch(dose); m != nil {
		return map[string]any{"doseRange": map[string]any{"low": quantity(m[1]), "high": quantity(m[2])}}
	}
	if dose == "" && unit == "" {
		return nil
	}
	return map[string]any{"doseQuantity": quantity(dose)}
}

// response projects the stored statements and List of a replace.
func (p *medicationPlan) response(visitID string, results []store.Result) (*VisitMedications, error) {
	out := &VisitMedications{VisitID: visitID, Medications: []MedicationEntry{}}
	for _, i := range p.entryOps {
		res := results[i].Resource
		ms, err := decodeExact(res.JSON)
		if err != nil {
			return nil, fmt.Errorf("decode MedicationStatement/%s: %w", res.ID, err)
		}
		out.Medications = append(out.Medications, projectMedication(res.ID, ms))
	}
	out.UpdatedAt = results[p.listOp].Resource.LastUpdated.UTC().Format(store.InstantLayout)
	return out, nil
}

// projectMedication maps a MedicationStatement onto a MedicationEntry.
func projectMedication(id string, ms map[string]any) MedicationEntry {
	d := jsonFirst(ms["dosage"])
	dr := jsonFirst(jsonGet(d, "doseAndRate"))
	e := MedicationEntry{
		MedicationID: id,
		Medication:   jsonStr(ms["medicationCodeableConcept"], "text"),
		UsageStatus:  jsonStr(ms, "status"),
		Source:       jsonStr(ms["informationSource"], "display"),
		Frequency:    jsonStr(jsonGet(jsonGet(d, "timing"), "code"), "text"),
		Route:        jsonStr(jsonGet(d, "route"), "text"),
		Instructions: jsonStr(d, "patientInstruction"),
	}
	e.Dose, e.UnitOfMeasurement = projectDose(dr)
	for _, f := range medicationFlags(&e) {
		if b, ok := extensionAny(ms, f.url, "valueBoolean").(bool); ok {
			*f.val = &b
		}
	}
	return e
}

// projectDose reads a doseAndRate item back as dose text and unit.
func projectDose(dr any) (dose, unit string) {
	if q := jsonGet(dr, "doseQuantity"); q != nil {
		return numberText(jsonGet(q, "value")), jsonStr(q, "unit")
	}
	if rg := jsonGet(dr, "doseRange"); rg != nil {
		low, high := jsonGet(rg, "low"), jsonGet(rg, "high")
		return numberText(jsonGet(low, "value")) + "-" + numberText(jsonGet(high, "value")), jsonStr(low, "unit")
	}
	return "", ""
}

// numberText is the text of a JSON number ("" if v is not one).
func numberText(v any) string {
	if n, ok := v.(json.Number); ok {
		return n.String()
	}
	return ""
}

// extensionAny is the value (of any JSON type) of the first extension of
// elem with url.
func extensionAny(elem any, url, valueKey string) any {
	exts, _ := jsonGet(elem, "extension").([]any)
	for _, x := range exts {
		if jsonStr(x, "url") == url {
			return jsonGet(x, valueKey)
		}
	}
	return nil
}
