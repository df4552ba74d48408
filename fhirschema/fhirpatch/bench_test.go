package fhirpatch_test

import (
	"context"
	"testing"

	"fhirstore/fhirschema/fhirpatch"
)

// BenchmarkApply replaces the birthDate of a small Patient.
func BenchmarkApply(b *testing.B) {
	patient := []byte(`{"resourceType":"Patient","id":"p","meta":{"versionId":"1","lastUpdated":"2024-01-01T00:00:00.000Z"},"active":true,` +
		`"identifier":[{"system":"urn:oid:1.2.36.146.595.217.0.1","value":"12345"}],` +
		`"name":[{"use":"official","family":"Chalmers","given":["Peter","James"]}],` +
		`"telecom":[{"system":"phone","value":"(03) 5555 6473","use":"work"}],` +
		`"gender":"male","birthDate":"1974-12-25",` +
		`"address":[{"use":"home","line":["534 Erewhon St"],"city":"PleasantVille","state":"Vic","postalCode":"3999"}]}`)
	params := []byte(`{"resourceType":"Parameters","parameter":[{"name":"operation","part":[{"name":"type","valueCode":"replace"},` +
		`{"name":"path","valueString":"Patient.birthDate"},{"name":"value","valueDate":"1975-01-01"}]}]}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := fhirpatch.Apply(context.Background(), patient, params); err != nil {
			b.Fatal(err)
		}
	}
}
