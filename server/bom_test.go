package server_test

import (
	"net/http"
	"testing"
)

func TestABodyStartingWithAByteOrderMarkIsAccepted(t *testing.T) {
	e := newEnv(t)
	const bom = "\xEF\xBB\xBF"
	for _, tc := range []struct{ name, contentType, body string }{
		{"JSON", "application/fhir+json", bom + `{"resourceType":"Patient","name":[{"family":"Bom"}]}`},
		{"XML", "application/fhir+xml", bom + `<?xml version="1.0" encoding="UTF-8"?><Patient xmlns="http://hl7.org/fhir"><name><family value="Bom"/></name></Patient>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(request{Method: http.MethodPost, Path: "/Patient", Body: tc.body, Header: map[string]string{"Content-Type": tc.contentType, "Accept": "application/fhir+json"}})
			if r.Status != http.StatusCreated {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
		})
	}
}
