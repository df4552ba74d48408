package fhirschema

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"fhirstore/fhirschema/fhirpath"
)

//go:generate sh -c "go run geninvariants.go ../../shared/fhir/definitions/r4-core > invariants.json"

// invariantsJSON holds the invariants (constraint expressions) of the R4
// StructureDefinitions by the element or type that carries them (see
// geninvariants.go).
//
//go:embed invariants.json
var invariantsJSON []byte

// sdPrefix is the canonical URL of the core StructureDefinitions, less the
// type name.
const sdPrefix = "http://hl7.org/fhir/StructureDefinition/"

// invariantBudget bounds the invariants of one validation: a resource
// whose checks run longer gets warnings for those not checked.
const invariantBudget = 5 * time.Second

// invariantSteps bounds one invariant's evaluation, ten times the engine's
// default: que-2 compares the linkId of every item of a Questionnaire with
// every other.
const invariantSteps = 10_000_000

// invariant is one constraint of the R4 definitions, compiled.
type invariant struct {
	key      string // per-1
	severity string // error or warning
	human    string
	source   string // canonical URL of the StructureDefinition defining it
	expr     *fhirpath.Expr
	// focus is the FHIRPath type of the element it applies to when the
	// walk cannot tell it (a backbone element: Patient.contact); "" for
	// the element's own type.
	focus string
	// native, when set, tells without FHIRPath whether the invariant
	// holds for a value; when it cannot tell (known false), expr decides.
	native func(v any) (holds, known bool)
}

// shortcuts are the invariants with a native test of their common case.
var shortcuts = map[string]func(v any) (holds, known bool){
	"dom-3": containedResourcesReferenced,
	"per-1": periodInOrder,
	"txt-2": narrativeHasContent,
}

// narrativeHasContent is txt-2 (the narrative has some non-whitespace
// content): text, or an image. R4 writes txt-1 and txt-2 alike as
// htmlChecks(), which says whether the markup is safe; the HL7 validator
// checks txt-2's own words, and so does this.
func narrativeHasContent(v any) (holds, known bool) {
	s, ok := v.(string)
	if !ok {
		return false, false
	}
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = false
	for {
		tok, err := d.Token()
		if err != nil {
			return false, err == io.EOF
		}
		switch t := tok.(type) {
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return true, true
			}
		case xml.StartElement:
			if t.Name.Local == "img" {
				return true, true
			}
		}
	}
}

// containedReferenced tells that every contained resource of a resource
// is referred to by a "reference" element below it ('#' + its id among
// %resource.descendants().select(reference)), which makes dom-3 hold
// whatever its other terms say. dom-3 looks at every descendant of the
// resource in FHIRPath, which Synthea ExplanationOfBenefits (contained
// Coverage and ServiceRequest) made 4% of their ingest.
func containedReferenced(v any) bool {
	obj, _ := v.(map[string]any)
	contained, _ := obj["contained"].([]any)
	if len(contained) == 0 {
		return false
	}
	refs := map[string]bool{}
	for _, child := range obj {
		collectReferences(child, refs)
	}
	for _, c := range contained {
		id, ok := c.(map[string]any)["id"].(string)
		if !ok || !refs["#"+id] {
			return false
		}
	}
	return true
}

// collectReferences adds the string values of the "reference" elements
// in v and below it to refs.
func collectReferences(v any, refs map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if r, ok := x["reference"].(string); ok {
			refs[r] = true
		}
		for _, child := range x {
			collectReferences(child, refs)
		}
	case []any:
		for _, item := range x {
			collectReferences(item, refs)
		}
	}
}

// invariantTable tells where each invariant applies, by the schema
// definitions the walk meets.
type invariantTable struct {
	// types holds those of data types and resource types, by name.
	types map[string][]*invariant
	// elements holds those of elements, by the schema definition holding
	// them and the element's name (a choice element without [x]).
	elements map[string]map[string][]*invariant
	// domain holds DomainResource's, which apply to every resource but
	// those of notDomain.
	domain    []*invariant
	notDomain map[string]bool
	// uncompiled lists the invariants whose expression does not compile,
	// with the error; they are not checked.
	uncompiled []string
}

// invariantFile is invariants.json.
type invariantFile struct {
	Invariants        map[string][][4]string `json:"invariants"`
	Bases             map[string]string      `json:"bases"`
	Profiles          map[string]string      `json:"profiles"`
	ContentReferences map[string]string      `json:"contentReferences"`
	NotDomain         []string               `json:"notDomain"`
}

// newInvariantTable compiles every invariant once and places it on the
// schema definitions of elements.
func newInvariantTable(elements map[string]map[string]*element) (*invariantTable, error) {
	var f invariantFile
	if err := json.Unmarshal(invariantsJSON, &f); err != nil {
		return nil, fmt.Errorf("read invariants: %w", err)
	}
	t := &invariantTable{types: map[string][]*invariant{}, elements: map[string]map[string][]*invariant{}, notDomain: map[string]bool{}}
	for _, name := range f.NotDomain {
		t.notDomain[name] = true
	}
	compiled := t.compile(f.Invariants)
	for path, invs := range compiled {
		if err := t.place(elements, f, compiled, path, invs); err != nil {
			return nil, err
		}
	}
	for path, target := range f.ContentReferences {
		if _, own := compiled[path]; !own {
			if err := t.placeElement(elements, path, compiled[target], target); err != nil {
				return nil, err
			}
		}
	}
	for path, profile := range f.Profiles {
		if err := t.placeElement(elements, path, compiled[profile], ""); err != nil {
			return nil, err
		}
	}
	sort.Strings(t.uncompiled)
	return t, nil
}

// compile compiles the invariants of the file, each distinct expression
// once; those that do not compile are listed in t.uncompiled.
func (t *invariantTable) compile(byPath map[string][][4]string) map[string][]*invariant {
	exprs := map[string]*fhirpath.Expr{}
	out := make(map[string][]*invariant, len(byPath))
	for path, list := range byPath {
		root, _, _ := strings.Cut(path, ".")
		for _, c := range list {
			expr, seen := exprs[c[3]]
			if !seen {
				var err error
				if expr, err = fhirpath.Compile(c[3]); err != nil {
					t.uncompiled = append(t.uncompiled, fmt.Sprintf("%s (%s): %v", c[0], path, err))
				}
				exprs[c[3]] = expr
			}
			if expr != nil {
				out[path] = append(out[path], &invariant{key: c[0], severity: c[1], human: c[2], source: sdPrefix + root, expr: expr, native: shortcuts[c[0]]})
			}
		}
	}
	return out
}

// place puts the invariants of path where the walk finds them: a type
// name (with the invariants of the types it specializes), DomainResource,
// or an element path.
func (t *invariantTable) place(elements map[string]map[string]*element, f invariantFile, compiled map[string][]*invariant, path string, invs []*invariant) error {
	switch {
	case path == "DomainResource":
		t.domain = invs
	case strings.Contains(path, "."):
		return t.placeElement(elements, path, invs, f.ContentReferences[path])
	case elements[path] != nil:
		all := append([]*invariant(nil), invs...)
		for base := f.Bases[path]; base != ""; base = f.Bases[base] {
			all = append(all, compiled[base]...)
		}
		t.types[path] = all
	}
	// Anything else is a profile (SimpleQuantity), placed by its elements.
	return nil
}

// placeElement puts invs on the element at path; focus is the FHIRPath
// type of a backbone element whose content is defined at another path.
func (t *invariantTable) placeElement(elements map[string]map[string]*element, path string, invs []*invariant, focus string) error {
	if len(invs) == 0 {
		return nil
	}
	def, name, el := resolvePath(elements, path)
	if el == nil {
		return fmt.Errorf("invariants of %s: the schema has no such element", path)
	}
	if strings.Contains(el.typ, "_") && focus == "" {
		focus = path // a backbone element: its path is its type
	}
	if t.elements[def] == nil {
		t.elements[def] = map[string][]*invariant{}
	}
	for _, inv := range invs {
		placed := *inv
		placed.focus = focus
		t.elements[def][name] = append(t.elements[def][name], &placed)
	}
	return nil
}

// resolvePath finds the element at an R4 path (Patient.contact,
// RiskAssessment.prediction.probability[x]) in the schema: the definition
// holding it, the name the walk looks it up by, and the element itself
// (one type of a choice element); el is nil when there is none.
func resolvePath(elements map[string]map[string]*element, path string) (def, name string, el *element) {
	steps := strings.Split(path, ".")
	def = steps[0]
	for i, step := range steps[1:] {
		name = strings.TrimSuffix(step, "[x]")
		el = lookupElement(elements[def], name)
		if el == nil {
			return "", "", nil
		}
		if i < len(steps)-2 {
			def = el.typ
		}
	}
	return def, name, el
}

// lookupElement finds the element name of a definition: the property
// itself, or one type of the choice element name.
func lookupElement(props map[string]*element, name string) *element {
	if el := props[name]; el != nil && !el.shadow && el.choice == "" {
		return el
	}
	for _, el := range props {
		if el.choice == name && !el.shadow {
			return el
		}
	}
	return nil
}

// elementName is the name invariants of el are placed by: a choice
// element's name without its type, or the property.
func elementName(el *element, key string) string {
	if el.choice != "" {
		return el.choice
	}
	return key
}

// pendingCheck is an element whose invariants are evaluated once the walk
// found no error in the resource.
type pendingCheck struct {
	invs  []*invariant
	node  fhirpath.Node
	at    *loc
	scope *resourceScope
}

// resourceScope is what the invariants of one resource's elements see:
// %resource (the resource holding them) and %rootResource (its container
// when it is contained, itself otherwise).
type resourceScope struct {
	env fhirpath.Env
}

// enterResource starts the scope of a resource; contained resources share
// their container's root.
func (w *walker) enterResource(obj map[string]any, contained bool) (restore func()) {
	parent := w.scope
	s := &resourceScope{env: fhirpath.Env{Resource: obj, RootResource: obj, MaxSteps: invariantSteps}}
	if contained && parent != nil {
		s.env.RootResource = parent.env.RootResource
	}
	w.scope = s
	return func() { w.scope = parent }
}

// invariantsOf queues the invariants of a resource or a data type for obj.
func (w *walker) invariantsOf(obj map[string]any, at *loc, def string) {
	if w.v.invariants == nil || w.scope == nil {
		return
	}
	if invs := w.v.invariants.types[def]; invs != nil {
		w.queue(invs, fhirpath.Node{Value: obj, Type: def}, at)
	}
}

// domainInvariants queues DomainResource's invariants for a resource.
func (w *walker) domainInvariants(obj map[string]any, at *loc, typ string) {
	if t := w.v.invariants; t != nil && !t.notDomain[typ] {
		w.queue(t.domain, fhirpath.Node{Value: obj, Type: typ}, at)
	}
}

// elementInvariants queues the invariants placed on an element for each of
// its values.
func (w *walker) elementInvariants(invs []*invariant, v any, at *loc, el *element) {
	if !el.array {
		if v != nil {
			w.queue(invs, fhirpath.Node{Value: v, Type: el.typ}, at)
		}
		return
	}
	items, _ := v.([]any)
	for i, item := range items {
		if item != nil {
			w.queue(invs, fhirpath.Node{Value: item, Type: el.typ}, at.item(i))
		}
	}
}

// queue records invs for node, to be evaluated in the current resource's
// scope.
func (w *walker) queue(invs []*invariant, node fhirpath.Node, at *loc) {
	if len(invs) > 0 && w.scope != nil {
		w.checks = append(w.checks, pendingCheck{invs: invs, node: node, at: at, scope: w.scope})
	}
}

// checkInvariants evaluates the queued invariants. One that fails is an
// issue of its own severity; one that cannot be evaluated is a warning,
// never a refusal. Warning-severity invariants (best practices) are
// evaluated only when the caller asks for them.
func (w *walker) checkInvariants() {
	if len(w.checks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), invariantBudget)
	defer cancel()
	for _, c := range w.checks {
		for _, inv := range c.invs {
			if inv.severity != "error" && !w.opts.BestPractice {
				continue
			}
			node := c.node
			if inv.focus != "" {
				node.Type = inv.focus
			}
			holds, err := inv.holds(ctx, &c.scope.env, node)
			switch {
			case err != nil:
				w.add(inv.issue("warning", c.at, fmt.Sprintf("%s: not checked: %v", inv.key, err)))
			case !holds:
				w.add(inv.issue(inv.severity, c.at, inv.key+": "+inv.human))
			}
		}
	}
}

// holds evaluates the invariant on node. As the HL7 validator reads a
// constraint's result: one boolean is the verdict, an empty result is
// false, and any other non-empty result is true.
func (inv *invariant) holds(ctx context.Context, env *fhirpath.Env, node fhirpath.Node) (bool, error) {
	if inv.native != nil {
		if holds, known := inv.native(node.Value); known {
			return holds, nil
		}
	}
	out, err := inv.expr.Eval(ctx, env, []fhirpath.Node{node})
	if err != nil {
		return false, err
	}
	if len(out) == 1 {
		if b, ok := out[0].Value.(bool); ok {
			return b, nil
		}
	}
	return len(out) > 0, nil
}

func (inv *invariant) issue(severity string, at *loc, msg string) Issue {
	return Issue{Severity: severity, Code: "invariant", Diagnostics: msg, Expression: at.String(), Key: inv.key, Source: inv.source}
}

// ele1 is the native check of ele-1 (every element has a value or
// children): an element whose only content is its id breaks it.
func (w *walker) ele1(at *loc) {
	w.add(Issue{Severity: "error", Code: "invariant", Expression: at.String(), Key: "ele-1", Source: sdPrefix + "Element",
		Diagnostics: "ele-1: All FHIR elements must have a @value or children"})
}

// onlyID reports whether an element's object holds nothing but its id.
func onlyID(obj map[string]any) bool {
	_, ok := obj["id"]
	return ok && len(obj) == 1
}

// UncompiledInvariants lists the core invariants whose expression the
// FHIRPath engine does not compile, with the error; they are not checked.
func (v *Validator) UncompiledInvariants() []string {
	if v.invariants == nil {
		return nil
	}
	return v.invariants.uncompiled
}

// WithoutInvariants returns a validator that shares v's compiled schema
// but checks no invariant: to measure what invariants cost.
func (v *Validator) WithoutInvariants() *Validator {
	c := *v
	c.invariants = nil
	return &c
}
