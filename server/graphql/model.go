package graphql

import (
	"strings"
	"unicode"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// systemType is the type of a system-level query's root, whose fields are
// [type](id:), [type]List(…) and [type]Connection(…).
const systemType = "#system"

// anyResource is the model's type of an element holding a whole resource
// (contained, Bundle.entry.resource): its items are typed by their
// resourceType.
const anyResource = "ResourceList"

// pseudoTypes are the types GraphQL adds to FHIR's: a search's connection
// and its edges.
var pseudoTypes = map[string]map[string]element{
	"#Connection": {
		"count": {typ: "integer"}, "offset": {typ: "integer"}, "pagesize": {typ: "integer"},
		"first": {typ: "string"}, "previous": {typ: "string"}, "next": {typ: "string"}, "last": {typ: "string"},
		"edges": {typ: "#Edge", repeats: true},
	},
	"#Edge": {"mode": {typ: "code"}, "score": {typ: "decimal"}, "resource": {typ: anyResource}},
}

// element is a field of a type: its JSON key, type and cardinality.
type element struct {
	key     string
	typ     string
	repeats bool
}

// elementOf finds the field name of typ: an element of the FHIR model, a
// choice element by its typed name (valueQuantity), a primitive's _name
// twin (its id and extensions), or a field of a pseudo type.
func elementOf(typ, name string) (element, bool) {
	p, ok := pseudoTypes[typ]
	if !ok {
		p, ok = metaTypes[typ]
	}
	if ok {
		el, ok := p[name]
		el.key = name
		return el, ok
	}
	if base, ok := strings.CutPrefix(name, "_"); ok {
		el, ok := elementOf(typ, base)
		if !ok || !isPrimitive(el.typ) {
			return element{}, false
		}
		return element{key: name, typ: "Element", repeats: el.repeats}, true
	}
	if types, repeats, ok := fhirschema.Element(typ, name); ok && len(types) == 1 {
		return element{key: name, typ: types[0], repeats: repeats}, true
	}
	stem, choice, ok := fhirpath.ChoiceOf(name)
	if !ok {
		return element{}, false
	}
	types, repeats, ok := fhirschema.Element(typ, stem)
	if !ok {
		return element{}, false
	}
	for _, t := range types {
		if strings.EqualFold(t, choice) {
			return element{key: name, typ: t, repeats: repeats}, true
		}
	}
	return element{}, false
}

// isPrimitive tells a FHIR primitive type: their names alone start with a
// lower-case letter.
func isPrimitive(typ string) bool {
	return typ != "" && unicode.IsLower(rune(typ[0]))
}

// pathType is the FHIRPath name of a model type: Patient.contact for the
// backbone element Patient_Contact.
func pathType(typ string) string {
	parts := strings.Split(typ, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToLower(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, ".")
}

// node is a value being selected from: a resource, an element's value or
// a pseudo object, with its type and the resource that holds it.
type node struct {
	value any
	typ   string
	res   map[string]any
	// dry marks the empty stand-in of an absent element, selected only to
	// check the query's names.
	dry bool
}

// resourceNode is the node of a whole resource.
func resourceNode(r map[string]any) node {
	rt, _ := r["resourceType"].(string)
	return node{value: r, typ: rt, res: r}
}

// isResource tells a node holding a whole resource.
func (n node) isResource() bool {
	return fhirschema.IsResourceType(n.typ)
}

// items are the values of a JSON property: each repetition of an array,
// or the one value.
func items(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	}
	return []any{v}
}
