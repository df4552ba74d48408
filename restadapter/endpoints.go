package restadapter

// endpoints lists the routes of the REST interface (service contract
// section 4.2).
func (h *Handler) endpoints() []endpoint {
	return []endpoint{
		{"GET " + Prefix + "/clinicians/{clinicianId}/visits", h.listClinicianVisits}, // R1
		{"PUT " + Prefix + "/patients/{patientId}", h.putPatient},                     // R2
		{"GET " + Prefix + "/patients/{patientId}", h.getPatient},                     // R3
		{"POST " + Prefix + "/visits/{visitId}/complete", h.completeVisit},            // R4
		{"GET " + Prefix + "/documents/{documentId}", h.getDocument},                  // R5
		{"GET " + Prefix + "/agencies/{agencyId}/clinicians", h.listAgencyClinicians}, // R6
		{"PUT " + Prefix + "/visits/{visitId}/medications", h.putVisitMedications},    // R7
		{"GET " + Prefix + "/openapi.json", h.openAPI},
	}
}
