package profile

import (
	"fmt"
	"strings"
)

// conceptTree is a CodeSystem's concepts with their hierarchy and
// properties.
type conceptTree struct {
	order    []string
	children map[string][]string
	props    map[string]map[string]string // code → property → value
}

func newConceptTree(cs map[string]any) *conceptTree {
	t := &conceptTree{children: map[string][]string{}, props: map[string]map[string]string{}}
	t.read(cs["concept"], "")
	for code, p := range t.props {
		for _, key := range []string{"parent", "subsumedBy"} {
			if parent := p[key]; parent != "" {
				t.children[parent] = append(t.children[parent], code)
			}
		}
	}
	return t
}

func (t *conceptTree) read(v any, parent string) {
	for _, c := range objects(v) {
		code, _ := c["code"].(string)
		if code == "" {
			continue
		}
		t.order = append(t.order, code)
		if parent != "" {
			t.children[parent] = append(t.children[parent], code)
		}
		props := map[string]string{}
		for _, p := range objects(c["property"]) {
			name, _ := p["code"].(string)
			props[name] = propertyValue(p)
		}
		t.props[code] = props
		t.read(c["concept"], code)
	}
}

// propertyValue renders a concept property's value as text.
func propertyValue(p map[string]any) string {
	for k, v := range p {
		if !strings.HasPrefix(k, "value") {
			continue
		}
		if m, ok := v.(map[string]any); ok {
			code, _ := m["code"].(string)
			return code
		}
		return fmt.Sprint(v)
	}
	return ""
}

// filter returns the codes all filters select; why says what could not be
// evaluated.
func (t *conceptTree) filter(filters []map[string]any) (codes []string, why string) {
	selected := t.order
	for _, f := range filters {
		prop, _ := f["property"].(string)
		op, _ := f["op"].(string)
		value, _ := f["value"].(string)
		keep, ok := t.selector(prop, op, value)
		if !ok {
			return nil, fmt.Sprintf("the filter %s %s %s cannot be evaluated", prop, op, value)
		}
		var next []string
		for _, c := range selected {
			if keep(c) {
				next = append(next, c)
			}
		}
		selected = next
	}
	return selected, ""
}

// selector returns the test of one filter; false when the operation is
// not supported.
func (t *conceptTree) selector(prop, op, value string) (func(string) bool, bool) {
	if prop == "concept" || prop == "code" {
		switch op {
		case "is-a":
			set := t.descendants(value, true)
			return func(c string) bool { return set[c] }, true
		case "descendent-of":
			set := t.descendants(value, false)
			return func(c string) bool { return set[c] }, true
		case "is-not-a":
			set := t.descendants(value, true)
			return func(c string) bool { return !set[c] }, true
		case "=":
			return func(c string) bool { return c == value }, true
		case "in":
			set := splitSet(value)
			return func(c string) bool { return set[c] }, true
		}
		return nil, false
	}
	switch op {
	case "=":
		return func(c string) bool { return t.props[c][prop] == value }, true
	case "in":
		set := splitSet(value)
		return func(c string) bool { return set[t.props[c][prop]] }, true
	case "exists":
		return func(c string) bool { _, ok := t.props[c][prop]; return ok == (value == "true") }, true
	}
	return nil, false
}

// descendants returns the codes under code, and code itself when self.
func (t *conceptTree) descendants(code string, self bool) map[string]bool {
	set := map[string]bool{}
	var walk func(c string)
	walk = func(c string) {
		for _, k := range t.children[c] {
			if !set[k] {
				set[k] = true
				walk(k)
			}
		}
	}
	walk(code)
	if self {
		set[code] = true
	}
	return set
}

func splitSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		set[strings.TrimSpace(p)] = true
	}
	return set
}
