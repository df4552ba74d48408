package fhirpath_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"fhirstore/fhirschema/fhirpath"
	"fhirstore/fhirschema/fhirxml"
)

// suiteDir holds the official FHIRPath R4 suite, its input files and the
// list of the tests the engine does not pass yet.
const suiteDir = "../../testdata/fhirpath"

// minPassRate is the share of the suite that must pass.
const minPassRate = 0.95

// suiteTest is one <test> of tests-fhir-r4.xml.
type suiteTest struct {
	Name       string `xml:"name,attr"`
	InputFile  string `xml:"inputfile,attr"`
	Predicate  string `xml:"predicate,attr"`
	Ordered    string `xml:"ordered,attr"`
	Expression struct {
		Text    string `xml:",chardata"`
		Invalid string `xml:"invalid,attr"`
	} `xml:"expression"`
	Outputs []suiteOutput `xml:"output"`
}

// suiteOutput is one expected item of a test's result: its type (empty
// for the untyped outputs of the boundary and precision tests) and value
// in the suite's notation (@ before dates and times, 'unit' after a
// quantity's value).
type suiteOutput struct {
	Type string `xml:"type,attr"`
	Text string `xml:",chardata"`
}

// loadSuite reads every <test> of the suite, at any depth, in document
// order. A name the suite uses twice gets #2 (#3, …) on its later tests so
// that each test has a name of its own.
func loadSuite(t testing.TB) []suiteTest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(suiteDir, "tests-fhir-r4.xml"))
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(raw))
	var tests []suiteTest
	seen := map[string]int{}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return tests
		}
		if err != nil {
			t.Fatalf("tests-fhir-r4.xml: %v", err)
		}
		start, ok := tok.(xml.StartElement)
		if !ok || start.Name.Local != "test" {
			continue
		}
		var tc suiteTest
		if err := d.DecodeElement(&tc, &start); err != nil {
			t.Fatalf("tests-fhir-r4.xml: %v", err)
		}
		if seen[tc.Name]++; seen[tc.Name] > 1 {
			tc.Name += "#" + strconv.Itoa(seen[tc.Name])
		}
		tests = append(tests, tc)
	}
}

// loadResource reads a FHIR resource in JSON or XML (through fhirxml), its
// numbers as json.Number, as the CLI does.
func loadResource(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '<' {
		if raw, err = fhirxml.ToJSON(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var res map[string]any
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

// loadInputs reads every input file the tests name.
func loadInputs(t testing.TB, tests []suiteTest) map[string]map[string]any {
	t.Helper()
	inputs := map[string]map[string]any{}
	for _, tc := range tests {
		if tc.InputFile == "" || inputs[tc.InputFile] != nil {
			continue
		}
		res, err := loadResource(filepath.Join(suiteDir, tc.InputFile))
		if err != nil {
			t.Fatalf("input of %s: %v", tc.Name, err)
		}
		inputs[tc.InputFile] = res
	}
	return inputs
}

// loadKnownFailures reads known-failures.txt: one test per line, its name
// and then why it fails; # starts a comment.
func loadKnownFailures(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(suiteDir, "known-failures.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, reason := text, ""
		if i := strings.IndexAny(text, " \t"); i > 0 {
			name, reason = text[:i], text[i+1:]
		}
		if strings.TrimSpace(reason) == "" {
			t.Errorf("known-failures.txt:%d: %s has no reason", line, name)
		}
		if _, dup := known[name]; dup {
			t.Errorf("known-failures.txt:%d: %s is listed twice", line, name)
		}
		known[name] = strings.TrimSpace(reason)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return known
}

// TestOfficialFHIRPathSuite runs the official FHIRPath R4 suite through
// the engine in strict mode, as `fhirstore fhirpath` does. Every test
// passes unless known-failures.txt lists it, every listed test still
// fails, and at least 95% of the suite passes.
func TestOfficialFHIRPathSuite(t *testing.T) {
	tests := loadSuite(t)
	inputs := loadInputs(t, tests)
	known := loadKnownFailures(t)
	names := map[string]bool{}
	ran, passed := 0, 0
	for _, tc := range tests {
		names[tc.Name] = true
		t.Run(tc.Name, func(t *testing.T) {
			ran++
			why := runSuiteTest(tc, inputs[tc.InputFile])
			reason, listed := known[tc.Name]
			switch {
			case why == "":
				passed++
				if listed {
					t.Errorf("passes now: remove it from known-failures.txt (listed as %q)", reason)
				}
			case listed:
				t.Logf("known failure (%s): %s", reason, why)
			default:
				t.Errorf("%s\nexpression: %s", why, strings.TrimSpace(tc.Expression.Text))
			}
		})
	}
	for name := range known {
		if !names[name] {
			t.Errorf("known-failures.txt lists %s, which is no test of the suite", name)
		}
	}
	if ran < len(tests) {
		return // a -run pattern chose some tests: the pass rate is the whole suite's
	}
	rate := float64(passed) / float64(len(tests))
	t.Logf("official FHIRPath suite: %d of %d passed (%.1f%%), %d known failures", passed, len(tests), 100*rate, len(known))
	if rate < minPassRate {
		t.Errorf("%d of %d passed (%.1f%%), want at least %.0f%%", passed, len(tests), 100*rate, 100*minPassRate)
	}
}

// runSuiteTest evaluates one test as the suite means it and returns why
// it failed, or "" when it passed.
func runSuiteTest(tc suiteTest, resource map[string]any) string {
	got, err := evalSuiteTest(tc, resource)
	if want := tc.Expression.Invalid; want != "" {
		return checkInvalid(want, got, err)
	}
	if err != nil {
		return fmt.Sprintf("error: %v", err)
	}
	if tc.Predicate == "true" {
		got = []fhirpath.Node{{Value: len(got) > 0, Type: "System.Boolean"}}
	}
	return compareOutputs(tc.Outputs, got, tc.Ordered == "false")
}

// evalSuiteTest compiles and evaluates the expression of tc in strict
// mode against resource (no input when nil).
func evalSuiteTest(tc suiteTest, resource map[string]any) ([]fhirpath.Node, error) {
	expr, err := fhirpath.Compile(tc.Expression.Text)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	env := &fhirpath.Env{Strict: true, Resource: resource, Timeout: 5 * time.Second}
	var focus []fhirpath.Node
	if resource != nil {
		focus = []fhirpath.Node{fhirpath.ResourceNode(resource)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return expr.Eval(ctx, env, focus)
}

// checkInvalid checks that a test marked invalid failed with an *Error of
// the kind the suite names (syntax, semantic or execution; true: any).
func checkInvalid(want string, got []fhirpath.Node, err error) string {
	if err == nil {
		return fmt.Sprintf("want a %s error, got %s", want, describe(got))
	}
	var fe *fhirpath.Error
	if !errors.As(err, &fe) {
		return fmt.Sprintf("want a %s *fhirpath.Error, got %T: %v", want, err, err)
	}
	if want != "true" && fe.Kind != want {
		return fmt.Sprintf("want a %s error, got %v", want, err)
	}
	return ""
}

// compareOutputs compares a result with the expected outputs, in order
// unless unordered (then as multisets).
func compareOutputs(want []suiteOutput, got []fhirpath.Node, unordered bool) string {
	if len(got) != len(want) {
		return fmt.Sprintf("want %d items %s, got %s", len(want), describeWant(want), describe(got))
	}
	if unordered {
		return compareUnordered(want, got)
	}
	for i, w := range want {
		if why := matchOutput(w, got[i]); why != "" {
			return fmt.Sprintf("item %d: %s (want %s, got %s)", i, why, describeWant(want), describe(got))
		}
	}
	return ""
}

// compareUnordered pairs each expected output with a distinct result item.
func compareUnordered(want []suiteOutput, got []fhirpath.Node) string {
	used := make([]bool, len(got))
next:
	for _, w := range want {
		for i, n := range got {
			if !used[i] && matchOutput(w, n) == "" {
				used[i] = true
				continue next
			}
		}
		return fmt.Sprintf("no item matches %s %q (want %s, got %s, in any order)", w.Type, w.Text, describeWant(want), describe(got))
	}
	return ""
}

// suiteTypes are the node types each type name of the suite accepts: the
// FHIR type itself and, for the System types, the computed value's type.
var suiteTypes = map[string][]string{
	"boolean":  {"boolean", "System.Boolean"},
	"integer":  {"integer", "System.Integer"},
	"decimal":  {"decimal", "System.Decimal"},
	"string":   {"string", "System.String"},
	"date":     {"date", "System.Date"},
	"dateTime": {"dateTime", "System.DateTime"},
	"time":     {"time", "System.Time"},
	"Quantity": {"Quantity", "System.Quantity"},
	"code":     {"code"},
	"id":       {"id"},
}

// matchOutput returns why n is not the expected output w, or "".
func matchOutput(w suiteOutput, n fhirpath.Node) string {
	kind := w.Type
	if kind == "" {
		kind = inferType(w.Text)
	} else if !oneOf(n.Type, suiteTypes[kind]) {
		return fmt.Sprintf("type %q, want %s", n.Type, w.Type)
	}
	v := fhirpath.JSONValue(n)
	text := strings.TrimSpace(w.Text)
	switch kind {
	case "boolean":
		if b, ok := v.(bool); !ok || strconv.FormatBool(b) != text {
			return fmt.Sprintf("value %#v, want %s", v, text)
		}
	case "integer", "decimal":
		return matchNumber(text, v)
	case "date", "dateTime", "time":
		want := strings.TrimPrefix(text, "@")
		if kind == "time" {
			want = strings.TrimPrefix(want, "T")
		}
		if s, ok := v.(string); !ok || s != want {
			return fmt.Sprintf("value %#v, want %s", v, want)
		}
	case "Quantity":
		return matchQuantity(text, v)
	default:
		if s, ok := v.(string); !ok || s != w.Text {
			return fmt.Sprintf("value %#v, want %q", v, w.Text)
		}
	}
	return ""
}

// inferType names the kind of an untyped output by its notation: @T… a
// time, @… with a T a dateTime, @… a date, a number and a 'unit' a
// Quantity, a number a decimal (which an integer matches by value).
func inferType(text string) string {
	text = strings.TrimSpace(text)
	switch {
	case strings.HasPrefix(text, "@T"):
		return "time"
	case strings.HasPrefix(text, "@") && strings.Contains(text, "T"):
		return "dateTime"
	case strings.HasPrefix(text, "@"):
		return "date"
	case strings.HasSuffix(text, "'"):
		return "Quantity"
	case text == "true" || text == "false":
		return "boolean"
	}
	if _, err := strconv.ParseFloat(text, 64); err == nil {
		return "decimal"
	}
	return "string"
}

// matchNumber compares a JSON number (json.Number, int64, float64…) with
// the expected value's text, by value: 1.0 matches 1.
func matchNumber(text string, v any) string {
	want, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return fmt.Sprintf("bad expected number %q", text)
	}
	got, ok := number(v)
	if !ok || got != want {
		return fmt.Sprintf("value %#v, want %s", v, text)
	}
	return ""
}

// number converts the number forms JSONValue may return to float64.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// matchQuantity compares a Quantity object with "value 'unit'".
func matchQuantity(text string, v any) string {
	num, unit, _ := strings.Cut(text, " ")
	unit = strings.Trim(unit, "'")
	q, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprintf("value %#v, want a Quantity %s", v, text)
	}
	if why := matchNumber(num, q["value"]); why != "" {
		return why
	}
	got, _ := q["code"].(string)
	if got == "" {
		got, _ = q["unit"].(string)
	}
	if got != unit {
		return fmt.Sprintf("unit %q, want %q", got, unit)
	}
	return ""
}

func oneOf(s string, list []string) bool {
	for _, x := range list {
		if s == x {
			return true
		}
	}
	return false
}

// describe renders a result as type:value items for failure messages.
func describe(nodes []fhirpath.Node) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		b, err := json.Marshal(fhirpath.JSONValue(n))
		if err != nil {
			b = []byte(fmt.Sprintf("%#v", n.Value))
		}
		s := string(b)
		if len(s) > 80 {
			s = s[:80] + "…"
		}
		parts[i] = n.Type + ":" + s
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// describeWant renders expected outputs like describe.
func describeWant(want []suiteOutput) string {
	parts := make([]string, len(want))
	for i, w := range want {
		parts[i] = w.Type + ":" + strings.TrimSpace(w.Text)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
