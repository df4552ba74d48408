package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// invalidResources are the validation cases every write path must refuse
// with 422 and an issue at the named FHIRPath.
var invalidResources = []struct {
	name, typ, body, expr string
}{
	{"unknown element", "Patient", `{"resourceType":"Patient","nosuch":1}`, "Patient.nosuch"},
	{"string for a boolean", "Patient", `{"resourceType":"Patient","active":"true"}`, "Patient.active"},
	{"object for an array", "Patient", `{"resourceType":"Patient","name":{"family":"X"}}`, "Patient.name"},
	{"bad code in a required binding", "Patient", `{"resourceType":"Patient","gender":"yes"}`, "Patient.gender"},
	{"bad DiagnosticReport.status", "DiagnosticReport", `{"resourceType":"DiagnosticReport","status":"done","code":{"text":"x"}}`, "DiagnosticReport.status"},
	{"missing DiagnosticReport.code", "DiagnosticReport", `{"resourceType":"DiagnosticReport","status":"final"}`, "DiagnosticReport.code"},
	{"missing EpisodeOfCare.patient", "EpisodeOfCare", `{"resourceType":"EpisodeOfCare","status":"active"}`, "EpisodeOfCare.patient"},
	{"missing List.mode", "List", `{"resourceType":"List","status":"current"}`, "List.mode"},
	{"malformed date", "Patient", `{"resourceType":"Patient","birthDate":"1990-13-45"}`, "Patient.birthDate"},
	{"malformed dateTime", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"effectiveDateTime":"2020-01-01 10:00"}`, "Observation.effectiveDateTime"},
	{"malformed instant", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"issued":"2020-01-01"}`, "Observation.issued"},
	{"malformed uri", "Patient", `{"resourceType":"Patient","implicitRules":"a b"}`, "Patient.implicitRules"},
	{"empty string", "Patient", `{"resourceType":"Patient","name":[{"given":["A",""]}]}`, "Patient.name[0].given[1]"},
	{"empty array", "Patient", `{"resourceType":"Patient","telecom":[]}`, "Patient.telecom"},
	{"empty object", "Patient", `{"resourceType":"Patient","maritalStatus":{}}`, "Patient.maritalStatus"},
	{"malformed primitive extension", "Patient", `{"resourceType":"Patient","_birthDate":{"extension":"x"}}`, "Patient._birthDate.extension"},
	{"narrative that is not well-formed XHTML", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>open</div>"}}`, "Patient.text.div"},
	{"narrative that is not a div", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"<p>x</p>"}}`, "Patient.text.div"},
	{"invalid contained resource", "Patient", `{"resourceType":"Patient","contained":[{"resourceType":"Observation","status":"bogus","code":{"text":"x"}}]}`, "Patient.contained[0].status"},
}

func TestCreateRefusesInvalidResourcesWith422(t *testing.T) {
	e := newEnv(t)
	for _, tt := range invalidResources {
		t.Run(tt.name, func(t *testing.T) {
			before := e2eHistoryTotal(t, e, "/_history")
			wantOutcome(t, e.post("/"+tt.typ, tt.body), http.StatusUnprocessableEntity, tt.expr)
			if after := e2eHistoryTotal(t, e, "/_history"); after != before {
				t.Fatalf("an invalid create changed the store: %d versions, was %d", after, before)
			}
		})
	}
}

func TestUpdateRefusesInvalidResourcesWith422(t *testing.T) {
	e := newEnv(t)
	for _, tt := range invalidResources {
		t.Run(tt.name, func(t *testing.T) {
			id := "v-" + strings.ReplaceAll(tt.name, " ", "-")
			body := strings.Replace(tt.body, `"resourceType":"`+tt.typ+`"`, `"resourceType":"`+tt.typ+`","id":"`+id+`"`, 1)
			wantOutcome(t, e.put("/"+tt.typ+"/"+id, body), http.StatusUnprocessableEntity, tt.expr)
			if r := e.get("/" + tt.typ + "/" + id); r.Status != http.StatusNotFound {
				t.Fatalf("an invalid update-as-create stored the resource: %d", r.Status)
			}
		})
	}
	t.Run("an invalid update leaves the current version", func(t *testing.T) {
		id := e.create("Patient", `{"resourceType":"Patient","gender":"male"}`)
		wantOutcome(t, e.put("/Patient/"+id, `{"resourceType":"Patient","id":"`+id+`","gender":"yes"}`), http.StatusUnprocessableEntity, "Patient.gender")
		r := e.get("/Patient/" + id)
		if r.Header.Get("ETag") != `W/"1"` || r.JSON(t)["gender"] != "male" {
			t.Fatalf("after a refused update: %s %s", r.Header.Get("ETag"), r.Body)
		}
	})
}

func TestJSONThatIsNotAResourceIs400(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{`[]`, `"Patient"`, `{"name":[{"family":"X"}]}`, `{"resourceType":1}`} {
		wantOutcome(t, e.post("/Patient", body), http.StatusBadRequest, "")
	}
}

func TestPrimitiveExtensionIsAccepted(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","birthDate":"1990-01-01","_birthDate":{"extension":[{"url":"http://example.org/accuracy","valueString":"estimated"}]}}`)
	if got := e.get("/Patient/" + id).JSON(t)["_birthDate"]; got == nil {
		t.Fatal("the primitive extension was not kept")
	}
}

func TestLenientHandlingAcceptsUnknownElementsWithAWarning(t *testing.T) {
	e := newEnv(t)
	r := e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","nosuch":1}`,
		Header: map[string]string{"Prefer": "handling=lenient"}})
	if r.Status != http.StatusCreated || !strings.Contains(r.Header.Get("Warning"), "Patient.nosuch") {
		t.Fatalf("lenient create: %d, Warning %q: %s", r.Status, r.Header.Get("Warning"), r.Body)
	}
	if got := r.JSON(t)["nosuch"]; got == nil {
		t.Fatal("the unknown element was not kept")
	}
	r = e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","nosuch":1}`,
		Header: map[string]string{"Prefer": "handling=lenient, return=OperationOutcome"}})
	if r.Status != http.StatusCreated || !strings.Contains(string(r.Body), `"severity":"warning"`) || !strings.Contains(string(r.Body), "Patient.nosuch") {
		t.Fatalf("lenient create with return=OperationOutcome: %d %s", r.Status, r.Body)
	}
	wantOutcome(t, e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","nosuch":1}`,
		Header: map[string]string{"Prefer": "handling=strict"}}), http.StatusUnprocessableEntity, "Patient.nosuch")
	wantOutcome(t, e.do(request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","gender":"yes"}`,
		Header: map[string]string{"Prefer": "handling=lenient"}}), http.StatusUnprocessableEntity, "Patient.gender")
}

func TestValidateOperationStoresNothing(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","gender":"male"}`)
	before := e2eHistoryTotal(t, e, "/_history")
	tests := []struct {
		name, path, body string
		status           int
		wantSeverity     string
		expr             string
	}{
		{"a valid resource is 200 with information", "/Patient/$validate", `{"resourceType":"Patient","gender":"male"}`, 200, "information", ""},
		{"an invalid resource is 422 with the errors", "/Patient/$validate", `{"resourceType":"Patient","gender":"yes"}`, 422, "error", "Patient.gender"},
		{"the resource inside Parameters is validated", "/Patient/$validate", `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":{"resourceType":"Patient","active":"no"}}]}`, 422, "error", "Patient.active"},
		{"a valid resource inside Parameters is 200", "/Patient/$validate", `{"resourceType":"Parameters","parameter":[{"name":"mode","valueCode":"create"},{"name":"resource","resource":{"resourceType":"Patient"}}]}`, 200, "information", ""},
		{"Parameters without a resource is 400", "/Patient/$validate", `{"resourceType":"Parameters","parameter":[{"name":"mode","valueCode":"create"}]}`, 400, "error", ""},
		{"lenient validation warns of unknown elements", "/Patient/$validate", `{"resourceType":"Patient","nosuch":true}`, 200, "warning", "Patient.nosuch"},
		{"instance validation checks the id like an update", "/Patient/" + id + "/$validate", `{"resourceType":"Patient","id":"other"}`, 400, "error", "Patient.id"},
		{"instance validation of a valid update is 200", "/Patient/" + id + "/$validate", `{"resourceType":"Patient","id":"` + id + `","gender":"female"}`, 200, "information", ""},
		{"a resource of another type is 400", "/Patient/$validate", `{"resourceType":"Observation"}`, 400, "error", "resourceType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request{Method: http.MethodPost, Path: tt.path, Body: tt.body}
			if tt.wantSeverity == "warning" {
				req.Header = map[string]string{"Prefer": "handling=lenient"}
			}
			r := e.do(req)
			if tt.status >= 400 {
				wantOutcome(t, r, tt.status, tt.expr)
				return
			}
			if r.Status != tt.status || !strings.Contains(string(r.Body), `"severity":"`+tt.wantSeverity+`"`) || !strings.Contains(string(r.Body), tt.expr) {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			if strings.Contains(string(r.Body), `"severity":"error"`) {
				t.Fatalf("a valid resource reported an error: %s", r.Body)
			}
		})
	}
	if after := e2eHistoryTotal(t, e, "/_history"); after != before {
		t.Fatalf("$validate stored something: %d versions, was %d", after, before)
	}
	if r := e.get("/Patient/" + id); r.JSON(t)["gender"] != "male" {
		t.Fatalf("$validate changed the resource: %s", r.Body)
	}
}
