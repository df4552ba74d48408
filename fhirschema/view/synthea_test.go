package view_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fhirstore/fhirschema/view"
)

// syntheaResources reads every resource of the Synthea sample's bundles.
func syntheaResources(t testing.TB) []map[string]any {
	t.Helper()
	files, _ := filepath.Glob("../../testdata/synthea/*.json")
	var out []map[string]any
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bundle, err := view.Decode(data)
		if err != nil {
			continue
		}
		for _, e := range objs(bundle["entry"]) {
			if r, ok := e["resource"].(map[string]any); ok {
				out = append(out, r)
			}
		}
	}
	if len(out) < 1000 {
		t.Fatalf("only %d Synthea resources", len(out))
	}
	return out
}

func objs(v any) []map[string]any {
	var out []map[string]any
	for _, x := range asArray(v) {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func asArray(v any) []any { a, _ := v.([]any); return a }

func str(m map[string]any, k string) any {
	if s, ok := m[k].(string); ok {
		return s
	}
	return nil
}

// refKey is the id a relative reference Type/id names, when of typ.
func refKey(ref map[string]any, typ string) any {
	s, _ := ref["reference"].(string)
	t, id, ok := strings.Cut(s, "/")
	if !ok || (typ != "" && t != typ) {
		return nil
	}
	return id
}

// syntheaCase is a view over the sample, and its rows computed by plain
// Go from each resource's JSON.
type syntheaCase struct {
	name, view string
	rows       func(r map[string]any) [][]any
}

var syntheaCases = []syntheaCase{
	{"patient demographics", `{"resource":"Patient","select":[{"column":[{"name":"id","path":"getResourceKey()"},
		{"name":"gender","path":"gender"},{"name":"birth_date","path":"birthDate"},
		{"name":"family","path":"name.where(use = 'official').family.first()"},
		{"name":"phones","path":"telecom.where(system = 'phone').value","collection":true}]}]}`,
		func(r map[string]any) [][]any {
			var family any
			for _, n := range objs(r["name"]) {
				if n["use"] == "official" && family == nil {
					family = str(n, "family")
				}
			}
			phones := []any{}
			for _, tc := range objs(r["telecom"]) {
				if tc["system"] == "phone" {
					phones = append(phones, tc["value"])
				}
			}
			return [][]any{{r["id"], str(r, "gender"), str(r, "birthDate"), family, phones}}
		}},
	{"observation values", `{"resource":"Observation","select":[{"column":[{"name":"id","path":"getResourceKey()"},
		{"name":"patient","path":"subject.getReferenceKey(Patient)"},{"name":"code","path":"code.coding.first().code"},
		{"name":"value","path":"value.ofType(Quantity).value","type":"decimal"},{"name":"unit","path":"value.ofType(Quantity).unit"},
		{"name":"effective","path":"effective.ofType(dateTime)","type":"dateTime"}]}]}`,
		func(r map[string]any) [][]any {
			var code, value, unit any
			if cs := objs(asMap(r["code"])["coding"]); len(cs) > 0 {
				code = str(cs[0], "code")
			}
			if q, ok := r["valueQuantity"].(map[string]any); ok {
				value, unit = q["value"], str(q, "unit")
			}
			return [][]any{{r["id"], refKey(asMap(r["subject"]), "Patient"), code, value, unit, str(r, "effectiveDateTime")}}
		}},
	{"blood pressure components", `{"resource":"Observation","where":[{"path":"code.coding.exists(code = '85354-9')"}],
		"select":[{"column":[{"name":"id","path":"id"}]},{"forEach":"component","column":[{"name":"code","path":"code.coding.code.first()"},
		{"name":"value","path":"value.ofType(Quantity).value"}]}]}`,
		func(r map[string]any) [][]any {
			bp := false
			for _, c := range objs(asMap(r["code"])["coding"]) {
				bp = bp || c["code"] == "85354-9"
			}
			if !bp {
				return nil
			}
			var rows [][]any
			for _, comp := range objs(r["component"]) {
				var code, value any
				if cs := objs(asMap(comp["code"])["coding"]); len(cs) > 0 {
					code = str(cs[0], "code")
				}
				if q, ok := comp["valueQuantity"].(map[string]any); ok {
					value = q["value"]
				}
				rows = append(rows, []any{r["id"], code, value})
			}
			return rows
		}},
	{"encounter participants or none", `{"resource":"Encounter","select":[{"column":[{"name":"id","path":"id"},
		{"name":"patient","path":"subject.getReferenceKey()"}]},{"forEachOrNull":"participant","column":[
		{"name":"practitioner","path":"individual.reference"},{"name":"n","path":"%rowIndex"}]}]}`,
		func(r map[string]any) [][]any {
			base := []any{r["id"], refKey(asMap(r["subject"]), "")}
			ps := objs(r["participant"])
			if len(ps) == 0 {
				return [][]any{append(base, nil, int64(0))}
			}
			var rows [][]any
			for i, p := range ps {
				rows = append(rows, append(slices.Clone(base), str(asMap(p["individual"]), "reference"), int64(i)))
			}
			return rows
		}},
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

// TestViewsOverSyntheaGiveTheRowsComputedFromTheData runs each view over
// the whole sample and compares its rows with those computed directly
// from the resources' JSON.
func TestViewsOverSyntheaGiveTheRowsComputedFromTheData(t *testing.T) {
	resources := syntheaResources(t)
	for _, tc := range syntheaCases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := view.Compile([]byte(tc.view), view.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, full := range resources {
				data, _ := json.Marshal(full)
				r, err := v.Decode(data)
				if err != nil {
					t.Fatal(err)
				}
				err = v.Eval(context.Background(), r, func(row []any) error {
					got = append(got, render(row))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if full["resourceType"] == v.Resource {
					for _, row := range tc.rows(full) {
						want = append(want, render(row))
					}
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("%d rows, want %d; first differences: %v", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}

func render(row []any) string {
	b, err := json.Marshal(row)
	if err != nil {
		return fmt.Sprint(row)
	}
	return string(b)
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return "got " + got[i] + ", want " + want[i]
		}
	}
	return ""
}

// TestAStreamGivesTheRowsEvalGives: over the whole sample, a Stream (its
// workers reusing their state from one resource to the next) gives the
// rows Eval gives, in the order of the resources.
func TestAStreamGivesTheRowsEvalGives(t *testing.T) {
	resources := syntheaResources(t)
	for _, tc := range syntheaCases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := view.Compile([]byte(tc.view), view.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			s := v.NewStream(context.Background(), 2, func(row []any) error {
				got = append(got, render(row))
				return nil
			})
			for _, full := range resources {
				data, _ := json.Marshal(full)
				if err := s.Add(data); err != nil {
					t.Fatal(err)
				}
				r, _ := view.Decode(data)
				err = v.Eval(context.Background(), r, func(row []any) error {
					want = append(want, render(row))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("%d rows, want %d; first differences: %v", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}
