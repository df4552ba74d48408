package fhirpath

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

const (
	paramsFile  = "../../testdata/fhir/search-parameters.json"
	examplesDir = "../../testdata/fhir/examples"
)

// requiredTypes are the parameter types whose every expression must compile.
var requiredTypes = []string{"string", "token", "reference", "date", "number", "quantity", "uri"}

// searchParam is the part of an official SearchParameter the tests use.
type searchParam struct {
	Code       string   `json:"code"`
	Type       string   `json:"type"`
	Expression string   `json:"expression"`
	Base       []string `json:"base"`
}

// officialParams reads the SearchParameter bundle.
func officialParams(tb testing.TB) []searchParam {
	tb.Helper()
	var bundle struct {
		Entry []struct {
			Resource searchParam `json:"resource"`
		} `json:"entry"`
	}
	data, err := os.ReadFile(paramsFile)
	if err != nil {
		tb.Fatalf("read parameters: %v", err)
	}
	if err := json.Unmarshal(data, &bundle); err != nil {
		tb.Fatalf("decode parameters: %v", err)
	}
	params := make([]searchParam, len(bundle.Entry))
	for i, e := range bundle.Entry {
		params[i] = e.Resource
	}
	return params
}

// decode decodes JSON the way the server does (UseNumber).
func decode(tb testing.TB, data []byte) any {
	tb.Helper()
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		tb.Fatalf("decode %.40q: %v", data, err)
	}
	return v
}

var (
	examplesMu sync.Mutex
	examples   = map[string]map[string]any{}
)

// example loads testdata/fhir/examples/<name>.json, decoded once.
func example(tb testing.TB, name string) map[string]any {
	tb.Helper()
	examplesMu.Lock()
	defer examplesMu.Unlock()
	if r, ok := examples[name]; ok {
		return r
	}
	data, err := os.ReadFile(filepath.Join(examplesDir, name+".json"))
	if err != nil {
		tb.Fatalf("read example: %v", err)
	}
	r, ok := decode(tb, data).(map[string]any)
	if !ok {
		tb.Fatalf("example %s is not an object", name)
	}
	examples[name] = r
	return r
}

// TestOfficialParametersCompile compiles the expression of every official
// R4 search parameter; those of the required types must all compile.
func TestOfficialParametersCompile(t *testing.T) {
	params := officialParams(t)
	if len(params) != 1375 {
		t.Errorf("got %d parameters, want 1375", len(params))
	}
	total, withExpr, compiled := map[string]int{}, map[string]int{}, map[string]int{}
	var failures, noExpr []string
	for _, p := range params {
		total[p.Type]++
		if p.Expression == "" {
			noExpr = append(noExpr, p.Type+" "+p.Code)
			continue
		}
		withExpr[p.Type]++
		if _, err := Compile(p.Expression); err != nil {
			if slices.Contains(requiredTypes, p.Type) {
				failures = append(failures, fmt.Sprintf("%s %s: %v", p.Type, p.Code, err))
			}
			continue
		}
		compiled[p.Type]++
	}
	types := make([]string, 0, len(total))
	for typ := range total {
		types = append(types, typ)
	}
	sort.Strings(types)
	for _, typ := range types {
		t.Logf("%-10s %4d of %4d with an expression compile (%d parameters)",
			typ, compiled[typ], withExpr[typ], total[typ])
	}
	t.Logf("no expression to compile: %s", strings.Join(noExpr, ", "))
	if len(failures) > 0 {
		t.Errorf("%d required parameters do not compile:\n%s", len(failures), strings.Join(failures, "\n"))
	}
}

// TestOfficialParametersOnExamples evaluates every compiled official
// expression on every example of its base types and checks the shape of
// the values returned.
func TestOfficialParametersOnExamples(t *testing.T) {
	byBase := map[string][]*Expr{}
	for _, p := range officialParams(t) {
		e, err := Compile(p.Expression)
		if err != nil || p.Expression == "" {
			continue
		}
		for _, b := range p.Base {
			byBase[b] = append(byBase[b], e)
		}
	}
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	nodes := 0
	for _, f := range files {
		r := example(t, strings.TrimSuffix(filepath.Base(f), ".json"))
		rt, _ := r["resourceType"].(string)
		exprs := slices.Concat(byBase[rt], byBase["Resource"], byBase["DomainResource"])
		for _, e := range exprs {
			for _, n := range e.Evaluate(r) {
				nodes++
				checkNodeValue(t, f, e, n)
			}
		}
	}
	t.Logf("%d examples, %d nodes", len(files), nodes)
}

// checkNodeValue fails when a node holds a value of an unexpected Go type.
func checkNodeValue(t *testing.T, file string, e *Expr, n Node) {
	switch n.Value.(type) {
	case map[string]any, string, json.Number, bool:
	default:
		t.Errorf("%s: %s: value %#v of type %T", file, e, n.Value, n.Value)
	}
}

// evalCase is one table test: the expression on an example (or inline
// resource) must give exactly want.
type evalCase struct {
	name     string
	example  string // file name without .json under testdata/fhir/examples
	resource string // inline JSON when example is empty
	expr     string
	want     []Node
}

// nodes builds the expected nodes from JSON values, all of type typ.
func nodes(tb testing.TB, typ string, values ...string) []Node {
	out := make([]Node, len(values))
	for i, v := range values {
		out[i] = Node{Value: decode(tb, []byte(v)), Type: typ}
	}
	return out
}

// runEvalCases runs a table of evalCase.
func runEvalCases(t *testing.T, cases []evalCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r map[string]any
			if tc.example != "" {
				r = example(t, tc.example)
			} else {
				r, _ = decode(t, []byte(tc.resource)).(map[string]any)
			}
			e, err := Compile(tc.expr)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got := e.Evaluate(r)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s\n got %s\nwant %s", tc.expr, show(got), show(tc.want))
			}
		})
	}
}

// show renders nodes for failure messages.
func show(ns []Node) string {
	var b strings.Builder
	for _, n := range ns {
		v, _ := json.Marshal(n.Value)
		fmt.Fprintf(&b, "[%s %s] ", n.Type, v)
	}
	return b.String()
}

// TestEvaluateOfficialExamples checks official expressions on official
// example resources.
func TestEvaluateOfficialExamples(t *testing.T) {
	bp := `{"value":107,"unit":"mmHg","system":"http://unitsofmeasure.org","code":"mm[Hg]"}`
	dp := `{"value":60,"unit":"mmHg","system":"http://unitsofmeasure.org","code":"mm[Hg]"}`
	email := `{"system":"email","value":"Jim@example.org","use":"home"}`
	emailExpr := "Patient.telecom.where(system='email') | Person.telecom.where(system='email') | " +
		"Practitioner.telecom.where(system='email') | PractitionerRole.telecom.where(system='email') | " +
		"RelatedPerson.telecom.where(system='email')"
	onsetAge := "Condition.onset.as(Age) | Condition.onset.as(Range)"
	deceased := "Patient.deceased.exists() and Patient.deceased != false"
	runEvalCases(t, []evalCase{
		{name: "family", example: "Patient-example", expr: "Patient.name.family",
			want: nodes(t, "", `"Chalmers"`, `"Windsor"`)},
		{name: "given flattens", example: "Patient-example", expr: "Patient.name.given",
			want: nodes(t, "", `"Peter"`, `"James"`, `"Jim"`, `"Peter"`, `"James"`)},
		{name: "other base", example: "Patient-example", expr: "Person.name.family"},
		{name: "value as Quantity", example: "Observation-example", expr: "Observation.value as Quantity",
			want: nodes(t, "Quantity", `{"value":185,"unit":"lbs","system":"http://unitsofmeasure.org","code":"[lb_av]"}`)},
		{name: "parenthesized as", example: "Observation-example", expr: "(Observation.value as Quantity)",
			want: nodes(t, "Quantity", `{"value":185,"unit":"lbs","system":"http://unitsofmeasure.org","code":"[lb_av]"}`)},
		{name: "as other type", example: "Observation-example", expr: "(Observation.value as CodeableConcept).text"},
		{name: "choice type", example: "Observation-example", expr: "Observation.effective",
			want: nodes(t, "dateTime", `"2016-03-28"`)},
		{name: "component values", example: "Observation-blood-pressure",
			expr: "(Observation.component.value as Quantity)", want: nodes(t, "Quantity", bp, dp)},
		{name: "subject is Patient", example: "Observation-example",
			expr: "Observation.subject.where(resolve() is Patient)", want: nodes(t, "", `{"reference":"Patient/example"}`)},
		{name: "subject is not Group", example: "Observation-example",
			expr: "Observation.subject.where(resolve() is Group)"},
		{name: "useContext CodeableConcept", example: "ActivityDefinition-citalopramPrescription",
			expr: "(ActivityDefinition.useContext.value as CodeableConcept)", want: nodes(t, "CodeableConcept",
				`{"coding":[{"system":"https://meshb.nlm.nih.gov","code":"D000328","display":"Adult"}]}`,
				`{"coding":[{"system":"http://snomed.info/sct","code":"87512008","display":"Mild major depression"}]}`,
				`{"coding":[{"system":"http://snomed.info/sct","code":"40379007","display":"Major depression, recurrent, mild"}]}`,
				`{"coding":[{"system":"http://snomed.info/sct","code":"225444004","display":"At risk for suicide (finding)"}]}`,
				`{"coding":[{"system":"http://snomed.info/sct","code":"306206005","display":"Referral to service (procedure)"}]}`,
				`{"coding":[{"system":"http://snomed.info/sct","code":"309343006","display":"Physician"}]}`,
				`{"coding":[{"system":"http://snomed.info/sct","code":"440655000","display":"Outpatient environment"}]}`)},
		{name: "deceased false", example: "Patient-example", expr: deceased, want: nodes(t, "boolean", "false")},
		{name: "deceased true", example: "Patient-pat4", expr: deceased, want: nodes(t, "boolean", "true")},
		{name: "deceased dateTime", example: "Patient-pat3", expr: deceased, want: nodes(t, "boolean", "true")},
		{name: "deceased absent", example: "Patient-xds", expr: deceased, want: nodes(t, "boolean", "false")},
		{name: "death-date", example: "Patient-pat3", expr: "(Patient.deceased as dateTime)",
			want: nodes(t, "dateTime", `"2015-02-14T13:42:00+10:00"`)},
		{name: "death-date boolean", example: "Patient-pat4", expr: "(Patient.deceased as dateTime)"},
		{name: "telecom email", example: "Person-example", expr: "Person.telecom.where(system='email')",
			want: nodes(t, "", email)},
		{name: "email union on Person", example: "Person-example", expr: emailExpr, want: nodes(t, "", email)},
		{name: "email union on Patient", example: "Patient-example", expr: emailExpr},
		{name: "union picks base", example: "Account-example",
			expr: "Account.name | ActivityDefinition.name | CapabilityStatement.name | Patient.name",
			want: nodes(t, "", `"HACC Funded Billing for Peter James Chalmers"`)},
		{name: "onset Age", example: "Condition-f202", expr: onsetAge,
			want: nodes(t, "Age", `{"value":52,"unit":"years","system":"http://unitsofmeasure.org","code":"a"}`)},
		{name: "onset dateTime not Age", example: "Condition-example", expr: onsetAge},
		{name: "onset string", example: "Condition-example2", expr: "Condition.onset.as(string)",
			want: nodes(t, "string", `"approximately November 2012"`)},
		{name: "composed-of", example: "Library-composition-example",
			expr: "Library.relatedArtifact.where(type='composed-of').resource",
			want: nodes(t, "", `"ActivityDefinition/administer-zika-virus-exposure-assessment"`,
				`"ActivityDefinition/order-serum-zika-dengue-virus-igm"`,
				`"ActivityDefinition/provide-mosquito-prevention-advice"`, `"Library/zika-virus-intervention-logic"`,
				`"PlanDefinition/zika-virus-intervention"`, `"Questionnaire/zika-virus-exposure-assessment"`)},
		{name: "relatesTo Reference", example: "Composition-example",
			expr: "(Composition.relatesTo.target as Reference)",
			want: nodes(t, "Reference", `{"reference":"Composition/old-example"}`)},
		{name: "relatesTo Identifier", example: "Composition-example",
			expr: "(Composition.relatesTo.target as Identifier)",
			want: nodes(t, "Identifier", `{"system":"http://example.org/fhir/NamingSystem/document-ids","value":"ABC123"}`)},
		{name: "contained medication", example: "MedicationRequest-medrx0302",
			expr: "(MedicationRequest.medication as Reference).where(resolve() is Medication)",
			want: nodes(t, "Reference", `{"reference":"#med0320"}`)},
		{name: "extension", example: "Patient-infant-fetal",
			expr: "Patient.extension('http://hl7.org/fhir/StructureDefinition/patient-mothersMaidenName').value",
			want: nodes(t, "string", `"Organa"`)},
		{name: "Resource base", example: "Observation-blood-pressure", expr: "Resource.meta.profile",
			want: nodes(t, "", `"http://hl7.org/fhir/StructureDefinition/vitalsigns"`)},
		{name: "Resource.id", example: "Patient-example", expr: "Resource.id", want: nodes(t, "", `"example"`)},
	})
}

// TestBundleEntryResource checks Bundle.entry[0].resource against the
// document bundle's first entry.
func TestBundleEntryResource(t *testing.T) {
	b := example(t, "Bundle-father")
	first := b["entry"].([]any)[0].(map[string]any)["resource"]
	e, err := Compile("Bundle.entry[0].resource")
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{{Value: first, Type: "Composition"}}
	if got := e.Evaluate(b); !reflect.DeepEqual(got, want) {
		t.Errorf("got %s, want %s", show(got), show(want))
	}
	if got := e.Evaluate(example(t, "Patient-example")); got != nil {
		t.Errorf("on a Patient: got %s", show(got))
	}
}

// FuzzCompile checks that Compile and Evaluate never panic.
func FuzzCompile(f *testing.F) {
	for _, p := range officialParams(f) {
		f.Add(p.Expression)
	}
	for _, s := range []string{"", "(", "a.where(", "'x", "`x", "a[", "@2020", "%x", "$index", "-a",
		"a as", "a.as(", "1 + 1", "a.b.c[99999999999999999999]", "{}", "/* x", "'\\u12'"} {
		f.Add(s)
	}
	resources := []map[string]any{example(f, "Patient-example"), example(f, "Observation-example"),
		example(f, "MedicationRequest-medrx0302"), example(f, "Bundle-father")}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Compile(src)
		if err != nil {
			if err.Error() == "" || e != nil {
				t.Fatalf("Compile(%q): bad failure %v, %v", src, e, err)
			}
			return
		}
		if e.String() != src {
			t.Fatalf("String() = %q, want %q", e.String(), src)
		}
		for _, r := range resources {
			for _, n := range e.Evaluate(r) {
				switch n.Value.(type) {
				case map[string]any, string, json.Number, bool:
				default:
					t.Fatalf("%q: value of type %T", src, n.Value)
				}
			}
		}
	})
}

// BenchmarkPatientParameters evaluates every Patient (and Resource)
// parameter on Patient-example.json.
func BenchmarkPatientParameters(b *testing.B) {
	var exprs []*Expr
	for _, p := range officialParams(b) {
		if p.Expression == "" || !slices.ContainsFunc(p.Base, func(s string) bool {
			return s == "Patient" || s == "Resource" || s == "DomainResource"
		}) {
			continue
		}
		e, err := Compile(p.Expression)
		if err != nil {
			b.Fatalf("%s: %v", p.Code, err)
		}
		exprs = append(exprs, e)
	}
	r := example(b, "Patient-example")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, e := range exprs {
			e.Evaluate(r)
		}
	}
	b.ReportMetric(float64(len(exprs)), "params")
}
