package profile

import (
	"encoding/json"
	"fmt"
	"reflect"
	"unsafe"

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

// ElementDefinition answers elementDefinition(): for each item, the
// ElementDefinition it is validated against in the profile applied to the
// resource at hand (a slice's when it is in one; for the parts of a value
// the profile hands over to a type or extension profile, that profile's;
// where no profile spells the element out, its core type's, such as
// Reference.display), as an object of type ElementDefinition. Items are
// found by identity; a primitive, which has none, by its value and type,
// and only where no other element holds an equal one. An item not in the
// resource (computed, or of a resource it refers to) yields nothing.
func (c conformance) ElementDefinition(_ fhirpath.Call, in []fhirpath.Node) ([]fhirpath.Node, error) {
	t := c.w.elementTrace()
	if t == nil {
		return nil, nil
	}
	var out []fhirpath.Node
	for _, n := range in {
		at, ok := t.find(n)
		if !ok {
			continue
		}
		ed, err := c.w.sc.elementDefinition(c.w.ctx, at.p, at.el)
		if err != nil {
			return nil, err
		}
		out = append(out, fhirpath.Node{Value: ed, Type: "ElementDefinition"})
	}
	return out, nil
}

// elementTrace records the element each value of a resource is validated
// against.
type elementTrace struct {
	level   int // the trial depth of the tracing walk: deeper trials are guesses
	objects map[unsafe.Pointer]traced
	// primitives are the elements of each place a primitive value is in,
	// and places those places by value.
	primitives map[place]traced
	places     map[any][]place
}

// place is where a primitive is: its holder's property key, at index.
type place struct {
	holder unsafe.Pointer
	key    string
	index  int
}

// traced is one value's element, in profile p.
type traced struct {
	p   *compiled
	el  *element
	typ string
}

type traceKey struct {
	p        *compiled
	resource unsafe.Pointer
}

// elementTrace returns the trace of the resource at hand against the
// profile applied to it, walking it once per validation.
func (w *walker) elementTrace() *elementTrace {
	if w.top == nil || w.resource == nil || w.trace != nil {
		return nil
	}
	key := traceKey{w.top, reflect.ValueOf(w.resource).UnsafePointer()}
	if t := w.traces[key]; t != nil {
		return t
	}
	t := &elementTrace{objects: map[unsafe.Pointer]traced{}, primitives: map[place]traced{}, places: map[any][]place{}}
	w.trace = t
	typ, _ := w.resource["resourceType"].(string)
	w.trial(func() {
		t.level = w.trials
		w.validateResource(w.top, w.resource, typ)
	})
	w.trace = nil
	if w.traces == nil {
		w.traces = map[traceKey]*elementTrace{}
	}
	w.traces[key] = t
	return t
}

// add records that n is validated against el of p, unless a trial
// (a slice or a type profile tried for a match) is under way, or n has
// been met before (the outer element, then its type's profile).
func (t *elementTrace) add(w *walker, p *compiled, el *element, n node) {
	if w.trials != t.level {
		return
	}
	at := traced{p: p, el: el, typ: n.typ}
	switch v := n.value.(type) {
	case map[string]any:
		k := reflect.ValueOf(v).UnsafePointer()
		if _, seen := t.objects[k]; !seen {
			t.objects[k] = at
		}
	case string, bool, json.Number:
		k := place{reflect.ValueOf(n.holder).UnsafePointer(), n.key, n.index}
		if _, seen := t.primitives[k]; !seen {
			t.primitives[k] = at
			t.places[v] = append(t.places[v], k)
		}
	}
}

// find returns the element of a FHIRPath item.
func (t *elementTrace) find(n fhirpath.Node) (traced, bool) {
	switch v := n.Value.(type) {
	case map[string]any:
		at, ok := t.objects[reflect.ValueOf(v).UnsafePointer()]
		return at, ok
	case string, bool, json.Number:
		var found traced
		for _, k := range t.places[v] {
			at := t.primitives[k]
			switch {
			case n.Type != "" && n.Type != at.typ:
			case found.el == nil:
				found = at
			case found.el != at.el:
				return traced{}, false // equal values under two elements
			}
		}
		return found, found.el != nil
	}
	return traced{}, false
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
