// Package sdc implements the Structured Data Capture operations on forms:
// $populate fills a QuestionnaireResponse from a patient's record,
// $extract turns a response's answers into Observations and other
// resources, and $assemble inlines the sub-questionnaires of a modular form.
// It reads data only through the Data interface the caller passes in and
// evaluates expressions with the project's FHIRPath engine, each one
// bounded in steps and time; it knows nothing of HTTP or storage.
package sdc

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// Data reads the tenant's resources with the caller's rights.
type Data interface {
	// Search runs a FHIR search such as "Observation?code=..." and returns
	// its searchset Bundle.
	Search(ctx context.Context, query string) (map[string]any, error)
	// Read returns the resource a reference such as "Patient/123" names;
	// nil, nil when it is absent or not visible to the caller.
	Read(ctx context.Context, reference string) (map[string]any, error)
	// Questionnaire returns the Questionnaire of a canonical URL ("url" or
	// "url|version"); nil, nil when there is none.
	Questionnaire(ctx context.Context, canonical string) (map[string]any, error)
}

// sdcSD is where the SDC implementation guide's extensions live.
const sdcSD = "http://hl7.org/fhir/uv/sdc/StructureDefinition/"

// Extensions the operations read and write.
const (
	// ExtLaunchContext declares a launch context (patient, encounter…) of a form.
	ExtLaunchContext = sdcSD + "sdc-questionnaire-launchContext"
	// ExtVariable names an expression's value for the expressions after it.
	ExtVariable = "http://hl7.org/fhir/StructureDefinition/variable"
	// ExtInitialExpression gives a question its first answers.
	ExtInitialExpression = sdcSD + "sdc-questionnaire-initialExpression"
	// ExtCalculatedExpression computes a question's answers from the others.
	ExtCalculatedExpression = sdcSD + "sdc-questionnaire-calculatedExpression"
	// ExtItemPopulationContext repeats a group once per item an expression yields.
	ExtItemPopulationContext = sdcSD + "sdc-questionnaire-itemPopulationContext"
	// ExtObservationExtract marks the items whose answers become Observations.
	ExtObservationExtract = sdcSD + "sdc-questionnaire-observationExtract"
	// ExtObservationCategory is the category of the Observations extracted.
	ExtObservationCategory = sdcSD + "sdc-questionnaire-observation-extract-category"
	// ExtDefinitionExtract names a resource definition-based extraction makes.
	ExtDefinitionExtract = sdcSD + "sdc-questionnaire-definitionExtract"
	// ExtDefinitionExtractValue sets an element of an extracted resource.
	ExtDefinitionExtractValue = sdcSD + "sdc-questionnaire-definitionExtractValue"
	// ExtItemExtractionContext is the older form of ExtDefinitionExtract.
	ExtItemExtractionContext = sdcSD + "sdc-questionnaire-itemExtractionContext"
	// ExtSubQuestionnaire makes a display item stand for another form's items.
	ExtSubQuestionnaire = sdcSD + "sdc-questionnaire-subQuestionnaire"
	// ExtLinkIDPrefix prefixes the linkIds of a sub-questionnaire's items.
	ExtLinkIDPrefix = sdcSD + "sdc-questionnaire-linkIdPrefix"
	// ExtAssembleExpectation says whether a form is a root, a module or both.
	ExtAssembleExpectation = sdcSD + "sdc-questionnaire-assemble-expectation"
	// ExtAssembledFrom names the root form an assembled form came from.
	ExtAssembledFrom = sdcSD + "sdc-questionnaire-assembledFrom"
	// ExtUnit is the unit of a numeric question.
	ExtUnit = "http://hl7.org/fhir/StructureDefinition/questionnaire-unit"
)

// UCUM is the system of the units of measure of extracted quantities.
const UCUM = "http://unitsofmeasure.org"

// Expression languages the operations evaluate.
const (
	langFHIRPath = "text/fhirpath"
	langQuery    = "application/x-fhir-query"
)

// Limits bound the work of one operation; zero fields take the defaults.
type Limits struct {
	// MaxSteps bounds each expression evaluation (default 100,000 steps).
	MaxSteps int
	// Timeout bounds each expression evaluation (default 1s).
	Timeout time.Duration
	// MaxQueries bounds the x-fhir-query searches of one operation (default 50).
	MaxQueries int
}

func (l Limits) withDefaults() Limits {
	if l.MaxSteps <= 0 {
		l.MaxSteps = 100_000
	}
	if l.Timeout <= 0 {
		l.Timeout = time.Second
	}
	if l.MaxQueries <= 0 {
		l.MaxQueries = 50
	}
	return l
}

// Failed reports whether issues hold an error, which means the operation
// produced nothing usable.
func Failed(issues []fhirschema.Issue) bool {
	for _, is := range issues {
		if is.Severity == "error" || is.Severity == "fatal" {
			return true
		}
	}
	return false
}

// expression is an R4 Expression value.
type expression struct {
	name, language, text string
}

// expressionOf reads the Expression of an extension's valueExpression.
func expressionOf(ext map[string]any) (expression, bool) {
	v, ok := ext["valueExpression"].(map[string]any)
	if !ok {
		return expression{}, false
	}
	e := expression{name: str(v["name"]), language: str(v["language"]), text: str(v["expression"])}
	return e, e.text != ""
}

// evaluator evaluates the expressions of one operation.
type evaluator struct {
	data    Data
	limits  Limits
	now     time.Time
	queries map[string]map[string]any // search results by query, run once each
	ran     int
	exprs   map[string]*fhirpath.Expr // compiled once each: calculations run again and again
}

func newEvaluator(d Data, l Limits, now time.Time) *evaluator {
	if now.IsZero() {
		now = time.Now()
	}
	return &evaluator{data: d, limits: l.withDefaults(), now: now, queries: map[string]map[string]any{}, exprs: map[string]*fhirpath.Expr{}}
}

// env is the FHIRPath environment of one evaluation: %resource is the
// response, the variables those in scope.
func (ev *evaluator) env(resource map[string]any, vars map[string][]fhirpath.Node) *fhirpath.Env {
	return &fhirpath.Env{Resource: resource, Vars: vars, MaxSteps: ev.limits.MaxSteps, Timeout: ev.limits.Timeout, Now: ev.now}
}

// fhirpath evaluates a FHIRPath expression over focus.
func (ev *evaluator) fhirpath(ctx context.Context, src string, resource map[string]any, vars map[string][]fhirpath.Node, focus []fhirpath.Node) ([]fhirpath.Node, error) {
	e, ok := ev.exprs[src]
	if !ok {
		var err error
		if e, err = fhirpath.Compile(src); err != nil {
			return nil, err
		}
		ev.exprs[src] = e
	}
	return e.Eval(ctx, ev.env(resource, vars), focus)
}

// eval evaluates an Expression of language text/fhirpath or
// application/x-fhir-query (a search whose {{...}} parts are FHIRPath).
func (ev *evaluator) eval(ctx context.Context, x expression, resource map[string]any, vars map[string][]fhirpath.Node, focus []fhirpath.Node) ([]fhirpath.Node, error) {
	switch x.language {
	case langFHIRPath, "":
		return ev.fhirpath(ctx, x.text, resource, vars, focus)
	case langQuery:
		q, err := ev.substitute(ctx, x.text, resource, vars, focus)
		if err != nil {
			return nil, err
		}
		b, err := ev.search(ctx, q)
		if err != nil {
			return nil, err
		}
		return []fhirpath.Node{fhirpath.ResourceNode(b)}, nil
	}
	return nil, fmt.Errorf("expression language %q is not supported (only %s and %s)", x.language, langFHIRPath, langQuery)
}

// substitute replaces each {{expr}} of a query with what the FHIRPath
// expr yields (SubstituteQuery).
func (ev *evaluator) substitute(ctx context.Context, q string, resource map[string]any, vars map[string][]fhirpath.Node, focus []fhirpath.Node) (string, error) {
	return SubstituteQuery(q, func(expr string) ([]fhirpath.Node, error) {
		return ev.fhirpath(ctx, expr, resource, vars, focus)
	})
}

// SubstituteQuery replaces each {{expr}} of an x-fhir-query with what
// eval makes of the FHIRPath expr: its values comma-separated, escaped for
// a query string. A value that is not a primitive is an error.
func SubstituteQuery(q string, eval func(expr string) ([]fhirpath.Node, error)) (string, error) {
	var b strings.Builder
	for {
		start := strings.Index(q, "{{")
		if start < 0 {
			b.WriteString(q)
			return b.String(), nil
		}
		end := strings.Index(q[start:], "}}")
		if end < 0 {
			return "", fmt.Errorf("query %q: {{ without }}", q)
		}
		b.WriteString(q[:start])
		inner := strings.TrimSpace(q[start+2 : start+end])
		nodes, err := eval(inner)
		if err != nil {
			return "", fmt.Errorf("query part {{%s}}: %w", inner, err)
		}
		vals := make([]string, 0, len(nodes))
		for _, n := range nodes {
			s, ok := text(fhirpath.JSONValue(n))
			if !ok {
				return "", fmt.Errorf("query part {{%s}} is not a primitive value", inner)
			}
			vals = append(vals, url.QueryEscape(s))
		}
		b.WriteString(strings.Join(vals, ","))
		q = q[start+end+2:]
	}
}

// search runs a query once per operation, within the query bound.
func (ev *evaluator) search(ctx context.Context, q string) (map[string]any, error) {
	if b, ok := ev.queries[q]; ok {
		return b, nil
	}
	if ev.ran >= ev.limits.MaxQueries {
		return nil, fmt.Errorf("more than %d queries in one operation", ev.limits.MaxQueries)
	}
	ev.ran++
	if ev.data == nil {
		return nil, fmt.Errorf("query %s: no data to search", q)
	}
	b, err := ev.data.Search(ctx, q)
	if err != nil {
		return nil, &DataError{Op: "search " + q, Err: err}
	}
	if b == nil {
		b = map[string]any{"resourceType": "Bundle", "type": "searchset"}
	}
	ev.queries[q] = b
	return b, nil
}

// DataError is a failure of the Data the operation was given (a search the
// server refused, a store that did not answer): the caller's to report,
// not the form's.
type DataError struct {
	Op  string // what was asked of the Data: "search Observation?code=…"
	Err error  // the Data's error
}

// Error names the operation on the Data and its failure.
func (e *DataError) Error() string { return e.Op + ": " + e.Err.Error() }

// Unwrap returns the Data's error.
func (e *DataError) Unwrap() error { return e.Err }

// text is a primitive JSON value as text.
func text(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case interface{ String() string }:
		return x.String(), true
	}
	return "", false
}

// str is v as a string, "" when it is not one.
func str(v any) string {
	s, _ := v.(string)
	return s
}

// objects are the objects of a JSON array.
func objects(v any) []map[string]any { return fhirschema.Objects(v) }

// extensions are the extensions of m with the given URL.
func extensions(m map[string]any, u string) []map[string]any {
	var out []map[string]any
	for _, e := range objects(m["extension"]) {
		if e["url"] == u {
			out = append(out, e)
		}
	}
	return out
}

// extension is the first extension of m with the given URL.
func extension(m map[string]any, u string) map[string]any {
	if list := extensions(m, u); len(list) > 0 {
		return list[0]
	}
	return nil
}

// subValue is the value[x] of the sub-extension name of a complex extension.
func subValue(ext map[string]any, name string) (string, any) {
	for _, e := range objects(ext["extension"]) {
		if e["url"] != name {
			continue
		}
		for k, v := range e {
			if typ, ok := strings.CutPrefix(k, "value"); ok && typ != "" {
				return typ, v
			}
		}
	}
	return "", nil
}

// valueOf is the value[x] of an element: its type suffix and value.
func valueOf(m map[string]any) (string, any) {
	for k, v := range m {
		if typ, ok := strings.CutPrefix(k, "value"); ok && typ != "" && typ[0] >= 'A' && typ[0] <= 'Z' {
			return typ, v
		}
	}
	return "", nil
}

// canonicalOf is a Questionnaire's url|version (its url alone without a version).
func canonicalOf(q map[string]any) string {
	u := str(q["url"])
	if v := str(q["version"]); u != "" && v != "" {
		return u + "|" + v
	}
	return u
}

// issue builds an issue.
func issue(severity, code, at, format string, args ...any) fhirschema.Issue {
	return fhirschema.Issue{Severity: severity, Code: code, Expression: at, Diagnostics: fmt.Sprintf(format, args...)}
}

// index appends [i] to a FHIRPath location.
func index(at string, i int) string { return at + "[" + strconv.Itoa(i) + "]" }
