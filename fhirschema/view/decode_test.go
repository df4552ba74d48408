package view_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"fhirstore/fhirschema/view"
)

func stdDecode(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}

// TestDecodeReadsWhatEncodingJSONReads: every official example and every
// Synthea bundle decodes to the same value as with a json.Decoder using
// UseNumber.
func TestDecodeReadsWhatEncodingJSONReads(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/fhir/examples/*.json")
	more, _ := filepath.Glob("../../testdata/synthea/*.json")
	files = append(files, more...)
	if len(files) < 100 {
		t.Fatalf("only %d files", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := stdDecode(data)
		if err != nil {
			continue
		}
		got, err := view.Decode(data)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded differently (%v)", filepath.Base(f), err)
		}
	}
}

func TestDecodeHandlesEscapesAndRefusesBrokenJSON(t *testing.T) {
	for _, ok := range []string{
		`{"a":"\u00e9\ud83d\ude00\n\t\"\\\/","b":[1,-2.5e3,true,false,null,{}],"c":{"d":[]}}`,
		`  {"x" : 1 }  `,
	} {
		want, _ := stdDecode([]byte(ok))
		if got, err := view.Decode([]byte(ok)); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, %v; want %v", ok, got, err, want)
		}
	}
	for _, bad := range []string{`[1]`, `{"a":}`, `{"a":1`, `{"a":tru}`, `{"a":"x}`, `{"a":1}x`, `{"a":"\q"}`, `{"a":01.2.3}`, "{\"a\":\"\x01\"}"} {
		if _, err := view.Decode([]byte(bad)); err == nil {
			t.Errorf("%q decoded without an error", bad)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	data, err := os.ReadFile("../../testdata/fhir/examples/Observation-example.json")
	if err != nil {
		b.Skip(err)
	}
	b.Run("view.Decode", func(b *testing.B) {
		for range b.N {
			if _, err := view.Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for range b.N {
			if _, err := stdDecode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchView is the view of the server's throughput benchmark.
const benchView = `{"resourceType":"ViewDefinition","name":"observations","status":"active","resource":"Observation","select":[{"column":[` +
	`{"name":"id","path":"getResourceKey()"},{"name":"patient","path":"subject.getReferenceKey(Patient)"},` +
	`{"name":"code","path":"code.coding.first().code"},{"name":"value","path":"value.ofType(Quantity).value","type":"decimal"},` +
	`{"name":"unit","path":"value.ofType(Quantity).unit"},{"name":"effective","path":"effective.ofType(dateTime)","type":"dateTime"}]}]}`

// syntheaObservation is an Observation of the Synthea sample.
func syntheaObservation(b *testing.B) []byte {
	files, _ := filepath.Glob("../../testdata/synthea/*.json")
	for _, f := range files {
		data, _ := os.ReadFile(f)
		var bundle struct {
			Entry []struct {
				Resource json.RawMessage `json:"resource"`
			} `json:"entry"`
		}
		_ = json.Unmarshal(data, &bundle)
		for _, e := range bundle.Entry {
			var head struct {
				ResourceType  string          `json:"resourceType"`
				ValueQuantity json.RawMessage `json:"valueQuantity"`
			}
			if json.Unmarshal(e.Resource, &head) == nil && head.ResourceType == "Observation" && head.ValueQuantity != nil {
				return e.Resource
			}
		}
	}
	b.Skip("no Synthea Observation")
	return nil
}

func BenchmarkEvalObservationView(b *testing.B) {
	v, err := view.Compile([]byte(benchView), view.Options{})
	if err != nil {
		b.Fatal(err)
	}
	data := syntheaObservation(b)
	res, _ := view.Decode(data)
	for range b.N {
		if err := v.Eval(context.Background(), res, func([]any) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSyntheaObservation(b *testing.B) {
	data := syntheaObservation(b)
	b.SetBytes(int64(len(data)))
	for range b.N {
		if _, err := view.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAViewDecodesOnlyTheElementsItReads: a view's Decode keeps the
// top-level elements its paths name (choice types and _twins included),
// and every element when a path can see the whole resource.
func TestAViewDecodesOnlyTheElementsItReads(t *testing.T) {
	data := []byte(`{"resourceType":"Observation","id":"o","status":"final","_status":{"id":"s"},"code":{"text":"c"},
		"valueQuantity":{"value":1.5},"component":[{"code":{"text":"x"}}],"note":[{"text":"n \"}\" ]"}],"method":{"text":"a backslash \\"},"issued":"2024-01-01T00:00:00Z"}`)
	for _, tc := range []struct {
		view string
		keys []string
	}{
		{`{"resource":"Observation","select":[{"column":[{"name":"v","path":"value.ofType(Quantity).value"},{"name":"s","path":"status"}]}]}`,
			[]string{"_status", "id", "resourceType", "status", "valueQuantity"}},
		{`{"resource":"Observation","select":[{"column":[{"name":"n","path":"descendants().count()"}]}]}`,
			[]string{"_status", "code", "component", "id", "issued", "method", "note", "resourceType", "status", "valueQuantity"}},
		{`{"resource":"Observation","select":[{"column":[{"name":"r","path":"$this"}]}]}`,
			[]string{"_status", "code", "component", "id", "issued", "method", "note", "resourceType", "status", "valueQuantity"}},
	} {
		v, err := view.Compile([]byte(tc.view), view.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := v.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, tc.keys) {
			t.Errorf("%s: kept %v, want %v", tc.view, keys, tc.keys)
		}
	}
}
