package sdc

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// maxCalculationRounds bounds the rounds of calculatedExpression
// evaluation: one calculated answer may feed another, so they are
// evaluated again until no answer changes.
const maxCalculationRounds = 10

// LaunchContext is one launch context of $populate: a name the
// Questionnaire's sdc-questionnaire-launchContext declares (patient,
// encounter, user…) and the resource it stands for, given inline or by
// reference.
type LaunchContext struct {
	Name      string         // the launch context's name: patient, encounter, user…
	Reference string         // read through Data when Resource is nil
	Resource  map[string]any // the resource itself
}

// PopulateRequest is the input of Populate.
type PopulateRequest struct {
	// Questionnaire is the form to fill.
	Questionnaire map[string]any
	// Subject is the resource the response is about; nil for none.
	Subject map[string]any
	// Contexts are the launch contexts given with the request.
	Contexts []LaunchContext
	// Limits bound the expressions and queries; Now fixes authored and now().
	Limits Limits
	Now    time.Time
}

// Populate fills a QuestionnaireResponse from the form's launch contexts,
// variables (FHIRPath and x-fhir-query), initialExpression,
// itemPopulationContext, initial values, initially selected options and
// calculatedExpression. The response is in-progress and lists every item
// of the form but display items, in form order. Issues say what could not
// be filled; when one is an error the response is nil, since a partly
// evaluated form must not pass for a filled one. An error is a failure of
// d (see DataError) or of ctx.
func Populate(ctx context.Context, d Data, req PopulateRequest) (map[string]any, []fhirschema.Issue, error) {
	q := req.Questionnaire
	if q == nil || q["resourceType"] != "Questionnaire" {
		return nil, []fhirschema.Issue{issue("error", "required", "Questionnaire", "no Questionnaire to populate")}, nil
	}
	p := &populator{ev: newEvaluator(d, req.Limits, req.Now), q: q}
	p.qr = map[string]any{
		"resourceType": "QuestionnaireResponse",
		"status":       "in-progress",
		"authored":     p.ev.now.UTC().Format(time.RFC3339),
	}
	if c := canonicalOf(q); c != "" {
		p.qr["questionnaire"] = c
	} else if id := str(q["id"]); id != "" {
		p.qr["questionnaire"] = "Questionnaire/" + id
	}
	if ref := referenceTo(req.Subject); ref != nil {
		p.qr["subject"] = ref
	}
	base := map[string][]fhirpath.Node{"questionnaire": {fhirpath.ResourceNode(q)}}
	if err := p.launchContexts(ctx, req, base); err != nil {
		return nil, p.issues, err
	}
	sc := p.variables(q, "Questionnaire", nil)
	vars, err := p.bind(ctx, base, sc, p.root())
	if err != nil {
		return nil, p.issues, err
	}
	items, err := p.items(ctx, objects(q["item"]), "Questionnaire", sc, vars)
	if err != nil {
		return nil, p.issues, err
	}
	if len(items) > 0 {
		p.qr["item"] = items
	}
	if err := p.calculate(ctx, base); err != nil {
		return nil, p.issues, err
	}
	if Failed(p.issues) {
		return nil, p.issues, nil
	}
	return p.qr, p.issues, nil
}

// referenceTo is a Reference to a stored resource; nil for nil or one
// without an id.
func referenceTo(res map[string]any) map[string]any {
	typ, id := str(res["resourceType"]), str(res["id"])
	if typ == "" || id == "" {
		return nil
	}
	return map[string]any{"reference": typ + "/" + id}
}

// populator fills one response.
type populator struct {
	ev     *evaluator
	q, qr  map[string]any
	issues []fhirschema.Issue
	calcs  []calculation
}

// binding is a variable in scope: a variable extension's expression, or
// a fixed value (an item of an itemPopulationContext).
type binding struct {
	name  string
	x     expression
	fixed []fhirpath.Node
	isSet bool // fixed holds the value
	at    string
}

// calculation is a calculatedExpression of an item of the response.
type calculation struct {
	x      expression
	qitem  map[string]any
	ritem  map[string]any
	scope  []binding
	at     string
	linkID string
}

func (p *populator) add(is fhirschema.Issue) { p.issues = append(p.issues, is) }

func (p *populator) root() []fhirpath.Node { return []fhirpath.Node{fhirpath.ResourceNode(p.qr)} }

// launchContexts binds each launch context the form declares to the
// resource the request gives for it; the patient context defaults to a
// Patient subject, declared or not. Contexts the form does not declare
// are bound too.
func (p *populator) launchContexts(ctx context.Context, req PopulateRequest, vars map[string][]fhirpath.Node) error {
	given := map[string]LaunchContext{}
	for _, c := range req.Contexts {
		given[c.Name] = c
	}
	declared := map[string]bool{}
	for k, ext := range objects(p.q["extension"]) {
		if ext["url"] != ExtLaunchContext {
			continue
		}
		at := index("Questionnaire.extension", k)
		name := launchContextName(ext)
		if name == "" {
			p.add(issue("error", "invalid", at, "a launchContext extension without a name"))
			continue
		}
		declared[name] = true
		var types []string
		for _, sub := range objects(ext["extension"]) {
			if sub["url"] == "type" {
				types = append(types, str(sub["valueCode"]))
			}
		}
		c, ok := given[name]
		if !ok && name == "patient" && req.Subject != nil && req.Subject["resourceType"] == "Patient" {
			c, ok = LaunchContext{Name: name, Resource: req.Subject}, true
		}
		if !ok {
			vars[name] = nil
			p.add(issue("warning", "required", at, "launch context %q was not given: expressions using %%%s find nothing", name, name))
			continue
		}
		res, err := p.contextResource(ctx, c, at)
		if err != nil {
			return err
		}
		if res == nil {
			vars[name] = nil
			continue
		}
		if len(types) > 0 && !slices.Contains(types, str(res["resourceType"])) {
			p.add(issue("error", "invalid", at, "launch context %q must be a %v, not a %s", name, types, str(res["resourceType"])))
			continue
		}
		vars[name] = []fhirpath.Node{fhirpath.ResourceNode(res)}
	}
	for _, c := range req.Contexts {
		if declared[c.Name] {
			continue
		}
		res, err := p.contextResource(ctx, c, "")
		if err != nil {
			return err
		}
		if res != nil {
			vars[c.Name] = []fhirpath.Node{fhirpath.ResourceNode(res)}
		}
	}
	if _, ok := vars["patient"]; !ok && req.Subject != nil && req.Subject["resourceType"] == "Patient" {
		vars["patient"] = []fhirpath.Node{fhirpath.ResourceNode(req.Subject)}
	}
	return nil
}

// launchContextName is the name of a launchContext extension: a Coding of
// the SDC launchContext code system, or an id in older forms.
func launchContextName(ext map[string]any) string {
	typ, v := subValue(ext, "name")
	switch typ {
	case "Coding":
		m, _ := v.(map[string]any)
		return str(m["code"])
	case "Id", "String", "Code":
		return str(v)
	}
	return ""
}

// contextResource is the resource of a launch context, read when given by
// reference; nil with an error issue when it cannot be read.
func (p *populator) contextResource(ctx context.Context, c LaunchContext, at string) (map[string]any, error) {
	if c.Resource != nil {
		return c.Resource, nil
	}
	if c.Reference == "" || p.ev.data == nil {
		p.add(issue("error", "required", at, "launch context %q has no content", c.Name))
		return nil, nil
	}
	res, err := p.ev.data.Read(ctx, c.Reference)
	if err != nil {
		return nil, &DataError{Op: "read " + c.Reference, Err: err}
	}
	if res == nil {
		p.add(issue("error", "not-found", at, "launch context %q: %s is not known", c.Name, c.Reference))
	}
	return res, nil
}

// variables extends scope with the variable extensions of m (the
// Questionnaire or an item) located at at.
func (p *populator) variables(m map[string]any, at string, scope []binding) []binding {
	out := slices.Clip(scope)
	for k, ext := range objects(m["extension"]) {
		if ext["url"] != ExtVariable {
			continue
		}
		x, ok := expressionOf(ext)
		xat := index(at+".extension", k)
		if !ok || x.name == "" {
			p.add(issue("error", "invalid", xat, "a variable needs a valueExpression with a name and an expression"))
			continue
		}
		out = append(out, binding{name: x.name, x: x, at: xat})
	}
	return out
}

// bind evaluates the bindings of scope past those already in vars, in
// order, each seeing the ones before it. An expression that fails is an
// error issue, and its variable is empty.
func (p *populator) bind(ctx context.Context, vars map[string][]fhirpath.Node, scope []binding, focus []fhirpath.Node) (map[string][]fhirpath.Node, error) {
	out := maps.Clone(vars)
	for _, b := range scope {
		if b.isSet {
			out[b.name] = b.fixed
			continue
		}
		nodes, err := p.ev.eval(ctx, b.x, p.qr, out, focus)
		if err != nil {
			if fatal(err) {
				return nil, err
			}
			p.add(issue("error", "processing", b.at, "variable %s: %v", b.name, err))
			nodes = nil
		}
		out[b.name] = nodes
	}
	return out, nil
}

// fatal tells the errors that end the operation instead of becoming an
// issue: the Data's failures and the request's end.
func fatal(err error) bool {
	var de *DataError
	return errors.As(err, &de) || errors.Is(err, context.Canceled)
}

// items builds the response items of the form's items qitems (at at).
// scope are the bindings in force, vars their values.
func (p *populator) items(ctx context.Context, qitems []map[string]any, at string, scope []binding, vars map[string][]fhirpath.Node) ([]any, error) {
	var out []any
	for i, qi := range qitems {
		iat := index(at+".item", i)
		if qi["type"] == "display" {
			continue
		}
		if pc := extension(qi, ExtItemPopulationContext); pc != nil && qi["type"] == "group" {
			groups, err := p.populationContext(ctx, qi, pc, iat, scope, vars)
			if err != nil {
				return nil, err
			}
			out = append(out, groups...)
			continue
		}
		item, err := p.item(ctx, qi, iat, scope, vars)
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

// populationContext builds one group per item its itemPopulationContext
// yields, each with the expression's name bound to that item; one empty
// group when it yields none.
func (p *populator) populationContext(ctx context.Context, qi, pc map[string]any, at string, scope []binding, vars map[string][]fhirpath.Node) ([]any, error) {
	x, ok := expressionOf(pc)
	if !ok {
		p.add(issue("error", "invalid", at, "item %s: itemPopulationContext needs a valueExpression", str(qi["linkId"])))
		return nil, nil
	}
	nodes, err := p.ev.eval(ctx, x, p.qr, vars, p.root())
	if err != nil {
		if fatal(err) {
			return nil, err
		}
		p.add(issue("error", "processing", at, "item %s: itemPopulationContext: %v", str(qi["linkId"]), err))
		nodes = nil
	}
	if x.language == langQuery && len(nodes) == 1 {
		nodes = bundleResources(nodes[0])
	}
	if len(nodes) == 0 {
		nodes = []fhirpath.Node{{}}
	}
	var out []any
	for _, n := range nodes {
		fixed := []fhirpath.Node{n}
		if n.Value == nil {
			fixed = nil
		}
		sc := append(slices.Clip(scope), binding{name: x.name, fixed: fixed, isSet: true, at: at})
		v := maps.Clone(vars)
		if x.name != "" {
			v[x.name] = fixed
		}
		item, err := p.item(ctx, qi, at, sc, v)
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

// bundleResources are the resources of the entries of a Bundle node.
func bundleResources(n fhirpath.Node) []fhirpath.Node {
	b, _ := n.Value.(map[string]any)
	var out []fhirpath.Node
	for _, e := range objects(b["entry"]) {
		if r, ok := e["resource"].(map[string]any); ok {
			out = append(out, fhirpath.ResourceNode(r))
		}
	}
	return out
}

// item builds the response item of qi with its answers and children.
func (p *populator) item(ctx context.Context, qi map[string]any, at string, scope []binding, parent map[string][]fhirpath.Node) (map[string]any, error) {
	linkID := str(qi["linkId"])
	ri := map[string]any{"linkId": linkID}
	for _, k := range []string{"definition", "text"} {
		if v, ok := qi[k].(string); ok && v != "" {
			ri[k] = v
		}
	}
	own := p.variables(qi, at, nil)
	scope = append(slices.Clip(scope), own...)
	withItem := maps.Clone(parent)
	withItem["qitem"] = []fhirpath.Node{{Value: qi, Type: "Questionnaire.item"}}
	vars, err := p.bind(ctx, withItem, own, p.root())
	if err != nil {
		return nil, err
	}
	var answers []any
	if qi["type"] != "group" {
		answers, err = p.initialAnswers(ctx, qi, at, vars)
		if err != nil {
			return nil, err
		}
	}
	if ext := extension(qi, ExtCalculatedExpression); ext != nil {
		if x, ok := expressionOf(ext); ok {
			p.calcs = append(p.calcs, calculation{x: x, qitem: qi, ritem: ri, scope: scope, at: at, linkID: linkID})
		} else {
			p.add(issue("error", "invalid", at, "item %s: calculatedExpression needs a valueExpression", linkID))
		}
	}
	children, err := p.items(ctx, objects(qi["item"]), at, scope, vars)
	if err != nil {
		return nil, err
	}
	switch {
	case qi["type"] == "group":
		if len(children) > 0 {
			ri["item"] = children
		}
	case len(answers) > 0 && len(children) > 0:
		answers[0].(map[string]any)["item"] = children
	}
	if len(answers) > 0 {
		ri["answer"] = answers
	}
	return ri, nil
}

// initialAnswers are a question's first answers: its initialExpression's
// values, else its initial values, else its initially selected options.
func (p *populator) initialAnswers(ctx context.Context, qi map[string]any, at string, vars map[string][]fhirpath.Node) ([]any, error) {
	linkID := str(qi["linkId"])
	if ext := extension(qi, ExtInitialExpression); ext != nil {
		x, ok := expressionOf(ext)
		if !ok {
			p.add(issue("error", "invalid", at, "item %s: initialExpression needs a valueExpression", linkID))
			return nil, nil
		}
		nodes, err := p.ev.eval(ctx, x, p.qr, vars, p.root())
		if err != nil {
			if fatal(err) {
				return nil, err
			}
			p.add(issue("error", "processing", at, "item %s: initialExpression %q: %v", linkID, x.text, err))
			return nil, nil
		}
		list, issues := answers(nodes, qi, at)
		p.issues = append(p.issues, issues...)
		return list, nil
	}
	var out []any
	for _, init := range objects(qi["initial"]) {
		if typ, v := valueOf(init); typ != "" {
			out = append(out, map[string]any{"value" + typ: fhirschema.CopyJSON(v)})
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, opt := range objects(qi["answerOption"]) {
		if opt["initialSelected"] != true {
			continue
		}
		if typ, v := valueOf(opt); typ != "" {
			out = append(out, map[string]any{"value" + typ: fhirschema.CopyJSON(v)})
		}
	}
	return out, nil
}

// answers converts what an expression yielded to the answers of qi; a
// value that does not fit the item's type is a warning and left out.
func answers(nodes []fhirpath.Node, qi map[string]any, at string) ([]any, []fhirschema.Issue) {
	linkID := str(qi["linkId"])
	var out []any
	var issues []fhirschema.Issue
	for _, n := range nodes {
		typ, v, err := answerValue(fhirpath.JSONValue(n), qi)
		if err != nil {
			issues = append(issues, issue("warning", "value", at, "item %s: %v", linkID, err))
			continue
		}
		out = append(out, map[string]any{"value" + typ: v})
	}
	if len(out) > 1 && qi["repeats"] != true {
		issues = append(issues, issue("warning", "value", at, "item %s does not repeat: %d values found, the first kept", linkID, len(out)))
		out = out[:1]
	}
	return out, issues
}

// calculate evaluates the calculatedExpressions over the filled response,
// again while any answer changes, at most maxCalculationRounds times.
func (p *populator) calculate(ctx context.Context, base map[string][]fhirpath.Node) error {
	if len(p.calcs) == 0 {
		return nil
	}
	for range maxCalculationRounds {
		changed := false
		var warnings []fhirschema.Issue
		for _, c := range p.calcs {
			focus := []fhirpath.Node{{Value: c.ritem, Type: "QuestionnaireResponse.item"}}
			n := len(p.issues)
			withItem := maps.Clone(base)
			withItem["qitem"] = []fhirpath.Node{{Value: c.qitem, Type: "Questionnaire.item"}}
			vars, err := p.bind(ctx, withItem, c.scope, focus)
			if err != nil {
				return err
			}
			nodes, err := p.ev.eval(ctx, c.x, p.qr, vars, focus)
			if err != nil {
				if fatal(err) {
					return err
				}
				p.add(issue("error", "processing", c.at, "item %s: calculatedExpression %q: %v", c.linkID, c.x.text, err))
			}
			if Failed(p.issues[n:]) {
				return nil // reported once; the response is not returned
			}
			list, ws := answers(nodes, c.qitem, c.at)
			warnings = append(warnings, ws...)
			if sameJSON(list, c.ritem["answer"]) {
				continue
			}
			changed = true
			if len(list) == 0 {
				delete(c.ritem, "answer")
			} else {
				c.ritem["answer"] = list
			}
		}
		if !changed {
			p.issues = append(p.issues, warnings...)
			return nil
		}
	}
	p.add(issue("warning", "processing", "Questionnaire", "calculated answers still changed after %d rounds of calculation", maxCalculationRounds))
	return nil
}

// sameJSON tells whether two lists of answers render alike; no answers
// and an absent answer are the same.
func sameJSON(a []any, b any) bool {
	if len(a) == 0 {
		return b == nil
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
