package restadapter_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fullPatient is a FHIR Patient with every element the REST Patient reads,
// and some it does not (which R2 must keep verbatim).
const fullPatient = `{"resourceType":"Patient","active":true,
 "extension":[{"url":"http://example.org/fhir/StructureDefinition/weight","valueDecimal":1.50}],
 "identifier":[{"system":"http://hospital.example/ssn","value":"123-45-6789"},
  {"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0203","code":"MR"}]},"system":"http://hospital.example/mrn","value":"MRN-0001"}],
 "name":[{"use":"nickname","given":["Rie"]},{"use":"official","family":"Rest","given":["Rita","Mae"]}],
 "telecom":[{"system":"email","value":"rita@example.org","rank":1},{"system":"phone","value":"555-0002","rank":2},{"system":"phone","value":"555-0001","rank":1}],
 "gender":"female","birthDate":"1944-04-04",
 "address":[{"use":"work","line":["9 Work St"],"city":"Worktown"},{"use":"home","line":["1 Main St","Apt 1"],"city":"Portland","state":"OR","postalCode":"97201"}],
 "contact":[{"relationship":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0131","code":"N"}]}],"name":{"text":"Next Kin"}},
  {"relationship":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0131","code":"C","display":"Daughter"}]}],"name":{"given":["Ann"],"family":"Lee"},"telecom":[{"system":"email","value":"ann@example.org"},{"system":"phone","value":"555-0100"}]}],
 "managingOrganization":{"reference":"Organization/%s"}}`

// fieldAt follows a dotted path (object keys and array indexes) into
// decoded JSON; nil when it leads nowhere.
func fieldAt(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// sameJSON reports whether got and want render as the same JSON.
func sameJSON(got, want any) bool {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return string(g) == string(w)
}

// checkFields checks fields of a decoded JSON object by path; a nil want
// means the field is absent.
func checkFields(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	for path, w := range want {
		if g := fieldAt(got, path); !sameJSON(g, w) {
			t.Errorf("%s = %#v, want %#v", path, g, w)
		}
	}
}

// versionCount is how many versions the FHIR history of typ/id holds.
func versionCount(e *env, typ, id string) int {
	e.t.Helper()
	r := e.fhir(http.MethodGet, "/"+typ+"/"+id+"/_history", "")
	if r.Status != http.StatusOK {
		e.t.Fatalf("history of %s/%s: %d %s", typ, id, r.Status, r.Body)
	}
	n, _ := r.JSON(e.t)["total"].(float64)
	return int(n)
}

// fhirRead reads the current FHIR resource typ/id.
func fhirRead(e *env, typ, id string) map[string]any {
	e.t.Helper()
	r := e.fhir(http.MethodGet, "/"+typ+"/"+id, "")
	if r.Status != http.StatusOK {
		e.t.Fatalf("read %s/%s: %d %s", typ, id, r.Status, r.Body)
	}
	return r.JSON(e.t)
}

// restPatient reads the REST patient, which must exist.
func restPatient(e *env, id string) map[string]any {
	e.t.Helper()
	r := e.api(http.MethodGet, "/patients/"+id, "")
	if r.Status != http.StatusOK {
		e.t.Fatalf("GET /patients/%s: %d %s", id, r.Status, r.Body)
	}
	return r.JSON(e.t)
}

func TestPatientReadProjectsTheFHIRPatient(t *testing.T) {
	e := newEnv(t)
	org := e.create("Organization", `{"resourceType":"Organization","name":"Agency"}`)
	tests := []struct {
		name    string
		patient string
		want    map[string]any
	}{
		{"a complete patient shows every field", fmt.Sprintf(fullPatient, org), map[string]any{
			"agencyId": org, "firstName": "Rita", "lastName": "Rest", "dateOfBirth": "1944-04-04", "gender": "female",
			"medicalRecordNumber": "MRN-0001", "status": "active",
			"address":          map[string]any{"street": "1 Main St", "apartment": "Apt 1", "city": "Portland", "state": "OR", "zipCode": "97201"},
			"phoneNumbers":     map[string]any{"primary": "555-0001", "secondary": "555-0002"},
			"emergencyContact": map[string]any{"name": "Ann Lee", "relationship": "Daughter", "phone": "555-0100"},
			"insuranceInfo":    nil,
		}},
		{"the official name wins over the usual and the first",
			`{"resourceType":"Patient","name":[{"use":"usual","given":["U"],"family":"UF"},{"use":"official","given":["O"],"family":"OF"}]}`,
			map[string]any{"firstName": "O", "lastName": "OF"}},
		{"the usual name wins without an official one",
			`{"resourceType":"Patient","name":[{"given":["A"],"family":"AF"},{"use":"usual","given":["U"],"family":"UF"}]}`,
			map[string]any{"firstName": "U", "lastName": "UF"}},
		{"the first name is used without official or usual",
			`{"resourceType":"Patient","name":[{"use":"old","given":["X"],"family":"XF"},{"use":"maiden","family":"YF"}]}`,
			map[string]any{"firstName": "X", "lastName": "XF"}},
		{"deceasedBoolean true is deceased even when active",
			`{"resourceType":"Patient","active":true,"deceasedBoolean":true}`, map[string]any{"status": "deceased"}},
		{"a deceasedDateTime is deceased",
			`{"resourceType":"Patient","deceasedDateTime":"2020-01-01"}`, map[string]any{"status": "deceased"}},
		{"deceasedBoolean false and active false is inactive",
			`{"resourceType":"Patient","active":false,"deceasedBoolean":false}`, map[string]any{"status": "inactive"}},
		{"without active the patient is active",
			`{"resourceType":"Patient","gender":"unknown"}`, map[string]any{"status": "active", "gender": "unknown"}},
		{"the MRN is the identifier typed MR in v2-0203 only",
			`{"resourceType":"Patient","identifier":[{"value":"plain"},{"type":{"coding":[{"system":"http://other.example","code":"MR"}]},"value":"wrong-system"},{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0203","code":"MR"}]},"value":"MRN-9"}]}`,
			map[string]any{"medicalRecordNumber": "MRN-9"}},
		{"the first address is used without a home one",
			`{"resourceType":"Patient","address":[{"use":"work","line":["9 Work St"],"city":"Worktown"},{"use":"temp","city":"Elsewhere"}]}`,
			map[string]any{"address": map[string]any{"street": "9 Work St", "city": "Worktown"}}},
		{"phones are ordered by rank, unranked last, emails ignored",
			`{"resourceType":"Patient","telecom":[{"system":"phone","value":"unranked"},{"system":"email","value":"a@b.c","rank":1},{"system":"phone","value":"second","rank":2},{"system":"phone","value":"first","rank":1}]}`,
			map[string]any{"phoneNumbers": map[string]any{"primary": "first", "secondary": "second"}}},
		{"a single phone is the primary",
			`{"resourceType":"Patient","telecom":[{"system":"phone","value":"only"}]}`,
			map[string]any{"phoneNumbers": map[string]any{"primary": "only"}}},
		{"an emergency contact without display is an Emergency Contact, named by its text",
			`{"resourceType":"Patient","contact":[{"relationship":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0131","code":"C"}]}],"name":{"text":"Bob Stone","family":"Stone"}}]}`,
			map[string]any{"emergencyContact": map[string]any{"name": "Bob Stone", "relationship": "Emergency Contact"}}},
		{"contacts not coded C are no emergency contact",
			`{"resourceType":"Patient","contact":[{"relationship":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0131","code":"N"}]}],"name":{"text":"Kin"}}]}`,
			map[string]any{"emergencyContact": nil}},
		{"a bare patient omits what it does not have",
			`{"resourceType":"Patient"}`,
			map[string]any{"status": "active", "agencyId": nil, "firstName": nil, "lastName": nil, "dateOfBirth": nil, "medicalRecordNumber": nil,
				"address": nil, "phoneNumbers": nil, "emergencyContact": nil, "insuranceInfo": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := e.create("Patient", tt.patient)
			got := restPatient(e, id)
			tt.want["patientId"] = id
			checkFields(t, got, tt.want)
			meta := fhirRead(e, "Patient", id)["meta"].(map[string]any)
			checkFields(t, got, map[string]any{"createdAt": meta["lastUpdated"], "updatedAt": meta["lastUpdated"]})
		})
	}
}

func TestPatientInsuranceComesFromItsCoverages(t *testing.T) {
	e := newEnv(t)
	payer := e.create("Organization", `{"resourceType":"Organization","name":"Acme Health"}`)
	pid := e.create("Patient", `{"resourceType":"Patient"}`)
	other := e.create("Patient", `{"resourceType":"Patient"}`)
	coverage := func(patient, body string) string {
		return e.create("Coverage", `{"resourceType":"Coverage","beneficiary":{"reference":"Patient/`+patient+`"},`+body+`}`)
	}
	old := coverage(pid, `"status":"cancelled","payor":[{"display":"Old Payer"}],"subscriberId":"OLD-1"`)
	current := coverage(pid, `"status":"active","order":1,"payor":[{"reference":"Organization/`+payer+`"}],
		"identifier":[{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v2-0203","code":"MB"}]},"value":"M-1"}],
		"class":[{"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/coverage-class","code":"group"}]},"value":"G-9"},
		         {"type":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/coverage-class","code":"plan"}]},"value":"P-1","name":"Gold PPO"}]`)
	coverage(pid, `"status":"entered-in-error","payor":[{"display":"Mistake"}]`)
	coverage(other, `"status":"active","payor":[{"display":"Not Hers"}]`)

	got := restPatient(e, pid)
	checkFields(t, got, map[string]any{
		"insuranceInfo.coverageId": current, "insuranceInfo.payer": "Acme Health", "insuranceInfo.memberId": "M-1",
		"insuranceInfo.groupNumber": "G-9", "insuranceInfo.planName": "Gold PPO", "insuranceInfo.status": "active",
		"insuranceInfo.coverages": []any{
			map[string]any{"coverageId": current, "payer": "Acme Health", "memberId": "M-1", "groupNumber": "G-9", "planName": "Gold PPO", "status": "active"},
			map[string]any{"coverageId": old, "payer": "Old Payer", "memberId": "OLD-1", "status": "cancelled"},
		},
	})
	checkFields(t, restPatient(e, other), map[string]any{"insuranceInfo.payer": "Not Hers", "insuranceInfo.coverages.1": nil})
}

func TestPatientCreatedAtStaysTheFirstVersionsTime(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", `{"resourceType":"Patient","gender":"male"}`)
	v1 := fhirRead(e, "Patient", id)["meta"].(map[string]any)["lastUpdated"]
	time.Sleep(5 * time.Millisecond) // versions a few milliseconds apart
	if r := e.fhir(http.MethodPut, "/Patient/"+id, `{"resourceType":"Patient","id":"`+id+`","gender":"female"}`); r.Status != http.StatusOK {
		t.Fatalf("FHIR update: %d %s", r.Status, r.Body)
	}
	v2 := fhirRead(e, "Patient", id)["meta"].(map[string]any)["lastUpdated"]
	got := restPatient(e, id)
	checkFields(t, got, map[string]any{"createdAt": v1, "updatedAt": v2, "gender": "female"})
	if v1 == v2 {
		t.Fatalf("both versions at %v", v1)
	}
	if _, err := time.Parse(time.RFC3339, got["createdAt"].(string)); err != nil {
		t.Fatalf("createdAt is not RFC 3339: %v", err)
	}
}

func TestPatientReadOfAnUnknownOrDeletedPatientIs404(t *testing.T) {
	e := newEnv(t)
	deleted := e.create("Patient", `{"resourceType":"Patient"}`)
	if r := e.fhir(http.MethodDelete, "/Patient/"+deleted, ""); r.Status >= 300 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	org := e.create("Organization", `{"resourceType":"Organization","name":"Not a patient"}`)
	for _, id := range []string{"nope", deleted, org, "bad%20id"} {
		wantError(t, e.api(http.MethodGet, "/patients/"+id, ""), http.StatusNotFound, "")
	}
}

// patientUpdate is a row of the R2 mapping table: a body with one field
// and where it lands in the FHIR Patient made from fullPatient.
var patientUpdates = []struct {
	field, body, fhirPath, value string
}{
	{"firstName", `{"firstName":"Rosa"}`, "name.1.given.0", "Rosa"},
	{"lastName", `{"lastName":"Rest-Smith"}`, "name.1.family", "Rest-Smith"},
	{"address.street", `{"address":{"street":"2 Oak Ave"}}`, "address.1.line.0", "2 Oak Ave"},
	{"address.apartment", `{"address":{"apartment":"Unit 5"}}`, "address.1.line.1", "Unit 5"},
	{"address.city", `{"address":{"city":"Salem"}}`, "address.1.city", "Salem"},
	{"address.state", `{"address":{"state":"WA"}}`, "address.1.state", "WA"},
	{"address.zipCode", `{"address":{"zipCode":"98101"}}`, "address.1.postalCode", "98101"},
	{"phoneNumbers.primary", `{"phoneNumbers":{"primary":"555-0199"}}`, "telecom.2.value", "555-0199"},
	{"phoneNumbers.secondary", `{"phoneNumbers":{"secondary":"555-0198"}}`, "telecom.1.value", "555-0198"},
	{"emergencyContact.name", `{"emergencyContact":{"name":"Bob Rest"}}`, "contact.1.name.text", "Bob Rest"},
	{"emergencyContact.relationship", `{"emergencyContact":{"relationship":"Son"}}`, "contact.1.relationship.0.text", "Son"},
	{"emergencyContact.phone", `{"emergencyContact":{"phone":"555-0111"}}`, "contact.1.telecom.1.value", "555-0111"},
}

func TestPatientUpdateWritesEachFieldToItsFHIRElementAsANewVersion(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", fmt.Sprintf(fullPatient, "agency"))
	for i, tt := range patientUpdates {
		t.Run(tt.field, func(t *testing.T) {
			r := e.api(http.MethodPut, "/patients/"+id, tt.body)
			if r.Status != http.StatusOK {
				t.Fatalf("PUT: %d %s", r.Status, r.Body)
			}
			var sent map[string]any
			_ = json.Unmarshal([]byte(tt.body), &sent)
			checkFields(t, r.JSON(t), map[string]any{tt.field: fieldAt(sent, tt.field)})
			checkFields(t, restPatient(e, id), map[string]any{tt.field: tt.value})
			checkFields(t, fhirRead(e, "Patient", id), map[string]any{tt.fhirPath: tt.value})
			if n := versionCount(e, "Patient", id); n != i+2 {
				t.Fatalf("history holds %d versions after %d updates", n, i+1)
			}
		})
	}
}

func TestPatientUpdateKeepsEveryFHIRElementItDoesNotMap(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", fmt.Sprintf(fullPatient, "agency"))
	before := e.fhir(http.MethodGet, "/Patient/"+id, "")
	r := e.api(http.MethodPut, "/patients/"+id, `{"firstName":"Rosa","lastName":"Rest-Smith",
		"address":{"street":"2 Oak Ave","apartment":"Unit 5","city":"Salem","state":"WA","zipCode":"98101"},
		"phoneNumbers":{"primary":"555-0199","secondary":"555-0198"},
		"emergencyContact":{"name":"Bob Rest","relationship":"Son","phone":"555-0111"}}`)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	after := fhirRead(e, "Patient", id)
	checkFields(t, after, map[string]any{
		"name.1.given.1": "Mae", "name.0": map[string]any{"use": "nickname", "given": []any{"Rie"}},
		"identifier":                             fieldAt(before.JSON(t), "identifier"),
		"extension":                              fieldAt(before.JSON(t), "extension"),
		"telecom.0":                              map[string]any{"system": "email", "value": "rita@example.org", "rank": 1},
		"address.0":                              map[string]any{"use": "work", "line": []any{"9 Work St"}, "city": "Worktown"},
		"contact.0":                              fieldAt(before.JSON(t), "contact.0"),
		"contact.1.telecom.0":                    map[string]any{"system": "email", "value": "ann@example.org"},
		"contact.1.relationship.0.coding.0.code": "C",
		"birthDate":                              "1944-04-04", "gender": "female", "active": true,
		"managingOrganization": map[string]any{"reference": "Organization/agency"},
	})
	// A decimal keeps its written precision through the rewrite.
	if got := e.fhir(http.MethodGet, "/Patient/"+id, ""); !strings.Contains(string(got.Body), "1.50") {
		t.Fatalf("valueDecimal 1.50 lost its precision: %s", got.Body)
	}
}

func TestPatientUpdateKeepsOmittedFields(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		changed []string
	}{
		{"only the first name", `{"firstName":"Rosa"}`, []string{"firstName"}},
		{"only the city of the address", `{"address":{"city":"Salem"}}`, []string{"address.city"}},
		{"only the secondary phone", `{"phoneNumbers":{"secondary":"555-0198"}}`, []string{"phoneNumbers.secondary"}},
		{"only the contact's phone", `{"emergencyContact":{"phone":"555-0111"}}`, []string{"emergencyContact.phone"}},
		{"null objects and fields are omitted", `{"address":null,"firstName":null,"phoneNumbers":{"primary":null}}`, nil},
		{"an empty body changes nothing", `{}`, nil},
		{"resending the current values changes nothing", `{"firstName":"Rita","lastName":"Rest",
			"address":{"street":"1 Main St","apartment":"Apt 1","city":"Portland","state":"OR","zipCode":"97201"},
			"phoneNumbers":{"primary":"555-0001","secondary":"555-0002"},
			"emergencyContact":{"name":"Ann Lee","relationship":"Daughter","phone":"555-0100"}}`, nil},
	}
	e := newEnv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := e.create("Patient", fmt.Sprintf(fullPatient, "agency"))
			before := restPatient(e, id)
			r := e.api(http.MethodPut, "/patients/"+id, tt.body)
			if r.Status != http.StatusOK {
				t.Fatalf("PUT: %d %s", r.Status, r.Body)
			}
			got := r.JSON(t)
			for _, path := range tt.changed {
				delete(fieldParent(got, path), lastKey(path))
				delete(fieldParent(before, path), lastKey(path))
			}
			delete(got, "updatedAt")
			delete(before, "updatedAt")
			if !sameJSON(got, before) {
				t.Fatalf("fields not sent changed:\nbefore %v\nafter  %v", before, got)
			}
			if want, n := 1+min(len(tt.changed), 1), versionCount(e, "Patient", id); n != want {
				t.Fatalf("history holds %d versions, want %d", n, want)
			}
		})
	}
}

// fieldParent is the object holding the field at path.
func fieldParent(m map[string]any, path string) map[string]any {
	i := strings.LastIndex(path, ".")
	if i < 0 {
		return m
	}
	p, _ := fieldAt(m, path[:i]).(map[string]any)
	return p
}

func lastKey(path string) string { return path[strings.LastIndex(path, ".")+1:] }

func TestPatientUpdateAddsAndRemovesParts(t *testing.T) {
	e := newEnv(t)
	bare := e.create("Patient", `{"resourceType":"Patient","gender":"other"}`)
	r := e.api(http.MethodPut, "/patients/"+bare, `{"firstName":"New","lastName":"Person",
		"address":{"street":"1 First St","apartment":"2B","city":"Bend","state":"OR","zipCode":"97701"},
		"phoneNumbers":{"primary":"555-1000","secondary":"555-2000"},
		"emergencyContact":{"name":"Kim Person","relationship":"Spouse","phone":"555-3000"}}`)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	checkFields(t, fhirRead(e, "Patient", bare), map[string]any{
		"name":    []any{map[string]any{"use": "official", "given": []any{"New"}, "family": "Person"}},
		"address": []any{map[string]any{"use": "home", "line": []any{"1 First St", "2B"}, "city": "Bend", "state": "OR", "postalCode": "97701"}},
		"telecom": []any{map[string]any{"system": "phone", "value": "555-1000"}, map[string]any{"system": "phone", "value": "555-2000"}},
		"contact": []any{map[string]any{
			"relationship": []any{map[string]any{"text": "Spouse", "coding": []any{map[string]any{"system": "http://terminology.hl7.org/CodeSystem/v2-0131", "code": "C", "display": "Emergency Contact"}}}},
			"name":         map[string]any{"text": "Kim Person"},
			"telecom":      []any{map[string]any{"system": "phone", "value": "555-3000"}},
		}},
	})
	r = e.api(http.MethodPut, "/patients/"+bare, `{"address":{"apartment":""},"phoneNumbers":{"secondary":""}}`)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	checkFields(t, r.JSON(t), map[string]any{"address.apartment": nil, "address.street": "1 First St", "phoneNumbers": map[string]any{"primary": "555-1000"}})
	checkFields(t, fhirRead(e, "Patient", bare), map[string]any{"address.0.line": []any{"1 First St"}, "telecom.1": nil})
}

func TestPatientUpdateRejectsBadInputAndWritesNothing(t *testing.T) {
	e := newEnv(t)
	full := e.create("Patient", fmt.Sprintf(fullPatient, "agency"))
	bare := e.create("Patient", `{"resourceType":"Patient"}`)
	tests := []struct {
		name        string
		patient     string
		body        string
		contentType string
		status      int
		field       string
	}{
		{"a number for firstName", full, `{"firstName":12}`, "", 400, "firstName"},
		{"a boolean for lastName", full, `{"lastName":true}`, "", 400, "lastName"},
		{"a string for address", full, `{"address":"1 Main St"}`, "", 400, "address"},
		{"a number for address.city", full, `{"address":{"city":5}}`, "", 400, "address.city"},
		{"an array for phoneNumbers", full, `{"phoneNumbers":["555"]}`, "", 400, "phoneNumbers"},
		{"an object for emergencyContact.phone", full, `{"emergencyContact":{"phone":{}}}`, "", 400, "emergencyContact.phone"},
		{"an unknown field", full, `{"firstName":"A","middleName":"B"}`, "", 400, "middleName"},
		{"an unknown address field", full, `{"address":{"country":"US"}}`, "", 400, "country"},
		{"a read-only field", full, `{"dateOfBirth":"1950-01-01"}`, "", 400, "dateOfBirth"},
		{"an empty firstName", full, `{"firstName":""}`, "", 400, "firstName"},
		{"a blank lastName", full, `{"lastName":"   "}`, "", 400, "lastName"},
		{"an empty city", full, `{"address":{"city":""}}`, "", 400, "address.city"},
		{"an empty primary phone", full, `{"phoneNumbers":{"primary":""}}`, "", 400, "phoneNumbers.primary"},
		{"an empty contact name", full, `{"emergencyContact":{"name":""}}`, "", 400, "emergencyContact.name"},
		{"a valid field beside an invalid one", full, `{"lastName":"Ok","firstName":""}`, "", 400, "firstName"},
		{"an apartment without a street", bare, `{"address":{"apartment":"2B"}}`, "", 400, "address.apartment"},
		{"a secondary phone without a primary", bare, `{"phoneNumbers":{"secondary":"555"}}`, "", 400, "phoneNumbers.secondary"},
		{"a contact phone without a contact", bare, `{"emergencyContact":{"phone":"555"}}`, "", 400, "emergencyContact.name"},
		{"malformed JSON", full, `{"firstName":`, "", 400, "body"},
		{"two JSON values", full, `{} {}`, "", 400, "body"},
		{"a JSON array", full, `[]`, "", 400, ""},
		{"a text/plain body", full, `{"firstName":"A"}`, "text/plain", 415, ""},
		{"an XML body", full, `<patient/>`, "application/xml", 415, ""},
		{"an unknown patient", "nope", `{"firstName":"A"}`, "", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(http.MethodPut, "/api/v1/patients/"+tt.patient, tt.body, tt.contentType)
			wantError(t, r, tt.status, tt.field)
			for _, id := range []string{full, bare} {
				if n := versionCount(e, "Patient", id); n != 1 {
					t.Fatalf("Patient/%s has %d versions after a rejected update", id, n)
				}
			}
		})
	}
	if r := e.fhir(http.MethodGet, "/Patient/nope", ""); r.Status != http.StatusNotFound {
		t.Fatalf("an update of an unknown patient created it: %d", r.Status)
	}
}

func TestPatientConcurrentUpdatesNeverLoseAWrite(t *testing.T) {
	e := newEnv(t)
	id := e.create("Patient", fmt.Sprintf(fullPatient, "agency"))
	const writers = 6
	statuses := make([]int, writers)
	bodies := make([]string, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPut, e.srv.URL+"/api/v1/patients/"+id, strings.NewReader(`{"lastName":"Writer`+strconv.Itoa(i)+`"}`))
			req.Header.Set("Authorization", "Bearer "+e.token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				bodies[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			statuses[i], bodies[i] = resp.StatusCode, string(b)
		})
	}
	wg.Wait()
	ok := 0
	for i, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
		default:
			t.Fatalf("writer %d: %d %s", i, s, bodies[i])
		}
	}
	if n := versionCount(e, "Patient", id); n != 1+ok {
		t.Fatalf("%d updates succeeded but history holds %d versions", ok, n)
	}
	t.Logf("%d of %d concurrent updates succeeded, the rest got 409", ok, writers)
}
