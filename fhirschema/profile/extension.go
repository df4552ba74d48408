package profile

import (
	"strings"
)

// extension checks one extension of host by its StructureDefinition,
// found by URL: validated against it unless a slice of the profile
// already did, used only where its context allows, a modifier extension
// only as modifierExtension. An unknown modifier extension is an error;
// another unknown extension a warning.
func (w *walker) extension(it, host node, modifier, profiled bool) {
	m, _ := it.value.(map[string]any)
	url, _ := m["url"].(string)
	if url == "" || !strings.Contains(url, ":") {
		return // nested in a complex extension: defined by its parent
	}
	p, err := w.sc.profile(w.ctx, url)
	switch {
	case err != nil:
		w.issue("error", "extension", it.loc(), "the definition of the extension "+url+" cannot be used: "+err.Error(), "", url)
		return
	case p == nil && modifier:
		w.issue("error", "extension", it.loc(), "the modifier extension "+url+" is not known, and a modifier extension must be understood", "", url)
		return
	case p == nil:
		w.issue("warning", "extension", it.loc(), "the extension "+url+" is not known; it is not checked", "", url)
		return
	case p.typ != "Extension":
		w.issue("error", "extension", it.loc(), url+" is not the definition of an extension", "", url)
		return
	}
	if !w.contextAllows(p, host) {
		w.errorf(p, "extension", it.loc(), "the extension %s is not allowed on %s; its context is %s", url, host.path(), contextList(p))
	}
	if p.root.isModifier && !modifier {
		w.errorf(p, "extension", it.loc(), "the extension %s is a modifier extension and must be in modifierExtension", url)
	}
	if modifier && !p.root.isModifier {
		w.errorf(p, "extension", it.loc(), "the extension %s is not a modifier extension", url)
	}
	if !profiled {
		w.element(p, p.root, it)
	}
}

// extensionCardinality checks how many times each extension is repeated
// in one list against the max of its definition's root.
func (w *walker) extensionCardinality(items []node, parentLoc, name string) {
	count := map[string]int{}
	for _, it := range items {
		m, _ := it.value.(map[string]any)
		if url, _ := m["url"].(string); strings.Contains(url, ":") {
			count[url]++
		}
	}
	for url, n := range count {
		if n < 2 {
			continue
		}
		p, err := w.sc.profile(w.ctx, url)
		if err != nil || p == nil || p.root.max < 0 || n <= p.root.max {
			continue
		}
		w.errorf(p, "structure", parentLoc+"."+name, "the extension %s may appear at most %d times here, but appears %d times", url, p.root.max, n)
	}
}

// contextAllows reports whether the extension defined by p may be used on
// host.
func (w *walker) contextAllows(p *compiled, host node) bool {
	if len(p.contexts) == 0 {
		return true
	}
	for _, c := range p.contexts {
		switch c.typ {
		case "element":
			if contextMatches(c.expression, host) {
				return true
			}
		case "extension":
			if m, _ := host.value.(map[string]any); m["url"] == c.expression {
				return true
			}
		default:
			return true // a FHIRPath context: not evaluated
		}
	}
	return false
}

// contextMatches reports whether an element context names host: by its
// path, its path within its data type, or its type.
func contextMatches(expr string, host node) bool {
	switch {
	case expr == host.path(), expr == host.tpath(), expr == host.alias, expr == host.typ, expr == "Element", expr == "*":
		return true
	case expr == "Resource" || expr == "DomainResource":
		return resourceTypes[host.typ] && !strings.Contains(host.path(), ".")
	case expr == "BackboneElement":
		return host.typ == "BackboneElement"
	case expr == "Quantity":
		return quantityTypes[host.typ]
	}
	return false
}

func contextList(p *compiled) string {
	parts := make([]string, len(p.contexts))
	for i, c := range p.contexts {
		parts[i] = c.expression
	}
	return strings.Join(parts, ", ")
}
