package profile

import (
	"context"
	"fmt"
	"reflect"

	"fhirstore/fhirschema"
)

// maxDepth bounds nested profile applications and nesting of values: a
// profile that refers to itself, or slicing that recurses, stops there.
const maxDepth = 64

// maxSteps bounds the values one validation visits, trial validations of
// slices and targets included.
const maxSteps = 1_000_000

// coreBase is the canonical URL prefix of the core definitions.
const coreBase = "http://hl7.org/fhir/StructureDefinition/"

// walker validates one resource, collecting issues.
type walker struct {
	ctx      context.Context
	v        *Validator
	sc       *scope
	opts     options
	issues   []fhirschema.Issue
	resource map[string]any // the resource the current node is in
	root     map[string]any // the Bundle it is an entry of, or the resource
	depth    int
	steps    int
	buf      []node // the values of the elements being walked, a stack
	deep     bool   // a bound was met (reported once)
	// top is the profile the resource at hand is validated against, and
	// trials how many trial validations are under way.
	top    *compiled
	trials int
	// trace, while not nil, records the element each value is validated
	// against (for elementDefinition()); traces keeps them per profile and
	// resource.
	trace  *elementTrace
	traces map[traceKey]*elementTrace
}

// resource validates r, at loc, against profile p.
func (w *walker) validateResource(p *compiled, r map[string]any, loc string) {
	typ, _ := r["resourceType"].(string)
	// The type decides; a kind that disagrees with it (complex-type for
	// Patient) is the profile's own slip, which the HL7 tooling reads past.
	if p.typ != typ || p.kind == "logical" {
		w.errorf(p, "structure", loc, "the profile constrains %s, not %s", p.typ, typ)
		return
	}
	prev, prevTop := w.resource, w.top
	w.resource, w.top = r, p
	defer func() { w.resource, w.top = prev, prevTop }()
	w.element(p, p.root, rootNode(r, loc, typ))
}

// element validates the value n against the element definition el of
// profile p: its type, value rules, binding, reference targets, type
// profiles, children and invariants.
func (w *walker) element(p *compiled, el *element, n node) {
	if !w.enter(n) {
		return
	}
	defer func() { w.depth-- }()
	if w.trace != nil {
		w.trace.add(w, p, el, n)
	}
	if !w.checkType(p, el, n) {
		return
	}
	w.checkValue(p, el, n)
	w.checkBinding(p, el, n)
	if n.typ == "Reference" {
		w.checkReference(p, el, n)
	}
	profiled := w.typeProfiles(p, el, n)
	if !profiled || len(el.kids()) > 0 {
		w.children(p, el, n)
	}
	w.invariants(p, el, n)
}

// enter counts one more level of nesting and one more step; false past
// maxDepth or maxSteps.
func (w *walker) enter(n node) bool {
	w.steps++
	switch {
	case w.depth >= maxDepth:
		w.stop(n.loc(), fmt.Sprintf("profile validation stops at %d nested levels (a profile that refers to itself, or recursive slicing)", maxDepth))
		return false
	case w.steps > maxSteps:
		w.stop(n.loc(), fmt.Sprintf("profile validation stops after %d steps", maxSteps))
		return false
	}
	w.depth++
	return true
}

// stop reports, once, that validation stopped at a bound.
func (w *walker) stop(loc, why string) {
	if w.deep {
		return
	}
	w.deep = true
	w.issues = append(w.issues, fhirschema.Issue{Severity: "warning", Code: "too-costly", Expression: loc, Diagnostics: why})
}

// children validates the children of n against the element's children,
// or, where the profile does not describe them, walks n by its base type
// for extensions and contained resources.
func (w *walker) children(p *compiled, el *element, n node) {
	kids := el.kids()
	if len(kids) == 0 {
		w.base(n)
		return
	}
	m := n.object()
	if m == nil && !anyRequired(kids) {
		return
	}
	pa := n.asParent()
	for _, c := range kids {
		if isPrimitive(n.typ) && c.name == "value" {
			continue // the primitive's value itself, not a property
		}
		start := len(w.buf)
		w.buf = appendValues(w.buf, m, c, pa.loc)
		items := w.buf[start:len(w.buf):len(w.buf)]
		for i := range items {
			items[i] = childOf(items[i], c, pa)
		}
		w.cardinality(p, c, items, pa.loc)
		var assigned []*element
		if c.slicing != nil || len(c.slices) > 0 {
			assigned = w.slice(p, c, items, pa.loc)
		}
		for i, it := range items {
			def := c
			if assigned != nil && assigned[i] != nil {
				def = assigned[i]
			}
			w.element(p, def, it)
			if c.name == "extension" || c.name == "modifierExtension" {
				w.extension(it, n, c.name == "modifierExtension", def != c && hasProfile(def))
			}
		}
		if c.name == "extension" || c.name == "modifierExtension" {
			w.extensionCardinality(items, pa.loc, c.name)
		}
		w.buf = w.buf[:start]
	}
}

// anyRequired reports whether one of elems has a minimum cardinality.
func anyRequired(elems []*element) bool {
	for _, e := range elems {
		if e.min > 0 {
			return true
		}
	}
	return false
}

// itemType is the FHIR type of a value of element c: the choice's type,
// a resource's resourceType, or the element's only type.
func itemType(c *element, it node) string {
	if it.typ != "" {
		return it.typ
	}
	if len(c.types) == 0 {
		return "BackboneElement"
	}
	code := c.types[0].code
	if m, ok := it.value.(map[string]any); ok {
		if rt, ok := m["resourceType"].(string); ok && (code == "Resource" || code == "DomainResource" || isResourceName(code)) {
			return rt
		}
	}
	if code == "Element" {
		return "BackboneElement"
	}
	return code
}

// isResourceName reports whether s is an R4 resource type.
func isResourceName(s string) bool { return resourceTypes[s] }

func hasProfile(e *element) bool {
	for _, t := range e.types {
		if len(t.profiles) > 0 {
			return true
		}
	}
	return false
}

// cardinality checks the number of values of c against its min and max.
func (w *walker) cardinality(p *compiled, c *element, items []node, parentLoc string) {
	if len(items) < c.min {
		w.errorf(p, "required", parentLoc+"."+c.jsonName(), "%s: minimum required = %d, but only found %d", elementID(c), c.min, len(items))
	}
	if c.max >= 0 && len(items) > c.max {
		w.errorf(p, "structure", parentLoc+"."+c.jsonName(), "%s: maximum allowed = %d, but found %d", elementID(c), c.max, len(items))
	}
}

// elementID names an element for messages: its path, with the slice.
func elementID(e *element) string {
	if e.sliceName != "" {
		return e.path + ":" + e.sliceName
	}
	return e.path
}

// base walks a value the profile does not describe by the core definition
// of its type, for its extensions and the resources it contains.
func (w *walker) base(n node) {
	if m, ok := n.value.(map[string]any); ok {
		if rt, ok := m["resourceType"].(string); ok && w.resource != nil && !sameMap(m, w.resource) {
			w.nested(m, rt, n.loc())
			return
		}
	}
	if isPrimitive(n.typ) || n.typ == "" {
		w.primitiveExtensions(n)
		return
	}
	bt := w.baseDefinition(n.typ)
	if bt == nil {
		return
	}
	if !w.enter(n) {
		return
	}
	defer func() { w.depth-- }()
	w.baseChildren(bt, bt.root, n)
}

// baseChildren walks the children of n by the base element el of the
// core definition bt.
func (w *walker) baseChildren(bt *compiled, el *element, n node) {
	m := n.object()
	if m == nil {
		return
	}
	pa := n.asParent()
	for _, c := range el.kids() {
		items := collect(m, c, pa.loc)
		if c.name == "extension" || c.name == "modifierExtension" {
			w.extensionCardinality(items, pa.loc, c.name)
		}
		for _, it := range items {
			it = childOf(it, c, pa)
			if w.trace != nil {
				w.trace.add(w, bt, c, it)
			}
			switch {
			case c.name == "extension" || c.name == "modifierExtension":
				w.extension(it, n, c.name == "modifierExtension", false)
			case len(c.kids()) > 0:
				if w.enter(it) {
					w.baseChildren(bt, c, it)
					w.depth--
				}
			default:
				w.base(it)
			}
		}
	}
}

// primitiveExtensions checks the extensions of a primitive's twin.
func (w *walker) primitiveExtensions(n node) {
	if n.twin == nil {
		return
	}
	pa := n.asParent()
	items := collectKey(n.twin, "extension", "Extension", pa.loc)
	w.extensionCardinality(items, pa.loc, "extension")
	for _, it := range items {
		it.ppath, it.pbase, it.name = pa.path, pa.base, "extension"
		w.extension(it, n, false, false)
	}
}

// baseDefinition is the compiled core definition of a type.
func (w *walker) baseDefinition(typ string) *compiled {
	p, err := w.sc.profile(w.ctx, coreBase+typ)
	if err != nil {
		return nil
	}
	return p
}

// nested validates a resource inside another (contained, a Bundle entry,
// a parameter): against the profiles it claims, or walked by its type.
func (w *walker) nested(r map[string]any, typ, loc string) {
	prevRes, prevRoot := w.resource, w.root
	w.resource = r
	if w.root == nil {
		w.root = prevRes
	}
	defer func() { w.resource, w.root = prevRes, prevRoot }()
	claimed := claimedProfiles(r)
	if len(claimed) == 0 {
		w.base(rootNode(r, loc, typ))
		return
	}
	for _, url := range claimed {
		p, err := w.sc.profile(w.ctx, url)
		switch {
		case err != nil:
			w.issue("error", "invalid", loc, fmt.Sprintf("the profile %s the resource claims cannot be used: %v", url, err), "", url)
		case p == nil:
			w.issue("warning", "not-supported", loc, fmt.Sprintf("the profile %s the resource claims is not known; not checked", url), "", url)
		default:
			w.validateResource(p, r, loc)
		}
	}
}

// claimedProfiles lists meta.profile.
func claimedProfiles(r map[string]any) []string {
	meta, _ := r["meta"].(map[string]any)
	return strings1(meta["profile"])
}

// sameMap reports whether a and b are the same map.
func sameMap(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// errorf reports an error of profile p at loc.
func (w *walker) errorf(p *compiled, code, loc, format string, args ...any) {
	w.issue("error", code, loc, fmt.Sprintf(format, args...)+" (profile "+p.url+")", "", p.url)
}

// warnf reports a warning of profile p at loc.
func (w *walker) warnf(p *compiled, code, loc, format string, args ...any) {
	w.issue("warning", code, loc, fmt.Sprintf(format, args...)+" (profile "+p.url+")", "", p.url)
}

func (w *walker) issue(severity, code, loc, text, key, source string) {
	w.issues = append(w.issues, fhirschema.Issue{Severity: severity, Code: code, Diagnostics: text, Expression: loc, Key: key, Source: source})
}

// trial validates with a fresh issue list and returns the issues found,
// leaving w's own untouched.
func (w *walker) trial(f func()) []fhirschema.Issue {
	saved, savedDeep := w.issues, w.deep
	w.issues = nil
	w.trials++
	f()
	w.trials--
	found := w.issues
	w.issues, w.deep = saved, savedDeep
	return found
}

// hasError reports whether any issue is an error.
func hasError(issues []fhirschema.Issue) bool {
	for _, is := range issues {
		if is.Severity == "error" {
			return true
		}
	}
	return false
}
