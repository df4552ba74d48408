package profile

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"fhirstore/fhirschema/fhirpath"
)

// compiled is a StructureDefinition's snapshot as a tree of elements.
type compiled struct {
	url      string
	name     string
	typ      string // the type it constrains: Patient, Extension, Quantity
	kind     string // resource, complex-type, primitive-type, logical
	root     *element
	contexts []extensionContext // where an extension may be used

	// source is the canonical it was compiled from (url or url|version);
	// definitions holds its snapshot's ElementDefinitions once
	// elementDefinition() has asked for them.
	source      string
	mu          sync.Mutex
	definitions []map[string]any
}

// extensionContext is one context of an extension definition.
type extensionContext struct {
	typ, expression string // element, extension or fhirpath
}

// element is one ElementDefinition with its children and slices.
type element struct {
	name      string // the last segment of the path: component, value[x]
	path      string // Observation.component
	index     int    // its place in the snapshot
	sliceName string
	min       int
	max       int // -1 when unbounded
	types     []typeRef
	// fixed and pattern hold fixed[x] and pattern[x]; fixedKey names the
	// property (fixedUri, patternCodeableConcept).
	fixed, pattern     any
	fixedKey           string
	patternKey         string
	maxLength          int
	minLength          int      // the minLength extension
	narrative          []string // the narrative-language-control extension's codes
	minValue, maxValue any
	minKey, maxKey     string
	binding            *binding
	constraints        []*constraint
	isModifier         bool
	contentReference   string
	twinKey            string // _name, when the element may be a primitive
	slicing            *slicing
	slices             []*element
	sliceOf            *element
	children           []*element
	ref                *element // the element a contentReference names

	discOnce sync.Once
	disc     []discriminatorValue // this slice's discriminator values
}

// typeRef is one ElementDefinition.type.
type typeRef struct {
	code     string
	profiles []string
	targets  []string
	// aggregation lists how a Reference may hold its target: contained,
	// referenced, bundled; none allows any.
	aggregation []string
}

type binding struct {
	strength, valueSet string
}

// constraint is an invariant the profile adds to an element.
type constraint struct {
	key, severity, human, expression string
	expr                             *fhirpath.Expr
	err                              error
}

type slicing struct {
	discriminators []discriminator
	ordered        bool
	rules          string // closed, open, openAtEnd
}

type discriminator struct {
	typ, path string
	steps     []step
}

// choice reports whether the element is a choice of types (value[x]).
func (e *element) choice() bool { return strings.HasSuffix(e.name, "[x]") }

// jsonName is the element's property name, without [x] for a choice.
func (e *element) jsonName() string { return strings.TrimSuffix(e.name, "[x]") }

// kids returns the element's children; for an element that spells out
// none, those of the element its contentReference names, or of the element
// it slices.
func (e *element) kids() []*element {
	switch {
	case len(e.children) > 0:
		return e.children
	case e.ref != nil:
		return e.ref.children
	case e.sliceOf != nil:
		return e.sliceOf.kids()
	}
	return nil
}

// child returns the child named name (value or value[x]).
func (e *element) child(name string) *element {
	for _, c := range e.kids() {
		if c.name == name || c.name == name+"[x]" {
			return c
		}
	}
	return nil
}

// typeCodes lists the codes of the element's types.
func (e *element) typeCodes() []string {
	out := make([]string, 0, len(e.types))
	for _, t := range e.types {
		out = append(out, t.code)
	}
	return out
}

// compile builds the element tree of a StructureDefinition's snapshot.
func compile(sd map[string]any) (*compiled, error) {
	url, _ := sd["url"].(string)
	p := &compiled{url: url}
	p.name, _ = sd["name"].(string)
	p.typ, _ = sd["type"].(string)
	p.kind, _ = sd["kind"].(string)
	p.contexts = contextsOf(sd)
	list := snapshotElements(sd)
	if len(list) == 0 {
		return nil, fmt.Errorf("StructureDefinition %s has no snapshot", url)
	}
	byPath := map[string]*element{}
	stack := []*element{}
	for i, raw := range list {
		e, err := newElement(raw)
		if err != nil {
			return nil, err
		}
		e.index = i
		if i == 0 {
			if strings.Contains(e.path, ".") {
				return nil, fmt.Errorf("element %s: the first element must be the root", e.path)
			}
			p.root = e
			stack = append(stack, e)
			byPath[e.path] = e
			continue
		}
		for len(stack) > 1 && !strings.HasPrefix(e.path, stack[len(stack)-1].path+".") {
			stack = stack[:len(stack)-1]
		}
		parent := stack[len(stack)-1]
		if !strings.HasPrefix(e.path, parent.path+".") || strings.Contains(e.path[len(parent.path)+1:], ".") {
			return nil, fmt.Errorf("element %s: its parent is not in the snapshot before it", e.path)
		}
		if err := attach(parent, e); err != nil {
			return nil, err
		}
		if _, ok := byPath[e.path]; !ok && e.sliceName == "" {
			byPath[e.path] = e
		}
		stack = append(stack, e)
	}
	for _, e := range byPath {
		resolveContentReference(e, byPath)
	}
	return p, nil
}

// attach adds e under parent: as a child, or as a slice of the child of
// the same name.
func attach(parent, e *element) error {
	if e.sliceName == "" {
		parent.children = append(parent.children, e)
		return nil
	}
	var base *element
	for _, c := range parent.children {
		if c.name == e.name {
			base = c
		}
	}
	if base == nil {
		return fmt.Errorf("element %s: slice %s has no base element", e.path, e.sliceName)
	}
	if i := strings.LastIndexByte(e.sliceName, '/'); i > 0 {
		for _, s := range base.slices {
			if s.sliceName == e.sliceName[:i] {
				base = s
			}
		}
	}
	e.sliceOf = base
	base.slices = append(base.slices, e)
	return nil
}

func resolveContentReference(e *element, byPath map[string]*element) {
	visit := func(x *element) {
		if x.contentReference != "" {
			ref := x.contentReference[strings.IndexByte(x.contentReference, '#')+1:]
			x.ref = byPath[ref]
		}
	}
	visit(e)
	for _, s := range e.slices {
		visit(s)
	}
}

// snapshotElements returns snapshot.element as objects.
func snapshotElements(sd map[string]any) []map[string]any {
	return elementList(sd, "snapshot")
}

func elementList(sd map[string]any, part string) []map[string]any {
	s, _ := sd[part].(map[string]any)
	list, _ := s["element"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func contextsOf(sd map[string]any) []extensionContext {
	list, _ := sd["context"].([]any)
	var out []extensionContext
	for _, x := range list {
		m, _ := x.(map[string]any)
		t, _ := m["type"].(string)
		e, _ := m["expression"].(string)
		out = append(out, extensionContext{t, e})
	}
	return out
}

// newElement reads one ElementDefinition.
func newElement(raw map[string]any) (*element, error) {
	path, _ := raw["path"].(string)
	if path == "" {
		return nil, fmt.Errorf("an element has no path")
	}
	e := &element{path: path, name: path[strings.LastIndexByte(path, '.')+1:], max: -1}
	e.sliceName, _ = raw["sliceName"].(string)
	e.contentReference, _ = raw["contentReference"].(string)
	e.isModifier, _ = raw["isModifier"].(bool)
	var err error
	if e.min, err = intOf(raw["min"], 0); err != nil {
		return nil, fmt.Errorf("element %s: min: %w", path, err)
	}
	if e.max, err = maxOf(raw["max"]); err != nil {
		return nil, fmt.Errorf("element %s: %w", path, err)
	}
	if e.maxLength, err = intOf(raw["maxLength"], 0); err != nil {
		return nil, fmt.Errorf("element %s: maxLength: %w", path, err)
	}
	readElementExtensions(e, raw)
	e.types = typesOf(raw)
	if mayBePrimitive(e.types) {
		e.twinKey = "_" + e.name
	}
	readValues(e, raw)
	if b, ok := raw["binding"].(map[string]any); ok {
		s, _ := b["strength"].(string)
		vs, _ := b["valueSet"].(string)
		if vs != "" {
			e.binding = &binding{strength: s, valueSet: vs}
		}
	}
	e.constraints = constraintsOf(raw)
	if e.slicing, err = slicingOf(raw); err != nil {
		return nil, fmt.Errorf("element %s: %w", path, err)
	}
	return e, nil
}

// readValues reads fixed[x], pattern[x], minValue[x] and maxValue[x].
func readValues(e *element, raw map[string]any) {
	for k, v := range raw {
		switch {
		case strings.HasPrefix(k, "fixed"):
			e.fixed, e.fixedKey = v, k
		case strings.HasPrefix(k, "pattern"):
			e.pattern, e.patternKey = v, k
		case strings.HasPrefix(k, "minValue"):
			e.minValue, e.minKey = v, k
		case strings.HasPrefix(k, "maxValue"):
			e.maxValue, e.maxKey = v, k
		}
	}
}

func typesOf(raw map[string]any) []typeRef {
	list, _ := raw["type"].([]any)
	out := make([]typeRef, 0, len(list))
	for _, x := range list {
		m, _ := x.(map[string]any)
		code, _ := m["code"].(string)
		out = append(out, typeRef{code: typeCode(code), profiles: strings1(m["profile"]), targets: strings1(m["targetProfile"]), aggregation: strings1(m["aggregation"])})
	}
	return out
}

// mayBePrimitive reports whether a value of one of types may be a
// primitive, with a _name twin; an element of no type (a contentReference)
// may not.
func mayBePrimitive(types []typeRef) bool {
	for _, t := range types {
		if isPrimitive(t.code) {
			return true
		}
	}
	return false
}

// typeCode maps the FHIRPath system types of primitive values
// (http://hl7.org/fhirpath/System.String) to their FHIR name.
func typeCode(code string) string {
	const sys = "http://hl7.org/fhirpath/System."
	if strings.HasPrefix(code, sys) {
		return strings.ToLower(code[len(sys):len(sys)+1]) + code[len(sys)+1:]
	}
	return code
}

func strings1(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func constraintsOf(raw map[string]any) []*constraint {
	list, _ := raw["constraint"].([]any)
	var out []*constraint
	for _, x := range list {
		m, _ := x.(map[string]any)
		c := &constraint{}
		c.key, _ = m["key"].(string)
		c.severity, _ = m["severity"].(string)
		c.human, _ = m["human"].(string)
		c.expression, _ = m["expression"].(string)
		if c.expression == "" || coreKey(c.key) {
			continue
		}
		c.expr, c.err = fhirpath.Compile(c.expression)
		out = append(out, c)
	}
	return out
}

func slicingOf(raw map[string]any) (*slicing, error) {
	m, ok := raw["slicing"].(map[string]any)
	if !ok {
		return nil, nil
	}
	s := &slicing{rules: "open"}
	s.ordered, _ = m["ordered"].(bool)
	if r, _ := m["rules"].(string); r != "" {
		s.rules = r
	}
	list, _ := m["discriminator"].([]any)
	for _, x := range list {
		d, _ := x.(map[string]any)
		t, _ := d["type"].(string)
		p, _ := d["path"].(string)
		steps, err := parseSteps(p)
		if err != nil {
			return nil, fmt.Errorf("slicing discriminator %q: %w", p, err)
		}
		switch t {
		case "value", "pattern", "type", "profile", "exists":
		default:
			return nil, fmt.Errorf("slicing discriminator type %q is not one of value, pattern, type, profile, exists", t)
		}
		s.discriminators = append(s.discriminators, discriminator{typ: t, path: p, steps: steps})
	}
	return s, nil
}

// intOf reads a JSON integer; def when absent.
func intOf(v any, def int) (int, error) {
	switch n := v.(type) {
	case nil:
		return def, nil
	case json.Number:
		i, err := strconv.Atoi(string(n))
		if err != nil || i < 0 {
			return 0, fmt.Errorf("%q is not a non-negative integer", n)
		}
		return i, nil
	case float64:
		return int(n), nil
	}
	return 0, fmt.Errorf("%v is not an integer", v)
}

// maxOf reads ElementDefinition.max: a number or *.
func maxOf(v any) (int, error) {
	s, ok := v.(string)
	if v == nil {
		return -1, nil
	}
	if !ok {
		return 0, fmt.Errorf("max %v is not a string", v)
	}
	if s == "*" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("max %q is neither a number nor *", s)
	}
	return n, nil
}

// Extensions on an element definition that constrain its values.
const (
	extMinLength       = "http://hl7.org/fhir/StructureDefinition/minLength"
	extNarrativeLangCt = "http://hl7.org/fhir/StructureDefinition/narrative-language-control"
)

// readElementExtensions reads the extensions of an element definition
// that constrain its values: minLength, and narrative-language-control
// (_no, _yes, _resource or language codes) on a Narrative.
func readElementExtensions(e *element, raw map[string]any) {
	for _, x := range objects(raw["extension"]) {
		switch x["url"] {
		case extMinLength:
			if n, err := intOf(x["valueInteger"], 0); err == nil {
				e.minLength = n
			}
		case extNarrativeLangCt:
			if c, _ := x["valueCode"].(string); c != "" {
				e.narrative = append(e.narrative, c)
			}
		}
	}
}
