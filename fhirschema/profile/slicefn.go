package profile

import (
	"fmt"

	"fhirstore/fhirschema/fhirpath"
)

// Slice answers FHIRPath's slice(structure, name): the items of in that
// belong to slice name of the profile at structure — the first element
// of that profile that has a slice of that name.
func (c conformance) Slice(call fhirpath.Call, in []fhirpath.Node, structure, name string) ([]fhirpath.Node, error) {
	p, err := c.w.sc.profile(c.w.ctx, structure)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownProfile, structure)
	}
	base, s := findSlice(p.root, name, 0)
	if s == nil {
		return nil, fmt.Errorf("the profile %s has no slice %s", structure, name)
	}
	sl := base.slicing
	if sl == nil {
		if sl = defaultSlicing(base); sl == nil {
			return nil, nil
		}
	}
	var out []fhirpath.Node
	for _, n := range in {
		if c.w.sliceMatches(s, sl, node{value: n.Value, typ: n.Type, index: -1}) {
			out = append(out, n)
		}
	}
	return out, nil
}

// ElementDefinition answers elementDefinition(): the compiled profiles do
// not keep the ElementDefinitions themselves, so it yields nothing.
func (c conformance) ElementDefinition(fhirpath.Call, []fhirpath.Node) ([]fhirpath.Node, error) {
	return nil, nil
}

// findSlice returns the first element under e (depth first) with a slice
// named name, and that slice.
func findSlice(e *element, name string, depth int) (*element, *element) {
	if depth > maxDepth {
		return nil, nil
	}
	for _, s := range e.slices {
		if s.sliceName == name {
			return e, s
		}
	}
	for _, c := range append(append([]*element(nil), e.children...), e.slices...) {
		if b, s := findSlice(c, name, depth+1); s != nil {
			return b, s
		}
	}
	return nil, nil
}
