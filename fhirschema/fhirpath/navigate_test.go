package fhirpath_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"fhirstore/fhirschema/fhirpath"
)

// walkExpressions lists walks down the elements v has, to depth levels:
// each name, each choice through ofType, with first() and [1] on the way,
// and extension('url') for the extensions it carries.
func walkExpressions(prefix string, v any, depth int, out map[string]bool) {
	if depth == 0 {
		return
	}
	var objs []map[string]any
	switch x := v.(type) {
	case map[string]any:
		objs = []map[string]any{x}
	case []any:
		for _, item := range x {
			if m, ok := item.(map[string]any); ok {
				objs = append(objs, m)
			}
		}
	}
	join := func(name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	for _, m := range objs {
		for key, child := range m {
			name := strings.TrimPrefix(key, "_")
			if name == "resourceType" {
				continue
			}
			if el, typ, ok := fhirpath.ChoiceOf(name); ok {
				out[join(el)] = true
				next := join(el) + ".ofType(" + typ + ")"
				out[next] = true
				walkExpressions(next, child, depth-1, out)
				continue
			}
			if name == "extension" {
				for _, x := range asList(child) {
					if url, ok := x.(map[string]any)["url"].(string); ok {
						next := join("extension('" + strings.ReplaceAll(url, "'", `\'`) + "')")
						out[next] = true
						walkExpressions(next, x, depth-1, out)
					}
				}
			}
			out[join(name)] = true
			out[join(name)+".first()"] = true
			out[join(name)+"[1]"] = true
			walkExpressions(join(name), child, depth-1, out)
			walkExpressions(join(name)+".first()", child, depth-1, out)
		}
	}
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// TestANavigationSelectsWhatEvalSelects: over every example resource,
// every walk down its elements that compiles to a Navigation selects the
// very nodes Eval selects (values, types and _name twins).
func TestANavigationSelectsWhatEvalSelects(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/fhir/examples/*.json")
	if len(files) < 100 {
		t.Skip("no examples")
	}
	extra := []map[string]any{
		decode(t, `{"resourceType":"Observation","id":"x","_code":{"extension":[{"url":"u","valueString":"s"}]},
			"valueQuantity":{"value":1.50,"unit":"mg","_unit":{"id":"u1"}},"_effectiveDateTime":{"id":"e"},
			"component":[{"code":{"text":"a"}},{"code":{"text":"b"},"valueString":"v"}]}`),
	}
	compared, declined := 0, 0
	var buf []fhirpath.Node
	check := func(r map[string]any) {
		rt, _ := r["resourceType"].(string)
		exprs := map[string]bool{}
		walkExpressions("", r, 3, exprs)
		srcs := make([]string, 0, len(exprs))
		for src := range exprs {
			srcs = append(srcs, src)
		}
		sort.Strings(srcs)
		for _, src := range srcs {
			expr, err := fhirpath.Compile(src)
			if err != nil {
				continue
			}
			nav := expr.Navigation(rt)
			if nav == nil {
				continue
			}
			focus := fhirpath.ResourceNode(r)
			want, err := expr.Eval(context.Background(), &fhirpath.Env{Resource: r}, []fhirpath.Node{focus})
			got, ok := nav.Select(focus, &buf)
			if !ok {
				declined++
				continue
			}
			if err != nil {
				t.Errorf("%s/%v %s: Eval failed (%v), the navigation selected %d nodes", rt, r["id"], src, err, len(got))
				continue
			}
			if len(want) == 0 && len(got) == 0 {
				compared++
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s/%v %s:\n got %s\nwant %s", rt, r["id"], src, fmt.Sprint(got), fmt.Sprint(want))
			}
			compared++
		}
	}
	for _, f := range files {
		r, err := loadResource(f)
		if err != nil {
			t.Fatal(err)
		}
		check(r)
	}
	for _, r := range extra {
		check(r)
	}
	if compared < 10_000 {
		t.Errorf("only %d navigations compared", compared)
	}
	t.Logf("%d navigations compared with Eval, %d left to it", compared, declined)
}

// TestANavigationIsOnlyAWalkDownElements: what is more than a walk (an
// operator, a function with its own logic, a variable, a type name, a step
// into a primitive or a resource of any type) compiles to no Navigation.
func TestANavigationIsOnlyAWalkDownElements(t *testing.T) {
	for _, tc := range []struct {
		src  string
		nav  bool
		from string
	}{
		{"id", true, "Observation"},
		{"code.coding.first().code", true, "Observation"},
		{"value.ofType(Quantity).value", true, "Observation"},
		{"component[0].code.coding.code", true, "Observation"},
		{"extension('http://example.org/x').value.ofType(string)", true, "Patient"},
		{"Observation.id", false, "Observation"},
		{"code.coding.where(system = 'x').code", false, "Observation"},
		{"id + 'x'", false, "Observation"},
		{"%resource.id", false, "Observation"},
		{"status.extension", false, "Observation"},
		{"contained.id", false, "Observation"},
		{"value.unit", false, "Observation"},
		{"code.coding.code", false, "NotAType"},
	} {
		expr := fhirpath.MustCompile(tc.src)
		if got := expr.Navigation(tc.from) != nil; got != tc.nav {
			t.Errorf("%s from %s: navigation %v, want %v", tc.src, tc.from, got, tc.nav)
		}
	}
}
