package restadapter

import "net/http"

func (h *Handler) listClinicianVisits(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusNotImplemented, "not_implemented", "not implemented")
}

func (h *Handler) completeVisit(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusNotImplemented, "not_implemented", "not implemented")
}
