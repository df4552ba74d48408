package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"fhirstore/server"
	"fhirstore/store"
	"fhirstore/store/engine"
)

// provenanceJSON is a Provenance with n targets.
func provenanceJSON(n int) string {
	targets := make([]string, n)
	for i := range targets {
		targets[i] = fmt.Sprintf(`{"reference":"Patient/p%05d"}`, i)
	}
	return `{"resourceType":"Provenance","target":[` + strings.Join(targets, ",") + `],"recorded":"2024-01-01T00:00:00Z","agent":[{"who":{"reference":"Practitioner/x"}}]}`
}

// TestWriteOverEngineLimitIs422: a write the engine would refuse (here an
// index key over the limit of FerretDB 1.x on PostgreSQL) is a 422 naming
// the resource and the limit, alone, in a transaction and in a batch, and
// nothing of it is stored.
func TestWriteOverEngineLimitIs422(t *testing.T) {
	e := newEnv(t, func(_ *server.Config, o *store.Options) {
		o.Limits = &engine.Limits{MaxDocumentBytes: 16 * engine.MiB, MaxIndexKeyBytes: 2400, WholeArrayKeys: true, Source: "FerretDB 1.x (on PostgreSQL)"}
	})
	big := provenanceJSON(200)
	entry := func(body string) string {
		return `{"request":{"method":"POST","url":"Provenance"},"resource":` + body + `}`
	}
	patient := `{"request":{"method":"POST","url":"Patient"},"resource":{"resourceType":"Patient"}}`
	tests := []struct {
		name, path, body string
		status           int
		at               string
	}{
		{"create", "/Provenance", big, http.StatusUnprocessableEntity, "Provenance"},
		{"update", "/Provenance/big", strings.Replace(big, `"Provenance",`, `"Provenance","id":"big",`, 1), http.StatusUnprocessableEntity, "Provenance"},
		{"transaction", "", `{"resourceType":"Bundle","type":"transaction","entry":[` + patient + `,` + entry(big) + `]}`, http.StatusUnprocessableEntity, "Bundle.entry[1].resource"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if strings.HasPrefix(tc.path, "/Provenance/") {
				method = http.MethodPut
			}
			r := e.do(request{Method: method, Path: tc.path, Body: tc.body})
			wantOutcome(t, r, tc.status, tc.at)
			if !strings.Contains(string(r.Body), "Provenance/") || !strings.Contains(string(r.Body), "at most 2400 bytes") {
				t.Fatalf("the outcome names neither the resource nor the limit: %s", r.Body)
			}
		})
	}
	t.Run("batch", func(t *testing.T) {
		r := e.post("", `{"resourceType":"Bundle","type":"batch","entry":[`+patient+`,`+entry(big)+`,`+entry(provenanceJSON(3))+`]}`)
		if r.Status != http.StatusOK {
			t.Fatalf("batch: %d %s", r.Status, r.Body)
		}
		entries := r.JSON(t)["entry"].([]any)
		statuses := make([]string, len(entries))
		for i, en := range entries {
			statuses[i] = en.(map[string]any)["response"].(map[string]any)["status"].(string)
		}
		if !strings.HasPrefix(statuses[0], "201") || !strings.HasPrefix(statuses[1], "422") || !strings.HasPrefix(statuses[2], "201") {
			t.Fatalf("batch entry statuses %v", statuses)
		}
	})
	r := e.get("/Provenance?_summary=count")
	if total := r.JSON(t)["total"]; fmt.Sprint(total) != "1" {
		t.Fatalf("Provenances stored: %v, want only the batch's small one", total)
	}
}
