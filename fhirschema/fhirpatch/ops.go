package fhirpatch

import (
	"fmt"
	"slices"
	"strings"

	"fhirstore/fhirschema/fhirpath"
)

// add adds a child named op.name to the one element op.path selects:
// appended when the child repeats, set when it is absent.
func (p *patcher) add(op *operation) error {
	nodes, err := p.eval(op, op.path)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return op.fail("path", false, "No content found at %s when adding", op.path)
	}
	if len(nodes) > 1 {
		return op.fail("path", false, "path %s selects %d elements; add needs one", op.path, len(nodes))
	}
	m, ok := nodes[0].Value.(map[string]any)
	if !ok {
		return op.fail("path", false, "path %s selects a primitive; add needs an element that has children", op.path)
	}
	key, repeats, typ, err := elementKey(nodes[0].Type, op.name, op.value)
	if err != nil {
		return op.fail("name", false, "%v", err)
	}
	v, ext, err := p.build(op.value, typ)
	if err != nil {
		return op.fail("value", false, "%v", err)
	}
	list, isList := m[key].([]any)
	_, hasTwin := m[twinKey(key)]
	switch {
	case repeats || isList:
		slot{obj: m, key: key, index: len(list)}.insert(p.tree, v, ext)
	case m[key] != nil || hasTwin:
		return op.fail("name", false, "%s already has %s; replace it instead", op.path, op.name)
	default:
		slot{obj: m, key: key, index: -1}.set(p.tree, v, ext)
	}
	return nil
}

// insert inserts op.value into the list op.path names at op.index.
func (p *patcher) insert(op *operation) error {
	l, err := p.list(op)
	if err != nil {
		return err
	}
	if op.index > len(l.items) {
		return op.fail("index", false, "index %d is past the end of %s, which has %d items", op.index, op.path, len(l.items))
	}
	v, ext, err := p.build(op.value, l.typ)
	if err != nil {
		return op.fail("value", false, "%v", err)
	}
	slot{obj: l.obj, key: l.key, index: op.index}.insert(p.tree, v, ext)
	return nil
}

// move moves an item of the list op.path names from op.source to
// op.destination.
func (p *patcher) move(op *operation) error {
	l, err := p.list(op)
	if err != nil {
		return err
	}
	for _, at := range []struct {
		part string
		i    int
	}{{"source", op.source}, {"destination", op.destination}} {
		if at.i >= len(l.items) {
			return op.fail(at.part, false, "%s %d is past the end of %s, which has %d items", at.part, at.i, op.path, len(l.items))
		}
	}
	move(l.obj, l.key, op.source, op.destination)
	return nil
}

// delete removes the element op.path selects; nothing when it selects none.
func (p *patcher) delete(op *operation) error {
	s, _, err := p.locate(op)
	if err != nil || s == nil {
		return err
	}
	s.remove()
	return nil
}

// replace replaces the element op.path selects with op.value.
func (p *patcher) replace(op *operation) error {
	s, n, err := p.locate(op)
	if err != nil {
		return err
	}
	if s == nil {
		return op.fail("path", false, "No content found at %s when replacing", op.path)
	}
	v, ext, err := p.build(op.value, n.Type)
	if err != nil {
		return op.fail("value", false, "%v", err)
	}
	// A choice element may change type: valueString replaces valueQuantity.
	if el, _, isChoice := fhirpath.ChoiceOf(s.key); isChoice && s.index < 0 && op.value.typ != "" {
		if key := el + upperFirst(op.value.typ); key != s.key {
			s.remove()
			s.key = key
		}
	}
	s.set(p.tree, v, ext)
	return nil
}

// list is the list an insert or move works on.
type list struct {
	obj   map[string]any
	key   string
	typ   string
	items []any
}

// list finds the list op.path names: a path ending in a repeating
// element of one element.
func (p *patcher) list(op *operation) (*list, error) {
	parent, name, index, ok := op.path.Tail()
	if !ok || index >= 0 {
		return nil, op.fail("path", true, "path %s must end in the name of a list element", op.path)
	}
	nodes, err := p.eval(op, parent)
	if err != nil {
		return nil, err
	}
	objs := objects(nodes)
	if len(objs) != 1 {
		return nil, op.fail("path", false, "No content found at %s when changing its list (%d elements hold it)", op.path, len(objs))
	}
	key, repeats, typ, err := elementKey(objs[0].Type, name, op.value)
	if err != nil {
		return nil, op.fail("path", false, "%v", err)
	}
	m := objs[0].Value.(map[string]any)
	items, isList := m[key].([]any)
	if (!repeats && objs[0].Type != "") || (m[key] != nil && !isList) {
		return nil, op.fail("path", false, "%s is not a list", op.path)
	}
	return &list{obj: m, key: key, typ: typ, items: items}, nil
}

// objects are the nodes that are complex elements or resources.
func objects(nodes []fhirpath.Node) []fhirpath.Node {
	var out []fhirpath.Node
	for _, n := range nodes {
		if _, ok := n.Value.(map[string]any); ok {
			out = append(out, n)
		}
	}
	return out
}

// build makes the JSON of a value for an element of type typ: value[x] as
// given, or the object an anonymous value's parts describe.
func (p *patcher) build(v *value, typ string) (any, any, error) {
	if v == nil || v.parts == nil {
		if v == nil {
			return nil, nil, nil
		}
		if div, ok := v.json.(string); ok && typ == "xhtml" {
			return serializedXHTML(div), v.ext, nil
		}
		return v.json, v.ext, nil
	}
	obj := map[string]any{}
	for _, part := range v.parts {
		key, repeats, sub, err := elementKey(typ, part.name, part.v)
		if err != nil {
			return nil, nil, err
		}
		val, ext, err := p.build(part.v, sub)
		if err != nil {
			return nil, nil, err
		}
		if list, isList := obj[key].([]any); repeats || isList {
			slot{obj: obj, key: key, index: len(list)}.insert(p.tree, val, ext)
		} else {
			slot{obj: obj, key: key, index: -1}.set(p.tree, val, ext)
		}
	}
	return obj, nil, nil
}

// elementKey finds element name of type typ: the JSON property a value v
// of it is written as, whether it repeats and its type. A type the model
// does not know takes the name as given.
func elementKey(typ, name string, v *value) (key string, repeats bool, elemType string, err error) {
	if typ == "" {
		return name, false, "", nil
	}
	types, repeats, keys, ok := fhirpath.ElementOf(typ, name)
	if ok {
		if len(keys) == 1 {
			return keys[0], repeats, types[0], nil
		}
		for i, t := range types {
			if v != nil && t == v.typ {
				return keys[i], repeats, t, nil
			}
		}
		return "", false, "", fmt.Errorf("%s is a choice of types (%s): give the value as one of them", name, strings.Join(types, ", "))
	}
	if el, t, isChoice := fhirpath.ChoiceOf(name); isChoice {
		if types, repeats, _, ok := fhirpath.ElementOf(typ, el); ok && slices.Contains(types, t) {
			return name, repeats, t, nil
		}
	}
	return "", false, "", fmt.Errorf("%s has no element %q", typ, name)
}

// serializedXHTML writes a narrative given as a string as FHIR's
// serializers write one: quotes in text as &quot; (markup as it is), so
// that a narrative set by a patch reads as the same narrative sent in a
// resource.
func serializedXHTML(div string) string {
	if !strings.Contains(div, `"`) {
		return div
	}
	var b strings.Builder
	inTag := false
	for _, c := range div {
		switch {
		case c == '<':
			inTag = true
		case c == '>':
			inTag = false
		case c == '"' && !inTag:
			b.WriteString("&quot;")
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
