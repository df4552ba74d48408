package terminology

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"fhirstore/fhirschema/profile"
)

// maxDepth bounds the nesting a walk follows (contained resources,
// extensions in extensions).
const maxDepth = 64

// node is what the walk reads of a core element definition, with its
// children by the names they have in JSON.
type node struct {
	types    []string
	strength string
	valueSet string
	// children holds the elements the same definition lists under this
	// one (a backbone element's, or the root's), a choice element under
	// each of its JSON names (valueCoding).
	children map[string]child
	// ref is the path of the element whose definition this one reuses
	// (contentReference).
	ref string
}

// child is an element as a JSON property names it: its node and type.
type child struct {
	n    *node
	typ  string
	name string // the FHIRPath name: value.ofType(Coding) for valueCoding
}

// typeDefs holds the core definitions read so far, by type name: the
// root node, or nil for a name the core does not define. The core never
// changes.
var typeDefs sync.Map

// coreType returns the root node of the core definition of the resource
// or data type name.
func coreType(name string) *node {
	if v, ok := typeDefs.Load(name); ok {
		return v.(*node)
	}
	var root *node
	sd, err := profile.Core().Resource(context.Background(), "StructureDefinition", "http://hl7.org/fhir/StructureDefinition/"+name)
	if err == nil && sd != nil {
		root = indexType(sd)
	}
	typeDefs.Store(name, root)
	return root
}

// indexType builds the node tree of a StructureDefinition's snapshot.
func indexType(sd map[string]any) *node {
	byPath := map[string]*node{}
	var root *node
	var refs []*node
	snap, _ := sd["snapshot"].(map[string]any)
	for _, e := range objects(snap["element"]) {
		path, _ := e["path"].(string)
		if path == "" || byPath[path] != nil {
			continue
		}
		n := &node{}
		for _, t := range objects(e["type"]) {
			if code, _ := t["code"].(string); code != "" {
				n.types = append(n.types, code)
			}
		}
		if b, ok := e["binding"].(map[string]any); ok {
			n.strength, _ = b["strength"].(string)
			n.valueSet, _ = b["valueSet"].(string)
		}
		if ref, _ := e["contentReference"].(string); ref != "" {
			n.ref = strings.TrimPrefix(ref, "#")
			refs = append(refs, n)
		}
		byPath[path] = n
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			root = n
			continue
		}
		parent := byPath[path[:i]]
		if parent == nil {
			continue
		}
		if parent.children == nil {
			parent.children = map[string]child{}
		}
		name := path[i+1:]
		if base, ok := strings.CutSuffix(name, "[x]"); ok {
			for _, t := range n.types {
				parent.children[base+strings.ToUpper(t[:1])+t[1:]] = child{n: n, typ: t, name: base + ".ofType(" + t + ")"}
			}
			continue
		}
		typ := ""
		if len(n.types) == 1 {
			typ = n.types[0]
		}
		parent.children[name] = child{n: n, typ: typ, name: name}
	}
	for _, n := range refs {
		if target := byPath[n.ref]; target != nil {
			n.children = target.children
		}
	}
	return root
}

// loc is a FHIRPath location built as the walk goes down, rendered only
// when an issue needs it.
type loc struct {
	parent *loc
	name   string
	index  int // -1 for a single value
}

func (l *loc) String() string {
	if l == nil {
		return ""
	}
	s := l.name
	if l.index >= 0 {
		s += "[" + strconv.Itoa(l.index) + "]"
	}
	if l.parent == nil {
		return s
	}
	return l.parent.String() + "." + s
}

// at renders l followed by more.
func (l *loc) at(more string) string {
	if more == "" {
		return l.String()
	}
	return l.String() + "." + more
}

// resource walks a resource of type typ at l.
func (r *run) resource(typ string, l *loc, res map[string]any, depth int) {
	root := coreType(typ)
	if root == nil || depth > maxDepth {
		return
	}
	r.object(root, l, res, depth)
}

// object walks the properties of an element whose definition is n. Only
// objects can hold codes: primitives are passed over without a look-up
// (a code's value is the schema's to check).
func (r *run) object(n *node, l *loc, obj map[string]any, depth int) {
	for key, v := range obj {
		if r.err != nil {
			return
		}
		if len(key) > 1 && key[0] == '_' {
			r.extendedPrimitive(n, l, key[1:], obj)
			continue
		}
		switch v := v.(type) {
		case map[string]any:
			if c, ok := n.children[key]; ok {
				r.value(c, loc{l, c.name, -1}, v, depth)
			}
		case []any:
			if len(v) == 0 {
				continue
			}
			if _, ok := v[0].(map[string]any); !ok {
				continue
			}
			c, ok := n.children[key]
			if !ok {
				continue
			}
			for i, item := range v {
				if m, ok := item.(map[string]any); ok {
					r.value(c, loc{l, c.name, i}, m, depth)
				}
			}
		}
	}
}

// value checks one object value of an element and walks into it.
func (r *run) value(c child, here loc, obj map[string]any, depth int) {
	if depth > maxDepth {
		return
	}
	l := &here
	if c.n.strength == "required" || c.n.strength == "extensible" {
		r.binding(c.n, c.typ, l, obj)
	}
	switch c.typ {
	case "Coding":
		r.coding(l, obj)
		return
	case "Identifier":
		r.identifierRule(l, obj)
	case "Narrative", "Quantity", "Reference", "Period", "HumanName", "ContactPoint", "Address", "Attachment":
		// nothing coded beyond what the schema checks, unless extended
		if _, ok := obj["extension"]; !ok {
			return
		}
	case "Resource":
		rt, _ := obj["resourceType"].(string)
		r.resource(rt, l, obj, depth+1)
		return
	}
	switch {
	case c.n.children != nil:
		r.object(c.n, l, obj, depth+1)
	case c.typ != "" && c.typ[0] >= 'A' && c.typ[0] <= 'Z':
		if t := coreType(c.typ); t != nil {
			r.object(t, l, obj, depth+1)
		}
	}
}

// extendedPrimitive checks a primitive given by its extensions (_name):
// an element with a required binding needs its code even so.
func (r *run) extendedPrimitive(n *node, l *loc, name string, obj map[string]any) {
	c, ok := n.children[name]
	if !ok || c.typ != "code" || c.n.strength != "required" {
		return
	}
	ext := obj["_"+name]
	val := obj[name]
	if list, ok := ext.([]any); ok {
		vals, _ := val.([]any)
		for i, e := range list {
			if e == nil {
				continue
			}
			if i >= len(vals) || vals[i] == nil {
				r.errorf((&loc{l, c.name, i}).String(), "no code is given, and a code from the value set %s is required", c.n.valueSet)
			}
		}
		return
	}
	if ext != nil && val == nil {
		r.errorf((&loc{l, c.name, -1}).String(), "no code is given, and a code from the value set %s is required", c.n.valueSet)
	}
}
