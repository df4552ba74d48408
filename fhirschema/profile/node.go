package profile

import (
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// node is one value met in the resource: a complex value (map), a
// primitive with its _name twin, or a resource. Its location and paths are
// kept in parts and joined only when asked for.
type node struct {
	value any            // map[string]any, string, bool, json.Number; nil for a primitive with only extensions
	twin  map[string]any // the _name object of a primitive: id and extensions
	// holder is the object whose property the value is.
	holder map[string]any
	typ    string // its FHIR type: CodeableConcept, BackboneElement, Patient
	// at is the location of the value holding it, key its property and
	// index its place in the property's array (-1 for none); a root has
	// only at.
	at, key string
	index   int
	// ppath is the path of the holding value in its type's definition
	// (Observation.component) and pbase the path within the nearest data
	// type (Address); name is the element's name.
	ppath, pbase, name string
	// alias is the path of the element a contentReference names
	// (Questionnaire.item for Questionnaire.item.item), "" for none.
	alias string
}

// rootNode is the node of a resource at loc.
func rootNode(r map[string]any, loc, typ string) node {
	return node{value: r, at: loc, ppath: typ, typ: typ, index: -1}
}

// loc is the node's FHIRPath location: Observation.component[1].code.
func (n node) loc() string {
	if n.key == "" {
		return n.at
	}
	s := n.at + "." + n.key
	if n.index >= 0 {
		s += "[" + strconv.Itoa(n.index) + "]"
	}
	return s
}

// path is the element's path in its type's definition:
// Observation.component.code.
func (n node) path() string {
	if n.name == "" {
		return n.ppath
	}
	return n.ppath + "." + n.name
}

// tpath is the path within the nearest data type (Address.line), or the
// path when the value is not inside one.
func (n node) tpath() string {
	if n.name == "" {
		return n.pbase
	}
	return n.pbase + "." + n.name
}

// childBase is what the children of n take as pbase: n's type when it is
// a data type, else n's own tpath (or path).
func (n node) childBase() string {
	if complexTypes[n.typ] && n.typ != "BackboneElement" && n.typ != "Element" {
		return n.typ
	}
	if t := n.tpath(); t != "" {
		return t
	}
	return n.path()
}

// object returns the map holding the node's children: the value, or the
// twin of a primitive.
func (n node) object() map[string]any {
	if m, ok := n.value.(map[string]any); ok {
		return m
	}
	return n.twin
}

// parent is what the children of a node need of it, computed once.
type parent struct {
	loc, path, base string
}

func (n node) asParent() parent {
	if n.alias != "" {
		return parent{loc: n.loc(), path: n.alias, base: n.alias}
	}
	return parent{loc: n.loc(), path: n.path(), base: n.childBase()}
}

// childOf fills in the paths and type of it, a value of element c of the
// node pa describes.
func childOf(it node, c *element, pa parent) node {
	it.ppath, it.pbase, it.name = pa.path, pa.base, c.name
	if c.ref != nil {
		it.alias = c.ref.path // Questionnaire.item.item is Questionnaire.item again
	}
	it.typ = itemType(c, it)
	return it
}

// collect returns the values of child element c in the object m of the
// node at loc, in document order.
func collect(m map[string]any, c *element, loc string) []node {
	return appendValues(nil, m, c, loc)
}

// appendValues appends the values of child element c in the object m of
// the node at loc to dst, in document order.
func appendValues(dst []node, m map[string]any, c *element, loc string) []node {
	if m == nil {
		return dst
	}
	if !c.choice() {
		return appendKey(dst, m, c.name, c.twinKey, "", loc)
	}
	prefix := c.jsonName()
	var keys []string
	for k := range m {
		name := strings.TrimPrefix(k, "_")
		if len(name) <= len(prefix) || !strings.HasPrefix(name, prefix) || !unicode.IsUpper(rune(name[len(prefix)])) {
			continue
		}
		if _, ok := m[name]; ok && name != k {
			continue // the twin of a value met as such
		}
		keys = append(keys, name)
	}
	if len(keys) > 1 {
		sort.Strings(keys)
	}
	for _, k := range keys {
		typ := choiceType(k[len(prefix):])
		twin := ""
		if isPrimitive(typ) {
			twin = "_" + k
		}
		dst = appendKey(dst, m, k, twin, typ, loc)
	}
	return dst
}

// collectKey returns the values of property key (and its _key twin).
func collectKey(m map[string]any, key, typ string, loc string) []node {
	return appendKey(nil, m, key, "_"+key, typ, loc)
}

// appendKey appends the values of property key (and of its twin, "" for
// an element that cannot have one) to dst.
func appendKey(dst []node, m map[string]any, key, twinKey, typ string, loc string) []node {
	v, hasV := m[key]
	var t any
	hasT := false
	if twinKey != "" {
		t, hasT = m[twinKey]
	}
	if !hasV && !hasT {
		return dst
	}
	if list, ok := v.([]any); ok || isList(t) {
		twins, _ := t.([]any)
		n := max(len(list), len(twins))
		for i := 0; i < n; i++ {
			var item any
			if i < len(list) {
				item = list[i]
			}
			var tw map[string]any
			if i < len(twins) {
				tw, _ = twins[i].(map[string]any)
			}
			if item == nil && tw == nil {
				continue
			}
			dst = append(dst, node{value: item, twin: tw, holder: m, at: loc, key: key, index: i, typ: typ})
		}
		return dst
	}
	tw, _ := t.(map[string]any)
	return append(dst, node{value: v, twin: tw, holder: m, at: loc, key: key, index: -1, typ: typ})
}

func isList(v any) bool {
	_, ok := v.([]any)
	return ok
}

// primitiveTypes are the FHIR primitive types, named in lower camel case.
var primitiveTypes = map[string]bool{
	"base64Binary": true, "boolean": true, "canonical": true, "code": true, "date": true, "dateTime": true,
	"decimal": true, "id": true, "instant": true, "integer": true, "markdown": true, "oid": true,
	"positiveInt": true, "string": true, "time": true, "unsignedInt": true, "uri": true, "url": true,
	"uuid": true, "xhtml": true,
}

// choiceType names the type of a choice property from its suffix:
// Quantity, string (for String), dateTime (for DateTime).
func choiceType(suffix string) string {
	if suffix == "" {
		return ""
	}
	lower := strings.ToLower(suffix[:1]) + suffix[1:]
	if primitiveTypes[lower] {
		return lower
	}
	return suffix
}

// isPrimitive reports whether typ is a FHIR primitive type.
func isPrimitive(typ string) bool { return primitiveTypes[typ] }
