package restadapter

import "net/http"

func (h *Handler) putVisitMedications(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusNotImplemented, "not_implemented", "not implemented")
}
