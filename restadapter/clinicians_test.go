package restadapter_test

import (
	"net/http"
	"testing"
)

// addClinician stores a Practitioner and its PractitionerRole at agency
// (role is the role's JSON members after resourceType) and returns the
// Practitioner's id.
func addClinician(e *env, agency, practitioner, role string) string {
	e.t.Helper()
	id := e.create("Practitioner", `{"resourceType":"Practitioner",`+practitioner+`}`)
	e.create("PractitionerRole", `{"resourceType":"PractitionerRole","practitioner":{"reference":"Practitioner/`+id+`"},
		"organization":{"reference":"Organization/`+agency+`"}`+role+`}`)
	return id
}

// clinicianPage reads one page of the agency's clinicians, which must be 200.
func clinicianPage(e *env, agency, query string) map[string]any {
	e.t.Helper()
	r := e.api(http.MethodGet, "/agencies/"+agency+"/clinicians"+query, "")
	if r.Status != http.StatusOK {
		e.t.Fatalf("GET clinicians%s: %d %s", query, r.Status, r.Body)
	}
	return r.JSON(e.t)
}

func TestAgencyCliniciansProjectPractitionerAndRole(t *testing.T) {
	e := newEnv(t)
	agency := e.create("Organization", `{"resourceType":"Organization","name":"Agency"}`)
	other := e.create("Organization", `{"resourceType":"Organization","name":"Other"}`)
	jane := addClinician(e, agency, `"active":true,
		"name":[{"use":"usual","given":["Janie"]},{"use":"official","given":["Jane","Q"],"family":"Doe","suffix":["RN","BSN"]}],
		"identifier":[{"system":"http://example.org/staff","value":"S-1"},{"system":"http://hl7.org/fhir/sid/us-npi","value":"1234567893"}],
		"telecom":[{"system":"phone","value":"555"},{"system":"email","value":"jane@home.example","rank":2},{"system":"email","value":"jane@best.example","rank":1}]`,
		`,"active":true,"code":[{"coding":[{"system":"http://snomed.info/sct","code":"224535009","display":"Registered nurse"}]}]`)
	paul := addClinician(e, agency, `"name":[{"given":["Paul"],"family":"Pratt"}],
		"qualification":[{"code":{"coding":[{"code":"PT"}]}},{"code":{"text":"CLT"}}]`,
		`,"active":false,"code":[{"text":"Physical therapist"}],"telecom":[{"system":"email","value":"paul@agency.example"}]`)
	// Inactive as a practitioner though the role is active.
	olga := addClinician(e, agency, `"active":false,"name":[{"given":["Olga"],"family":"Old"}]`, `,"active":true`)
	// A second role at the agency does not list the practitioner twice; the
	// active role is the one shown.
	e.create("PractitionerRole", `{"resourceType":"PractitionerRole","active":false,"code":[{"text":"Former aide"}],
		"practitioner":{"reference":"Practitioner/`+jane+`"},"organization":{"reference":"Organization/`+agency+`"}}`)
	// Not listed: a role at another agency, a role without practitioner, a
	// role whose practitioner does not exist.
	addClinician(e, other, `"name":[{"family":"Elsewhere"}]`, "")
	e.create("PractitionerRole", `{"resourceType":"PractitionerRole","organization":{"reference":"Organization/`+agency+`"}}`)
	e.create("PractitionerRole", `{"resourceType":"PractitionerRole","practitioner":{"reference":"Practitioner/ghost"},"organization":{"reference":"Organization/`+agency+`"}}`)
	// createdAt stays the first version's time across updates.
	created := fhirRead(e, "Practitioner", paul)["meta"].(map[string]any)["lastUpdated"]
	if r := e.fhir(http.MethodPut, "/Practitioner/"+paul, `{"resourceType":"Practitioner","id":"`+paul+`","name":[{"given":["Paul"],"family":"Pratt"}],
		"qualification":[{"code":{"coding":[{"code":"PT"}]}},{"code":{"text":"CLT"}}]}`); r.Status != http.StatusOK {
		t.Fatalf("update practitioner: %d %s", r.Status, r.Body)
	}

	got := clinicianPage(e, agency, "")
	checkFields(t, got, map[string]any{
		"pagination": map[string]any{"page": 1, "limit": 20, "total": 3, "totalPages": 1, "offset": 0},
		"data.0": map[string]any{"clinicianId": jane, "agencyId": agency, "firstName": "Jane", "lastName": "Doe", "credentials": "RN, BSN",
			"npi": "1234567893", "role": "Registered nurse", "email": "jane@best.example", "status": "active",
			"createdAt": fhirRead(e, "Practitioner", jane)["meta"].(map[string]any)["lastUpdated"]},
		"data.1": map[string]any{"clinicianId": olga, "agencyId": agency, "firstName": "Olga", "lastName": "Old", "status": "inactive",
			"createdAt": fhirRead(e, "Practitioner", olga)["meta"].(map[string]any)["lastUpdated"]},
		"data.2": map[string]any{"clinicianId": paul, "agencyId": agency, "firstName": "Paul", "lastName": "Pratt", "credentials": "PT, CLT",
			"role": "Physical therapist", "email": "paul@agency.example", "status": "inactive", "createdAt": created},
	})
}

func TestAgencyCliniciansArePagedInNameOrder(t *testing.T) {
	e := newEnv(t)
	agency := e.create("Organization", `{"resourceType":"Organization","name":"Agency"}`)
	ids := map[string]string{}
	for _, family := range []string{"Clin3", "Clin1", "Clin2"} {
		ids[family] = addClinician(e, agency, `"active":true,"name":[{"family":"`+family+`","given":["C"]}]`, `,"active":true`)
	}
	tests := []struct {
		query      string
		data       []string
		pagination map[string]any
	}{
		{"?limit=2", []string{"Clin1", "Clin2"}, map[string]any{"page": 1, "limit": 2, "total": 3, "totalPages": 2, "offset": 0}},
		{"?limit=2&page=2", []string{"Clin3"}, map[string]any{"page": 2, "limit": 2, "total": 3, "totalPages": 2, "offset": 2}},
		{"?limit=2&page=3", nil, map[string]any{"page": 3, "limit": 2, "total": 3, "totalPages": 2, "offset": 4}},
		{"?page=1&limit=100", []string{"Clin1", "Clin2", "Clin3"}, map[string]any{"page": 1, "limit": 100, "total": 3, "totalPages": 1, "offset": 0}},
		{"", []string{"Clin1", "Clin2", "Clin3"}, map[string]any{"page": 1, "limit": 20, "total": 3, "totalPages": 1, "offset": 0}},
	}
	for _, tt := range tests {
		t.Run("clinicians"+tt.query, func(t *testing.T) {
			got := clinicianPage(e, agency, tt.query)
			want := []any{}
			for _, family := range tt.data {
				want = append(want, ids[family])
			}
			gotIDs := []any{}
			data, ok := got["data"].([]any)
			if !ok {
				t.Fatalf("data is not an array: %s", got["data"])
			}
			for _, c := range data {
				gotIDs = append(gotIDs, fieldAt(c, "clinicianId"))
			}
			if !sameJSON(gotIDs, want) {
				t.Fatalf("clinicians %v, want %v (%v)", gotIDs, want, tt.data)
			}
			checkFields(t, got, map[string]any{"pagination": tt.pagination})
		})
	}
}

func TestAgencyCliniciansRejectBadPagingAndUnknownAgencies(t *testing.T) {
	e := newEnv(t)
	agency := e.create("Organization", `{"resourceType":"Organization","name":"Agency"}`)
	gone := e.create("Organization", `{"resourceType":"Organization","name":"Closed"}`)
	if r := e.fhir(http.MethodDelete, "/Organization/"+gone, ""); r.Status >= 300 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	tests := []struct {
		name   string
		path   string
		status int
		field  string
	}{
		{"a limit above 100", agency + "/clinicians?limit=101", 400, "limit"},
		{"a limit of 0", agency + "/clinicians?limit=0", 400, "limit"},
		{"a limit that is no number", agency + "/clinicians?limit=ten", 400, "limit"},
		{"a page of 0", agency + "/clinicians?page=0", 400, "page"},
		{"a negative page", agency + "/clinicians?page=-1", 400, "page"},
		{"a fractional page", agency + "/clinicians?page=1.5", 400, "page"},
		{"an unknown agency", "nope/clinicians", 404, ""},
		{"a deleted agency", gone + "/clinicians", 404, ""},
		{"a patient is no agency", patient + "/clinicians", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, e.api(http.MethodGet, "/agencies/"+tt.path, ""), tt.status, tt.field)
		})
	}
	t.Run("an agency without clinicians has an empty list", func(t *testing.T) {
		got := clinicianPage(e, agency, "")
		checkFields(t, got, map[string]any{"data": []any{}, "pagination": map[string]any{"page": 1, "limit": 20, "total": 0, "totalPages": 0, "offset": 0}})
	})
}
