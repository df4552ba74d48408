package fhirxml

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxDepth bounds the nesting of elements, like the JSON reader's limit.
const MaxDepth = 100

// xsiNamespace is XML Schema's instance namespace (xsi:schemaLocation),
// tolerated on resource elements.
const xsiNamespace = "http://www.w3.org/2001/XMLSchema-instance"

// ToJSON converts one FHIR XML resource to compact FHIR JSON with keys in
// definition order (resourceType first). Anything that is not a well-formed
// FHIR XML resource — a DOCTYPE or entity declaration, a foreign namespace,
// an unknown element or attribute, text outside value attributes, nesting
// deeper than MaxDepth — fails with an *Error naming the element.
func ToJSON(data []byte) ([]byte, error) {
	n, err := readXML(data)
	if err != nil {
		return nil, err
	}
	return appendJSON(make([]byte, 0, len(data)), n), nil
}

// readXML parses a FHIR XML document into a JSON tree.
func readXML(data []byte) (*jsonNode, error) {
	r := &xmlReader{m: theModel(), data: data, d: newDecoder(bytes.NewReader(data))}
	return r.document()
}

// newDecoder is a strict decoder that knows no entities beyond XML's five:
// an XML document declares no others (a narrative written in JSON may use
// XHTML's, which the XML writer turns into numeric references).
func newDecoder(rd io.Reader) *xml.Decoder {
	d := xml.NewDecoder(rd)
	d.Strict = true
	return d
}

// xmlReader builds JSON from the tokens of one document.
type xmlReader struct {
	m     *model
	data  []byte
	d     *xml.Decoder
	depth int
	// tokStart is the input offset where the last token began.
	tokStart int64
}

// errorf is an Error at path on the decoder's current line.
func (r *xmlReader) errorf(path, format string, args ...any) *Error {
	line, _ := r.d.InputPos()
	return &Error{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// next returns the next token inside an element: the end of the input is
// an error there.
func (r *xmlReader) next(path string) (xml.Token, error) {
	tok, err := r.token(path)
	if err == io.EOF {
		return nil, r.errorf(path, "the document ends early")
	}
	return tok, err
}

// token returns the next token or io.EOF, refusing declarations (DOCTYPE,
// ENTITY) and turning syntax errors into *Error.
func (r *xmlReader) token(path string) (xml.Token, error) {
	r.tokStart = r.d.InputOffset()
	tok, err := r.d.Token()
	if err == io.EOF {
		return nil, err
	}
	var se *xml.SyntaxError
	if errors.As(err, &se) {
		return nil, &Error{Path: path, Line: se.Line, Msg: "not well-formed XML: " + se.Msg}
	}
	if err != nil {
		return nil, r.errorf(path, "not well-formed XML: %v", err)
	}
	if _, ok := tok.(xml.Directive); ok {
		return nil, r.errorf(path, "DOCTYPE and entity declarations are not allowed")
	}
	return tok, nil
}

// document reads the prolog, the root resource and the epilog.
func (r *xmlReader) document() (*jsonNode, error) {
	var root *jsonNode
	for {
		tok, err := r.token("")
		if err == io.EOF {
			if root == nil {
				return nil, r.errorf("", "the document has no resource element")
			}
			return root, nil
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if root != nil {
				return nil, r.errorf(t.Name.Local, "the document has more than one root element")
			}
			if root, err = r.root(t); err != nil {
				return nil, err
			}
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return nil, r.errorf("", "text outside the resource element")
			}
		}
	}
}

// root reads the resource element of the document.
func (r *xmlReader) root(t xml.StartElement) (*jsonNode, error) {
	if t.Name.Space != Namespace {
		return nil, r.errorf(t.Name.Local, "the root element must be in the namespace %s, not %s", Namespace, namespaceName(t.Name.Space))
	}
	d := r.m.resourceDef(t.Name.Local)
	if d == nil {
		return nil, r.errorf(t.Name.Local, "unknown resource type %q", t.Name.Local)
	}
	r.depth = 1
	return r.object(d, t, t.Name.Local, nil)
}

func namespaceName(ns string) string {
	if ns == "" {
		return "no namespace"
	}
	return strconv.Quote(ns)
}

// valueAttr receives the value attribute of a primitive.
type valueAttr struct {
	text string
	ok   bool
}

// slot collects the occurrences of one property.
type slot struct {
	vals, exts []*jsonNode
}

// object reads an element of definition d: its attributes, its children in
// any order, and builds the JSON object in definition order. value, when
// not nil, accepts a value attribute (primitives).
func (r *xmlReader) object(d *definition, t xml.StartElement, path string, value *valueAttr) (*jsonNode, error) {
	slots := make([]slot, len(d.props))
	if err := r.attributes(d, t, path, value, slots); err != nil {
		return nil, err
	}
	if err := r.children(d, path, slots); err != nil {
		return nil, err
	}
	obj := &jsonNode{kind: jsonObject}
	if d.resource {
		obj.set("resourceType", &jsonNode{kind: jsonString, str: d.name})
	}
	// Attributes come first, as in the official JSON: id, then url.
	for _, p := range d.attrs {
		addProperty(obj, p, slots[p.index])
	}
	for i, p := range d.props {
		if !p.attr {
			addProperty(obj, p, slots[i])
		}
	}
	return obj, nil
}

// attributes reads id, url and value attributes; namespace declarations pass.
func (r *xmlReader) attributes(d *definition, t xml.StartElement, path string, value *valueAttr, slots []slot) error {
	for _, a := range t.Attr {
		switch {
		case a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns"):
			continue
		case a.Name.Space == xsiNamespace && d.resource:
			continue
		case a.Name.Space == "" && a.Name.Local == "value" && value != nil:
			value.text, value.ok = a.Value, true
			continue
		}
		p := d.byName[a.Name.Local]
		if a.Name.Space != "" || p == nil || !p.attr {
			return r.errorf(path, "unknown attribute %q on <%s>", attrName(a.Name), t.Name.Local)
		}
		slots[p.index].vals = append(slots[p.index].vals, &jsonNode{kind: jsonString, str: a.Value})
		slots[p.index].exts = append(slots[p.index].exts, nil)
	}
	return nil
}

func attrName(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}

// children reads child elements up to the end tag into their slots.
func (r *xmlReader) children(d *definition, path string, slots []slot) error {
	for {
		tok, err := r.next(path)
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return r.errorf(path, "text is not allowed here; FHIR XML carries values in value attributes")
			}
		case xml.StartElement:
			if err := r.child(d, t, path, slots); err != nil {
				return err
			}
		}
	}
}

// child reads one child element into the slot of its property.
func (r *xmlReader) child(d *definition, t xml.StartElement, path string, slots []slot) error {
	name := t.Name.Local
	p := d.byName[name]
	if p == nil || p.attr {
		return r.errorf(path+"."+name, "unknown element <%s> in %s", name, d.name)
	}
	want := Namespace
	if p.kind == kindXHTML {
		want = XHTMLNamespace
	}
	if t.Name.Space != want {
		return r.errorf(path+"."+name, "<%s> must be in the namespace %s, not %s", name, want, namespaceName(t.Name.Space))
	}
	s := &slots[p.index]
	cpath := path + "." + name
	if p.array {
		cpath += "[" + strconv.Itoa(len(s.vals)) + "]"
	} else if len(s.vals) > 0 {
		return r.errorf(cpath, "<%s> may occur only once", name)
	}
	r.depth++
	if r.depth > MaxDepth {
		return r.errorf(cpath, "elements nest deeper than %d levels", MaxDepth)
	}
	v, ext, err := r.element(p, t, cpath)
	r.depth--
	if err != nil {
		return err
	}
	s.vals = append(s.vals, v)
	s.exts = append(s.exts, ext)
	return nil
}

// element reads one occurrence of property p.
func (r *xmlReader) element(p *property, t xml.StartElement, path string) (v, ext *jsonNode, err error) {
	switch p.kind {
	case kindPrimitive:
		return r.primitive(p, t, path)
	case kindComplex:
		v, err = r.object(p.def, t, path, nil)
	case kindResource:
		v, err = r.wrapped(t, path)
	default:
		v, err = r.div(t, path)
	}
	return v, nil, err
}

// primitive reads <name id=".." value="..">extensions</name> into the value
// and its _name object.
func (r *xmlReader) primitive(p *property, t xml.StartElement, path string) (v, ext *jsonNode, err error) {
	var value valueAttr
	ext, err = r.object(r.m.defs["Element"], t, path, &value)
	if err != nil {
		return nil, nil, err
	}
	if len(ext.keys) == 0 {
		ext = nil
	}
	if !value.ok {
		if ext == nil {
			return nil, nil, r.errorf(path, "<%s> has no value, id or extension", p.name)
		}
		return nil, ext, nil
	}
	v, err = primitiveValue(p, value.text)
	if err != nil {
		return nil, nil, r.errorf(path, "%v", err)
	}
	return v, ext, nil
}

// primitiveValue types a value attribute by the schema: numbers keep their
// text exactly, booleans become JSON booleans.
func primitiveValue(p *property, text string) (*jsonNode, error) {
	switch p.prim {
	case primNumber:
		if !isJSONNumber(text) {
			return nil, fmt.Errorf("value %q of <%s> is not a number", text, p.name)
		}
		return &jsonNode{kind: jsonNumber, str: text}, nil
	case primBoolean:
		if text != "true" && text != "false" {
			return nil, fmt.Errorf("value %q of <%s> is not true or false", text, p.name)
		}
		return &jsonNode{kind: jsonBool, b: text == "true"}, nil
	}
	return &jsonNode{kind: jsonString, str: text}, nil
}

// isJSONNumber checks the JSON number grammar, which FHIR decimals share.
func isJSONNumber(s string) bool {
	i := 0
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	if n := digits(); n == 0 || (n > 1 && s[i-n] == '0') {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// wrapped reads <contained><Type>…</Type></contained> and the like.
func (r *xmlReader) wrapped(t xml.StartElement, path string) (*jsonNode, error) {
	if len(onlyNamespaces(t.Attr)) != len(t.Attr) {
		return nil, r.errorf(path, "<%s> takes no attributes", t.Name.Local)
	}
	var res *jsonNode
	for {
		tok, err := r.next(path)
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.EndElement:
			if res == nil {
				return nil, r.errorf(path, "<%s> holds no resource", t.Name.Local)
			}
			return res, nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return nil, r.errorf(path, "text is not allowed here")
			}
		case xml.StartElement:
			if res != nil {
				return nil, r.errorf(path, "<%s> holds more than one resource", t.Name.Local)
			}
			if res, err = r.inner(t, path); err != nil {
				return nil, err
			}
		}
	}
}

// inner reads the resource inside a wrapper element.
func (r *xmlReader) inner(t xml.StartElement, path string) (*jsonNode, error) {
	d := r.m.resourceDef(t.Name.Local)
	if t.Name.Space != Namespace || d == nil {
		return nil, r.errorf(path, "<%s> is not a FHIR resource", t.Name.Local)
	}
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > MaxDepth {
		return nil, r.errorf(path, "elements nest deeper than %d levels", MaxDepth)
	}
	return r.object(d, t, path, nil)
}

// onlyNamespaces keeps the namespace declarations of attrs.
func onlyNamespaces(attrs []xml.Attr) []xml.Attr {
	var out []xml.Attr
	for _, a := range attrs {
		if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
			out = append(out, a)
		}
	}
	return out
}

// div keeps the narrative XHTML as its raw markup, which must declare the
// XHTML namespace on the div itself so that it stands alone in JSON.
func (r *xmlReader) div(t xml.StartElement, path string) (*jsonNode, error) {
	start := r.tokStart
	if !bytes.HasPrefix(r.data[start:], []byte("<div")) || !declaresXHTML(t.Attr) {
		return nil, r.errorf(path, `the narrative must be <div xmlns="%s">`, XHTMLNamespace)
	}
	for depth := 1; depth > 0; {
		tok, err := r.next(path)
		if err != nil {
			return nil, err
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
			if r.depth+depth > MaxDepth {
				return nil, r.errorf(path, "elements nest deeper than %d levels", MaxDepth)
			}
		case xml.EndElement:
			depth--
		}
	}
	return &jsonNode{kind: jsonString, str: string(r.data[start:r.d.InputOffset()])}, nil
}

// declaresXHTML reports whether attrs declare XHTML as the default namespace.
func declaresXHTML(attrs []xml.Attr) bool {
	for _, a := range attrs {
		if a.Name.Space == "" && a.Name.Local == "xmlns" {
			return strings.TrimSpace(a.Value) == XHTMLNamespace
		}
	}
	return false
}

// addProperty sets the occurrences of p on obj: the values under the name,
// a primitive's ids and extensions under _name, arrays aligned with nulls.
func addProperty(obj *jsonNode, p *property, s slot) {
	if len(s.vals) == 0 {
		return
	}
	if v := collect(s.vals, p.array); v != nil {
		obj.set(p.name, v)
	}
	if e := collect(s.exts, p.array); e != nil {
		obj.set("_"+p.name, e)
	}
}

// collect is the JSON of one property's occurrences: nil when none is set,
// the single value, or an array with nulls for the unset ones.
func collect(ns []*jsonNode, array bool) *jsonNode {
	set := false
	for _, n := range ns {
		set = set || n != nil
	}
	if !set {
		return nil
	}
	if !array {
		return ns[0]
	}
	items := make([]*jsonNode, len(ns))
	for i, n := range ns {
		if n == nil {
			n = &jsonNode{kind: jsonNull}
		}
		items[i] = n
	}
	return &jsonNode{kind: jsonArray, items: items}
}
