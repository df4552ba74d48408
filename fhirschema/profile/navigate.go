package profile

import (
	"strings"
	"unicode"
)

// valuesAt returns the values a discriminator path selects from it.
func (w *walker) valuesAt(steps []step, it node) []node {
	cur := []node{it}
	for _, st := range steps {
		var next []node
		for _, n := range cur {
			next = append(next, w.stepValues(st, n)...)
		}
		cur = next
		if len(cur) == 0 {
			return nil
		}
	}
	return cur
}

func (w *walker) stepValues(st step, n node) []node {
	switch st.kind {
	case "this":
		return []node{n}
	case "name":
		return childValues(n, st.arg)
	case "extension":
		var out []node
		for _, x := range childValues(n, "extension") {
			if m, _ := x.value.(map[string]any); m["url"] == st.arg {
				out = append(out, x)
			}
		}
		return out
	case "ofType":
		if n.typ == st.arg {
			return []node{n}
		}
	case "resolve":
		m, _ := n.value.(map[string]any)
		target, typ := w.target(m)
		if typ != "" {
			return []node{rootNode(target, n.loc(), typ)}
		}
	}
	return nil
}

// childValues returns the values of property name of n, or of the choice
// name[x]. Their locations are left out: discriminators report none.
func childValues(n node, name string) []node {
	m := n.object()
	if m == nil {
		return nil
	}
	name = strings.TrimSuffix(name, "[x]")
	if _, ok := m[name]; ok {
		return typed(collectKey(m, name, "", ""), name)
	}
	if _, ok := m["_"+name]; ok {
		return typed(collectKey(m, name, "", ""), name)
	}
	var out []node
	for k := range m {
		if len(k) > len(name) && strings.HasPrefix(k, name) && unicode.IsUpper(rune(k[len(name)])) {
			out = append(out, collectKey(m, k, choiceType(k[len(name):]), "")...)
		}
	}
	return out
}

// typed gives values of well-known properties their type, enough for
// bindings and types met in discriminators.
func typed(nodes []node, name string) []node {
	typ := ""
	switch name {
	case "coding":
		typ = "Coding"
	case "extension", "modifierExtension":
		typ = "Extension"
	}
	for i := range nodes {
		if nodes[i].typ == "" {
			nodes[i].typ = typ
			if m, ok := nodes[i].value.(map[string]any); ok && typ == "" {
				if rt, ok := m["resourceType"].(string); ok {
					nodes[i].typ = rt
				} else if _, ok := m["coding"]; ok {
					nodes[i].typ = "CodeableConcept"
				}
			}
		}
	}
	return nodes
}
