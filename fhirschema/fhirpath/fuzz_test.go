package fhirpath_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"fhirstore/fhirschema/fhirpath"
)

// fuzzEnv bounds one evaluation of a fuzzed input tighter than the
// defaults, so that the fuzzer spends its time on many inputs.
func fuzzEnv(resource map[string]any, strict bool) *fhirpath.Env {
	return &fhirpath.Env{Resource: resource, Strict: strict, MaxSteps: 100_000, Timeout: time.Second}
}

// hostileExpressions are seeds that try the parser's and the evaluator's
// edges: nesting, unterminated tokens, escapes, out-of-range literals,
// recursion and blow-up.
var hostileExpressions = []string{
	"", " ", "(", ")", "((1)", "1)", ".", "..", "Patient.", ".name", "[0]", "name[", "name[0", "name[]",
	"'unterminated", "`unterminated", "/* unterminated", "//", "'\\u12'", "'\\uZZZZ'", "'\\x'", "'\\",
	"@", "@T", "@2014-13-45", "@2014-02-30T25:61:61.1234+15:00", "@T24:00", "@2014-01-01T", "@-1",
	"2147483648", "-2147483649", "99999999999999999999999999999999.9", "1.", ".5", "1e10", "0x10",
	"1 'wk' + @T10:00", "1 '", "1 'mg' * 1 '[in_i]'", "5 'mg' / 0 'mg'", "1 / 0", "1 div 0", "1 mod 0",
	"$this", "$index", "$total", "$", "%", "%resource.%context", "%`vs-foo`", "%'x'", "%unknown",
	"a.b.c.d.e.f.g", "where()", "where(1, 2)", "iif()", "iif(true)", "iif(true, 1, 2, 3)", "first(1)",
	"repeat($this)", "(1).repeat($this + 1)", "descendants().descendants().count()",
	"(1 | 2 | 3).aggregate($total + $this, 0)", "aggregate($total)", "trace()", "trace('x', $this, 1)",
	"1 is", "is Integer", "1 as", "1 is System", "1 is FHIR.", "ofType()", "ofType(1)", "type().name.type()",
	"1 and", "and 1", "true implies", "not", "1 = = 1", "1 <> 1", "1 !~ 1", "-", "- -1", "+1", "1 + + 1",
	"'a'.matches('(')", "'a'.replaceMatches('[', 'b')", "'a'.substring(-1, -1)", "'a'.substring(1e3)",
	"'x'.toQuantity('mg')", "'1 \\'wk\\''.toQuantity()", "{}", "{}.x", "{ }", "{1}", "(1 | {}).count()",
	"resolve()", "extension('')", "memberOf('')", "conformsTo('')", "htmlChecks()", "children().skip(-1)",
	"now() - today()", "today() + 1 year - 1 'a'", "timeOfDay() > @T25:00", "lowBoundary(-1)", "1.precision(1)",
}

// searchExpressions returns the expressions of the official R4 search
// parameters, real-world expressions to seed the fuzzers with.
func searchExpressions(t testing.TB) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fhir", "search-parameters.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bundle struct {
		Entry []struct {
			Resource struct {
				Expression string `json:"expression"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(raw, &bundle); err != nil {
		t.Fatalf("search-parameters.json: %v", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range bundle.Entry {
		if x := e.Resource.Expression; x != "" && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// FuzzCompile: Compile never panics; it fails only with a positioned
// *fhirpath.Error of kind syntax or semantic, the same for the same text;
// what compiles keeps its text and evaluates without input to a result or
// an *fhirpath.Error.
func FuzzCompile(f *testing.F) {
	for _, tc := range loadSuite(f) {
		f.Add(tc.Expression.Text)
	}
	for _, src := range searchExpressions(f) {
		f.Add(src)
	}
	for _, src := range hostileExpressions {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		expr, err := fhirpath.Compile(src)
		if err != nil {
			checkCompileError(t, src, err)
			return
		}
		if expr.String() != src {
			t.Fatalf("compiled %q reads back as %q", src, expr.String())
		}
		for _, strict := range []bool{true, false} {
			out, err := expr.Eval(context.Background(), fuzzEnv(nil, strict), nil)
			checkEvalOutcome(t, src, out, err)
		}
	})
}

// checkCompileError checks a compile error: a positioned *Error within the
// expression, of kind syntax or semantic, and the same on a second compile.
func checkCompileError(t *testing.T, src string, err error) {
	t.Helper()
	var fe *fhirpath.Error
	if !errors.As(err, &fe) {
		t.Fatalf("Compile(%q): %T %v, want a *fhirpath.Error", src, err, err)
	}
	if fe.Kind != "syntax" && fe.Kind != "semantic" {
		t.Fatalf("Compile(%q): error kind %q, want syntax or semantic", src, fe.Kind)
	}
	if fe.Pos < 0 || fe.Pos > len(src)+1 {
		t.Fatalf("Compile(%q): position %d outside the expression (%d bytes)", src, fe.Pos, len(src))
	}
	if fe.Msg == "" {
		t.Fatalf("Compile(%q): an error without a message", src)
	}
	if fhirpath.IsSyntax(err) != (fe.Kind == "syntax") {
		t.Fatalf("Compile(%q): IsSyntax disagrees with kind %q", src, fe.Kind)
	}
	if _, again := fhirpath.Compile(src); again == nil || again.Error() != err.Error() {
		t.Fatalf("Compile(%q) failed with %v, then with %v", src, err, again)
	}
}

// checkEvalOutcome checks an evaluation's outcome: an *Error of kind
// semantic or execution, or nodes of the documented value types that
// render as JSON.
func checkEvalOutcome(t *testing.T, src string, out []fhirpath.Node, err error) {
	t.Helper()
	if err != nil {
		var fe *fhirpath.Error
		if !errors.As(err, &fe) || (fe.Kind != "semantic" && fe.Kind != "execution") || fe.Msg == "" {
			t.Fatalf("Eval(%q): %T %v, want a *fhirpath.Error of kind semantic or execution", src, err, err)
		}
		return
	}
	for i, n := range out {
		switch n.Value.(type) {
		case nil, map[string]any, string, bool, json.Number, int64, fhirpath.Quantity:
		default:
			t.Fatalf("Eval(%q): item %d is a %T (type %q), not a documented value type", src, i, n.Value, n.Type)
		}
		if _, err := json.Marshal(fhirpath.JSONValue(n)); err != nil {
			t.Fatalf("Eval(%q): item %d does not render as JSON: %v", src, i, err)
		}
	}
}

// FuzzEval: evaluating any expression over any JSON resource, strict or
// lenient, never panics or hangs, and gives nodes of the documented types
// or an *fhirpath.Error.
func FuzzEval(f *testing.F) {
	tests := loadSuite(f)
	inputs := map[string][]byte{}
	for _, tc := range tests {
		if tc.InputFile == "" || inputs[tc.InputFile] != nil {
			continue
		}
		res, err := loadResource(filepath.Join(suiteDir, tc.InputFile))
		if err != nil {
			f.Fatal(err)
		}
		if inputs[tc.InputFile], err = json.Marshal(res); err != nil {
			f.Fatal(err)
		}
	}
	for _, tc := range tests {
		f.Add(tc.Expression.Text, inputs[tc.InputFile], true)
	}
	for _, body := range hostileResources {
		for _, src := range []string{"descendants()", "name.given", "Patient.name.where(use = 'official').given.first()",
			"contained.select(id)", "extension.value", "id.extension", "birthDate + 1 day", "repeat(children())"} {
			f.Add(src, []byte(body), false)
			f.Add(src, []byte(body), true)
		}
	}
	f.Fuzz(func(t *testing.T, src string, body []byte, strict bool) {
		expr, err := fhirpath.Compile(src)
		if err != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var resource map[string]any
		if dec.Decode(&resource) != nil || resource == nil {
			return
		}
		focus := []fhirpath.Node{fhirpath.ResourceNode(resource)}
		out, err := expr.Eval(context.Background(), fuzzEnv(resource, strict), focus)
		checkEvalOutcome(t, src, out, err)
	})
}

// hostileResources are resources whose JSON holds what a resource should
// not: wrong JSON types, nulls, empty arrays, primitive twins without
// values, unknown elements, odd references.
var hostileResources = []string{
	`{}`,
	`{"resourceType":"Patient"}`,
	`{"resourceType":"Patient","name":5,"birthDate":true,"active":"yes","gender":["male"]}`,
	`{"resourceType":"Patient","name":[null,{},{"given":[null,"A",null]}],"_birthDate":{"extension":[{"url":"x"}]}}`,
	`{"resourceType":"Patient","name":[],"telecom":[[]],"extension":[{"url":5,"valueString":{}}]}`,
	`{"resourceType":"Patient","id":"a","contained":[{"resourceType":"Patient","contained":[{"resourceType":"Patient"}]}],"link":[{"other":{"reference":"#"}}]}`,
	`{"resourceType":"Nonsense","name":[{"given":["x"]}],"value":1.0e400}`,
	`{"resourceType":"Observation","valueQuantity":{"value":"1","code":5},"valueString":"both","component":[{"valueQuantity":{"value":1e-400}}]}`,
	`{"resourceType":"Bundle","entry":[{"fullUrl":"urn:uuid:1","resource":{"resourceType":"Patient","id":"1"}},{"resource":null},{}]}`,
	`{"resourceType":"Patient","birthDate":"not a date","deceasedDateTime":"2014-13-45","multipleBirthInteger":2147483648}`,
}
