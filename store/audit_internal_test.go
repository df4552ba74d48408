package store

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/fhirschema"
	"fhirstore/search"
)

// TestAuditRowIndexIsTheIndexOfItsAuditEvent: the search values an audit
// row holds are those the registry extracts from the AuditEvent it renders
// as, for each parameter the row holds, whatever the record names.
func TestAuditRowIndexIsTheIndexOfItsAuditEvent(t *testing.T) {
	reg, err := search.NewRegistry(fhirschema.ResourceTypes())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC).UnixNano()
	records := []AuditRecord{
		{Key: "k1", At: at, Site: "demo", RequestID: "r1", Method: "GET", Path: "/fhir/r4/Patient/p1", Status: 200, Type: "Patient", ID: "p1", Patient: "p1",
			Interaction: "read", Action: "R", Subject: "Nurse Joy", Issuer: "https://idp.example", ClientID: "app", Address: "10.0.0.1"},
		{Key: "k2", At: at, Method: "GET", Path: "/fhir/r4/Observation", Query: "patient=p2", Status: 200, Type: "Observation", Patient: "p2",
			Interaction: "search-type", Action: "E", Subject: "dev"},
		{Key: "k3", At: at, Method: "POST", Path: "/oauth2/token", Status: 401, Action: "E"},
		{Key: "k4", At: at, Method: "DELETE", Path: "/fhir/r4/Observation/o1", Status: 503, Type: "Observation", ID: "o1", Interaction: "delete", Action: "D", ClientID: "c"},
	}
	for _, r := range records {
		lastUpdated := r.time()
		body, err := r.render(lastUpdated)
		if err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&res); err != nil {
			t.Fatal(err)
		}
		want, sortDoc := reg.Extract("AuditEvent", res)
		want = slices.DeleteFunc(want, func(e bson.E) bool { return !heldByAuditRows(e.Key) || e.Key == "type:text" })
		// The rows sort by date (idx.date itself) and _lastUpdated only.
		if slices.ContainsFunc(sortDoc, func(e bson.E) bool { return e.Key == "date" }) {
			t.Errorf("record %s: the AuditEvent has a date sort value the row lacks: %v", r.Key, sortDoc)
		}
		got := r.idx(lastUpdated)
		if !sameIndex(t, got, want) {
			t.Errorf("record %s: the row holds\n %v\nthe AuditEvent's index is\n %v", r.Key, got, want)
		}
	}
}

// heldByAuditRows reports whether an idx field belongs to a parameter
// audit rows hold.
func heldByAuditRows(field string) bool {
	for _, p := range auditParams {
		if field == p || len(field) > len(p) && field[:len(p)] == p && field[len(p)] == ':' {
			return true
		}
	}
	return false
}

// sameIndex compares idx documents as the database holds them, fields in
// any order and each list of values as a set.
func sameIndex(t *testing.T, a, b bson.D) bool {
	norm := func(d bson.D) map[string]any {
		out := map[string]any{}
		for _, e := range d {
			raw, err := bson.Marshal(bson.D{{Key: "v", Value: e.Value}})
			if err != nil {
				t.Fatal(err)
			}
			var v struct{ V any }
			if err := bson.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			if arr, ok := v.V.(bson.A); ok {
				var ss []string
				for _, x := range arr {
					s, _ := x.(string)
					ss = append(ss, s)
				}
				slices.Sort(ss)
				out[e.Key] = ss
				continue
			}
			out[e.Key] = v.V
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
