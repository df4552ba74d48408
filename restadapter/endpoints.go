package restadapter

import "fhirstore/server/auth"

// endpoints lists the routes of the REST interface (service contract
// section 4.2), each with the FHIR access it needs: the resource types it
// reads, searches or writes, as SMART permissions.
func (h *Handler) endpoints() []endpoint {
	return []endpoint{
		{"GET " + Prefix + "/clinicians/{clinicianId}/visits", h.listClinicianVisits, // R1
			needs{"Practitioner": "r", "Encounter": "s", "Patient": "s", "Location": "s"}},
		{"PUT " + Prefix + "/patients/{patientId}", h.putPatient, // R2
			needs{"Patient": "ru", "Coverage": "s", "Organization": "s"}},
		{"GET " + Prefix + "/patients/{patientId}", h.getPatient, // R3
			needs{"Patient": "r", "Coverage": "s", "Organization": "s"}},
		{"POST " + Prefix + "/visits/{visitId}/complete", h.completeVisit, // R4
			needs{"Encounter": "ru", "Patient": "s", "Practitioner": "s", "Location": "s"}},
		{"GET " + Prefix + "/documents/{documentId}", h.getDocument, // R5
			needs{"DocumentReference": "r"}},
		{"GET " + Prefix + "/agencies/{agencyId}/clinicians", h.listAgencyClinicians, // R6
			needs{"Organization": "r", "PractitionerRole": "s", "Practitioner": "s"}},
		{"PUT " + Prefix + "/visits/{visitId}/medications", h.putVisitMedications, // R7
			needs{"Encounter": "r", "List": "rscu", "MedicationStatement": "rcud"}},
		{"GET " + Prefix + "/openapi.json", h.openAPI, nil},
	}
}

// needs maps resource types to the SMART permission letters (cruds) an
// endpoint needs on them.
type needs map[string]string

// each calls f for every type and permission of n until f says false.
func (n needs) each(f func(typ string, i auth.Interaction) bool) bool {
	for typ, perms := range n {
		for _, p := range perms {
			if !f(typ, auth.Interaction(p)) {
				return false
			}
		}
	}
	return true
}
