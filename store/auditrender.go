package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// The AuditEvent of a record, as JSON: typed, so that rendering costs
// little (a map marshalled sorts its keys). It follows the Basic Audit
// Log Patterns: a RESTful operation whose subtype is the interaction,
// the requestor as agent, the server as source, the resource addressed
// (and the patient concerned) as entities.
type (
	auditEventJSON struct {
		ResourceType string        `json:"resourceType"`
		ID           string        `json:"id"`
		Meta         auditMeta     `json:"meta"`
		Type         codingJSON    `json:"type"`
		Subtype      []codingJSON  `json:"subtype,omitempty"`
		Action       string        `json:"action,omitempty"`
		Recorded     string        `json:"recorded"`
		Outcome      string        `json:"outcome"`
		OutcomeDesc  string        `json:"outcomeDesc"`
		Agent        []auditAgent  `json:"agent"`
		Source       auditSource   `json:"source"`
		Entity       []auditEntity `json:"entity"`
	}
	auditMeta struct {
		VersionID   string `json:"versionId"`
		LastUpdated string `json:"lastUpdated"`
	}
	codingJSON struct {
		System  string `json:"system"`
		Code    string `json:"code"`
		Display string `json:"display,omitempty"`
	}
	auditAgent struct {
		Who       auditWho      `json:"who"`
		AltID     string        `json:"altId,omitempty"`
		Name      string        `json:"name,omitempty"`
		Requestor bool          `json:"requestor"`
		Network   *auditNetwork `json:"network,omitempty"`
	}
	auditWho struct {
		Identifier *identifierJSON `json:"identifier,omitempty"`
		Display    string          `json:"display"`
	}
	identifierJSON struct {
		System string `json:"system"`
		Value  string `json:"value"`
	}
	auditNetwork struct {
		Address string `json:"address"`
		Type    string `json:"type"`
	}
	auditSource struct {
		Site     string       `json:"site,omitempty"`
		Observer displayJSON  `json:"observer"`
		Type     []codingJSON `json:"type"`
	}
	displayJSON struct {
		Display string `json:"display"`
	}
	auditEntity struct {
		What        *referenceJSON `json:"what,omitempty"`
		Type        codingJSON     `json:"type"`
		Role        *codingJSON    `json:"role,omitempty"`
		Description string         `json:"description,omitempty"`
		Query       string         `json:"query,omitempty"`
	}
	referenceJSON struct {
		Reference string `json:"reference"`
	}
)

// Codings every AuditEvent of the trail carries.
var (
	auditRESTType     = codingJSON{System: "http://terminology.hl7.org/CodeSystem/audit-event-type", Code: "rest", Display: "RESTful Operation"}
	auditEntityObject = codingJSON{System: "http://terminology.hl7.org/CodeSystem/audit-entity-type", Code: "2", Display: "System Object"}
	auditEntityPerson = codingJSON{System: "http://terminology.hl7.org/CodeSystem/audit-entity-type", Code: "1", Display: "Person"}
	auditRolePatient  = codingJSON{System: "http://terminology.hl7.org/CodeSystem/object-role", Code: "1", Display: "Patient"}
	auditServerSource = []codingJSON{{System: "http://terminology.hl7.org/CodeSystem/security-source-type", Code: "4", Display: "Application Server"}}
)

// render is the AuditEvent of r, stored at lastUpdated, as JSON.
func (r *AuditRecord) render(lastUpdated time.Time) ([]byte, error) {
	out, err := json.Marshal(r.auditEvent(lastUpdated))
	if err != nil {
		return nil, fmt.Errorf("render audit record %s: %w", r.Key, err)
	}
	return out, nil
}

// auditEvent is the AuditEvent of r.
func (r *AuditRecord) auditEvent(lastUpdated time.Time) auditEventJSON {
	agent := auditAgent{Who: auditWho{Display: "anonymous"}, Requestor: true, AltID: r.ClientID}
	if r.Subject != "" {
		agent.Who = auditWho{Identifier: &identifierJSON{System: r.issuerOrLocal(), Value: r.Subject}, Display: r.Subject}
		agent.Name = r.Subject
	}
	if r.Address != "" {
		agent.Network = &auditNetwork{Address: r.Address, Type: "2"}
	}
	entity := auditEntity{Type: auditEntityObject, Description: r.Method + " " + r.Path + " (request " + r.RequestID + ")"}
	if ref := r.reference(); ref != "" {
		entity.What = &referenceJSON{Reference: ref}
	}
	if r.Query != "" {
		entity.Query = encodeQuery(r.Query)
	}
	entities := []auditEntity{entity}
	if r.Patient != "" && !(r.Type == "Patient" && r.ID == r.Patient) {
		entities = append(entities, auditEntity{What: &referenceJSON{Reference: "Patient/" + r.Patient}, Type: auditEntityPerson, Role: &auditRolePatient})
	}
	ev := auditEventJSON{
		ResourceType: auditType,
		ID:           r.Key,
		Meta:         auditMeta{VersionID: "1", LastUpdated: lastUpdated.UTC().Format(InstantLayout)},
		Type:         auditRESTType,
		Action:       r.Action,
		Recorded:     r.time().Format(InstantLayout),
		Outcome:      outcomeCode(r.Status),
		OutcomeDesc:  statusText(r.Status),
		Agent:        []auditAgent{agent},
		Source:       auditSource{Site: r.Site, Observer: displayJSON{Display: "fhirstore"}, Type: auditServerSource},
		Entity:       entities,
	}
	if r.Interaction != "" {
		ev.Subtype = []codingJSON{{System: "http://hl7.org/fhir/restful-interaction", Code: r.Interaction}}
	}
	return ev
}
