package console

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
	"fhirstore/fhirschema/sdc"
)

// The form renderer evaluates enableWhen itself and asks this endpoint for
// the FHIRPath of a form (calculatedExpression, enableWhenExpression): the
// browser runs no FHIRPath engine of its own, so the answers on screen are
// the ones the server's engine computes when it checks the saved response.
// The endpoint reads nothing from the store: the browser sends the form, the
// response as filled so far, its launch contexts and the answers of the
// form's x-fhir-query searches, which it runs itself with its own token.

// SDC extensions the endpoint reads.
const (
	sdcSD                   = "http://hl7.org/fhir/uv/sdc/StructureDefinition/"
	extVariable             = "http://hl7.org/fhir/StructureDefinition/variable"
	extCalculatedExpression = sdcSD + "sdc-questionnaire-calculatedExpression"
	extEnableWhenExpression = sdcSD + "sdc-questionnaire-enableWhenExpression"
	extInitialExpression    = sdcSD + "sdc-questionnaire-initialExpression"
	langFHIRPath            = "text/fhirpath"
	langQuery               = "application/x-fhir-query"
)

// Bounds of one evaluation request.
const (
	maxExpressionBody  = 4 << 20
	expressionSteps    = 100_000
	expressionTimeout  = 250 * time.Millisecond
	calculationRounds  = 5
	expressionRequests = 2 * time.Second
)

// expressionCache keeps the compiled expressions of the forms in use.
var expressionCache = fhirpath.NewCache(1024)

// expressionRequest is what the form sends.
type expressionRequest struct {
	Questionnaire map[string]any `json:"questionnaire"`
	// Response holds every item of the form shown so far, answered or
	// not, display items too; the answers of disabled items left out.
	Response map[string]any `json:"response"`
	// Context are the launch contexts by name (patient, user…).
	Context map[string]map[string]any `json:"context"`
	// Queries are the searchset Bundles of the form's x-fhir-query
	// variables, by query as the endpoint asked for it.
	Queries map[string]map[string]any `json:"queries"`
	// Initial asks for the initialExpressions' answers too.
	Initial bool `json:"initial"`
}

// expressionAnswer is what the endpoint computes. Items are named by their
// path in the response sent: "item[0].item[2]".
type expressionAnswer struct {
	// Calculated are the answers of the items with a calculatedExpression.
	Calculated map[string][]any `json:"calculated"`
	// Initial are the initialExpressions' answers, when asked for.
	Initial map[string][]any `json:"initial,omitempty"`
	// Enabled tells, for each item with an enableWhenExpression, whether it
	// is enabled.
	Enabled map[string]bool `json:"enabled"`
	// Queries are the x-fhir-query searches whose Bundles were missing;
	// the variables they feed were empty.
	Queries []string `json:"queries"`
	// Problems are expressions that failed, in words.
	Problems []string `json:"problems"`
	// Millis is the time the evaluation took on the server.
	Millis float64 `json:"millis"`
}

// serveExpressions evaluates a form's expressions over a response.
func (c *Console) serveExpressions(w http.ResponseWriter, r *http.Request) {
	var req expressionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxExpressionBody))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		writeAPIError(w, http.StatusBadRequest, "send {questionnaire, response, context, queries} as JSON: "+err.Error())
		return
	}
	if req.Questionnaire == nil || req.Response == nil {
		writeAPIError(w, http.StatusBadRequest, "a questionnaire and a response are required")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), expressionRequests)
	defer cancel()
	start := time.Now()
	out := evaluateForm(ctx, req, c.opts.Now())
	out.Millis = float64(time.Since(start).Microseconds()) / 1000
	writeAPIJSON(w, out)
}

// formEval evaluates the expressions of one request.
type formEval struct {
	req     expressionRequest
	now     time.Time
	out     *expressionAnswer
	missing map[string]bool
	failed  map[string]bool
}

// evaluateForm computes the calculated answers (again while any changes,
// a few rounds at most, so that a BMI feeds what depends on it), then the
// enableWhenExpressions over the final answers.
func evaluateForm(ctx context.Context, req expressionRequest, now time.Time) *expressionAnswer {
	out := &expressionAnswer{Calculated: map[string][]any{}, Enabled: map[string]bool{}, Queries: []string{}, Problems: []string{}}
	f := &formEval{req: req, now: now, out: out, missing: map[string]bool{}, failed: map[string]bool{}}
	base := map[string][]fhirpath.Node{
		"resource":      {fhirpath.ResourceNode(req.Response)},
		"questionnaire": {fhirpath.ResourceNode(req.Questionnaire)},
	}
	for name, res := range req.Context {
		if res != nil {
			base[name] = []fhirpath.Node{fhirpath.ResourceNode(res)}
		}
	}
	root := []fhirpath.Node{fhirpath.ResourceNode(req.Response)}
	vars := f.bind(ctx, req.Questionnaire, "Questionnaire", base, root)
	qitems := objects(req.Questionnaire["item"])
	for range calculationRounds {
		if !f.walk(ctx, qitems, objects(req.Response["item"]), "", vars, pass{calculate: true}) {
			break
		}
		// The answers changed: the form's own variables may read them.
		vars = f.bind(ctx, req.Questionnaire, "Questionnaire", base, root)
	}
	f.walk(ctx, qitems, objects(req.Response["item"]), "", vars, pass{enable: true, initial: req.Initial})
	for q := range f.missing {
		out.Queries = append(out.Queries, q)
	}
	return out
}

// pass says what one walk over the items evaluates.
type pass struct{ calculate, enable, initial bool }

// walk evaluates the expressions of the response items ritems (at path)
// of the form's items qitems and reports whether a calculated answer changed.
func (f *formEval) walk(ctx context.Context, qitems, ritems []map[string]any, path string, vars map[string][]fhirpath.Node, p pass) bool {
	byID := make(map[string]map[string]any, len(qitems))
	for _, qi := range qitems {
		if id, _ := qi["linkId"].(string); id != "" {
			byID[id] = qi
		}
	}
	changed := false
	for i, ri := range ritems {
		id, _ := ri["linkId"].(string)
		qi := byID[id]
		if qi == nil {
			continue
		}
		at := path + "item[" + strconv.Itoa(i) + "]"
		focus := []fhirpath.Node{{Value: ri, Type: "QuestionnaireResponse.item"}}
		iv := maps.Clone(vars)
		iv["qitem"] = []fhirpath.Node{{Value: qi, Type: "Questionnaire.item"}}
		iv["context"] = focus
		iv = f.bind(ctx, qi, "item "+id, iv, focus)
		if x, ok := expressionOf(qi, extCalculatedExpression); ok && p.calculate {
			if list, ok := f.answers(ctx, x, qi, at, iv, focus); ok && !sameJSON(list, ri["answer"]) {
				changed = true
				if len(list) == 0 {
					delete(ri, "answer")
				} else {
					ri["answer"] = list
				}
				f.out.Calculated[at] = list
			} else if ok {
				f.out.Calculated[at] = list
			}
		}
		if x, ok := expressionOf(qi, extInitialExpression); ok && p.initial {
			if list, ok := f.answers(ctx, x, qi, at, iv, focus); ok {
				if f.out.Initial == nil {
					f.out.Initial = map[string][]any{}
				}
				f.out.Initial[at] = list
			}
		}
		if x, ok := expressionOf(qi, extEnableWhenExpression); ok && p.enable {
			nodes, err := f.eval(ctx, x, iv, focus)
			if err != nil {
				f.problem(at, "item %s: enableWhenExpression: %v", id, err)
			} else {
				f.out.Enabled[at] = len(nodes) == 1 && nodes[0].Value == true
			}
		}
		if f.walk(ctx, objects(qi["item"]), objects(ri["item"]), at+".", iv, p) {
			changed = true
		}
	}
	return changed
}

// answers evaluates an expression into the answers of an item.
func (f *formEval) answers(ctx context.Context, x expression, qi map[string]any, at string, vars map[string][]fhirpath.Node, focus []fhirpath.Node) ([]any, bool) {
	nodes, err := f.eval(ctx, x, vars, focus)
	if err != nil {
		f.problem(at, "item %s: %v", qi["linkId"], err)
		return nil, false
	}
	typ, _ := qi["type"].(string)
	list := []any{}
	for _, n := range nodes {
		if v, ok := answerOf(typ, n); ok {
			list = append(list, v)
		}
	}
	return list, true
}

// problem records a failed expression once per item.
func (f *formEval) problem(at, format string, args ...any) {
	if f.failed[at] {
		return
	}
	f.failed[at] = true
	f.out.Problems = append(f.out.Problems, fmt.Sprintf(format, args...))
}

// bind adds the variable extensions of m (the form or an item), in order,
// each seeing the ones before it.
func (f *formEval) bind(ctx context.Context, m map[string]any, where string, vars map[string][]fhirpath.Node, focus []fhirpath.Node) map[string][]fhirpath.Node {
	var out map[string][]fhirpath.Node
	for _, ext := range objects(m["extension"]) {
		if ext["url"] != extVariable {
			continue
		}
		x, ok := valueExpression(ext)
		if !ok || x.name == "" {
			continue
		}
		if out == nil {
			out = maps.Clone(vars)
		}
		nodes, err := f.eval(ctx, x, out, focus)
		if err != nil {
			f.problem(where+"/"+x.name, "%s: variable %s: %v", where, x.name, err)
			nodes = nil
		}
		out[x.name] = nodes
	}
	if out == nil {
		return vars
	}
	return out
}

// eval evaluates a FHIRPath expression, or looks an x-fhir-query up in the
// Bundles the browser sent (noting the query when it is not there).
func (f *formEval) eval(ctx context.Context, x expression, vars map[string][]fhirpath.Node, focus []fhirpath.Node) ([]fhirpath.Node, error) {
	switch x.language {
	case langFHIRPath, "":
		return f.fhirpath(ctx, x.text, vars, focus)
	case langQuery:
		q, err := f.substitute(ctx, x.text, vars, focus)
		if err != nil {
			return nil, err
		}
		b, ok := f.req.Queries[q]
		if !ok {
			f.missing[q] = true
			return nil, nil
		}
		return []fhirpath.Node{fhirpath.ResourceNode(b)}, nil
	}
	return nil, fmt.Errorf("expression language %q is not supported", x.language)
}

func (f *formEval) fhirpath(ctx context.Context, src string, vars map[string][]fhirpath.Node, focus []fhirpath.Node) ([]fhirpath.Node, error) {
	e, err := expressionCache.Compile(src)
	if err != nil {
		return nil, err
	}
	env := &fhirpath.Env{Resource: f.req.Response, Vars: vars, MaxSteps: expressionSteps, Timeout: expressionTimeout, Now: f.now}
	return e.Eval(ctx, env, focus)
}

// substitute replaces each {{expr}} of a query with what expr yields
// (sdc.SubstituteQuery).
func (f *formEval) substitute(ctx context.Context, q string, vars map[string][]fhirpath.Node, focus []fhirpath.Node) (string, error) {
	return sdc.SubstituteQuery(q, func(expr string) ([]fhirpath.Node, error) {
		return f.fhirpath(ctx, expr, vars, focus)
	})
}

// answerOf turns a value an expression yields into an answer of an item
// of type typ; false when it is not one.
func answerOf(typ string, n fhirpath.Node) (map[string]any, bool) {
	v := fhirpath.JSONValue(n)
	num := func() (json.Number, bool) {
		switch x := v.(type) {
		case json.Number:
			return x, true
		case int64:
			return json.Number(strconv.FormatInt(x, 10)), true
		case float64:
			return json.Number(strconv.FormatFloat(x, 'f', -1, 64)), true
		case map[string]any: // a Quantity: its value
			if q, ok := x["value"].(json.Number); ok {
				return q, true
			}
			if q, ok := x["value"].(float64); ok {
				return json.Number(strconv.FormatFloat(q, 'f', -1, 64)), true
			}
		}
		return "", false
	}
	switch typ {
	case "decimal":
		if x, ok := num(); ok {
			return map[string]any{"valueDecimal": x}, true
		}
	case "integer":
		if x, ok := num(); ok {
			fl, err := x.Float64()
			if err == nil && fl == math.Trunc(fl) && math.Abs(fl) < 1<<53 {
				return map[string]any{"valueInteger": int64(fl)}, true
			}
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return map[string]any{"valueBoolean": b}, true
		}
	case "string", "text", "url":
		key := "valueString"
		if typ == "url" {
			key = "valueUri"
		}
		switch x := v.(type) {
		case string:
			return map[string]any{key: x}, true
		case json.Number:
			return map[string]any{key: x.String()}, true
		}
	case "date", "dateTime", "time":
		if s, ok := v.(string); ok {
			return map[string]any{"value" + strings.ToUpper(typ[:1]) + typ[1:]: s}, true
		}
	case "choice", "open-choice":
		switch x := v.(type) {
		case map[string]any:
			if x["code"] != nil || x["system"] != nil {
				return map[string]any{"valueCoding": x}, true
			}
		case string:
			return map[string]any{"valueString": x}, true
		}
	case "quantity":
		if m, ok := v.(map[string]any); ok {
			return map[string]any{"valueQuantity": m}, true
		}
		if x, ok := num(); ok {
			return map[string]any{"valueQuantity": map[string]any{"value": x}}, true
		}
	case "reference":
		if m, ok := v.(map[string]any); ok {
			return map[string]any{"valueReference": m}, true
		}
	}
	return nil, false
}

// expression is a valueExpression.
type expression struct{ name, language, text string }

// expressionOf reads the valueExpression of m's extension of url.
func expressionOf(m map[string]any, url string) (expression, bool) {
	for _, ext := range objects(m["extension"]) {
		if ext["url"] == url {
			return valueExpression(ext)
		}
	}
	return expression{}, false
}

func valueExpression(ext map[string]any) (expression, bool) {
	v, ok := ext["valueExpression"].(map[string]any)
	if !ok {
		return expression{}, false
	}
	s := func(k string) string { x, _ := v[k].(string); return x }
	x := expression{name: s("name"), language: s("language"), text: s("expression")}
	return x, x.text != ""
}

// objects are the JSON objects of a JSON array.
func objects(v any) []map[string]any { return fhirschema.Objects(v) }

// sameJSON tells whether a list of answers renders as b; an empty list and
// no answers are the same.
func sameJSON(a []any, b any) bool {
	if len(a) == 0 {
		l, _ := b.([]any)
		return len(l) == 0
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
