package server_test

// Benchmarks of the FHIR interactions through the real handler over HTTP on
// the httptest server, against the test database (embedded FerretDB/SQLite
// unless FHIRSTORE_TEST_MONGODB_URI names a MongoDB). Figures and the
// command that produced them: docs/performance.md.

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"fhirstore/fhirschema"
	"fhirstore/server"
	"fhirstore/store"
)

// benchPatient is a small but realistic Patient (about 600 bytes).
const benchPatient = `{"resourceType":"Patient","active":true,` +
	`"identifier":[{"system":"urn:oid:1.2.36.146.595.217.0.1","value":"12345"}],` +
	`"name":[{"use":"official","family":"Chalmers","given":["Peter","James"]}],` +
	`"telecom":[{"system":"phone","value":"(03) 5555 6473","use":"work"}],` +
	`"gender":"male","birthDate":"1974-12-25",` +
	`"address":[{"use":"home","line":["534 Erewhon St"],"city":"PleasantVille","state":"Vic","postalCode":"3999"}]}`

// benchPatientWithID is benchPatient with an id, for updates.
func benchPatientWithID(id string) string {
	return `{"resourceType":"Patient","id":"` + id + `",` + benchPatient[len(`{"resourceType":"Patient",`):]
}

// seedPatients stores n Patients directly (not timed, not through HTTP) and
// returns the id of the last one.
func seedPatients(b *testing.B, e *env, n int) string {
	b.Helper()
	var id string
	for i := 0; i < n; i++ {
		res, err := e.store.Create(context.Background(), e.tenant, "Patient", []byte(benchPatient), store.WriteOptions{})
		if err != nil {
			b.Fatalf("seed Patient %d: %v", i, err)
		}
		id = res.ID
	}
	return id
}

// benchGet times GETs of path, which must answer 200.
func benchGet(b *testing.B, e *env, path string) {
	b.Helper()
	if r := e.get(path); r.Status != http.StatusOK {
		b.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := e.get(path); r.Status != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
}

// BenchmarkCreate posts Patients; the collection grows by b.N during the run.
func BenchmarkCreate(b *testing.B) {
	e := newEnv(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := e.post("/Patient", benchPatient); r.Status != http.StatusCreated {
			b.Fatalf("create: %d %s", r.Status, r.Body)
		}
	}
}

// benchPatientWithExtensions is benchPatient with the extensions a Synthea
// Patient carries: two whose definitions the server looks up in the tenant
// (US Core race, of nested extensions, and birth sex) and a core one.
var benchPatientWithExtensions = `{"resourceType":"Patient","extension":[` +
	`{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-race","extension":[` +
	`{"url":"ombCategory","valueCoding":{"system":"urn:oid:2.16.840.1.113883.6.238","code":"2106-3","display":"White"}},` +
	`{"url":"text","valueString":"White"}]},` +
	`{"url":"http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex","valueCode":"M"},` +
	`{"url":"http://hl7.org/fhir/StructureDefinition/patient-mothersMaidenName","valueString":"Smith"}],` +
	benchPatient[len(`{"resourceType":"Patient",`):]

// BenchmarkCreateWithExtensions posts Patients with extensions: the cost of
// finding their definitions among the tenant's StructureDefinitions.
func BenchmarkCreateWithExtensions(b *testing.B) {
	e := newEnv(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := e.post("/Patient", benchPatientWithExtensions); r.Status != http.StatusCreated {
			b.Fatalf("create: %d %s", r.Status, r.Body)
		}
	}
}

// BenchmarkRead reads the only Patient of the tenant.
func BenchmarkRead(b *testing.B) {
	e := newEnv(b)
	benchGet(b, e, "/Patient/"+seedPatients(b, e, 1))
}

// BenchmarkRead1000 reads one Patient of a collection of 1,000: the embedded
// engine scans, so this shows how read cost grows with collection size.
func BenchmarkRead1000(b *testing.B) {
	e := newEnv(b)
	benchGet(b, e, "/Patient/"+seedPatients(b, e, 1000))
}

// BenchmarkVRead reads version 1 of the only Patient of the tenant.
func BenchmarkVRead(b *testing.B) {
	e := newEnv(b)
	benchGet(b, e, "/Patient/"+seedPatients(b, e, 1)+"/_history/1")
}

// BenchmarkVRead1000 reads version 1 of one Patient among 1,000 (1,000 history rows).
func BenchmarkVRead1000(b *testing.B) {
	e := newEnv(b)
	benchGet(b, e, "/Patient/"+seedPatients(b, e, 1000)+"/_history/1")
}

// BenchmarkUpdate puts new versions of one Patient; its history grows by b.N.
func BenchmarkUpdate(b *testing.B) {
	e := newEnv(b)
	id := seedPatients(b, e, 1)
	body := benchPatientWithID(id)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := e.put("/Patient/"+id, body); r.Status != http.StatusOK {
			b.Fatalf("update: %d %s", r.Status, r.Body)
		}
	}
}

// BenchmarkHistoryInstance pages the newest 10 of 20 versions of one Patient.
func BenchmarkHistoryInstance(b *testing.B) {
	e := newEnv(b)
	id := seedPatients(b, e, 1)
	for v := 2; v <= 20; v++ {
		if _, _, err := e.store.Update(context.Background(), e.tenant, "Patient", id, []byte(benchPatientWithID(id)), store.WriteOptions{}); err != nil {
			b.Fatalf("seed version %d: %v", v, err)
		}
	}
	path := fmt.Sprintf("/Patient/%s/_history?_count=10", id)
	r := e.get(path)
	if r.Status != http.StatusOK {
		b.Fatalf("history: %d %s", r.Status, r.Body)
	}
	if entries, _ := r.JSON(b)["entry"].([]any); len(entries) != 10 {
		b.Fatalf("history page has %d entries, want 10", len(entries))
	}
	benchGet(b, e, path)
}

// BenchmarkValidateCreateBody validates the body BenchmarkCreate posts: the
// share of a create's round trip spent in schema validation.
func BenchmarkValidateCreateBody(b *testing.B) {
	v, err := fhirschema.NewValidator()
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(benchPatient)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := v.Validate("Patient", body, fhirschema.Options{}); !r.Valid() {
			b.Fatal(r.Issues)
		}
	}
}

// BenchmarkCreateConcurrentAudited posts Patients from 16 goroutines with
// the audit trail on, as write_scaling.py's many clients do: what a
// create costs the server when the writes commit together.
func BenchmarkCreateConcurrentAudited(b *testing.B) {
	e := newEnv(b, func(c *server.Config, _ *store.Options) { c.Audit = true })
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := e.post("/Patient", benchPatient); r.Status != http.StatusCreated {
				b.Errorf("create: %d %s", r.Status, r.Body)
				return
			}
		}
	})
	closeAudit(b, e)
}
