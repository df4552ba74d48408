// Package fhirxml converts FHIR R4 resources between their JSON and XML
// representations (hl7.org/fhir/R4/xml.html), driven by the element order
// and types of the embedded official JSON schema.
package fhirxml

import (
	"fmt"
	"strings"
	"sync"

	"fhirstore/fhirschema"
)

// Namespace is the XML namespace of FHIR resources.
const Namespace = "http://hl7.org/fhir"

// XHTMLNamespace is the namespace of the narrative div.
const XHTMLNamespace = fhirschema.XHTMLNamespace

// kind says how a property is represented in XML.
type kind uint8

const (
	kindComplex   kind = iota // an element with child elements
	kindPrimitive             // an element with a value attribute
	kindXHTML                 // the narrative div, raw XHTML
	kindResource              // a resource wrapped in the property's element
)

// primitive is the JSON type of a primitive value.
type primitive uint8

const (
	primString primitive = iota
	primNumber
	primBoolean
)

// property is one element of a definition.
type property struct {
	name  string
	index int // position in the definition's element order
	kind  kind
	prim  primitive
	def   *definition // the type of a complex property
	array bool
	attr  bool // written as an XML attribute: element id, Extension.url
}

// definition is a resource or data type with its elements in schema order.
type definition struct {
	name     string
	resource bool
	props    []*property
	byName   map[string]*property
	attrs    []*property // the props written as attributes, in order
}

// model is the compiled schema: every definition by name.
type model struct {
	defs map[string]*definition
}

// theModel compiles the embedded schema once.
var theModel = sync.OnceValue(func() *model {
	m, err := compile(fhirschema.SchemaJSON)
	if err != nil {
		panic(fmt.Sprintf("fhirxml: embedded FHIR schema: %v", err))
	}
	return m
})

// compile builds the model from the JSON schema; the order of each
// definition's properties is the element order.
func compile(schema []byte) (*model, error) {
	root, err := parseJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	defsNode := root.get("definitions")
	if defsNode == nil || defsNode.kind != jsonObject {
		return nil, fmt.Errorf("schema has no definitions")
	}
	m := &model{defs: map[string]*definition{}}
	for i, name := range defsNode.keys {
		if props := defsNode.vals[i].get("properties"); props != nil {
			m.defs[name] = &definition{name: name, byName: map[string]*property{}}
		}
	}
	for i, name := range defsNode.keys {
		d := m.defs[name]
		if d == nil {
			continue
		}
		if err := m.fill(d, defsNode.vals[i].get("properties"), defsNode); err != nil {
			return nil, fmt.Errorf("definition %s: %w", name, err)
		}
	}
	return m, nil
}

// fill adds the properties of one definition in schema order.
func (m *model) fill(d *definition, props, defs *jsonNode) error {
	for i, name := range props.keys {
		spec := props.vals[i]
		if name == "resourceType" && spec.get("const") != nil {
			d.resource = true
			continue
		}
		if strings.HasPrefix(name, "_") {
			continue // merged into the primitive's element
		}
		p := &property{name: name, index: len(d.props)}
		if items := spec.get("items"); items != nil {
			p.array, spec = true, items
		}
		if err := m.classify(p, spec, defs); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		d.props = append(d.props, p)
		d.byName[name] = p
	}
	for _, p := range d.props {
		if (p.name == "id" && !d.resource) || (d.name == "Extension" && p.name == "url") {
			p.attr = true
			d.attrs = append(d.attrs, p)
		}
	}
	return nil
}

// classify sets a property's kind from its schema: a $ref to a data type, a
// primitive or the resource list, or an inline primitive (enum, pattern).
func (m *model) classify(p *property, spec, defs *jsonNode) error {
	ref := spec.get("$ref")
	if ref == nil {
		if spec.get("enum") != nil {
			p.kind, p.prim = kindPrimitive, primString
			return nil
		}
		if t := spec.get("type"); t != nil && t.kind == jsonString {
			p.kind, p.prim = kindPrimitive, primitiveOf(t.str)
			return nil
		}
		return fmt.Errorf("neither $ref, enum nor type")
	}
	target := strings.TrimPrefix(ref.str, "#/definitions/")
	switch {
	case target == "ResourceList":
		p.kind = kindResource
	case target == "xhtml":
		p.kind = kindXHTML
	case m.defs[target] != nil:
		p.kind, p.def = kindComplex, m.defs[target]
	default:
		t := defs.get(target)
		if t == nil {
			return fmt.Errorf("unknown $ref %s", ref.str)
		}
		p.kind, p.prim = kindPrimitive, primString
		if tt := t.get("type"); tt != nil {
			p.prim = primitiveOf(tt.str)
		}
	}
	return nil
}

// primitiveOf maps a JSON schema type to the JSON form of a primitive.
func primitiveOf(t string) primitive {
	switch t {
	case "number":
		return primNumber
	case "boolean":
		return primBoolean
	}
	return primString
}

// resourceDef returns the definition of a resource type, nil if name is none.
func (m *model) resourceDef(name string) *definition {
	if d := m.defs[name]; d != nil && d.resource {
		return d
	}
	return nil
}
