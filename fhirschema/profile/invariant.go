package profile

import (
	"context"
	"fmt"

	"fhirstore/fhirschema/fhirpath"
)

// invariants evaluates the constraints the profile adds to the element
// (those of the core definitions are the base validator's) on the value:
// one that is not true is an issue of its severity naming its key.
func (w *walker) invariants(p *compiled, el *element, n node) {
	if len(el.constraints) == 0 || w.trace != nil {
		return // none, or the walk only traces elements
	}
	env := &fhirpath.Env{Resource: w.resource, RootResource: w.rootResource(), Terminology: terminology{w}, Conformance: conformance{w}}
	focus := []fhirpath.Node{w.fhirpathNode(n, env)}
	for _, c := range el.constraints {
		if c.err != nil {
			w.issue("warning", "invariant", n.loc(), fmt.Sprintf("%s: the expression %q cannot be compiled: %v (profile %s)", c.key, c.expression, c.err, p.url), c.key, p.url)
			continue
		}
		out, err := c.expr.Eval(w.ctx, env, focus)
		if err != nil {
			w.issue("warning", "invariant", n.loc(), fmt.Sprintf("%s: the invariant could not be evaluated: %v (profile %s)", c.key, err, p.url), c.key, p.url)
			continue
		}
		if holds(out) {
			continue
		}
		sev := "error"
		if c.severity == "warning" {
			sev = "warning"
		}
		w.issue(sev, "invariant", n.loc(), fmt.Sprintf("%s: %s (profile %s)", c.key, c.human, p.url), c.key, p.url)
	}
}

// holds reads an invariant's result: true, or empty (nothing to check).
func holds(out []fhirpath.Node) bool {
	if len(out) == 0 {
		return true
	}
	b, ok := out[0].Value.(bool)
	return len(out) == 1 && ok && b
}

// rootResource is %rootResource: the Bundle at hand, or the resource.
func (w *walker) rootResource() map[string]any {
	if w.root != nil {
		return w.root
	}
	return w.resource
}

// fhirpathNode is the FHIRPath node of a value.
func (w *walker) fhirpathNode(n node, env *fhirpath.Env) fhirpath.Node {
	if m, ok := n.value.(map[string]any); ok {
		if _, ok := m["resourceType"].(string); ok {
			return fhirpath.ResourceNode(m)
		}
	}
	typ := n.typ
	if typ == "BackboneElement" {
		typ = n.path()
	}
	if n.twin != nil {
		if p, ok := w.primitiveNode(n, env); ok {
			p.Type = typ
			return p
		}
	}
	return fhirpath.Node{Value: n.value, Type: typ}
}

// navigations compiles the one-step navigations that reach primitives.
var navigations = fhirpath.NewCache(4096)

// primitiveNode is the node of a primitive with extensions as the engine
// makes it, navigating from the object holding it, so that extension()
// sees the extensions of its _name twin.
func (w *walker) primitiveNode(n node, env *fhirpath.Env) (fhirpath.Node, bool) {
	if n.holder == nil || n.key == "" {
		return fhirpath.Node{}, false
	}
	e, err := navigations.Compile("`" + n.key + "`")
	if err != nil {
		return fhirpath.Node{}, false
	}
	out, err := e.Eval(w.ctx, env, []fhirpath.Node{{Value: n.holder}})
	i := max(n.index, 0)
	if err != nil || i >= len(out) {
		return fhirpath.Node{}, false
	}
	return out[i], true
}

// terminology answers memberOf() from the definitions' value sets.
type terminology struct{ w *walker }

// MemberOf reports whether system|code is in the value set at url.
func (t terminology) MemberOf(ctx context.Context, system, code, url string) (member, known bool, err error) {
	x, err := t.w.sc.expansion(ctx, url)
	if err != nil {
		return false, false, err
	}
	m, why := x.contains(coding{system, code})
	return m, m || why == "", nil
}

// conformance answers conformsTo() by validating against the profile.
type conformance struct{ w *walker }

// ConformsTo reports whether resource conforms to the profile at url.
func (c conformance) ConformsTo(ctx context.Context, resource map[string]any, url string) (bool, error) {
	p, err := c.w.sc.profile(ctx, url)
	if err != nil {
		return false, err
	}
	if p == nil {
		return false, fmt.Errorf("%w: %s", ErrUnknownProfile, url)
	}
	typ, _ := resource["resourceType"].(string)
	return !hasError(c.w.trial(func() { c.w.validateResource(p, resource, typ) })), nil
}
