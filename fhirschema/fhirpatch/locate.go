package fhirpatch

import (
	"strings"

	"fhirstore/fhirschema/fhirpath"
)

// locate finds the one element op.path selects and where it sits; a nil
// slot when it selects none.
func (p *patcher) locate(op *operation) (*slot, fhirpath.Node, error) {
	nodes, err := p.eval(op, op.path)
	if err != nil || len(nodes) == 0 {
		return nil, fhirpath.Node{}, err
	}
	if len(nodes) > 1 {
		return nil, fhirpath.Node{}, op.fail("path", false, "path %s selects %d elements; the %s operation changes one", op.path, len(nodes), op.kind)
	}
	n := nodes[0]
	if m, ok := n.Value.(map[string]any); ok {
		if s, found := find(p.root, id(m)); found {
			return &s, n, nil
		}
	}
	s, err := p.locateByTail(op)
	return s, n, err
}

// find finds the object whose identity is target under obj.
func find(obj map[string]any, target uintptr) (slot, bool) {
	for k, v := range obj {
		switch x := v.(type) {
		case map[string]any:
			if id(x) == target {
				return slot{obj: obj, key: k, index: -1}, true
			}
			if s, ok := find(x, target); ok {
				return s, true
			}
		case []any:
			for i, e := range x {
				m, ok := e.(map[string]any)
				if !ok {
					continue
				}
				if id(m) == target {
					return slot{obj: obj, key: k, index: i}, true
				}
				if s, ok := find(m, target); ok {
					return s, true
				}
			}
		}
	}
	return slot{}, false
}

// locateByTail finds a primitive by the last step of its path: the
// elements before it, the name and the index.
func (p *patcher) locateByTail(op *operation) (*slot, error) {
	parent, name, index, ok := op.path.Tail()
	if !ok {
		return nil, op.fail("path", true, "path %s selects a primitive or the resource itself; end it in an element name", op.path)
	}
	nodes, err := p.eval(op, parent)
	if err != nil {
		return nil, err
	}
	var found []slot
	for _, n := range objects(nodes) {
		m := n.Value.(map[string]any)
		for _, key := range propertiesOf(n.Type, name, m) {
			found = appendSlots(found, m, key)
		}
	}
	switch {
	case index >= 0 && index < len(found):
		return &found[index], nil
	case index >= 0 || len(found) == 0:
		return nil, nil
	case len(found) > 1:
		return nil, op.fail("path", false, "path %s selects %d elements; the %s operation changes one", op.path, len(found), op.kind)
	}
	return &found[0], nil
}

// propertiesOf are the JSON properties of element name in m, an element
// of type typ: name itself, or the typed properties of a choice element.
func propertiesOf(typ, name string, m map[string]any) []string {
	var keys []string
	if _, _, ks, ok := fhirpath.ElementOf(typ, name); ok {
		keys = ks
	} else {
		keys = []string{name}
		for k := range m {
			if el, _, isChoice := fhirpath.ChoiceOf(k); isChoice && el == name {
				keys = append(keys, k)
			}
		}
	}
	var out []string
	for _, k := range keys {
		if _, ok := m[k]; ok {
			out = append(out, k)
		} else if _, ok := m[twinKey(k)]; ok {
			out = append(out, k)
		}
	}
	return out
}

// appendSlots appends the slot of each element of property key of m,
// skipping the nulls of a list that have no twin (FHIRPath sees none).
func appendSlots(out []slot, m map[string]any, key string) []slot {
	list, isList := m[key].([]any)
	if !isList {
		if twins, ok := m[twinKey(key)].([]any); ok && m[key] == nil {
			list, isList = make([]any, len(twins)), true
		}
	}
	if !isList {
		return append(out, slot{obj: m, key: key, index: -1})
	}
	twins, _ := m[twinKey(key)].([]any)
	for i, v := range list {
		if v == nil && (i >= len(twins) || twins[i] == nil) {
			continue
		}
		out = append(out, slot{obj: m, key: key, index: i})
	}
	return out
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
