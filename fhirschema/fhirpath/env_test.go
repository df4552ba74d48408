package fhirpath_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fhirstore/fhirschema/fhirpath"
)

// decode reads JSON the way the server does (UseNumber).
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// eval evaluates expr over resource with env (Resource set to resource)
// and returns the result as JSON.
func eval(t *testing.T, env fhirpath.Env, resource map[string]any, expr string) string {
	t.Helper()
	e, err := fhirpath.Compile(expr)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	env.Resource = resource
	out, err := e.Eval(context.Background(), &env, []fhirpath.Node{fhirpath.ResourceNode(resource)})
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	vals := make([]any, len(out))
	for i, n := range out {
		vals[i] = fhirpath.JSONValue(n)
	}
	b, _ := json.Marshal(vals)
	return string(b)
}

type store map[string]map[string]any

func (s store) Resolve(_ context.Context, ref string) (map[string]any, error) {
	if ref == "Patient/broken" {
		return nil, errors.New("store down")
	}
	return s[ref], nil
}

type valueSets map[string][]string

func (v valueSets) MemberOf(_ context.Context, system, code, url string) (bool, bool, error) {
	codes, ok := v[url]
	if !ok {
		return false, false, nil
	}
	for _, c := range codes {
		if c == system+"|"+code {
			return true, true, nil
		}
	}
	return false, true, nil
}

func TestResolveLooksInContainedBundleAndStore(t *testing.T) {
	bundle := decode(t, `{"resourceType":"Bundle","type":"transaction","entry":[
		{"fullUrl":"urn:uuid:1","resource":{"resourceType":"Patient","id":"p1","name":[{"family":"Inbundle"}]}},
		{"fullUrl":"urn:uuid:2","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},
			"contained":[{"resourceType":"Practitioner","id":"pr","name":[{"family":"Contained"}]}],
			"performer":[{"reference":"#pr"}],
			"subject":{"reference":"urn:uuid:1"},
			"focus":[{"reference":"Patient/stored"},{"reference":"Patient/absent"}]}}]}`)
	obs := bundle["entry"].([]any)[1].(map[string]any)["resource"].(map[string]any)
	env := fhirpath.Env{RootResource: bundle, Resolver: store{"Patient/stored": decode(t, `{"resourceType":"Patient","id":"stored","name":[{"family":"Stored"}]}`)}}
	for expr, want := range map[string]string{
		"Observation.performer.resolve().name.family": `["Contained"]`,
		"Observation.subject.resolve().name.family":   `["Inbundle"]`,
		"Observation.focus.resolve().name.family":     `["Stored"]`,
		"Observation.focus.resolve().count()":         `[1]`,
		"%rootResource.entry.count()":                 `[2]`,
	} {
		if got := eval(t, env, obs, expr); got != want {
			t.Errorf("%s = %s, want %s", expr, got, want)
		}
	}
	e := fhirpath.MustCompile("Observation.focus.resolve()")
	env.Resource = obs
	obs["focus"] = []any{map[string]any{"reference": "Patient/broken"}}
	if _, err := e.Eval(context.Background(), &env, []fhirpath.Node{fhirpath.ResourceNode(obs)}); err == nil || !strings.Contains(err.Error(), "store down") {
		t.Errorf("a failing store: %v, want its error", err)
	}
}

func TestMemberOfAsksTheTerminology(t *testing.T) {
	obs := decode(t, `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8867-4"}]}}`)
	env := fhirpath.Env{Terminology: valueSets{"http://x/vs/vitals": {"http://loinc.org|8867-4"}, "http://x/vs/labs": {"http://loinc.org|1-8"}}}
	for expr, want := range map[string]string{
		"code.memberOf('http://x/vs/vitals')":   `[true]`,
		"code.memberOf('http://x/vs/labs')":     `[false]`,
		"code.memberOf('http://x/vs/unknown')":  `[]`,
		"status.memberOf('http://x/vs/vitals')": `[false]`,
	} {
		if got := eval(t, env, obs, expr); got != want {
			t.Errorf("%s = %s, want %s", expr, got, want)
		}
	}
	if got := eval(t, fhirpath.Env{}, obs, "code.memberOf('http://x/vs/vitals')"); got != `[]` {
		t.Errorf("without a terminology: %s, want []", got)
	}
}

func TestEnvironmentVariablesAndTrace(t *testing.T) {
	p := decode(t, `{"resourceType":"Patient","name":[{"given":["Ann","Bo"]}]}`)
	var traced []string
	env := fhirpath.Env{
		Vars: map[string][]fhirpath.Node{"limit": {{Value: int64(1), Type: "System.Integer"}}},
		Trace: func(name string, nodes []fhirpath.Node) {
			traced = append(traced, name+":"+strings.Repeat("x", len(nodes)))
		},
	}
	for expr, want := range map[string]string{
		"name.given.take(%limit)":       `["Ann"]`,
		"%ucum":                         `["http://unitsofmeasure.org"]`,
		"%sct":                          `["http://snomed.info/sct"]`,
		"%loinc":                        `["http://loinc.org"]`,
		"%`vs-administrative-gender`":   `["http://hl7.org/fhir/ValueSet/administrative-gender"]`,
		"%'ext-patient-birthTime'":      `["http://hl7.org/fhir/StructureDefinition/patient-birthTime"]`,
		"name.given.trace('g').count()": `[2]`,
		"%context.name.given.first()":   `["Ann"]`,
		"name.given.aggregate($total + $this, '')":       `["AnnBo"]`,
		"name.given.select($index)":                      `[0,1]`,
		"(1 | 2 | 3).aggregate($this + $total, 0)":       `[6]`,
		"name.given.where($this.startsWith('B'))":        `["Bo"]`,
		"Patient.name.given.combine(name.given).count()": `[4]`,
	} {
		if got := eval(t, env, p, expr); got != want {
			t.Errorf("%s = %s, want %s", expr, got, want)
		}
	}
	if len(traced) != 1 || traced[0] != "g:xx" {
		t.Errorf("trace saw %v, want [g:xx]", traced)
	}
	e := fhirpath.MustCompile("%nosuch")
	if _, err := e.Eval(context.Background(), &fhirpath.Env{}, nil); err == nil {
		t.Error("an unknown variable evaluated without error")
	}
}

func TestErrorsNameTheirPosition(t *testing.T) {
	for expr, want := range map[string]string{
		"Patient.name.where(":   "syntax error at 20",
		"Patient.name.nosuch()": "syntax error at 14",
		"1 +":                   "syntax error at 4",
		"'open":                 "syntax error at 1",
		"@2014-13-01":           "syntax error at 1",
	} {
		_, err := fhirpath.Compile(expr)
		if err == nil || !strings.Contains(err.Error(), want) || !fhirpath.IsSyntax(err) {
			t.Errorf("%s: %v, want a syntax error containing %q", expr, err, want)
		}
	}
	e := fhirpath.MustCompile("Patient.name.given.single()")
	p := decode(t, `{"resourceType":"Patient","name":[{"given":["Ann","Bo"]}]}`)
	_, err := e.Eval(context.Background(), &fhirpath.Env{}, []fhirpath.Node{fhirpath.ResourceNode(p)})
	var fe *fhirpath.Error
	if !errors.As(err, &fe) || fe.Kind != "execution" || fe.Pos != 20 {
		t.Errorf("single() over two items: %v, want an execution error at 20", err)
	}
}

func TestCacheCompilesOnce(t *testing.T) {
	c := fhirpath.NewCache(2)
	a, err1 := c.Compile("Patient.name")
	b, err2 := c.Compile("Patient.name")
	if err1 != nil || err2 != nil || a != b {
		t.Errorf("the same text gave %p and %p (%v, %v)", a, b, err1, err2)
	}
	if _, err := c.Compile("Patient.("); err == nil {
		t.Error("a bad expression compiled")
	}
}

// TestOfficialSearchParametersOnEveryExample evaluates every official
// search parameter expression over every official example of its base:
// each compiles, and none fails to evaluate.
func TestOfficialSearchParametersOnEveryExample(t *testing.T) {
	data, err := os.ReadFile("../../search/search-parameters.json")
	if err != nil {
		t.Skip("no search-parameters.json:", err)
	}
	var bundle struct {
		Entry []struct {
			Resource struct {
				Code, Expression string
				Base             []string
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(data, &bundle); err != nil {
		t.Fatal(err)
	}
	examples, _ := filepath.Glob("../../testdata/fhir/examples/*.json")
	byType := map[string][]map[string]any{}
	for _, f := range examples {
		b, _ := os.ReadFile(f)
		r := decode(t, string(b))
		rt, _ := r["resourceType"].(string)
		byType[rt] = append(byType[rt], r)
	}
	evaluated := 0
	for _, e := range bundle.Entry {
		p := e.Resource
		if p.Expression == "" {
			continue
		}
		expr, err := fhirpath.Compile(p.Expression)
		if err != nil {
			t.Errorf("%s: %v", p.Code, err)
			continue
		}
		for _, base := range p.Base {
			for _, r := range byType[base] {
				env := fhirpath.Env{Resource: r}
				if _, err := expr.Eval(context.Background(), &env, []fhirpath.Node{fhirpath.ResourceNode(r)}); err != nil {
					t.Errorf("%s on %s/%v: %v", p.Code, base, r["id"], err)
				}
				evaluated++
			}
		}
	}
	if evaluated < 1000 {
		t.Errorf("only %d evaluations: are the examples there?", evaluated)
	}
}

func TestAPathMayStartWithATypeTheModelDoesNotKnow(t *testing.T) {
	v := decode(t, `{"resourceType":"ViewDefinition","name":"patients","resource":"Patient"}`)
	if got := eval(t, fhirpath.Env{}, v, "ViewDefinition.name"); got != `["patients"]` {
		t.Errorf("ViewDefinition.name = %s", got)
	}
	if got := eval(t, fhirpath.Env{}, v, "Patient.name"); got != `[]` {
		t.Errorf("Patient.name of a ViewDefinition = %s, want []", got)
	}
}
