package profile

import (
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// node is one value met in the resource: a complex value (map), a
// primitive with its _name twin, or a resource.
type node struct {
	value any            // map[string]any, string, bool, json.Number; nil for a primitive with only extensions
	twin  map[string]any // the _name object of a primitive: id and extensions
	loc   string         // FHIRPath location: Observation.component[1].code
	// path is the element's path in its type's definition
	// (Observation.component), typ its FHIR type (CodeableConcept,
	// BackboneElement, Patient).
	path, typ string
	// tpath is the path within the nearest data type (Address.line), or
	// the path when the value is not inside one.
	tpath string
}

// childOf fills in the paths and type of it, a value of element c of n.
func childOf(it node, c *element, n node) node {
	it.path = n.path + "." + c.name
	base := n.tpath
	if complexTypes[n.typ] && n.typ != "BackboneElement" && n.typ != "Element" {
		base = n.typ
	}
	if base == "" {
		base = n.path
	}
	it.tpath = base + "." + c.name
	it.typ = itemType(c, it)
	return it
}

// object returns the map holding the node's children: the value, or the
// twin of a primitive.
func (n node) object() map[string]any {
	if m, ok := n.value.(map[string]any); ok {
		return m
	}
	return n.twin
}

// collect returns the values of child element c in the object m of the
// node at parent, in document order.
func collect(m map[string]any, c *element, parent node) []node {
	if m == nil {
		return nil
	}
	if !c.choice() {
		return collectKey(m, c.name, "", parent)
	}
	prefix := c.jsonName()
	var keys []string
	for k := range m {
		if len(k) > len(prefix) && strings.HasPrefix(k, prefix) && unicode.IsUpper(rune(k[len(prefix)])) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 1 {
		sort.Strings(keys)
	}
	var out []node
	for _, k := range keys {
		out = append(out, collectKey(m, k, choiceType(k[len(prefix):]), parent)...)
	}
	for k := range m {
		if strings.HasPrefix(k, "_"+prefix) && len(k) > len(prefix)+1 && unicode.IsUpper(rune(k[len(prefix)+1])) {
			if _, ok := m[k[1:]]; !ok {
				out = append(out, collectKey(m, k[1:], choiceType(k[len(prefix)+1:]), parent)...)
			}
		}
	}
	return out
}

// collectKey returns the values of property key (and its _key twin).
func collectKey(m map[string]any, key, typ string, parent node) []node {
	v, hasV := m[key]
	t, hasT := m["_"+key]
	if !hasV && !hasT {
		return nil
	}
	loc := parent.loc + "." + key
	if list, ok := v.([]any); ok || isList(t) {
		twins, _ := t.([]any)
		n := max(len(list), len(twins))
		out := make([]node, 0, n)
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
			out = append(out, node{value: item, twin: tw, loc: loc + "[" + strconv.Itoa(i) + "]", typ: typ})
		}
		return out
	}
	tw, _ := t.(map[string]any)
	return []node{{value: v, twin: tw, loc: loc, typ: typ}}
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
