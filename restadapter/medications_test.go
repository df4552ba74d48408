package restadapter_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"fhirstore/restadapter"
)

// metformin is a medication entry with every field.
const metformin = `{"medication":"Metformin 500 mg tablet","usageStatus":"active","clinicianReviewed":true,` +
	`"source":"Admission Referral Packet","dose":"500","unitOfMeasurement":"mg","frequency":"BID","route":"oral",` +
	`"instructions":"Take with meals","highRisk":false,"matchedToMedDb":true}`

// putMedications replaces a visit's medications and wants 200.
func putMedications(t *testing.T, e *env, visit, body string) map[string]any {
	t.Helper()
	r := e.api(http.MethodPut, "/visits/"+visit+"/medications", body)
	if r.Status != http.StatusOK {
		t.Fatalf("put medications: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)
}

// medicationIDs are the medicationIds of an R7 response.
func medicationIDs(resp map[string]any) []string {
	ids := []string{}
	meds, _ := resp["medications"].([]any)
	for _, m := range meds {
		id, _ := visitField(m, "medicationId").(string)
		ids = append(ids, id)
	}
	return ids
}

// medicationList is the visit's medication List as FHIR shows it, and the
// MedicationStatement ids its entries reference.
func medicationList(t *testing.T, e *env, visit string) (list map[string]any, items []string) {
	t.Helper()
	q := url.Values{"encounter": {"Encounter/" + visit}, "code": {restadapter.SystemLOINC + "|" + restadapter.CodeMedicationList}}
	b := e.fhir(http.MethodGet, "/List?"+q.Encode(), "").JSON(t)
	if n := b["total"]; n != 1.0 {
		t.Fatalf("the visit has %v medication lists, want 1", n)
	}
	list = visitField(b, "entry.0.resource").(map[string]any)
	items = []string{}
	entries, _ := list["entry"].([]any)
	for _, en := range entries {
		items = append(items, strings.TrimPrefix(visitField(en, "item.reference").(string), "MedicationStatement/"))
	}
	return list, items
}

// visitStatementCount counts the current MedicationStatements of a visit.
func visitStatementCount(t *testing.T, e *env, visit string) float64 {
	t.Helper()
	n, _ := e.fhir(http.MethodGet, "/MedicationStatement?_summary=count&context=Encounter/"+visit, "").JSON(t)["total"].(float64)
	return n
}

func TestPuttingMedicationsStoresAListOfMedicationStatements(t *testing.T) {
	w := newVisitWorld(t)
	visit := w.encounter(visitSpec{status: "in-progress"})
	resp := putMedications(t, w.e, visit, `{"medications":[`+metformin+`,{"medication":"Aspirin","dose":"1-2","unitOfMeasurement":"tablet"}]}`)
	ids := medicationIDs(resp)
	list, items := medicationList(t, w.e, visit)

	t.Run("the response is the list as stored", func(t *testing.T) {
		var sent map[string]any
		if err := json.Unmarshal([]byte(metformin), &sent); err != nil {
			t.Fatal(err)
		}
		sent["medicationId"] = ids[0]
		if got := visitField(resp, "medications.0"); !reflect.DeepEqual(got, sent) {
			t.Fatalf("got %v\nwant %v", got, sent)
		}
		want := map[string]any{"medicationId": ids[1], "medication": "Aspirin", "usageStatus": "unknown", "dose": "1-2", "unitOfMeasurement": "tablet"}
		if got := visitField(resp, "medications.1"); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v\nwant %v", got, want)
		}
		if resp["visitId"] != visit || resp["updatedAt"] != visitField(list, "meta.lastUpdated") {
			t.Fatalf("visitId %v updatedAt %v, want %s and the List's lastUpdated %v", resp["visitId"], resp["updatedAt"], visit, visitField(list, "meta.lastUpdated"))
		}
	})

	listWant := map[string]any{
		"status": "current", "mode": "working",
		"code.coding.0.system": "http://loinc.org", "code.coding.0.code": "10160-0",
		"subject.reference":   "Patient/" + w.patient,
		"encounter.reference": "Encounter/" + visit,
		"source.reference":    "Practitioner/" + w.clinician,
	}
	for path, want := range listWant {
		t.Run("List."+path, func(t *testing.T) {
			if got := visitField(list, path); got != want {
				t.Fatalf("got %#v, want %#v", got, want)
			}
		})
	}
	t.Run("the List entries are the statements in order", func(t *testing.T) {
		if !reflect.DeepEqual(items, ids) {
			t.Fatalf("List items %v, response ids %v", items, ids)
		}
	})

	ms := w.e.fhir(http.MethodGet, "/MedicationStatement/"+ids[0], "").JSON(t)
	statementWant := map[string]any{
		"status":                                    "active",
		"medicationCodeableConcept.text":            "Metformin 500 mg tablet",
		"subject.reference":                         "Patient/" + w.patient,
		"context.reference":                         "Encounter/" + visit,
		"informationSource.display":                 "Admission Referral Packet",
		"dosage.0.doseAndRate.0.doseQuantity.value": 500.0,
		"dosage.0.doseAndRate.0.doseQuantity.unit":  "mg",
		"dosage.0.timing.code.text":                 "BID",
		"dosage.0.route.text":                       "oral",
		"dosage.0.patientInstruction":               "Take with meals",
	}
	for path, want := range statementWant {
		t.Run("MedicationStatement."+path, func(t *testing.T) {
			if got := visitField(ms, path); got != want {
				t.Fatalf("got %#v, want %#v", got, want)
			}
		})
	}
	t.Run("MedicationStatement flags are extensions", func(t *testing.T) {
		want := map[string]any{restadapter.ExtMedicationClinicianReviewed: true, restadapter.ExtMedicationHighRisk: false, restadapter.ExtMedicationMatchedToMedDB: true}
		got := map[string]any{}
		exts, _ := ms["extension"].([]any)
		for _, x := range exts {
			got[visitField(x, "url").(string)] = visitField(x, "valueBoolean")
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	t.Run("a dose range is a doseRange", func(t *testing.T) {
		ms := w.e.fhir(http.MethodGet, "/MedicationStatement/"+ids[1], "").JSON(t)
		if lo, hi := visitField(ms, "dosage.0.doseAndRate.0.doseRange.low.value"), visitField(ms, "dosage.0.doseAndRate.0.doseRange.high.value"); lo != 1.0 || hi != 2.0 {
			t.Fatalf("doseRange %v-%v, want 1-2", lo, hi)
		}
	})
}

func TestPuttingMedicationsReplacesTheList(t *testing.T) {
	w := newVisitWorld(t)
	visit := w.encounter(visitSpec{status: "in-progress"})
	first := medicationIDs(putMedications(t, w.e, visit, `{"medications":[{"medication":"A"},{"medication":"B"},{"medication":"C"}]}`))
	firstList, _ := medicationList(t, w.e, visit)

	resp := putMedications(t, w.e, visit, `{"medications":[{"medicationId":"`+first[1]+`","medication":"B","usageStatus":"stopped"},{"medication":"D"}]}`)
	second := medicationIDs(resp)
	list, items := medicationList(t, w.e, visit)
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"a sent medicationId keeps its statement", second[0], first[1]},
		{"the List lists only the new entries", items, second},
		{"the List is the same resource, a new version", list["id"], firstList["id"]},
		{"the List has two versions", w.e.fhir(http.MethodGet, "/List/"+firstList["id"].(string)+"/_history", "").JSON(t)["total"], 2.0},
		{"only the listed statements are current", visitStatementCount(t, w.e, visit), 2.0},
		{"a dropped statement is deleted", w.e.fhir(http.MethodGet, "/MedicationStatement/"+first[0], "").Status, http.StatusGone},
		{"a kept statement has a new version", w.e.fhir(http.MethodGet, "/MedicationStatement/"+first[1], "").JSON(t)["status"], "stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Fatalf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	t.Run("an empty list clears it", func(t *testing.T) {
		if ids := medicationIDs(putMedications(t, w.e, visit, `{"medications":[]}`)); len(ids) != 0 {
			t.Fatalf("response lists %v", ids)
		}
		list, items := medicationList(t, w.e, visit)
		if len(items) != 0 || visitField(list, "emptyReason.coding.0.code") != "nilknown" || visitStatementCount(t, w.e, visit) != 0 {
			t.Fatalf("List %v, statements %v", list, visitStatementCount(t, w.e, visit))
		}
	})
}

func TestPuttingMedicationsIsAllOrNothing(t *testing.T) {
	w := newVisitWorld(t)
	visit := w.encounter(visitSpec{status: "in-progress"})
	kept := medicationIDs(putMedications(t, w.e, visit, `{"medications":[{"medication":"A"},{"medication":"B"}]}`))
	two := `{"medication":"A2","medicationId":"` + kept[0] + `"},{"medication":"E"},`
	tests := []struct {
		name   string
		visit  string
		body   string
		status int
		field  string
	}{
		{"a third entry without medication", visit, `{"medications":[` + two + `{"usageStatus":"active"}]}`, http.StatusBadRequest, "medications[2].medication"},
		{"a third entry with a blank medication", visit, `{"medications":[` + two + `{"medication":"  "}]}`, http.StatusBadRequest, "medications[2].medication"},
		{"a third entry with an unknown usageStatus", visit, `{"medications":[` + two + `{"medication":"F","usageStatus":"taking"}]}`, http.StatusBadRequest, "medications[2].usageStatus"},
		{"a third entry with a string flag", visit, `{"medications":[` + two + `{"medication":"F","clinicianReviewed":"yes"}]}`, http.StatusBadRequest, "medications[2].clinicianReviewed"},
		{"a third entry with a dose in words", visit, `{"medications":[` + two + `{"medication":"F","dose":"two"}]}`, http.StatusBadRequest, "medications[2].dose"},
		{"a third entry with an unknown field", visit, `{"medications":[` + two + `{"medication":"F","strength":"5 mg"}]}`, http.StatusBadRequest, "medications[2].strength"},
		{"a third entry with another list's medicationId", visit, `{"medications":[` + two + `{"medication":"F","medicationId":"not-ours"}]}`, http.StatusBadRequest, "medications[2].medicationId"},
		{"a third entry repeating a medicationId", visit, `{"medications":[` + two + `{"medication":"F","medicationId":"` + kept[0] + `"}]}`, http.StatusBadRequest, "medications[2].medicationId"},
		{"a third entry that is not an object", visit, `{"medications":[` + two + `"F"]}`, http.StatusBadRequest, "medications[2]"},
		{"a third entry the store finds invalid", visit, `{"medications":[` + two + `{"medication":"F","instructions":"take\fdaily"}]}`, http.StatusBadRequest, "medications[2]"},
		{"no medications", visit, `{}`, http.StatusBadRequest, "medications"},
		{"medications not an array", visit, `{"medications":{"medication":"A"}}`, http.StatusBadRequest, "medications"},
		{"an unknown visit", "nope", `{"medications":[{"medication":"x"}]}`, http.StatusNotFound, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := visitsHistoryTotal(t, w.e)
			wantError(t, w.e.api(http.MethodPut, "/visits/"+tt.visit+"/medications", tt.body), tt.status, tt.field)
			if after := visitsHistoryTotal(t, w.e); after != before {
				t.Fatalf("history grew from %v to %v", before, after)
			}
			if _, items := medicationList(t, w.e, visit); !reflect.DeepEqual(items, kept) || visitStatementCount(t, w.e, visit) != 2 {
				t.Fatalf("List items %v, want %v", items, kept)
			}
		})
	}
	t.Run("a body that is not JSON media is 415", func(t *testing.T) {
		r := w.e.call(http.MethodPut, "/api/v1/visits/"+visit+"/medications", `medication=A`, "text/plain")
		wantError(t, r, http.StatusUnsupportedMediaType, "")
	})
}
