package fhirschema

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// TestWalkAnswersForTheSchema validates every official example and every
// resource of the Synthea sample, and mutants of them (an unknown
// property, a missing one, a string off its pattern or enumeration, a
// value of the wrong JSON type), twice: with the schema run only when the
// walk says it would object, and with the schema run always. Both must
// give the same issues: the walk never passes what the schema rejects.
func TestWalkAnswersForTheSchema(t *testing.T) {
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(18, 1))
	resources := corpus(t)
	checked, rejected := 0, 0
	for _, res := range resources {
		bodies := [][]byte{mustJSON(t, res)}
		for range 4 {
			bodies = append(bodies, mustJSON(t, mutate(rng, clone(res))))
		}
		typ, _ := res["resourceType"].(string)
		for _, body := range bodies {
			fast := v.validate(typ, body, Options{}, false)
			full := v.validate(typ, body, Options{}, true)
			if !reflect.DeepEqual(fast.Issues, full.Issues) {
				t.Errorf("%s: the walk alone gives %v, with the schema %v\n%s", typ, fast.Issues, full.Issues, body)
			}
			checked++
			if !full.Valid() {
				rejected++
			}
		}
	}
	if checked < 7000 || rejected < checked/3 {
		t.Fatalf("%d resources checked, %d rejected: too few", checked, rejected)
	}
	t.Logf("%d resources checked, %d rejected", checked, rejected)
}

// corpus is the official examples and the resources of the Synthea sample.
func corpus(t *testing.T) []map[string]any {
	t.Helper()
	examples, _ := filepath.Glob(filepath.Join("..", "testdata", "fhir", "examples", "*.json"))
	bundles, _ := filepath.Glob(filepath.Join("..", "testdata", "synthea", "*.json"))
	if len(examples) == 0 || len(bundles) == 0 {
		t.Fatal("no examples or Synthea bundles")
	}
	var out []map[string]any
	for _, f := range examples {
		out = append(out, readJSON(t, f))
	}
	for _, f := range bundles {
		entries, _ := readJSON(t, f)["entry"].([]any)
		for i, e := range entries {
			if res, ok := e.(map[string]any)["resource"].(map[string]any); ok && i%4 == 0 {
				out = append(out, res)
			}
		}
	}
	return out
}

// mutate breaks one thing somewhere in res, chosen by rng.
func mutate(rng *rand.Rand, res map[string]any) map[string]any {
	var objects []map[string]any
	collect(res, &objects)
	obj := objects[rng.IntN(len(objects))]
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	k := keys[rng.IntN(len(keys))]
	switch rng.IntN(6) {
	case 0:
		obj["unknownElement"] = "x"
	case 1:
		if k != "resourceType" {
			delete(obj, k)
		}
	case 2:
		obj[k] = "off  pattern "
	case 3:
		obj[k] = "not-a-known-code"
	case 4:
		obj[k] = json.Number("5")
	default:
		obj[k] = map[string]any{"id": "x"}
	}
	return res
}

func collect(v any, out *[]map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			*out = append(*out, x)
		}
		for _, c := range x {
			collect(c, out)
		}
	case []any:
		for _, c := range x {
			collect(c, out)
		}
	}
}

func clone(res map[string]any) map[string]any {
	var out map[string]any
	b, _ := json.Marshal(res)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	_ = dec.Decode(&out)
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}
