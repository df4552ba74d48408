package fhirxml

import (
	"encoding/xml"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"fhirstore/fhirschema"
)

// WriteOptions tune the XML rendering.
type WriteOptions struct {
	// Indent puts each element on its own line, two spaces per level.
	Indent bool
	// OnUnknown, when set, is told the path of each property the
	// definitions do not have (kept by lenient handling), which is then
	// left out; when nil such a property is an error.
	OnUnknown func(path string)
}

// ErrNotResource is FromJSON's answer for JSON that is not an object with a
// resourceType: a document that has no XML form.
var ErrNotResource = errors.New("not a FHIR resource")

// FromJSON renders a FHIR JSON resource as FHIR XML: elements in the order
// of the definitions, primitives as value attributes, the narrative div as
// raw XHTML. It fails with ErrNotResource for JSON without a resourceType,
// and with an *Error for a resource of an unknown type or with properties
// XML cannot carry.
func FromJSON(data []byte, opts WriteOptions) ([]byte, error) {
	n, err := parseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("render XML: %w", err)
	}
	if rt := n.get("resourceType"); rt == nil || rt.kind != jsonString {
		return nil, ErrNotResource
	}
	w := &xmlWriter{m: theModel(), indent: opts.Indent, onUnknown: opts.OnUnknown, b: make([]byte, 0, len(data)+len(data)/2)}
	w.b = append(w.b, `<?xml version="1.0" encoding="UTF-8"?>`...)
	if opts.Indent {
		w.b = append(w.b, '\n')
	}
	if err := w.resource(n, "", true); err != nil {
		return nil, err
	}
	if opts.Indent {
		w.b = append(w.b, '\n')
	}
	return w.b, nil
}

// xmlWriter appends XML for JSON nodes.
type xmlWriter struct {
	m         *model
	b         []byte
	indent    bool
	depth     int
	onUnknown func(path string)
}

// member is a property of an object with its value and its _name sibling.
type member struct {
	p      *property
	v, ext *jsonNode
}

// newline starts a line at the current depth when indenting.
func (w *xmlWriter) newline() {
	if !w.indent {
		return
	}
	w.b = append(w.b, '\n')
	for range w.depth {
		w.b = append(w.b, ' ', ' ')
	}
}

// resource writes <Type>…</Type>; the root declares the FHIR namespace.
func (w *xmlWriter) resource(n *jsonNode, path string, root bool) error {
	if n.kind != jsonObject {
		return errorAt(path, "a resource must be a JSON object")
	}
	rt := n.get("resourceType")
	if rt == nil || rt.kind != jsonString {
		return errorAt(path, "the resource has no resourceType")
	}
	d := w.m.resourceDef(rt.str)
	if d == nil {
		return errorAt(path, "unknown resource type "+strconv.Quote(rt.str))
	}
	if path == "" {
		path = rt.str
	}
	w.b = append(w.b, '<')
	w.b = append(w.b, d.name...)
	if root {
		w.b = append(w.b, ` xmlns="`+Namespace+`"`...)
	}
	return w.content(d, n, path, d.name)
}

// content ends the open start tag of element name, then writes its child
// elements and its end tag (or ends the tag with "/>" when it has none).
func (w *xmlWriter) content(d *definition, n *jsonNode, path, name string) error {
	members, err := w.members(d, n, path)
	if err != nil {
		return err
	}
	if len(members) == 0 {
		w.b = append(w.b, '/', '>')
		return nil
	}
	w.b = append(w.b, '>')
	w.depth++
	for _, mb := range members {
		if err := w.property(mb, path+"."+mb.p.name); err != nil {
			return err
		}
	}
	w.depth--
	w.newline()
	w.b = append(w.b, '<', '/')
	w.b = append(w.b, name...)
	w.b = append(w.b, '>')
	return nil
}

// members lists the child elements of an object in definition order,
// pairing each primitive with its _name sibling.
func (w *xmlWriter) members(d *definition, n *jsonNode, path string) ([]member, error) {
	out := make([]member, 0, len(n.keys))
	for i, k := range n.keys {
		if k == "resourceType" && d.resource {
			continue
		}
		name, ext := strings.CutPrefix(k, "_")
		p := d.byName[name]
		if p == nil || (ext && p.kind != kindPrimitive) {
			if w.onUnknown != nil {
				w.onUnknown(path + "." + k)
				continue
			}
			return nil, errorAt(path+"."+k, "unknown property "+strconv.Quote(k))
		}
		if p.attr {
			if ext {
				return nil, errorAt(path+"."+k, "XML cannot carry extensions of "+strconv.Quote(name))
			}
			continue
		}
		j := slices.IndexFunc(out, func(m member) bool { return m.p == p })
		if j < 0 {
			out = append(out, member{p: p})
			j = len(out) - 1
		}
		if ext {
			out[j].ext = n.vals[i]
		} else {
			out[j].v = n.vals[i]
		}
	}
	slices.SortFunc(out, func(a, b member) int { return a.p.index - b.p.index })
	return out, nil
}

// property writes every occurrence of one property.
func (w *xmlWriter) property(mb member, path string) error {
	if !mb.p.array {
		if isArray(mb.v) || isArray(mb.ext) {
			return errorAt(path, "an array where a single value belongs")
		}
		return w.item(mb.p, nonNull(mb.v), nonNull(mb.ext), path)
	}
	vs, err := itemsOf(mb.v, path)
	if err != nil {
		return err
	}
	es, err := itemsOf(mb.ext, path)
	if err != nil {
		return err
	}
	for i := range max(len(vs), len(es)) {
		var v, ext *jsonNode
		if i < len(vs) {
			v = nonNull(vs[i])
		}
		if i < len(es) {
			ext = nonNull(es[i])
		}
		if err := w.item(mb.p, v, ext, path+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	return nil
}

func isArray(n *jsonNode) bool { return n != nil && n.kind == jsonArray }

// nonNull maps JSON null to nil.
func nonNull(n *jsonNode) *jsonNode {
	if n == nil || n.kind == jsonNull {
		return nil
	}
	return n
}

// itemsOf returns the items of an array property (none when absent).
func itemsOf(n *jsonNode, path string) ([]*jsonNode, error) {
	if n == nil {
		return nil, nil
	}
	if n.kind != jsonArray {
		return nil, errorAt(path, "a single value where an array belongs")
	}
	return n.items, nil
}

// item writes one element of a property.
func (w *xmlWriter) item(p *property, v, ext *jsonNode, path string) error {
	if v == nil && ext == nil {
		return errorAt(path, "null without a value, id or extension")
	}
	if ext != nil && p.kind != kindPrimitive {
		return errorAt(path, "only primitives have _ siblings")
	}
	w.newline()
	switch p.kind {
	case kindPrimitive:
		return w.primitive(p, v, ext, path)
	case kindComplex:
		return w.complex(p, v, path)
	case kindResource:
		return w.wrapped(p, v, path)
	}
	return w.div(v, path)
}

// primitive writes <name id=".." value="..">extensions</name>.
func (w *xmlWriter) primitive(p *property, v, ext *jsonNode, path string) error {
	w.startTag(p.name)
	if ext != nil {
		if ext.kind != jsonObject {
			return errorAt(path, "the _ sibling must be an object")
		}
		if err := w.attributes(w.m.defs["Element"], ext, path); err != nil {
			return err
		}
	}
	if v != nil {
		text, err := primitiveText(p, v)
		if err != nil {
			return errorAt(path, err.Error())
		}
		w.attr("value", text)
	}
	if ext == nil {
		w.b = append(w.b, '/', '>')
		return nil
	}
	return w.content(w.m.defs["Element"], ext, path, p.name)
}

// primitiveText is the value attribute of a JSON primitive of p's type.
func primitiveText(p *property, v *jsonNode) (string, error) {
	switch {
	case p.prim == primString && v.kind == jsonString:
		return v.str, nil
	case p.prim == primNumber && v.kind == jsonNumber:
		return v.str, nil
	case p.prim == primBoolean && v.kind == jsonBool:
		return strconv.FormatBool(v.b), nil
	}
	return "", fmt.Errorf("%s needs a JSON %s", p.name, [...]string{"string", "number", "boolean"}[p.prim])
}

// complex writes <name id=".." url="..">children</name>.
func (w *xmlWriter) complex(p *property, v *jsonNode, path string) error {
	if v.kind != jsonObject {
		return errorAt(path, "must be a JSON object")
	}
	w.startTag(p.name)
	if err := w.attributes(p.def, v, path); err != nil {
		return err
	}
	return w.content(p.def, v, path, p.name)
}

// attributes writes the properties of d that XML carries as attributes.
func (w *xmlWriter) attributes(d *definition, v *jsonNode, path string) error {
	for _, a := range d.attrs {
		av := v.get(a.name)
		if av == nil {
			continue
		}
		if av.kind != jsonString {
			return errorAt(path+"."+a.name, "must be a JSON string")
		}
		w.attr(a.name, av.str)
	}
	return nil
}

// wrapped writes <name><Type>…</Type></name> for contained resources,
// Bundle entries and outcomes.
func (w *xmlWriter) wrapped(p *property, v *jsonNode, path string) error {
	w.startTag(p.name)
	w.b = append(w.b, '>')
	w.depth++
	w.newline()
	if err := w.resource(v, path, false); err != nil {
		return err
	}
	w.depth--
	w.newline()
	w.b = append(w.b, "</"...)
	w.b = append(w.b, p.name...)
	w.b = append(w.b, '>')
	return nil
}

// div writes the narrative XHTML as it is, after checking it is one
// well-formed element; a div without its namespace gets it.
func (w *xmlWriter) div(v *jsonNode, path string) error {
	if v.kind != jsonString {
		return errorAt(path, "the narrative div must be a JSON string")
	}
	declared, err := fhirschema.CheckXHTML(v.str)
	if err != nil {
		return errorAt(path, "the narrative is not well-formed XHTML: "+err.Error())
	}
	div := v.str
	if strings.Contains(div, "&") {
		div = numericEntities(div)
	}
	if declared {
		w.b = append(w.b, div...)
		return nil
	}
	w.b = append(w.b, `<div xmlns="`+XHTMLNamespace+`"`...)
	w.b = append(w.b, div[len("<div"):]...)
	return nil
}

// namedEntity is a named character reference.
var namedEntity = regexp.MustCompile(`&([A-Za-z][A-Za-z0-9]*);`)

// numericEntities rewrites the XHTML named entities of a narrative
// (&nbsp;) as numeric character references (&#160;): an XML document
// without a DTD knows only XML's five.
func numericEntities(s string) string {
	return namedEntity.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		switch name {
		case "amp", "lt", "gt", "quot", "apos":
			return m
		}
		text, ok := xml.HTMLEntity[name]
		if !ok {
			return m
		}
		var b strings.Builder
		for _, r := range text {
			fmt.Fprintf(&b, "&#%d;", r)
		}
		return b.String()
	})
}

// startTag writes "<name" (the caller closes the tag).
func (w *xmlWriter) startTag(name string) {
	w.b = append(w.b, '<')
	w.b = append(w.b, name...)
}

// attr writes ` name="escaped value"`.
func (w *xmlWriter) attr(name, value string) {
	w.b = append(w.b, ' ')
	w.b = append(w.b, name...)
	w.b = append(w.b, '=', '"')
	w.b = appendEscaped(w.b, value)
	w.b = append(w.b, '"')
}

// appendEscaped escapes an attribute value; characters XML 1.0 cannot
// carry become U+FFFD, as in encoding/xml.
func appendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch {
		case r == '&':
			esc = "&amp;"
		case r == '<':
			esc = "&lt;"
		case r == '>':
			esc = "&gt;"
		case r == '"':
			esc = "&quot;"
		case r == '\t':
			esc = "&#x9;"
		case r == '\n':
			esc = "&#xA;"
		case r == '\r':
			esc = "&#xD;"
		case !isXMLChar(r) || (r == utf8.RuneError && size == 1):
			esc = "\uFFFD"
		default:
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, esc...)
		i += size
		start = i
	}
	return append(b, s[start:]...)
}

// isXMLChar reports whether r is a Char of XML 1.0.
func isXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		(r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}
