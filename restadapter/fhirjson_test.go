package restadapter_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestRESTWritesKeepTheStoredLayout: a change through the REST interface
// stores the FHIR resource with its keys in their old order (resourceType
// first) and its decimals as written.
func TestRESTWritesKeepTheStoredLayout(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","extension":[{"url":"http://example.org/weight","valueDecimal":1.50}],`+
		`"name":[{"use":"official","family":"Layout","given":["Lia"]}],"gender":"female","birthDate":"1944-04-04"}`)
	if r := e.api(http.MethodPut, "/patients/"+id, `{"lastName":"Layout-Smith"}`); r.Status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	r := e.fhir(http.MethodGet, "/Patient/"+id, "")
	body := string(r.Body)
	if !strings.HasPrefix(body, `{"resourceType":"Patient"`) {
		t.Fatalf("resourceType is not first: %s", body)
	}
	last := -1
	for _, key := range []string{`"extension"`, `"name"`, `"gender"`, `"birthDate"`} {
		at := strings.Index(body, key)
		if at < last {
			t.Fatalf("%s moved before an element that preceded it: %s", key, body)
		}
		last = at
	}
	if !strings.Contains(body, `"valueDecimal":1.50`) || !strings.Contains(body, `"family":"Layout-Smith"`) {
		t.Fatalf("decimal text or the change lost: %s", body)
	}
}
