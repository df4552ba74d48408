package sdc

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// coreSD is where the StructureDefinitions of the core resources live.
const coreSD = "http://hl7.org/fhir/StructureDefinition/"

// extraction is one resource definition-based extraction fills: the
// canonical of its type or profile, the response item it is made from
// (nil for the whole response) and what made it.
type extraction struct {
	canonical string
	ext       map[string]any // the definitionExtract extension; nil for itemExtractionContext
	base      map[string]any // the resource an itemExtractionContext updates
	qi        *qitem         // nil at the form's level
	ri        map[string]any // nil at the form's level
	at        string
}

// definitions runs definition-based extraction: the form's own
// extractions over the whole response, then each item's over each of its
// answers' groups.
func (x *extractor) definitions(ctx context.Context) error {
	list, err := x.contexts(ctx, x.q, nil, nil, "Questionnaire")
	if err != nil {
		return err
	}
	for _, e := range list {
		if err := x.extract(ctx, e); err != nil {
			return err
		}
	}
	return x.itemDefinitions(ctx, objects(x.qr["item"]), "QuestionnaireResponse")
}

// itemDefinitions runs the extractions of the items of a response.
func (x *extractor) itemDefinitions(ctx context.Context, items []map[string]any, at string) error {
	for i, ri := range items {
		iat := index(at+".item", i)
		qi, ok := x.qitems[str(ri["linkId"])]
		if !ok {
			continue
		}
		list, err := x.contexts(ctx, qi.item, &qi, ri, iat)
		if err != nil {
			return err
		}
		for _, e := range list {
			if err := x.extract(ctx, e); err != nil {
				return err
			}
		}
		if err := x.itemDefinitions(ctx, objects(ri["item"]), iat); err != nil {
			return err
		}
		for k, a := range objects(ri["answer"]) {
			if err := x.itemDefinitions(ctx, objects(a["item"]), index(iat+".answer", k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// contexts are the extractions m (the form or an item) starts:
// definitionExtract, else the older itemExtractionContext.
func (x *extractor) contexts(ctx context.Context, m map[string]any, qi *qitem, ri map[string]any, at string) ([]extraction, error) {
	var out []extraction
	where := at
	if qi != nil {
		where = qi.at
	}
	for _, ext := range extensions(m, ExtDefinitionExtract) {
		typ, v := subValue(ext, "definition")
		c, _ := v.(string)
		if typ == "" || c == "" {
			x.add(issue("error", "invalid", where, "a definitionExtract without a definition canonical"))
			continue
		}
		out = append(out, extraction{canonical: c, ext: ext, qi: qi, ri: ri, at: at})
	}
	if len(out) > 0 {
		return out, nil
	}
	ext := extension(m, ExtItemExtractionContext)
	if ext == nil {
		return nil, nil
	}
	if code := str(ext["valueCode"]); code != "" {
		return []extraction{{canonical: coreSD + code, qi: qi, ri: ri, at: at}}, nil
	}
	xp, ok := expressionOf(ext)
	if !ok {
		x.add(issue("error", "invalid", where, "an itemExtractionContext needs a valueCode or valueExpression"))
		return nil, nil
	}
	if fhirschema.IsResourceType(xp.text) {
		return []extraction{{canonical: coreSD + xp.text, qi: qi, ri: ri, at: at}}, nil
	}
	nodes, err := x.ev.eval(ctx, xp, x.qr, x.env(ri), x.focus(ri))
	if err != nil {
		if fatal(err) {
			return nil, err
		}
		x.add(issue("error", "processing", where, "itemExtractionContext %q: %v", xp.text, err))
		return nil, nil
	}
	for _, n := range nodes {
		if xp.language == langQuery {
			for _, r := range bundleResources(n) {
				res := r.Value.(map[string]any)
				out = append(out, extraction{canonical: coreSD + str(res["resourceType"]), base: res, qi: qi, ri: ri, at: at})
			}
			continue
		}
		res, ok := n.Value.(map[string]any)
		if !ok || str(res["resourceType"]) == "" {
			x.add(issue("warning", "processing", where, "itemExtractionContext %q yields something other than a resource", xp.text))
			continue
		}
		out = append(out, extraction{canonical: coreSD + str(res["resourceType"]), base: res, qi: qi, ri: ri, at: at})
	}
	return out, nil
}

// env is the environment of extraction expressions: the form's variables
// and %qitem.
func (x *extractor) env(ri map[string]any) map[string][]fhirpath.Node {
	vars := make(map[string][]fhirpath.Node, len(x.vars)+1)
	for k, v := range x.vars {
		vars[k] = v
	}
	if ri != nil {
		if qi, ok := x.qitems[str(ri["linkId"])]; ok {
			vars["qitem"] = []fhirpath.Node{{Value: qi.item, Type: "Questionnaire.item"}}
		}
	}
	return vars
}

// focus is the input of extraction expressions: the response item the
// extraction is made from, or the response.
func (x *extractor) focus(ri map[string]any) []fhirpath.Node {
	if ri == nil {
		return []fhirpath.Node{fhirpath.ResourceNode(x.qr)}
	}
	return []fhirpath.Node{{Value: ri, Type: "QuestionnaireResponse.item"}}
}

// typed is a value with its FHIR type, capitalised as in value[x] names
// (String, Coding, DateTime, HumanName).
type typed struct {
	typ string
	v   any
}

// extract builds the resource of one extraction and adds it to the Bundle.
func (x *extractor) extract(ctx context.Context, e extraction) error {
	canonical, _, _ := strings.Cut(e.canonical, "|")
	typ := x.resourceType(canonical)
	where := e.at
	if e.qi != nil {
		where = e.qi.at
	}
	if typ == "" {
		x.add(issue("error", "not-supported", where, "definitionExtract %s: the resource type it extracts is not known", e.canonical))
		return nil
	}
	res := map[string]any{"resourceType": typ}
	if e.base != nil {
		res = fhirschema.CopyJSON(e.base).(map[string]any)
	}
	if !strings.HasPrefix(canonical, coreSD) {
		meta, _ := res["meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			res["meta"] = meta
		}
		meta["profile"] = append(anyList(meta["profile"]), e.canonical)
	}
	set := 0
	var items []map[string]any
	if e.ri == nil {
		items = objects(x.qr["item"])
	} else {
		items = childItems(e.ri)
	}
	t := &target{res: res}
	if err := x.fill(ctx, t, canonical, items, &set); err != nil {
		return err
	}
	values := extensions(x.q, ExtDefinitionExtractValue)
	if e.qi != nil {
		values = append(values, extensions(e.qi.item, ExtDefinitionExtractValue)...)
	}
	for _, ext := range values {
		if err := x.extractValue(ctx, t, canonical, ext, e.ri, where); err != nil {
			return err
		}
	}
	if set == 0 && e.base == nil && (e.ri != nil || len(res) == 1) {
		return nil // no answer went into it: nothing to create
	}
	fullURL, request, err := x.request(ctx, e)
	if err != nil {
		return err
	}
	x.entry(res, fullURL, request)
	return nil
}

// childItems are the items nested in a response item, in its answers too.
func childItems(ri map[string]any) []map[string]any {
	out := objects(ri["item"])
	for _, a := range objects(ri["answer"]) {
		out = append(out, objects(a["item"])...)
	}
	return out
}

// anyList is v as a JSON array.
func anyList(v any) []any {
	list, _ := v.([]any)
	return list
}

// resourceType is the type of resource a canonical extracts: a core
// resource's name, else the first step of the element ids the form's
// items name under it.
func (x *extractor) resourceType(canonical string) string {
	if t, ok := strings.CutPrefix(canonical, coreSD); ok && fhirschema.IsResourceType(t) {
		return t
	}
	for _, qi := range x.qitems {
		c, id, ok := strings.Cut(str(qi.item["definition"]), "#")
		if c, _, _ = strings.Cut(c, "|"); ok && c == canonical {
			t, _, _ := strings.Cut(id, ".")
			if fhirschema.IsResourceType(t) {
				return t
			}
		}
	}
	return ""
}

// fill sets the elements the answers of items (and their nested items)
// define under canonical, leaving alone items that start extractions of
// their own. A group whose definition names an element opens a new
// instance of it (of a repeating element, one per repetition of the
// group) for the elements its items define below it.
func (x *extractor) fill(ctx context.Context, t *target, canonical string, items []map[string]any, set *int) error {
	for _, ri := range items {
		qi, ok := x.qitems[str(ri["linkId"])]
		if !ok || len(extensions(qi.item, ExtDefinitionExtract)) > 0 || extension(qi.item, ExtItemExtractionContext) != nil {
			continue
		}
		linkID := str(qi.item["linkId"])
		inner := t
		c, element, ok := strings.Cut(str(qi.item["definition"]), "#")
		if c, _, _ = strings.Cut(c, "|"); ok && c == canonical {
			if qi.item["type"] == "group" {
				opened, err := t.open(element)
				if err != nil {
					x.add(issue("warning", "value", qi.at, "item %s: %v", linkID, err))
				} else {
					inner = opened
				}
			} else if vals := answerValues(ri); len(vals) > 0 {
				if err := t.set(element, vals, unitOf(qi.item)); err != nil {
					x.add(issue("warning", "value", qi.at, "item %s: %v", linkID, err))
				} else {
					*set++
				}
			}
		}
		for _, ext := range extensions(qi.item, ExtDefinitionExtractValue) {
			if err := x.extractValue(ctx, inner, canonical, ext, ri, qi.at); err != nil {
				return err
			}
		}
		if err := x.fill(ctx, inner, canonical, childItems(ri), set); err != nil {
			return err
		}
		if inner != t {
			inner.closeEmpty()
		}
	}
	return nil
}

// answerValues are the values of a response item's answers.
func answerValues(ri map[string]any) []typed {
	var vals []typed
	for _, a := range objects(ri["answer"]) {
		if typ, v := valueOf(a); typ != "" {
			vals = append(vals, typed{typ, v})
		}
	}
	return vals
}

// extractValue applies a definitionExtractValue aimed at canonical: the
// values of its expression, or its fixed value.
func (x *extractor) extractValue(ctx context.Context, t *target, canonical string, ext, ri map[string]any, at string) error {
	_, v := subValue(ext, "definition")
	c, element, ok := strings.Cut(str(v), "#")
	if c, _, _ = strings.Cut(c, "|"); !ok || c != canonical {
		return nil
	}
	var vals []typed
	if typ, fixed := subValue(ext, "fixed-value"); typ != "" {
		vals = append(vals, typed{typ, fixed})
	} else {
		var xp expression
		for _, sub := range objects(ext["extension"]) {
			if sub["url"] == "expression" {
				xp, _ = expressionOf(sub)
			}
		}
		if xp.text == "" {
			x.add(issue("error", "invalid", at, "definitionExtractValue for %s has neither an expression nor a fixed-value", element))
			return nil
		}
		nodes, err := x.ev.eval(ctx, xp, x.qr, x.env(ri), x.focus(ri))
		if err != nil {
			if fatal(err) {
				return err
			}
			x.add(issue("error", "processing", at, "definitionExtractValue for %s: %q: %v", element, xp.text, err))
			return nil
		}
		for _, n := range nodes {
			vals = append(vals, typed{typeName(n), fhirschema.CopyJSON(fhirpath.JSONValue(n))})
		}
	}
	if len(vals) == 0 {
		return nil
	}
	if err := t.set(element, vals, nil); err != nil {
		x.add(issue("warning", "value", at, "definitionExtractValue: %v", err))
	}
	return nil
}

// typeName is a node's type as value[x] names it.
func typeName(n fhirpath.Node) string {
	t := strings.TrimPrefix(n.Type, "System.")
	if t == "" {
		switch n.Value.(type) {
		case string:
			return "String"
		case bool:
			return "Boolean"
		case int64:
			return "Integer"
		}
		return ""
	}
	if i := strings.LastIndexByte(t, '.'); i >= 0 { // a backbone element
		return ""
	}
	r := []rune(t)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// request is the fullUrl and the conditional request elements a
// definitionExtract asks for, each a FHIRPath expression.
func (x *extractor) request(ctx context.Context, e extraction) (string, map[string]any, error) {
	if e.ext == nil {
		return "", nil, nil
	}
	fullURL := ""
	request := map[string]any{}
	for _, name := range []string{"fullUrl", "ifNoneMatch", "ifModifiedSince", "ifMatch", "ifNoneExist"} {
		_, v := subValue(e.ext, name)
		src := str(v)
		if src == "" {
			continue
		}
		nodes, err := x.ev.fhirpath(ctx, src, x.qr, x.env(e.ri), x.focus(e.ri))
		if err != nil {
			if fatal(err) {
				return "", nil, err
			}
			x.add(issue("error", "processing", e.at, "definitionExtract %s %q: %v", name, src, err))
			continue
		}
		if len(nodes) == 0 {
			continue
		}
		s, _ := text(fhirpath.JSONValue(nodes[0]))
		if name == "fullUrl" {
			fullURL = s
		} else if s != "" {
			request[name] = s
		}
	}
	return fullURL, request, nil
}

// target is the resource definition-based extraction fills, and the
// element instance a group opened in it (nil at the resource's level).
type target struct {
	res    map[string]any
	parent *target
	// id is the element id of the instance, obj the instance, def its type;
	// from and key locate it in its parent (index in the list; -1 when the
	// element does not repeat).
	id    string
	obj   map[string]any
	def   string
	from  map[string]any
	key   string
	index int
}

// start is where an element id is set from: the innermost open instance
// it lies under, else the resource; and the steps left.
func (t *target) start(elementID string) (map[string]any, string, []string, error) {
	for o := t; o != nil && o.obj != nil; o = o.parent {
		if rest, ok := strings.CutPrefix(elementID, o.id+"."); ok {
			return o.obj, o.def, strings.Split(rest, "."), nil
		}
	}
	steps := strings.Split(elementID, ".")
	def := str(t.res["resourceType"])
	if steps[0] != def || len(steps) < 2 {
		return nil, "", nil, fmt.Errorf("%s is not an element of %s", elementID, def)
	}
	return t.res, def, steps[1:], nil
}

// descend walks steps but the last from obj of type def, creating the
// elements on its way (the first of each repeating one); it returns the
// parent of the last step and its type.
func descend(obj map[string]any, def string, steps []string) (map[string]any, string, error) {
	for _, step := range steps {
		name, _, _ := strings.Cut(step, ":")
		types, repeats, ok := fhirschema.Element(def, name)
		if !ok {
			return nil, "", fmt.Errorf("%s has no element %s", def, name)
		}
		if len(types) != 1 {
			return nil, "", fmt.Errorf("%s.%s has a choice of types", def, name)
		}
		obj = child(obj, name, repeats)
		def = types[0]
	}
	return obj, def, nil
}

// set sets the element an element id (Patient.name.given, slice names
// allowed) names to vals. A repeating element gets every value, one that
// does not repeat the first.
func (t *target) set(elementID string, vals []typed, unit map[string]any) error {
	obj, def, steps, err := t.start(elementID)
	if err != nil {
		return err
	}
	cur, def, err := descend(obj, def, steps[:len(steps)-1])
	if err != nil {
		return fmt.Errorf("element %s: %w", elementID, err)
	}
	name, _, _ := strings.Cut(steps[len(steps)-1], ":")
	base, choice := strings.CutSuffix(name, "[x]")
	types, repeats, ok := fhirschema.Element(def, base)
	if !ok {
		return fmt.Errorf("element %s: %s has no element %s", elementID, def, base)
	}
	var out []any
	key := base
	for _, tv := range vals {
		typ, v, ok := convertTo(tv, types, unit)
		if !ok {
			return fmt.Errorf("%s does not fit %s (%s)", describe(tv.v), elementID, strings.Join(types, ", "))
		}
		if choice || len(types) > 1 {
			key = base + strings.ToUpper(typ[:1]) + typ[1:]
		}
		out = append(out, v)
		if !repeats {
			break
		}
	}
	if repeats {
		cur[key] = append(anyList(cur[key]), out...)
	} else {
		cur[key] = out[0]
	}
	return nil
}

// open opens a new instance of the complex element an element id names
// (a new item of a repeating element, the element itself otherwise).
func (t *target) open(elementID string) (*target, error) {
	obj, def, steps, err := t.start(elementID)
	if err != nil {
		return nil, err
	}
	cur, def, err := descend(obj, def, steps[:len(steps)-1])
	if err != nil {
		return nil, fmt.Errorf("element %s: %w", elementID, err)
	}
	name, _, _ := strings.Cut(steps[len(steps)-1], ":")
	types, repeats, ok := fhirschema.Element(def, name)
	if !ok || len(types) != 1 || !isComplex(types[0]) {
		return nil, fmt.Errorf("element %s is not an element a group can stand for", elementID)
	}
	o := &target{res: t.res, parent: t, id: elementID, def: types[0], from: cur, key: name, index: -1}
	if repeats {
		o.obj = map[string]any{}
		list := append(anyList(cur[name]), o.obj)
		o.index = len(list) - 1
		cur[name] = list
	} else {
		o.obj = child(cur, name, false)
	}
	return o, nil
}

// closeEmpty removes the instance again when nothing went into it.
func (t *target) closeEmpty() {
	if len(t.obj) > 0 {
		return
	}
	if t.index < 0 {
		delete(t.from, t.key)
		return
	}
	list := anyList(t.from[t.key])
	if t.index < len(list) {
		list = append(list[:t.index], list[t.index+1:]...)
	}
	if len(list) == 0 {
		delete(t.from, t.key)
	} else {
		t.from[t.key] = list
	}
}

// isComplex tells a complex type or backbone element from a primitive.
func isComplex(typ string) bool {
	return typ != "" && typ[0] >= 'A' && typ[0] <= 'Z'
}

// child is the object element name of m, created when absent; the first
// of the list when it repeats.
func child(m map[string]any, name string, repeats bool) map[string]any {
	if !repeats {
		c, ok := m[name].(map[string]any)
		if !ok {
			c = map[string]any{}
			m[name] = c
		}
		return c
	}
	list := anyList(m[name])
	if len(list) > 0 {
		if c, ok := list[0].(map[string]any); ok {
			return c
		}
	}
	c := map[string]any{}
	m[name] = append([]any{c}, list...)
	return c
}

// convertTo converts a value to the first of types it fits, its own type
// first: the target type and the value.
func convertTo(tv typed, types []string, unit map[string]any) (string, any, bool) {
	for _, t := range types {
		if strings.EqualFold(t, tv.typ) {
			return t, fhirschema.CopyJSON(tv.v), true
		}
	}
	for _, t := range types {
		if v, ok := convert(tv, t, unit); ok {
			return t, v, true
		}
	}
	return "", nil, false
}

// convert converts a value to the FHIR type target where one is the
// usual reading of the other (a Coding as a CodeableConcept or its code,
// a string as a HumanName's text, a decimal as a Quantity in the item's unit).
func convert(tv typed, target string, unit map[string]any) (any, bool) {
	s, isText := tv.v.(string)
	coding, _ := tv.v.(map[string]any)
	switch target {
	case "CodeableConcept":
		if tv.typ == "Coding" {
			return map[string]any{"coding": []any{fhirschema.CopyJSON(coding)}}, true
		}
		if isText {
			return map[string]any{"text": s}, true
		}
	case "Coding":
		if tv.typ == "CodeableConcept" && len(objects(coding["coding"])) > 0 {
			return fhirschema.CopyJSON(objects(coding["coding"])[0]), true
		}
	case "code":
		if tv.typ == "Coding" {
			return coding["code"], coding["code"] != nil
		}
		if isText {
			return s, true
		}
	case "string", "markdown":
		if tv.typ == "Coding" {
			if d := str(coding["display"]); d != "" {
				return d, true
			}
			return coding["code"], coding["code"] != nil
		}
		if t, ok := text(tv.v); ok {
			return t, true
		}
	case "uri", "url", "canonical", "id", "oid", "uuid":
		if isText {
			return s, true
		}
	case "decimal":
		if n, ok := number(tv.v); ok {
			return n, true
		}
	case "integer", "positiveInt", "unsignedInt":
		if n, ok := number(tv.v); ok && !strings.ContainsAny(n.String(), ".eE") {
			return n, true
		}
	case "Quantity":
		if n, ok := number(tv.v); ok {
			return quantityOf(n, unit), true
		}
	case "date":
		if isText && (tv.typ == "Date" || tv.typ == "DateTime") {
			if i := strings.IndexByte(s, 'T'); i > 0 {
				s = s[:i]
			}
			return s, true
		}
	case "dateTime", "instant":
		if isText && (tv.typ == "Date" || tv.typ == "DateTime" || tv.typ == "Instant") {
			return s, target == "dateTime" || strings.Contains(s, "T")
		}
	case "Reference":
		if ref := referenceTo(coding); ref != nil {
			return ref, true
		}
	case "HumanName", "Address":
		if isText {
			return map[string]any{"text": s}, true
		}
	case "Identifier", "ContactPoint":
		if isText {
			return map[string]any{"value": s}, true
		}
	}
	return nil, false
}
