package restadapter

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPIDocument is the OpenAPI 3.1 description of R1–R7, written by hand
// from the handlers. openapi_test.go validates real responses against it,
// so a change to a response shape fails there until the document follows.
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPI serves the OpenAPI document.
func (h *Handler) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPIDocument)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
