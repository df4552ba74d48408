package restadapter_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"fhirstore/restadapter"
)

// visitWorld is the FHIR data visits point to: two clinicians, a patient,
// a location and an episode of care.
type visitWorld struct {
	e                                            *env
	clinician, other, patient, location, episode string
}

// newVisitWorld stores the resources every visit test starts from.
func newVisitWorld(t *testing.T) *visitWorld {
	t.Helper()
	e := newEnv(t)
	w := &visitWorld{e: e}
	w.clinician = e.create("Practitioner", `{"resourceType":"Practitioner","name":[{"use":"usual","given":["Nurse"],"family":"Nick"},{"use":"official","given":["Nora","Jane"],"family":"Nightingale"}]}`)
	w.other = e.create("Practitioner", `{"resourceType":"Practitioner","name":[{"given":["Otto"],"family":"Other"}]}`)
	w.patient = e.create("Patient", `{"resourceType":"Patient","name":[{"use":"official","given":["Paula"],"family":"Patel"}]}`)
	w.location = e.create("Location", `{"resourceType":"Location","name":"Patel home","address":{"line":["12 Elm St","Apt 4"],"city":"Springfield","state":"IL","postalCode":"62701"}}`)
	w.episode = e.create("EpisodeOfCare", fmt.Sprintf(`{"resourceType":"EpisodeOfCare","status":"active","patient":{"reference":"Patient/%s"}}`, w.patient))
	return w
}

// visitSpec describes an Encounter to store; empty fields are left out.
type visitSpec struct {
	status, scheduled, start string
	clinician                string // defaults to the world's clinician
	length                   map[string]any
}

// encounter stores an Encounter for spec and returns its id.
func (w *visitWorld) encounter(spec visitSpec) string {
	w.e.t.Helper()
	return w.e.create("Encounter", string(w.encounterJSON("", spec)))
}

// encounterJSON is the Encounter of spec, with id when not empty.
func (w *visitWorld) encounterJSON(id string, spec visitSpec) []byte {
	w.e.t.Helper()
	if spec.clinician == "" {
		spec.clinician = w.clinician
	}
	enc := map[string]any{
		"resourceType": "Encounter",
		"status":       spec.status,
		"class":        map[string]any{"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "HH", "display": "home health"},
		"type": []any{map[string]any{
			"coding":    []any{map[string]any{"system": restadapter.SystemVisitType, "code": "SN-RV", "display": "Skilled nursing routine visit"}},
			"extension": []any{map[string]any{"url": restadapter.ExtVisitDiscipline, "valueCode": "SN"}},
		}},
		"serviceType":   map[string]any{"coding": []any{map[string]any{"system": "https://www.cms.gov/Medicare/Coding/HCPCSReleaseCodeSets", "code": "G0299"}}},
		"subject":       map[string]any{"reference": "Patient/" + w.patient},
		"episodeOfCare": []any{map[string]any{"reference": "EpisodeOfCare/" + w.episode}},
		"participant":   []any{map[string]any{"individual": map[string]any{"reference": "Practitioner/" + spec.clinician}}},
		"location":      []any{map[string]any{"location": map[string]any{"reference": "Location/" + w.location}}},
	}
	if id != "" {
		enc["id"] = id
	}
	if spec.scheduled != "" {
		enc["extension"] = []any{map[string]any{"url": restadapter.ExtPlannedStartDate, "valueDateTime": spec.scheduled}}
	}
	if spec.start != "" {
		enc["period"] = map[string]any{"start": spec.start}
	}
	if spec.length != nil {
		enc["length"] = spec.length
	}
	b, err := json.Marshal(enc)
	if err != nil {
		w.e.t.Fatal(err)
	}
	return b
}

// visits lists the world clinician's visits with query.
func (w *visitWorld) visits(t *testing.T, query string) (ids []string, body map[string]any) {
	t.Helper()
	r := w.e.api(http.MethodGet, "/clinicians/"+w.clinician+"/visits"+query, "")
	if r.Status != http.StatusOK {
		t.Fatalf("list visits%s: %d %s", query, r.Status, r.Body)
	}
	body = r.JSON(t)
	data, _ := body["data"].([]any)
	ids = []string{}
	for _, v := range data {
		ids = append(ids, visitField(v, "visitId").(string))
	}
	return ids, body
}

// visitField is the value at a dotted path of decoded JSON; a number
// steps into an array.
func visitField(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		if a, ok := v.([]any); ok {
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(a) {
				return nil
			}
			v = a[i]
			continue
		}
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// visitsHistoryTotal counts every stored version of every resource of the
// tenant: unchanged means nothing was written.
func visitsHistoryTotal(t *testing.T, e *env) float64 {
	t.Helper()
	r := e.fhir(http.MethodGet, "/_history?_count=1", "")
	if r.Status != http.StatusOK {
		t.Fatalf("system history: %d %s", r.Status, r.Body)
	}
	n, _ := r.JSON(t)["total"].(float64)
	return n
}

// fhirLastUpdated reads a FHIR resource's meta.lastUpdated.
func fhirLastUpdated(t *testing.T, e *env, path string) time.Time {
	t.Helper()
	r := e.fhir(http.MethodGet, path, "")
	ts, err := time.Parse(time.RFC3339Nano, visitField(r.JSON(t), "meta.lastUpdated").(string))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ts
}

func TestVisitShowsEveryElementOfItsEncounter(t *testing.T) {
	w := newVisitWorld(t)
	id := w.encounter(visitSpec{status: "in-progress", scheduled: "2024-05-01T09:00:00Z", start: "2024-05-01T09:10:00Z",
		length: map[string]any{"value": 1.5, "unit": "h", "system": "http://unitsofmeasure.org", "code": "h"}})
	created := fhirLastUpdated(t, w.e, "/Encounter/"+id)
	time.Sleep(5 * time.Millisecond)
	if r := w.e.fhir(http.MethodPut, "/Encounter/"+id, string(w.encounterJSON(id, visitSpec{status: "in-progress", scheduled: "2024-05-01T09:00:00Z", start: "2024-05-01T09:10:00Z",
		length: map[string]any{"value": 1.5, "unit": "h", "system": "http://unitsofmeasure.org", "code": "h"}}))); r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	updated := fhirLastUpdated(t, w.e, "/Encounter/"+id)
	_, body := w.visits(t, "")
	visit := visitField(body, "data").([]any)[0]
	tests := []struct {
		field string
		want  any
	}{
		{"visitId", id},
		{"episodeId", w.episode},
		{"patientId", w.patient},
		{"clinicianId", w.clinician},
		{"visitTypeId", "SN-RV"},
		{"visitType.visitTypeId", "SN-RV"},
		{"visitType.name", "Skilled nursing routine visit"},
		{"visitType.discipline", "SN"},
		{"visitType.serviceCode", "G0299"},
		{"scheduledDate", "2024-05-01T09:00:00Z"},
		{"actualDate", "2024-05-01T09:10:00Z"},
		{"duration", 90.0},
		{"status", "inProgress"},
		{"location.locationId", w.location},
		{"location.name", "Patel home"},
		{"location.address.street", "12 Elm St"},
		{"location.address.apartment", "Apt 4"},
		{"location.address.city", "Springfield"},
		{"location.address.state", "IL"},
		{"location.address.zipCode", "62701"},
		{"patient.patientId", w.patient},
		{"patient.firstName", "Paula"},
		{"patient.lastName", "Patel"},
		{"clinician.clinicianId", w.clinician},
		{"clinician.firstName", "Nora"},
		{"clinician.lastName", "Nightingale"},
		{"createdAt", created.Format("2006-01-02T15:04:05.000Z07:00")},
		{"updatedAt", updated.Format("2006-01-02T15:04:05.000Z07:00")},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			if got := visitField(visit, tt.field); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("%s = %#v, want %#v", tt.field, got, tt.want)
			}
		})
	}
}

func TestVisitStatusShowsTheEncounterStatus(t *testing.T) {
	w := newVisitWorld(t)
	tests := []struct {
		fhir, want string
	}{
		{"planned", "scheduled"},
		{"arrived", "inProgress"},
		{"triaged", "inProgress"},
		{"in-progress", "inProgress"},
		{"onleave", "inProgress"},
		{"finished", "completed"},
		{"cancelled", "cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.fhir, func(t *testing.T) {
			id := w.encounter(visitSpec{status: tt.fhir})
			_, body := w.visits(t, "?limit=100")
			for _, v := range visitField(body, "data").([]any) {
				if visitField(v, "visitId") == id {
					if got := visitField(v, "status"); got != tt.want {
						t.Fatalf("status %v, want %s", got, tt.want)
					}
					return
				}
			}
			t.Fatalf("visit %s is not listed", id)
		})
	}
}

func TestClinicianVisitsFilterByStatus(t *testing.T) {
	w := newVisitWorld(t)
	planned := w.encounter(visitSpec{status: "planned", scheduled: "2024-05-01T09:00:00Z"})
	arrived := w.encounter(visitSpec{status: "arrived", scheduled: "2024-05-02T09:00:00Z"})
	going := w.encounter(visitSpec{status: "in-progress", scheduled: "2024-05-03T09:00:00Z"})
	done := w.encounter(visitSpec{status: "finished", scheduled: "2024-05-04T09:00:00Z"})
	cancelled := w.encounter(visitSpec{status: "cancelled", scheduled: "2024-05-05T09:00:00Z"})
	w.encounter(visitSpec{status: "entered-in-error", scheduled: "2024-05-06T09:00:00Z"})
	w.encounter(visitSpec{status: "planned", scheduled: "2024-05-01T08:00:00Z", clinician: w.other})
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"no status lists every visit but those entered in error", "", []string{planned, arrived, going, done, cancelled}},
		{"scheduled is FHIR planned", "?status=scheduled", []string{planned}},
		{"inProgress is FHIR arrived, triaged, in-progress or onleave", "?status=inProgress", []string{arrived, going}},
		{"completed is FHIR finished", "?status=completed", []string{done}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := w.visits(t, tt.query); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClinicianVisitsFilterByCreatedOrUpdated(t *testing.T) {
	w := newVisitWorld(t)
	today := time.Now().UTC().Format(time.DateOnly)
	a := w.encounter(visitSpec{status: "planned", scheduled: "2024-05-01T09:00:00Z"})
	aCreated := fhirLastUpdated(t, w.e, "/Encounter/"+a)
	time.Sleep(5 * time.Millisecond)
	b := w.encounter(visitSpec{status: "planned", scheduled: "2024-05-02T09:00:00Z"})
	bCreated := fhirLastUpdated(t, w.e, "/Encounter/"+b)
	time.Sleep(5 * time.Millisecond)
	if r := w.e.fhir(http.MethodPut, "/Encounter/"+a, string(w.encounterJSON(a, visitSpec{status: "arrived", scheduled: "2024-05-01T09:00:00Z"}))); r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	aUpdated := fhirLastUpdated(t, w.e, "/Encounter/"+a)
	if time.Now().UTC().Format(time.DateOnly) != today {
		t.Skip("the test ran across midnight UTC")
	}
	day := func(d int) string { return time.Now().UTC().AddDate(0, 0, d).Format(time.DateOnly) }
	instant := func(ts time.Time, d time.Duration) string { return url.QueryEscape(ts.Add(d).Format(time.RFC3339Nano)) }
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"dateFrom today lists both", "?dateFrom=" + today, []string{a, b}},
		{"dateFrom tomorrow lists none", "?dateFrom=" + day(1), []string{}},
		{"dateTo yesterday lists none", "?dateTo=" + day(-1), []string{}},
		{"dateTo today includes the whole day", "?dateTo=" + today, []string{a, b}},
		{"dateFrom and dateTo the same day", "?dateFrom=" + today + "&dateTo=" + today, []string{a, b}},
		{"dateFrom at b's creation keeps a, updated later", "?dateFrom=" + instant(bCreated, 0), []string{a, b}},
		{"dateFrom after every write lists none", "?dateFrom=" + instant(aUpdated, time.Millisecond), []string{}},
		{"dateTo at a's creation keeps a, though updated later", "?dateTo=" + instant(aCreated, 0), []string{a}},
		{"dateTo just before a's creation lists none", "?dateTo=" + instant(aCreated, -time.Millisecond), []string{}},
		{"a range after b's creation keeps a, changed in it", "?dateFrom=" + instant(bCreated, time.Millisecond) + "&dateTo=" + instant(aUpdated, -time.Millisecond), []string{a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := w.visits(t, tt.query); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClinicianVisitsArePagedInScheduledOrder(t *testing.T) {
	w := newVisitWorld(t)
	ids := map[string]string{}
	for _, v := range []struct{ name, scheduled string }{
		{"third", "2024-05-03T09:00:00Z"},
		{"unscheduled", ""},
		{"first", "2024-05-01T09:00:00+02:00"}, // 07:00Z, before the second
		{"second", "2024-05-01T08:00:00Z"},
		{"fourth", "2024-05-04"},
	} {
		ids[v.name] = w.encounter(visitSpec{status: "planned", scheduled: v.scheduled})
	}
	order := []string{ids["first"], ids["second"], ids["third"], ids["fourth"], ids["unscheduled"]}
	tests := []struct {
		query      string
		want       []string
		pagination map[string]any
	}{
		{"?limit=2", order[0:2], map[string]any{"page": 1.0, "limit": 2.0, "total": 5.0, "totalPages": 3.0, "offset": 0.0}},
		{"?limit=2&page=2", order[2:4], map[string]any{"page": 2.0, "limit": 2.0, "total": 5.0, "totalPages": 3.0, "offset": 2.0}},
		{"?limit=2&page=3", order[4:5], map[string]any{"page": 3.0, "limit": 2.0, "total": 5.0, "totalPages": 3.0, "offset": 4.0}},
		{"?limit=2&page=4", []string{}, map[string]any{"page": 4.0, "limit": 2.0, "total": 5.0, "totalPages": 3.0, "offset": 6.0}},
		{"", order, map[string]any{"page": 1.0, "limit": 20.0, "total": 5.0, "totalPages": 1.0, "offset": 0.0}},
	}
	for _, tt := range tests {
		name := tt.query
		if name == "" {
			name = "the default page"
		}
		t.Run(name, func(t *testing.T) {
			got, body := w.visits(t, tt.query)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			if p := body["pagination"]; !reflect.DeepEqual(p, tt.pagination) {
				t.Fatalf("pagination %v, want %v", p, tt.pagination)
			}
		})
	}
}

func TestClinicianVisitsRejectBadQueries(t *testing.T) {
	w := newVisitWorld(t)
	tests := []struct {
		name   string
		path   string
		status int
		field  string
	}{
		{"cancelled is not a status filter", "/clinicians/" + w.clinician + "/visits?status=cancelled", http.StatusBadRequest, "status"},
		{"an unknown status", "/clinicians/" + w.clinician + "/visits?status=done", http.StatusBadRequest, "status"},
		{"a FHIR status", "/clinicians/" + w.clinician + "/visits?status=planned", http.StatusBadRequest, "status"},
		{"dateFrom not a date", "/clinicians/" + w.clinician + "/visits?dateFrom=yesterday", http.StatusBadRequest, "dateFrom"},
		{"dateFrom month 13", "/clinicians/" + w.clinician + "/visits?dateFrom=2024-13-01", http.StatusBadRequest, "dateFrom"},
		{"dateTo with slashes", "/clinicians/" + w.clinician + "/visits?dateTo=2024/05/01", http.StatusBadRequest, "dateTo"},
		{"dateTo a time without zone", "/clinicians/" + w.clinician + "/visits?dateTo=2024-05-01T10:00:00", http.StatusBadRequest, "dateTo"},
		{"dateFrom after dateTo", "/clinicians/" + w.clinician + "/visits?dateFrom=2024-05-02&dateTo=2024-05-01", http.StatusBadRequest, "dateFrom"},
		{"limit over 100", "/clinicians/" + w.clinician + "/visits?limit=101", http.StatusBadRequest, "limit"},
		{"limit 0", "/clinicians/" + w.clinician + "/visits?limit=0", http.StatusBadRequest, "limit"},
		{"page 0", "/clinicians/" + w.clinician + "/visits?page=0", http.StatusBadRequest, "page"},
		{"an unknown clinician", "/clinicians/nobody/visits", http.StatusNotFound, "nobody"},
		{"a patient is not a clinician", "/clinicians/" + w.patient + "/visits", http.StatusNotFound, w.patient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, w.e.api(http.MethodGet, tt.path, ""), tt.status, tt.field)
		})
	}
}

func TestCompletingAVisitFinishesItsEncounter(t *testing.T) {
	tests := []struct {
		name string
		spec visitSpec
		body string
		want map[string]any // Visit fields
		fhir map[string]any // Encounter elements
	}{
		{
			name: "every field of an in-progress visit",
			spec: visitSpec{status: "in-progress", scheduled: "2024-05-01T09:00:00Z", start: "2024-05-01T09:05:00Z"},
			body: `{"endTime":"2024-05-01T09:50:00Z","duration":40,"mileage":12.5,"summary":"Wound healing well."}`,
			want: map[string]any{"status": "completed", "duration": 40.0, "actualDate": "2024-05-01T09:05:00Z", "scheduledDate": "2024-05-01T09:00:00Z"},
			fhir: map[string]any{
				"status": "finished", "period.start": "2024-05-01T09:05:00Z", "period.end": "2024-05-01T09:50:00Z",
				"length.value": 40.0, "length.code": "min", "length.system": "http://unitsofmeasure.org",
				"extension.mileage": 12.5, "extension.summary": "Wound healing well.",
			},
		},
		{
			name: "the duration defaults to the time from start to end",
			spec: visitSpec{status: "arrived", start: "2024-05-01T09:00:00Z"},
			body: `{"endTime":"2024-05-01T10:15:00Z"}`,
			want: map[string]any{"status": "completed", "duration": 75.0},
			fhir: map[string]any{"status": "finished", "period.end": "2024-05-01T10:15:00Z", "length.value": 75.0},
		},
		{
			name: "a scheduled visit never started starts duration before its end",
			spec: visitSpec{status: "planned", scheduled: "2024-05-01T09:00:00Z"},
			body: `{"endTime":"2024-05-01T10:00:00Z","duration":30}`,
			want: map[string]any{"status": "completed", "duration": 30.0, "actualDate": "2024-05-01T09:30:00Z"},
			fhir: map[string]any{"period.start": "2024-05-01T09:30:00Z", "period.end": "2024-05-01T10:00:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newVisitWorld(t)
			id := w.encounter(tt.spec)
			created := fhirLastUpdated(t, w.e, "/Encounter/"+id)
			r := w.e.api(http.MethodPost, "/visits/"+id+"/complete", tt.body)
			if r.Status != http.StatusOK {
				t.Fatalf("complete: %d %s", r.Status, r.Body)
			}
			visit := r.JSON(t)
			tt.want["visitId"], tt.want["createdAt"] = id, created.Format("2006-01-02T15:04:05.000Z07:00")
			tt.want["clinician.lastName"], tt.want["patient.firstName"] = "Nightingale", "Paula"
			for field, want := range tt.want {
				if got := visitField(visit, field); got != want {
					t.Errorf("Visit %s = %#v, want %#v", field, got, want)
				}
			}
			enc := w.e.fhir(http.MethodGet, "/Encounter/"+id, "").JSON(t)
			if visit["updatedAt"] != visitField(enc, "meta.lastUpdated") {
				t.Errorf("updatedAt %v, Encounter lastUpdated %v", visit["updatedAt"], visitField(enc, "meta.lastUpdated"))
			}
			for path, want := range tt.fhir {
				if got := encounterElement(enc, path); got != want {
					t.Errorf("Encounter.%s = %#v, want %#v", path, got, want)
				}
			}
			hist := w.e.fhir(http.MethodGet, "/Encounter/"+id+"/_history", "").JSON(t)
			if n := hist["total"]; n != 2.0 {
				t.Fatalf("Encounter history holds %v versions, want 2", n)
			}
		})
	}
}

// encounterElement reads a dotted path of an Encounter; extension.mileage
// and extension.summary read the value of the visit extensions.
func encounterElement(enc map[string]any, path string) any {
	ext := map[string]struct{ url, path string }{
		"extension.mileage": {restadapter.ExtVisitMileage, "valueQuantity.value"},
		"extension.summary": {restadapter.ExtVisitSummary, "valueString"},
	}
	x, ok := ext[path]
	if !ok {
		return visitField(enc, path)
	}
	list, _ := enc["extension"].([]any)
	for _, item := range list {
		if visitField(item, "url") == x.url {
			return visitField(item, x.path)
		}
	}
	return nil
}

func TestCompletingAVisitConflictsWithItsState(t *testing.T) {
	w := newVisitWorld(t)
	for _, status := range []string{"finished", "cancelled", "entered-in-error"} {
		t.Run(status, func(t *testing.T) {
			id := w.encounter(visitSpec{status: status, start: "2024-05-01T09:00:00Z"})
			before := visitsHistoryTotal(t, w.e)
			wantError(t, w.e.api(http.MethodPost, "/visits/"+id+"/complete", `{"endTime":"2024-05-01T10:00:00Z"}`), http.StatusConflict, "")
			if after := visitsHistoryTotal(t, w.e); after != before {
				t.Fatalf("history grew from %v to %v", before, after)
			}
		})
	}
	t.Run("completing twice", func(t *testing.T) {
		id := w.encounter(visitSpec{status: "in-progress", start: "2024-05-01T09:00:00Z"})
		if r := w.e.api(http.MethodPost, "/visits/"+id+"/complete", `{"endTime":"2024-05-01T10:00:00Z"}`); r.Status != http.StatusOK {
			t.Fatalf("first complete: %d %s", r.Status, r.Body)
		}
		wantError(t, w.e.api(http.MethodPost, "/visits/"+id+"/complete", `{"endTime":"2024-05-01T10:00:00Z"}`), http.StatusConflict, "completed")
	})
}

func TestCompletingAVisitRejectsBadInput(t *testing.T) {
	w := newVisitWorld(t)
	id := w.encounter(visitSpec{status: "in-progress", start: "2024-05-01T09:00:00Z"})
	tests := []struct {
		name   string
		visit  string
		body   string
		status int
		field  string
	}{
		{"endTime not a date-time", id, `{"endTime":"tomorrow"}`, http.StatusBadRequest, "endTime"},
		{"endTime without a zone", id, `{"endTime":"2024-05-01T10:00:00"}`, http.StatusBadRequest, "endTime"},
		{"endTime a number", id, `{"endTime":1714557600}`, http.StatusBadRequest, "endTime"},
		{"endTime before the visit started", id, `{"endTime":"2024-05-01T08:59:00Z"}`, http.StatusBadRequest, "endTime"},
		{"duration a string", id, `{"duration":"30"}`, http.StatusBadRequest, "duration"},
		{"duration a fraction", id, `{"duration":30.5}`, http.StatusBadRequest, "duration"},
		{"duration negative", id, `{"duration":-5}`, http.StatusBadRequest, "duration"},
		{"mileage a string", id, `{"mileage":"12 mi"}`, http.StatusBadRequest, "mileage"},
		{"mileage negative", id, `{"mileage":-1}`, http.StatusBadRequest, "mileage"},
		{"summary a number", id, `{"summary":5}`, http.StatusBadRequest, "summary"},
		{"an unknown field", id, `{"notes":"x"}`, http.StatusBadRequest, "notes"},
		{"not JSON", id, `{"duration":`, http.StatusBadRequest, "body"},
		{"an unknown visit", "nope", `{"duration":30}`, http.StatusNotFound, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := visitsHistoryTotal(t, w.e)
			wantError(t, w.e.api(http.MethodPost, "/visits/"+tt.visit+"/complete", tt.body), tt.status, tt.field)
			if after := visitsHistoryTotal(t, w.e); after != before {
				t.Fatalf("history grew from %v to %v", before, after)
			}
		})
	}
	t.Run("a body that is not JSON media is 415", func(t *testing.T) {
		wantError(t, w.e.call(http.MethodPost, "/api/v1/visits/"+id+"/complete", `duration=30`, "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType, "")
	})
}

func TestAVisitsClinicianIsItsPrimaryPerformer(t *testing.T) {
	w := newVisitWorld(t)
	var enc map[string]any
	if err := json.Unmarshal(w.encounterJSON("", visitSpec{status: "planned"}), &enc); err != nil {
		t.Fatal(err)
	}
	pprf := map[string]any{"coding": []any{map[string]any{"system": restadapter.SystemParticipationType, "code": "PPRF"}}}
	enc["participant"] = []any{
		map[string]any{"individual": map[string]any{"reference": "Practitioner/" + w.other}},
		map[string]any{"type": []any{pprf}, "individual": map[string]any{"reference": "Practitioner/" + w.clinician}},
	}
	b, _ := json.Marshal(enc)
	id := w.e.create("Encounter", string(b))
	for _, lister := range []string{w.clinician, w.other} {
		r := w.e.api(http.MethodGet, "/clinicians/"+lister+"/visits", "")
		visit := visitField(r.JSON(t), "data.0")
		if visitField(visit, "visitId") != id || visitField(visit, "clinicianId") != w.clinician || visitField(visit, "clinician.lastName") != "Nightingale" {
			t.Fatalf("listed for %s: %v", lister, visit)
		}
	}
}
