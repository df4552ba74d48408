package questionnaire

import (
	"fmt"

	"fhirstore/fhirschema/fhirpath"
)

// enabled reports whether the form item w is enabled where the response
// item g (nil when absent) stands, inside the items sc: its enableWhen
// conditions hold as its enableBehavior combines them (all when it says
// nothing), and its enableWhenExpression, if any, is true. A condition on
// a question the response does not answer is false, except "exists =
// false".
func (r *responseCheck) enabled(w, g map[string]any, at string, sc scope) bool {
	if ext := extension(w, extEnableWhenExpr); ext != nil {
		return r.enableWhenExpression(w, ext, g, at)
	}
	conds := objects(w["enableWhen"])
	if len(conds) == 0 {
		return true
	}
	any := w["enableBehavior"] == "any"
	for _, cond := range conds {
		ok := r.condition(cond, sc)
		if any && ok {
			return true
		}
		if !any && !ok {
			return false
		}
	}
	return !any
}

// condition evaluates one enableWhen.
func (r *responseCheck) condition(cond map[string]any, sc scope) bool {
	question, _ := cond["question"].(string)
	op, _ := cond["operator"].(string)
	typ, want, ok := answerOf(cond, "answer")
	if !ok {
		return false
	}
	answers := answersTo(question, sc, r.qr)
	if op == "exists" {
		return (len(answers) > 0) == (want == true)
	}
	for _, a := range answers {
		at, got, ok := answerOf(a, "value")
		if !ok {
			continue
		}
		if op == "!=" {
			if !(at == typ && sameValue(typ, got, want)) {
				return true
			}
			continue
		}
		if compareAnswer(op, typ, at, got, want) {
			return true
		}
	}
	return false
}

// compareAnswer applies =, >, <, >= or <= to an answer (type at, value
// got) and the condition's answer (type typ, value want).
func compareAnswer(op, typ, at string, got, want any) bool {
	if op == "=" {
		return sameValue(typ, got, want) && (at == typ || numericTypes[at] && numericTypes[typ])
	}
	c, ok := compareValues(typ, at, got, want)
	if !ok {
		return false
	}
	switch op {
	case ">":
		return c > 0
	case "<":
		return c < 0
	case ">=":
		return c >= 0
	case "<=":
		return c <= 0
	}
	return false
}

var numericTypes = map[string]bool{"Integer": true, "Decimal": true}

// answersTo finds the answers to the question with linkId id: in the
// innermost enclosing response item that holds it, else anywhere in the
// response.
func answersTo(id string, sc scope, qr map[string]any) []map[string]any {
	for i := len(sc) - 1; i >= 0; i-- {
		if found, ok := findAnswers(sc[i], id); ok {
			return found
		}
	}
	found, _ := findAnswers(qr, id)
	return found
}

// findAnswers returns the answers of the items with linkId id at or under
// el (items and answers' items).
func findAnswers(el map[string]any, id string) (found []map[string]any, ok bool) {
	if el["linkId"] == id {
		return objects(el["answer"]), true
	}
	for _, it := range objects(el["item"]) {
		if f, o := findAnswers(it, id); o {
			found, ok = append(found, f...), true
		}
	}
	for _, a := range objects(el["answer"]) {
		for _, it := range objects(a["item"]) {
			if f, o := findAnswers(it, id); o {
				found, ok = append(found, f...), true
			}
		}
	}
	return found, ok
}

// enableWhenExpression evaluates the SDC enableWhenExpression of w with
// %resource the response, %questionnaire the form, %qitem the form item
// and %context the response item.
func (r *responseCheck) enableWhenExpression(w, ext, g map[string]any, at string) bool {
	e, _ := ext["valueExpression"].(map[string]any)
	src, _ := e["expression"].(string)
	expr, err := r.c.exprs.Compile(src)
	if err != nil {
		r.warnf(at, "invalid", "the enableWhenExpression of item %q does not parse: %v", linkID(w), err)
		return true
	}
	ctxNode := fhirpath.ResourceNode(r.qr)
	if g != nil {
		ctxNode = fhirpath.Node{Value: g, Type: "QuestionnaireResponse.item"}
	}
	env := &fhirpath.Env{Resource: r.qr, Timeout: r.opts.Timeout, Vars: map[string][]fhirpath.Node{
		"questionnaire": {fhirpath.ResourceNode(r.q)},
		"qitem":         {{Value: w, Type: "Questionnaire.item"}},
		"context":       {ctxNode},
	}}
	out, err := expr.Eval(r.ctx, env, []fhirpath.Node{ctxNode})
	if err != nil {
		r.warnf(at, "invalid", "the enableWhenExpression of item %q failed: %v", linkID(w), err)
		return true
	}
	if len(out) != 1 {
		return false
	}
	b, ok := out[0].Value.(bool)
	if !ok {
		r.warnf(at, "invalid", "the enableWhenExpression of item %q gave %s, not a boolean", linkID(w), fmt.Sprint(fhirpath.JSONValue(out[0])))
	}
	return ok && b
}
