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
	{"malformed dateTime", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"effectiveDateTime":"2020-01-01 10:00"}`, "Observation.effective.ofType(dateTime)"},
	{"malformed instant", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"issued":"2020-01-01"}`, "Observation.issued"},
	{"malformed uri", "Patient", `{"resourceType":"Patient","implicitRules":"a b"}`, "Patient.implicitRules"},
	{"empty string", "Patient", `{"resourceType":"Patient","name":[{"given":["A",""]}]}`, "Patient.name[0].given[1]"},
	{"empty array", "Patient", `{"resourceType":"Patient","telecom":[]}`, "Patient.telecom"},
	{"empty object", "Patient", `{"resourceType":"Patient","maritalStatus":{}}`, "Patient.maritalStatus"},
	{"malformed primitive extension", "Patient", `{"resourceType":"Patient","_birthDate":{"extension":"x"}}`, "Patient.birthDate.extension"},
	{"narrative that is not well-formed XHTML", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>open</div>"}}`, "Patient.text.div"},
	{"narrative that is not a div", "Patient", `{"resourceType":"Patient","text":{"status":"generated","div":"<p>x</p>"}}`, "Patient.text.div"},
	{"invalid contained resource", "Patient", `{"resourceType":"Patient","contained":[{"resourceType":"Observation","status":"bogus","code":{"text":"x"}}]}`, "Patient.contained[0].status"},
	{"February 29th of a year that is not a leap year", "Patient", `{"resourceType":"Patient","birthDate":"2023-02-29"}`, "Patient.birthDate"},
	{"February 29th of 1900", "Patient", `{"resourceType":"Patient","birthDate":"1900-02-29"}`, "Patient.birthDate"},
	{"April 31st in a dateTime", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"effectiveDateTime":"2020-04-31T10:00:00Z"}`, "Observation.effective.ofType(dateTime)"},
	{"ten digits of fractional seconds", "Patient", `{"resourceType":"Patient","deceasedDateTime":"1970-01-01T10:00:00.1234567890Z"}`, "Patient.deceased.ofType(dateTime)"},
	{"an instant without a time zone", "Patient", `{"resourceType":"Patient","meta":{"lastUpdated":"2020-01-01T10:00:00"}}`, "Patient.meta.lastUpdated"},
	{"an integer beyond 32 bits", "Patient", `{"resourceType":"Patient","multipleBirthInteger":2147483648}`, "Patient.multipleBirth.ofType(integer)"},
	{"an integer with a fraction", "Patient", `{"resourceType":"Patient","multipleBirthInteger":2.5}`, "Patient.multipleBirth.ofType(integer)"},
	{"a positiveInt of 0", "Patient", `{"resourceType":"Patient","telecom":[{"system":"phone","value":"1","rank":0}]}`, "Patient.telecom[0].rank"},
	{"a string for a boolean choice", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueBoolean":"yes"}`, "Observation.value.ofType(boolean)"},
	{"a bad value inside a complex choice", "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":"1"}}`, "Observation.value.ofType(Quantity).value"},
	{"two types of one choice element", "Patient", `{"resourceType":"Patient","deceasedBoolean":true,"deceasedDateTime":"2000-01-01"}`, "Patient.deceased"},
	{"null in an array", "Patient", `{"resourceType":"Patient","telecom":[null]}`, "Patient.telecom[0]"},
	{"null for a single element", "Patient", `{"resourceType":"Patient","birthDate":null}`, "Patient.birthDate"},
	{"an empty object in an array", "Patient", `{"resourceType":"Patient","name":[{}]}`, "Patient.name[0]"},
	{"_name as a string", "Patient", `{"resourceType":"Patient","_birthDate":"x"}`, "Patient.birthDate"},
	{"_name of a repeated primitive of another length", "Patient", `{"resourceType":"Patient","name":[{"given":["A","B"],"_given":[{"id":"a"}]}]}`, "Patient.name[0].given"},
	{"_name entry that is empty", "Patient", `{"resourceType":"Patient","name":[{"given":["A"],"_given":[{}]}]}`, "Patient.name[0].given[0]"},
	{"an extension with a value and nested extensions", "Patient", `{"resourceType":"Patient","extension":[{"url":"http://example.org/x","valueString":"a","extension":[{"url":"b","valueString":"c"}]}]}`, "Patient.extension[0]"},
	{"an extension without url", "Patient", `{"resourceType":"Patient","extension":[{"valueString":"a"}]}`, "Patient.extension[0].url"},
	{"a core extension with a value of the wrong type", "Patient", `{"resourceType":"Patient","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueString":"noon"}]}`, "Patient.extension[0].value.ofType(string)"},
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
			id := "v" + strings.NewReplacer(" ", "-", "_", "-").Replace(tt.name)
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

// TestTransactionsRefuseInvalidResourcesWith422 runs the table of the
// create and update tests through a transaction: the same validator, the
// issue located in the entry.
func TestTransactionsRefuseInvalidResourcesWith422(t *testing.T) {
	e := newEnv(t)
	before := e2eHistoryTotal(t, e, "/_history")
	for _, tt := range invalidResources {
		t.Run(tt.name, func(t *testing.T) {
			body := btBundle("transaction", btOp("POST", "Patient", `{"resourceType":"Patient"}`), btOp("POST", tt.typ, tt.body))
			wantOutcome(t, e.post("", body), http.StatusUnprocessableEntity, "Bundle.entry[1].resource"+strings.TrimPrefix(tt.expr, tt.typ))
		})
	}
	if after := e2eHistoryTotal(t, e, "/_history"); after != before {
		t.Fatalf("refused transactions changed the store: %d versions, was %d", after, before)
	}
}

// TestValidateOperationReportsTheSameIssues runs the table through
// $validate, with the resource bare and inside Parameters, at the base, the
// type and an instance: each issue is located in the resource.
func TestValidateOperationReportsTheSameIssues(t *testing.T) {
	e := newEnv(t)
	for _, tt := range invalidResources {
		id := e.create(tt.typ, validOfType(tt.typ))
		inParameters := `{"resourceType":"Parameters","parameter":[{"name":"mode","valueCode":"create"},{"name":"resource","resource":` + tt.body + `}]}`
		withID := strings.Replace(tt.body, `"resourceType":"`+tt.typ+`"`, `"resourceType":"`+tt.typ+`","id":"`+id+`"`, 1)
		updateParameters := `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":` + withID + `}]}`
		for _, call := range []struct{ where, path, body string }{
			{"bare at the type", "/" + tt.typ + "/$validate", tt.body},
			{"in Parameters at the type", "/" + tt.typ + "/$validate", inParameters},
			{"bare at the base", "/$validate", tt.body},
			{"in Parameters at the base", "/$validate", inParameters},
			{"in Parameters at the instance", "/" + tt.typ + "/" + id + "/$validate", updateParameters},
		} {
			t.Run(tt.name+" "+call.where, func(t *testing.T) {
				r := e.post(call.path, call.body)
				wantOutcome(t, r, http.StatusUnprocessableEntity, tt.expr)
				if strings.Contains(string(r.Body), "Parameters.") {
					t.Fatalf("an issue is located in the Parameters, not the resource: %s", r.Body)
				}
			})
		}
	}
}

// validOfType is a minimal valid resource of each type of invalidResources.
func validOfType(typ string) string {
	return map[string]string{
		"Patient":          `{"resourceType":"Patient"}`,
		"Observation":      `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`,
		"DiagnosticReport": `{"resourceType":"DiagnosticReport","status":"final","code":{"text":"x"}}`,
		"EpisodeOfCare":    `{"resourceType":"EpisodeOfCare","status":"active","patient":{"display":"x"}}`,
		"List":             `{"resourceType":"List","status":"current","mode":"working"}`,
	}[typ]
}

func TestValidResourcesAreStored(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{
		`{"resourceType":"Patient","birthDate":"2000-02-29"}`,
		`{"resourceType":"Patient","deceasedDateTime":"2024-02-29T23:59:59.123456789+14:00"}`,
		`{"resourceType":"Patient","multipleBirthInteger":2147483647}`,
		`{"resourceType":"Patient","name":[{"given":["A",null],"_given":[null,{"extension":[{"url":"http://example.org/x","valueString":"y"}]}]}]}`,
		`{"resourceType":"Patient","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"2000-02-29T10:00:00Z"}]}`,
	} {
		if r := e.post("/Patient", body); r.Status != http.StatusCreated {
			t.Errorf("%s: %d %s", body, r.Status, r.Body)
		}
	}
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
		{"a valid resource at the base is 200", "/$validate", `{"resourceType":"Patient","gender":"male"}`, 200, "information", ""},
		{"Parameters at the base is 200 for a valid resource", "/$validate", `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"}}}]}`, 200, "information", ""},
		{"a body without resourceType at the base is 400", "/$validate", `{"gender":"male"}`, 400, "error", ""},
		{"an unknown type at the base is 400", "/$validate", `{"resourceType":"Nope"}`, 400, "error", "resourceType"},
		{"the base profile of the type is checked", "/Patient/$validate", `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":{"resourceType":"Patient"}},{"name":"profile","valueUri":"http://hl7.org/fhir/StructureDefinition/Patient"}]}`, 200, "information", ""},
		{"a profile the server does not know is an error", "/Patient/$validate", `{"resourceType":"Parameters","parameter":[{"name":"resource","resource":{"resourceType":"Patient"}},{"name":"profile","valueUri":"http://example.org/StructureDefinition/other"}]}`, 422, "error", ""},
		{"a profile in the URL the server does not know is an error", "/Patient/$validate?profile=http://example.org/StructureDefinition/other", `{"resourceType":"Patient"}`, 422, "error", ""},
		{"mode update at the type takes the resource's id", "/Patient/$validate", `{"resourceType":"Parameters","parameter":[{"name":"mode","valueCode":"update"},{"name":"resource","resource":{"resourceType":"Patient","id":"` + id + `"}}]}`, 200, "information", ""},
		{"mode update without an id is 400", "/Patient/$validate", `{"resourceType":"Parameters","parameter":[{"name":"mode","valueCode":"update"},{"name":"resource","resource":{"resourceType":"Patient"}}]}`, 400, "error", "Patient.id"},
		{"mode delete needs no resource", "/Patient/" + id + "/$validate", `{"resourceType":"Parameters","parameter":[{"name":"mode","valueCode":"delete"}]}`, 200, "information", ""},
		{"an unknown mode is 400", "/Patient/$validate", `{"resourceType":"Parameters","parameter":[{"name":"mode","valueCode":"sometimes"},{"name":"resource","resource":{"resourceType":"Patient"}}]}`, 400, "error", "Parameters.parameter[0]"},
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

// TestExtensionsAreCheckedAgainstTheTenantsDefinitions: once a tenant
// stores the StructureDefinition of an extension, the extension's value
// must be of a type it allows, in that tenant only.
func TestExtensionsAreCheckedAgainstTheTenantsDefinitions(t *testing.T) {
	const url = "http://example.org/fhir/StructureDefinition/shoe-size"
	definition := `{"resourceType":"StructureDefinition","url":"` + url + `","name":"ShoeSize","status":"active","kind":"complex-type","abstract":false,
		"type":"Extension","baseDefinition":"http://hl7.org/fhir/StructureDefinition/Extension","derivation":"constraint","context":[{"type":"element","expression":"Patient"}],
		"differential":{"element":[{"id":"Extension.value[x]","path":"Extension.value[x]","type":[{"code":"Quantity"},{"code":"decimal"}]}]}}`
	withValue := func(value string) string {
		return `{"resourceType":"Patient","extension":[{"url":"` + url + `",` + value + `}]}`
	}
	const raceURL = "http://example.org/fhir/StructureDefinition/race"
	race := `{"resourceType":"StructureDefinition","url":"` + raceURL + `","name":"Race","status":"active","kind":"complex-type","abstract":false,
		"type":"Extension","baseDefinition":"http://hl7.org/fhir/StructureDefinition/Extension","derivation":"constraint","context":[{"type":"element","expression":"Patient"}],
		"differential":{"element":[
			{"id":"Extension.extension:category","path":"Extension.extension","sliceName":"category"},
			{"id":"Extension.extension:category.url","path":"Extension.extension.url","fixedUri":"category"},
			{"id":"Extension.extension:category.value[x]","path":"Extension.extension.value[x]","type":[{"code":"Coding"}]},
			{"id":"Extension.value[x]","path":"Extension.value[x]","max":"0"}]}}`
	e, other := newEnv(t), newEnv(t)
	e.create("StructureDefinition", definition)
	e.create("StructureDefinition", race)
	tests := []struct {
		name   string
		env    *env
		body   string
		status int
		expr   string
	}{
		{"a value of an allowed type", e, withValue(`"valueQuantity":{"value":44,"unit":"EU"}`), http.StatusCreated, ""},
		{"a value of another allowed type", e, withValue(`"valueDecimal":44`), http.StatusCreated, ""},
		{"a value of a type the definition does not allow", e, withValue(`"valueString":"44"`), http.StatusUnprocessableEntity, "Patient.extension[0].value.ofType(string)"},
		{"nested extensions where the definition wants a value", e, `{"resourceType":"Patient","extension":[{"url":"` + url + `","extension":[{"url":"eu","valueString":"44"}]}]}`, http.StatusUnprocessableEntity, "Patient.extension[0]"},
		{"any value in a tenant without the definition", other, withValue(`"valueString":"44"`), http.StatusCreated, ""},
		{"nested extensions of the types the definition allows", e, `{"resourceType":"Patient","extension":[{"url":"` + raceURL + `","extension":[{"url":"category","valueCoding":{"code":"x"}}]}]}`, http.StatusCreated, ""},
		{"a nested extension of a type the definition does not allow", e, `{"resourceType":"Patient","extension":[{"url":"` + raceURL + `","extension":[{"url":"category","valueString":"x"}]}]}`, http.StatusUnprocessableEntity, "Patient.extension[0].extension[0].value.ofType(string)"},
		{"a value where the definition wants nested extensions", e, `{"resourceType":"Patient","extension":[{"url":"` + raceURL + `","valueString":"x"}]}`, http.StatusUnprocessableEntity, "Patient.extension[0].value.ofType(string)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.env.post("/Patient", tt.body)
			if tt.status == http.StatusCreated {
				if r.Status != tt.status {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				return
			}
			wantOutcome(t, r, tt.status, tt.expr)
		})
	}
	wantOutcome(t, e.post("/Patient/$validate", withValue(`"valueString":"44"`)), http.StatusUnprocessableEntity, "Patient.extension[0].value.ofType(string)")
}
