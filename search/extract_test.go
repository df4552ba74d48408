package search_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/search"
)

func example(t testing.TB, name string) map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "fhir", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return decode(t, f)
}

func decode(t testing.TB, f interface{ Read([]byte) (int, error) }) map[string]any {
	t.Helper()
	d := json.NewDecoder(f)
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func at(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

func dates(pairs ...time.Time) bson.A {
	var out bson.A
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, bson.D{{Key: "lo", Value: pairs[i]}, {Key: "hi", Value: pairs[i+1]}})
	}
	return out
}

func lookup(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// check compares idx fields with want; a nil want means the field is absent.
func check(t *testing.T, idx bson.D, want map[string]any) {
	t.Helper()
	for key, w := range want {
		got, ok := lookup(idx, key)
		switch {
		case w == nil && ok:
			t.Errorf("idx[%q] = %v, want no field", key, got)
		case w != nil && !ok:
			t.Errorf("idx[%q] missing, want %v", key, w)
		case w != nil && !reflect.DeepEqual(got, w):
			t.Errorf("idx[%q] = %#v\nwant %#v", key, got, w)
		}
	}
}

func TestExtractPatientExample(t *testing.T) {
	r := newRegistry(t)
	idx, sort := r.Extract("Patient", example(t, "Patient-example.json"))
	day := func(d string) []time.Time { return []time.Time{at(t, d+"T00:00:00Z"), at(t, d+"T23:59:59.999999999Z")} }
	check(t, idx, map[string]any{
		"_id":                nil, // searched on the row's own key
		"_lastUpdated":       nil,
		"active":             []string{"true", "|true"},
		"family":             []string{"chalmers", "windsor"},
		"family:exact":       []string{"Chalmers", "Windsor"},
		"given":              []string{"peter", "james", "jim"},
		"name":               []string{"chalmers", "peter", "james", "jim", "windsor"},
		"name:exact":         []string{"Chalmers", "Peter", "James", "Jim", "Windsor"},
		"gender":             []string{"http://hl7.org/fhir/administrative-gender|male", "male"},
		"birthdate":          dates(day("1974-12-25")...)[0], // one range: stored as itself
		"deceased":           []string{"false", "|false"},
		"death-date":         nil,
		"identifier":         []string{"urn:oid:1.2.36.146.595.217.0.1|12345", "12345"},
		"identifier:of-type": []string{"http://terminology.hl7.org/CodeSystem/v2-0203|MR|12345"},
		"identifier:text":    nil,
		"address": []string{"534 erewhon st", "pleasantville", "rainbow", "vic", "3999",
			"534 erewhon st peasantville, rainbow, vic 3999"},
		"address-city":         []string{"pleasantville"},
		"address-city:exact":   []string{"PleasantVille"},
		"address-postalcode":   []string{"3999"},
		"address-use":          []string{"home", "|home"},
		"phone":                []string{"(03) 5555 6473", "|(03) 5555 6473", "(03) 3410 5613", "|(03) 3410 5613", "(03) 5555 8834", "|(03) 5555 8834"},
		"email":                nil,
		"organization":         []string{"Organization/1", "1"},
		"general-practitioner": nil,
	})
	wantSort := bson.D{
		// Patient.birthDate is 0..1: one range, which sorts by its bounds in idx
		{Key: "birthdate", Value: nil},
		{Key: "family", Value: bson.D{{Key: "a", Value: "chalmers"}, {Key: "d", Value: "windsor"}}},
		// Patient.gender and Patient.managingOrganization are 0..1: one value
		{Key: "gender", Value: bson.D{{Key: "a", Value: "male"}}},
		{Key: "organization", Value: bson.D{{Key: "a", Value: "Organization/1"}}},
	}
	for _, w := range wantSort {
		if got, _ := lookup(sort, w.Key); !reflect.DeepEqual(got, w.Value) {
			t.Errorf("sort[%q] = %v, want %v", w.Key, got, w.Value)
		}
	}
	for _, code := range []string{"_id", "_lastUpdated"} { // sorted by the row's own fields
		if got, ok := lookup(sort, code); ok {
			t.Errorf("sort[%q] = %v, want none", code, got)
		}
	}
	for _, d := range []bson.D{idx, sort} {
		for i := 1; i < len(d); i++ {
			if d[i-1].Key >= d[i].Key {
				t.Errorf("fields out of order or repeated: %q then %q", d[i-1].Key, d[i].Key)
			}
		}
	}
}

func TestExtractObservationExample(t *testing.T) {
	r := newRegistry(t)
	idx, sort := r.Extract("Observation", example(t, "Observation-example.json"))
	quantity := bson.A{bson.D{{Key: "lo", Value: 184.5}, {Key: "hi", Value: 185.5},
		{Key: "s", Value: "http://unitsofmeasure.org|[lb_av]"}, {Key: "u", Value: "lbs"}}}
	check(t, idx, map[string]any{
		"code": []string{"http://loinc.org|29463-7", "29463-7", "http://loinc.org|3141-9", "3141-9",
			"http://snomed.info/sct|27113001", "27113001",
			"http://acme.org/devices/clinical-codes|body-weight", "body-weight"},
		"code:text":            []string{"body weight", "body weight measured"},
		"category":             []string{"http://terminology.hl7.org/CodeSystem/observation-category|vital-signs", "vital-signs"},
		"status":               []string{"http://hl7.org/fhir/observation-status|final", "final"},
		"subject":              []string{"Patient/example", "example"},
		"patient":              []string{"Patient/example", "example"},
		"encounter":            []string{"Encounter/example", "example"},
		"date":                 dates(at(t, "2016-03-28T00:00:00Z"), at(t, "2016-03-28T23:59:59.999999999Z"))[0],
		"value-quantity":       quantity[0],
		"combo-value-quantity": nil, // searched as value-quantity and component-value-quantity
		"combo-code":           nil,
		"value-concept":        nil,
		"value-date":           nil,
		"value-string":         nil,
		"performer":            nil,
	})
	// value is 0..1: value-quantity sorts by the bounds of its one range in
	// idx; combo-value-quantity has the components' values too
	if got, ok := lookup(sort, "value-quantity"); ok {
		t.Errorf("sort[value-quantity] = %v, want none", got)
	}
	if got, _ := lookup(sort, "combo-value-quantity"); !reflect.DeepEqual(got, bson.D{{Key: "a", Value: 184.5}, {Key: "d", Value: 185.5}}) {
		t.Errorf("sort[combo-value-quantity] = %v", got)
	}
	if got, _ := lookup(sort, "code"); !reflect.DeepEqual(got, bson.D{{Key: "a", Value: "27113001"}, {Key: "d", Value: "body-weight"}}) {
		t.Errorf("sort[code] = %v", got)
	}
}

func TestExtractPeriodsAndContainedReferences(t *testing.T) {
	r := newRegistry(t)
	idx, sort := r.Extract("Encounter", example(t, "Encounter-home.json"))
	lo, hi := at(t, "2015-01-17T06:00:00Z"), at(t, "2015-01-17T06:30:00.999999999Z")
	check(t, idx, map[string]any{
		"date":        dates(lo, hi)[0],
		"class":       []string{"http://terminology.hl7.org/CodeSystem/v3-ActCode|HH", "HH"},
		"class:text":  []string{"home health"},
		"participant": []string{"Practitioner/example", "example"},
		"location":    nil, // "#home" is a contained resource
	})
	if got, ok := lookup(sort, "date"); ok { // Encounter.period is 0..1: sorted by idx.date
		t.Errorf("sort[date] = %v, want none", got)
	}
}

func TestExtractResourceLevelParameters(t *testing.T) {
	r := newRegistry(t)
	res := decode(t, strings.NewReader(`{"resourceType":"Patient","id":"p1",
		"meta":{"versionId":"3","lastUpdated":"2024-03-01T10:05:07.123+02:00",
			"source":"http://sender.example/#abc",
			"profile":["http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient|3.1.1","http://x.org/p"],
			"tag":[{"system":"http://tags.example","code":"t1","display":"Tag One"},{"code":"t2"}],
			"security":[{"system":"http://terminology.hl7.org/CodeSystem/v3-Confidentiality","code":"R"}]},
		"identifier":[{"type":{"text":"Medical Record"},"value":"M-1"}]}`))
	idx, sort := r.Extract("Patient", res)
	check(t, idx, map[string]any{
		"_id":                nil,
		"_lastUpdated":       dates(at(t, "2024-03-01T08:05:07.123Z"), at(t, "2024-03-01T08:05:07.123999999Z")),
		"_source":            []string{"http://sender.example/#abc"},
		"_profile":           []string{"http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient|3.1.1", "http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient", "http://x.org/p"},
		"_tag":               []string{"http://tags.example|t1", "t1", "t2", "|t2"},
		"_tag:text":          []string{"tag one"},
		"_security":          []string{"http://terminology.hl7.org/CodeSystem/v3-Confidentiality|R", "R"},
		"identifier":         []string{"M-1", "|M-1"},
		"identifier:text":    []string{"medical record"},
		"identifier:of-type": nil,
	})
	if got, _ := lookup(sort, "_tag"); !reflect.DeepEqual(got, bson.D{{Key: "a", Value: "t1"}, {Key: "d", Value: "t2"}}) {
		t.Errorf("sort[_tag] = %v", got)
	}
}

func TestExtractProfileOfAnExample(t *testing.T) {
	r := newRegistry(t)
	idx, _ := r.Extract("Observation", example(t, "Observation-bmi.json"))
	check(t, idx, map[string]any{"_profile": []string{"http://hl7.org/fhir/StructureDefinition/vitalsigns"}})
	idx, _ = r.Extract("Condition", example(t, "Condition-f202.json"))
	check(t, idx, map[string]any{"_security": []string{"http://terminology.hl7.org/CodeSystem/v3-ActCode|TBOO", "TBOO"},
		"_security:text": []string{"taboo"}})
}

// TestExtractEveryExample runs Extract over all official examples: no
// panic, and every idx value has the documented shape.
func TestExtractEveryExample(t *testing.T) {
	r := newRegistry(t)
	files, err := filepath.Glob(filepath.Join("..", "testdata", "fhir", "examples", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	fields := 0
	for _, f := range files {
		res := example(t, filepath.Base(f))
		typ, _ := res["resourceType"].(string)
		idx, sort := r.Extract(typ, res)
		fields += len(idx)
		for _, e := range idx {
			switch v := e.Value.(type) {
			case []string:
				if len(v) == 0 {
					t.Errorf("%s: idx[%q] empty", f, e.Key)
				}
			case bson.A:
				if p, _ := r.Lookup(typ, e.Key); p.Type == "composite" {
					checkComposite(t, f, p, v)
					continue
				}
				for _, x := range v {
					d := x.(bson.D)
					if d[0].Key != "lo" || d[1].Key != "hi" {
						t.Errorf("%s: idx[%q] = %v", f, e.Key, v)
					}
				}
			case bson.D: // the one range of a parameter that has one
				if p, _ := r.Lookup(typ, e.Key); !p.SortKey(false).Range || e.Value.(bson.D)[0].Key != "lo" || e.Value.(bson.D)[1].Key != "hi" {
					t.Errorf("%s: idx[%q] = %v", f, e.Key, e.Value)
				}
			default:
				t.Errorf("%s: idx[%q] is a %T", f, e.Key, e.Value)
			}
		}
		for _, e := range sort {
			p, _ := r.Lookup(typ, e.Key)
			want := []string{"a", "d"}
			if p.SortKey(false).OneValue {
				want = want[:1]
			}
			if d, ok := e.Value.(bson.D); !ok || !slices.Equal(keysOf(d), want) {
				t.Errorf("%s: sort[%q] = %v, want the keys %v", f, e.Key, e.Value, want)
			}
		}
	}
	t.Logf("%d examples, %d idx fields", len(files), fields)
}

func keysOf(d bson.D) []string {
	var out []string
	for _, e := range d {
		out = append(out, e.Key)
	}
	return out
}

func BenchmarkExtractPatient(b *testing.B) {
	r := newRegistry(b)
	res := example(b, "Patient-example.json")
	b.ReportAllocs()
	for b.Loop() {
		r.Extract("Patient", res)
	}
}

// TestExtractConcurrently shares one Registry between goroutines, as the
// server does.
func TestExtractConcurrently(t *testing.T) {
	r := newRegistry(t)
	res := example(t, "Observation-example.json")
	want, _ := r.Extract("Observation", res)
	done := make(chan bson.D)
	for range 8 {
		go func() {
			var idx bson.D
			for range 50 {
				idx, _ = r.Extract("Observation", res)
			}
			done <- idx
		}()
	}
	for range 8 {
		if got := <-done; !reflect.DeepEqual(got, want) {
			t.Errorf("concurrent Extract = %v, want %v", got, want)
		}
	}
}

// checkComposite checks that each stored element of a composite holds
// every component under its key.
func checkComposite(t *testing.T, file string, p *search.Param, v bson.A) {
	t.Helper()
	for _, x := range v {
		d := x.(bson.D)
		if n := len(d); n > 0 && d[n-1].Key == "k" { // the point keys of token$quantity
			if keys, ok := d[n-1].Value.(bson.D); !ok || len(keys) == 0 {
				t.Errorf("%s: idx[%q] element %v: point keys %v", file, p.Code, d, d[n-1].Value)
			}
			d = d[:n-1]
		}
		if len(d) != len(p.Components) {
			t.Errorf("%s: idx[%q] element %v has %d components, not %d", file, p.Code, d, len(d), len(p.Components))
			continue
		}
		for i, e := range d {
			if e.Key != string("abcdefgh"[i]) {
				t.Errorf("%s: idx[%q] element %v: key %q at %d", file, p.Code, d, e.Key, i)
			}
		}
	}
}
