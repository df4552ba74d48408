package profile

import (
	"fmt"
	"strings"
)

// step is one step of a discriminator path: an element name, $this,
// extension('url'), resolve() or ofType(T).
type step struct {
	kind string // name, this, extension, resolve, ofType
	arg  string
}

// parseSteps reads a discriminator path.
func parseSteps(path string) ([]step, error) {
	var out []step
	for _, part := range splitPath(path) {
		switch {
		case part == "$this":
			out = append(out, step{kind: "this"})
		case part == "resolve()":
			out = append(out, step{kind: "resolve"})
		case strings.HasPrefix(part, "extension(") && strings.HasSuffix(part, ")"):
			out = append(out, step{kind: "extension", arg: strings.Trim(part[len("extension("):len(part)-1], `'"`)})
		case strings.HasPrefix(part, "ofType(") && strings.HasSuffix(part, ")"):
			out = append(out, step{kind: "ofType", arg: part[len("ofType(") : len(part)-1]})
		case isName(part):
			out = append(out, step{kind: "name", arg: part})
		default:
			return nil, fmt.Errorf("the step %q is not supported", part)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty path")
	}
	return out, nil
}

// splitPath splits at the dots outside parentheses and quotes.
func splitPath(path string) []string {
	var parts []string
	depth, quote, start := 0, byte(0), 0
	for i := 0; i < len(path); i++ {
		ch := path[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '(':
			depth++
		case ch == ')':
			depth--
		case ch == '.' && depth == 0:
			parts = append(parts, path[start:i])
			start = i + 1
		}
	}
	return append(parts, path[start:])
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '[' || r == ']') {
			return false
		}
	}
	return true
}

// discriminatorValue is what one slice requires at one discriminator's
// path.
type discriminatorValue struct {
	d        discriminator
	def      *element // the slice's element at the path; nil when absent
	value    any      // fixed or pattern value
	pattern  bool
	binding  *binding // a required binding standing for the value
	types    []string
	profiles []string
}

// constrains reports whether the slice says anything at this
// discriminator.
func (dv discriminatorValue) constrains() bool {
	switch dv.d.typ {
	case "value", "pattern":
		return dv.value != nil || dv.binding != nil
	case "type":
		return len(dv.types) > 0
	case "profile":
		return len(dv.profiles) > 0
	case "exists":
		return dv.def != nil && (dv.def.min > 0 || dv.def.max == 0)
	}
	return false
}

// discriminatorValues reads, for each discriminator, what slice s holds at
// its path.
func (w *walker) discriminatorValues(s *element, sl *slicing) []discriminatorValue {
	out := make([]discriminatorValue, 0, len(sl.discriminators))
	for _, d := range sl.discriminators {
		dv := discriminatorValue{d: d}
		steps := d.steps
		resolved := len(steps) > 0 && steps[len(steps)-1].kind == "resolve"
		if (d.typ == "profile" || d.typ == "type") && resolved {
			steps = steps[:len(steps)-1]
		}
		dv.def = w.defAt(s, steps)
		if dv.def != nil {
			w.readDiscriminator(&dv, resolved)
		}
		out = append(out, dv)
	}
	return out
}

func (w *walker) readDiscriminator(dv *discriminatorValue, resolved bool) {
	def := dv.def
	switch dv.d.typ {
	case "value", "pattern":
		switch {
		case def.fixed != nil:
			dv.value = def.fixed
		case def.pattern != nil:
			dv.value, dv.pattern = def.pattern, true
		case def.binding != nil && def.binding.strength == "required":
			dv.binding = def.binding
		}
	case "type":
		dv.types = def.typeCodes()
		if resolved {
			dv.types = w.targetTypes(def)
		}
	case "profile":
		for _, t := range def.types {
			if resolved {
				dv.profiles = append(dv.profiles, t.targets...)
			} else {
				dv.profiles = append(dv.profiles, t.profiles...)
			}
		}
	}
}

// targetTypes lists the resource types a Reference element's target
// profiles constrain.
func (w *walker) targetTypes(e *element) []string {
	var out []string
	for _, t := range e.types {
		for _, url := range t.targets {
			if tp := w.targetProfile(url); tp != nil {
				out = append(out, tp.typ)
			}
		}
	}
	return out
}

// defAt walks a discriminator path through the slice's definition,
// stepping into type and target profiles where the slice does not spell
// the elements out.
func (w *walker) defAt(s *element, steps []step) *element {
	cur := s
	for _, st := range steps {
		switch st.kind {
		case "this", "ofType":
		case "name":
			cur = w.childDef(cur, st.arg)
		case "extension":
			cur = w.extensionDef(cur, st.arg)
		case "resolve":
			cur = w.targetDef(cur)
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}

// childDef finds the child named name of e, in e's children or else in
// its type's profile or base definition.
func (w *walker) childDef(e *element, name string) *element {
	if c := e.child(name); c != nil {
		return c
	}
	if len(e.kids()) > 0 {
		return nil
	}
	if root := w.typeRoot(e); root != nil {
		return root.child(name)
	}
	return nil
}

// typeRoot is the root element of e's type profile, or of its type's base
// definition when it names no profile.
func (w *walker) typeRoot(e *element) *element {
	if len(e.types) != 1 {
		return nil
	}
	t := e.types[0]
	url := coreBase + t.code
	if len(t.profiles) == 1 {
		url = t.profiles[0]
	}
	p, err := w.sc.profile(w.ctx, url)
	if err != nil || p == nil {
		return nil
	}
	return p.root
}

// extensionDef finds the slice of e's extensions that holds url.
func (w *walker) extensionDef(e *element, url string) *element {
	ext := w.childDef(e, "extension")
	if ext == nil {
		return nil
	}
	for _, s := range ext.slices {
		for _, t := range s.types {
			for _, p := range t.profiles {
				if p == url || strings.HasPrefix(p, url+"|") {
					return s
				}
			}
		}
		if u := s.child("url"); u != nil && u.fixed == url {
			return s
		}
	}
	return nil
}

// targetDef is the root of the only target profile of a Reference
// element.
func (w *walker) targetDef(e *element) *element {
	var targets []string
	for _, t := range e.types {
		targets = append(targets, t.targets...)
	}
	if len(targets) != 1 {
		return nil
	}
	p, err := w.sc.profile(w.ctx, targets[0])
	if err != nil || p == nil {
		return nil
	}
	return p.root
}

// discriminatorMatches reports whether the value meets one discriminator.
func (w *walker) discriminatorMatches(dv discriminatorValue, it node) bool {
	if ok, done := propertyMatches(dv, it); done {
		return ok
	}
	vals := w.valuesAt(dv.d.steps, it)
	switch dv.d.typ {
	case "exists":
		return (len(vals) > 0) == (dv.def.min > 0)
	case "value", "pattern":
		for _, v := range vals {
			if w.valueMatches(dv, v) {
				return true
			}
		}
	case "type":
		for _, v := range vals {
			if allowsType(dv.types, v.typ) {
				return true
			}
		}
	case "profile":
		for _, v := range vals {
			if w.conformsToAny(dv.profiles, v) {
				return true
			}
		}
	}
	return false
}

// propertyMatches answers the common discriminator on one property with a
// fixed or pattern value (url, system, code) without collecting values;
// done is false when the discriminator is not of that kind.
func propertyMatches(dv discriminatorValue, it node) (ok, done bool) {
	if dv.value == nil || len(dv.d.steps) != 1 || dv.d.steps[0].kind != "name" {
		return false, false
	}
	m, _ := it.value.(map[string]any)
	v, present := m[dv.d.steps[0].arg]
	if !present {
		return false, m != nil
	}
	if list, isList := v.([]any); isList {
		for _, x := range list {
			if valueMatches(dv, x) {
				return true, true
			}
		}
		return false, true
	}
	return valueMatches(dv, v), true
}

// valueMatches compares a value with a discriminator's fixed or pattern
// value.
func valueMatches(dv discriminatorValue, v any) bool {
	if dv.pattern {
		return patternMatches(dv.value, v)
	}
	return fixedMatches(dv.value, v)
}

func (w *walker) valueMatches(dv discriminatorValue, v node) bool {
	switch {
	case dv.value != nil && dv.pattern:
		return patternMatches(dv.value, v.value)
	case dv.value != nil:
		return fixedMatches(dv.value, v.value)
	}
	codes, _ := codingsOf(v)
	x, err := w.sc.expansion(w.ctx, dv.binding.valueSet)
	if err != nil || len(codes) == 0 {
		return false
	}
	member, _ := x.any(codes)
	return member
}

// conformsToAny reports whether v conforms to one of the profiles.
func (w *walker) conformsToAny(urls []string, v node) bool {
	for _, url := range urls {
		p, err := w.sc.profile(w.ctx, url)
		if err != nil || p == nil {
			continue
		}
		if m, ok := v.value.(map[string]any); ok && m["resourceType"] != nil {
			if !hasError(w.trial(func() { w.validateResource(p, m, v.loc()) })) {
				return true
			}
			continue
		}
		if !hasError(w.trial(func() { w.element(p, p.root, v) })) {
			return true
		}
	}
	return false
}
