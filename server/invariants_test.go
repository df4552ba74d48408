package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// invariantWrites are resources that break one core R4 invariant, each
// with a valid resource of its type and the JSON Patch that breaks it.
var invariantWrites = []struct {
	name, key, typ, body, at string
	base, patch              string
}{
	{"a Period that ends before it starts", "per-1", "Encounter",
		`{"resourceType":"Encounter","status":"finished","class":{"code":"HH"},"period":{"start":"2024-03-02","end":"2024-03-01"}}`, "Encounter.period",
		`{"resourceType":"Encounter","status":"finished","class":{"code":"HH"},"period":{"start":"2024-03-02"}}`, `[{"op":"add","path":"/period/end","value":"2024-03-01"}]`},
	{"an Observation with a value and a dataAbsentReason", "obs-6", "Observation",
		`{"resourceType":"Observation","status":"final","code":{"text":"weight"},"valueQuantity":{"value":70},"dataAbsentReason":{"text":"not asked"}}`, "Observation",
		`{"resourceType":"Observation","status":"final","code":{"text":"weight"},"valueQuantity":{"value":70}}`, `[{"op":"add","path":"/dataAbsentReason","value":{"text":"not asked"}}]`},
	{"a Patient contact with nothing but a gender", "pat-1", "Patient",
		`{"resourceType":"Patient","contact":[{"gender":"male"}]}`, "Patient.contact[0]",
		`{"resourceType":"Patient"}`, `[{"op":"add","path":"/contact","value":[{"gender":"male"}]}]`},
	{"a local reference to no contained resource", "ref-1", "Observation",
		`{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"#nobody"}}`, "Observation.subject",
		`{"resourceType":"Observation","status":"final","code":{"text":"x"}}`, `[{"op":"add","path":"/subject","value":{"reference":"#nobody"}}]`},
	{"a Quantity with a unit code and no system", "qty-3", "Observation",
		`{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1,"code":"mg"}}`, "Observation.value.ofType(Quantity)",
		`{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1}}`, `[{"op":"add","path":"/valueQuantity/code","value":"mg"}]`},
	{"a contained resource nothing refers to", "dom-3", "Patient",
		`{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o1","name":"unused"}]}`, "Patient",
		`{"resourceType":"Patient"}`, `[{"op":"add","path":"/contained","value":[{"resourceType":"Organization","id":"o1","name":"unused"}]}]`},
}

// TestCoreInvariantsRefuseEveryWrite sends each broken resource through
// every write path: each is refused with 422 naming the invariant and the
// element that carries it, and nothing is stored.
func TestCoreInvariantsRefuseEveryWrite(t *testing.T) {
	e := newEnv(t)
	for i, tc := range invariantWrites {
		id := e.create(tc.typ, tc.base)
		before := e2eHistoryTotal(t, e, "/_history")
		withID := func(newID string) string {
			return strings.Replace(tc.body, `"resourceType":"`+tc.typ+`"`, `"resourceType":"`+tc.typ+`","id":"`+newID+`"`, 1)
		}
		inEntry := "Bundle.entry[1].resource" + strings.TrimPrefix(tc.at, tc.typ)
		paths := []struct {
			name string
			send func() *response
			at   string
		}{
			{"create", func() *response { return e.post("/"+tc.typ, tc.body) }, tc.at},
			{"update as create", func() *response {
				return e.put(fmt.Sprintf("/%s/inv%d", tc.typ, i), withID(fmt.Sprintf("inv%d", i)))
			}, tc.at},
			{"update", func() *response { return e.put("/"+tc.typ+"/"+id, withID(id)) }, tc.at},
			{"patch", func() *response {
				return e.do(request{Method: http.MethodPatch, Path: "/" + tc.typ + "/" + id, Body: tc.patch, Header: btJSONPatch})
			}, tc.at},
			{"transaction entry", func() *response {
				return e.btSend(btBundle("transaction", btOp("POST", "Patient", `{"resourceType":"Patient"}`), btOp("POST", tc.typ, tc.body)), nil)
			}, inEntry},
			{"$validate", func() *response { return e.post("/"+tc.typ+"/$validate", tc.body) }, tc.at},
		}
		for _, p := range paths {
			t.Run(tc.key+" "+p.name, func(t *testing.T) {
				wantInvariantIssue(t, p.send(), http.StatusUnprocessableEntity, tc.key, p.at)
			})
		}
		t.Run(tc.key+" batch entry", func(t *testing.T) {
			b := btDecode(t, e.btSend(btBundle("batch", btOp("POST", tc.typ, tc.body)), nil), "batch-response", 1)
			btWantStatuses(t, b, http.StatusUnprocessableEntity)
			wantInvariantIssue(t, &response{Status: http.StatusUnprocessableEntity, Body: b.Entry[0].Response.Outcome}, http.StatusUnprocessableEntity, tc.key, "")
		})
		if after := e2eHistoryTotal(t, e, "/_history"); after != before {
			t.Fatalf("%s: refused writes changed the store: %d versions, was %d", tc.key, after, before)
		}
		if r := e.get("/" + tc.typ + "/" + id); r.Header.Get("ETag") != `W/"1"` {
			t.Fatalf("%s: the resource refused an update is at %s", tc.key, r.Header.Get("ETag"))
		}
	}
}

// wantInvariantIssue checks an OperationOutcome with an error issue of code
// invariant naming key in details.coding and its text, located at at
// (any location when at is "").
func wantInvariantIssue(t testing.TB, r *response, status int, key, at string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	var oo struct {
		ResourceType string
		Issue        []struct {
			Severity, Code, Diagnostics string
			Details                     struct {
				Coding []struct{ System, Code string }
				Text   string
			}
			Expression []string
		}
	}
	if err := json.Unmarshal(r.Body, &oo); err != nil || oo.ResourceType != "OperationOutcome" {
		t.Fatalf("not an OperationOutcome (%v): %s", err, r.Body)
	}
	for _, is := range oo.Issue {
		coded := len(is.Details.Coding) == 1 && is.Details.Coding[0].Code == key &&
			strings.HasPrefix(is.Details.Coding[0].System, "http://hl7.org/fhir/StructureDefinition/")
		located := at == "" || len(is.Expression) == 1 && is.Expression[0] == at
		if is.Severity == "error" && is.Code == "invariant" && coded && located && strings.Contains(is.Details.Text, key+": ") {
			return
		}
	}
	t.Fatalf("no error issue naming %s at %q: %s", key, at, r.Body)
}

// TestTransactionWithOneBrokenInvariantStoresNothing: a transaction whose
// last entry breaks an invariant is refused whole, the valid entries
// before it included; a batch stores the valid entries only.
func TestTransactionWithOneBrokenInvariantStoresNothing(t *testing.T) {
	e := newEnv(t)
	bad := invariantWrites[0]
	before := e2eHistoryTotal(t, e, "/_history")
	r := e.btSend(btBundle("transaction",
		btOp("PUT", "Patient/good1", `{"resourceType":"Patient","id":"good1"}`),
		btOp("POST", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`),
		btOp("POST", bad.typ, bad.body)), nil)
	wantInvariantIssue(t, r, http.StatusUnprocessableEntity, bad.key, "Bundle.entry[2].resource.period")
	if after := e2eHistoryTotal(t, e, "/_history"); after != before {
		t.Fatalf("a refused transaction stored %d versions", after-before)
	}
	if r := e.get("/Patient/good1"); r.Status != http.StatusNotFound {
		t.Fatalf("an entry of the refused transaction is readable: %d", r.Status)
	}
	b := btDecode(t, e.btSend(btBundle("batch",
		btOp("PUT", "Patient/good2", `{"resourceType":"Patient","id":"good2"}`),
		btOp("POST", bad.typ, bad.body)), nil), "batch-response", 2)
	btWantStatuses(t, b, http.StatusCreated, http.StatusUnprocessableEntity)
}

// TestBestPracticeInvariantsNeverRefuseAWrite: dom-6 (no narrative) is a
// warning; a write is stored without it, $validate reports it.
func TestBestPracticeInvariantsNeverRefuseAWrite(t *testing.T) {
	e := newEnv(t)
	body := `{"resourceType":"Patient","name":[{"family":"Warn"}]}`
	r := e.post("/Patient", body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create without narrative: %d %s", r.Status, r.Body)
	}
	if w := r.Header.Values("Warning"); len(w) != 0 {
		t.Fatalf("a write reports best practices: %q", w)
	}
	for _, path := range []string{"/Patient/$validate", "/$validate"} {
		v := e.post(path, body)
		if v.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, v.Status, v.Body)
		}
		var oo struct {
			Issue []struct {
				Severity, Code string
				Details        struct{ Coding []struct{ Code string } }
				Expression     []string
			}
		}
		if err := json.Unmarshal(v.Body, &oo); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, is := range oo.Issue {
			found = found || is.Severity == "warning" && len(is.Details.Coding) == 1 && is.Details.Coding[0].Code == "dom-6" &&
				len(is.Expression) == 1 && is.Expression[0] == "Patient"
		}
		if !found {
			t.Fatalf("%s does not warn of dom-6: %s", path, v.Body)
		}
	}
	withText := `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">Warn</div>"}}`
	if v := e.post("/Patient/$validate", withText); v.Status != http.StatusOK || strings.Contains(string(v.Body), "dom-6") {
		t.Fatalf("a Patient with narrative: %d %s", v.Status, v.Body)
	}
}

// TestInvariantsOfNestedResources: contained resources see their
// container as %rootResource, Bundle entries are their own root.
func TestInvariantsOfNestedResources(t *testing.T) {
	e := newEnv(t)
	sibling := `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o1","name":"a","partOf":{"reference":"#o2"}},{"resourceType":"Organization","id":"o2","name":"b"}],"managingOrganization":{"reference":"#o1"}}`
	if r := e.post("/Patient", sibling); r.Status != http.StatusCreated {
		t.Fatalf("a contained resource referring to its sibling: %d %s", r.Status, r.Body)
	}
	broken := `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o1","name":"a","partOf":{"reference":"#o9"}}],"managingOrganization":{"reference":"#o1"}}`
	wantInvariantIssue(t, e.post("/Patient", broken), http.StatusUnprocessableEntity, "ref-1", "Patient.contained[0].partOf")
	doc := `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:6a4c5d2e-0000-4000-8000-000000000001","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"#p"}}}]}`
	wantInvariantIssue(t, e.post("/Bundle", doc), http.StatusUnprocessableEntity, "ref-1", "Bundle.entry[0].resource.subject")
}

// TestInvariantsOnLargeResourcesAreBounded: a resource whose invariants
// look at every element for each of hundreds of contained resources is
// answered promptly, and a broken one is still refused.
func TestInvariantsOnLargeResourcesAreBounded(t *testing.T) {
	e := newEnv(t)
	var contained, refs []string
	for i := range 400 {
		contained = append(contained, fmt.Sprintf(`{"resourceType":"Organization","id":"o%d","name":"org %d"}`, i, i))
		if i > 0 {
			refs = append(refs, fmt.Sprintf(`{"reference":"#o%d"}`, i))
		}
	}
	body := `{"resourceType":"Patient","contained":[` + strings.Join(contained, ",") + `],"generalPractitioner":[` + strings.Join(refs, ",") + `]}`
	start := time.Now()
	r := e.post("/Patient", body)
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("%v to answer", d)
	}
	wantInvariantIssue(t, r, http.StatusUnprocessableEntity, "dom-3", "Patient")
}
