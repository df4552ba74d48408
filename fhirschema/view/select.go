package view

import (
	"fmt"
	"slices"
	"strings"
)

// selectNode is a compiled select: its iteration (forEach, forEachOrNull or
// repeat), its own columns, its nested selects and its unionAll branches.
type selectNode struct {
	forEach *path
	orNull  bool
	repeat  []*path
	columns []column
	selects []*selectNode
	union   []*selectNode
	// slots are every column this select fills, its nested ones included
	// (a forEachOrNull with nothing to iterate sets them all to null).
	slots []int
	at    string
}

// column is a compiled column: where its value goes in a row and the path
// that computes it.
type column struct {
	slot       int
	path       *path
	collection bool
	at         string
}

// children compiles the selects of list into parent's nested selects,
// evaluated on a focus of type focusType ("" when not known).
func (c *compiler) children(parent *selectNode, list []any, at, focusType string, depth int) {
	for i, obj := range c.objects(list, at) {
		s := c.selectOf(obj, fmt.Sprintf("%s[%d]", at, i), focusType, depth)
		parent.selects = append(parent.selects, s)
		parent.slots = append(parent.slots, s.slots...)
	}
}

// selectOf compiles one select.
func (c *compiler) selectOf(obj map[string]any, at, focusType string, depth int) *selectNode {
	s := &selectNode{at: at}
	if depth > c.limits.MaxDepth {
		c.errorf("too-costly", at, "selects nest deeper than %d levels", c.limits.MaxDepth)
		return s
	}
	c.unknown(obj, selectElements, at)
	focusType = c.iteration(s, obj, at, focusType)
	for i, col := range c.objects(obj["column"], at+".column") {
		c.column(s, col, fmt.Sprintf("%s.column[%d]", at, i), focusType)
	}
	if list, ok := obj["select"].([]any); ok {
		c.children(s, list, at+".select", focusType, depth+1)
	} else if obj["select"] != nil {
		c.errorf("structure", at+".select", "select must be an array")
	}
	c.unionAll(s, obj["unionAll"], at+".unionAll", focusType, depth)
	if len(s.slots) == 0 && len(c.issues) == 0 {
		c.errorf("required", at, "a select must declare a column, a select or a unionAll")
	}
	return s
}

// iteration compiles forEach, forEachOrNull or repeat (at most one of
// them) and returns the type of the nodes iterated over.
func (c *compiler) iteration(s *selectNode, obj map[string]any, at, focusType string) string {
	n := 0
	for _, k := range []string{"forEach", "forEachOrNull", "repeat"} {
		if obj[k] != nil {
			n++
		}
	}
	if n > 1 {
		c.errorf("structure", at, "a select may have only one of forEach, forEachOrNull and repeat")
		return ""
	}
	for _, k := range []string{"forEach", "forEachOrNull"} {
		if obj[k] == nil {
			continue
		}
		s.forEach, s.orNull = c.path(obj, k, at, true), k == "forEachOrNull"
		if s.forEach == nil {
			return ""
		}
		return s.forEach.staticType(focusType)
	}
	if obj["repeat"] == nil {
		return focusType
	}
	list, ok := obj["repeat"].([]any)
	if !ok || len(list) == 0 {
		c.errorf("structure", at+".repeat", "repeat must be an array of one or more paths")
		return ""
	}
	for i, item := range list {
		p := c.pathText(item, fmt.Sprintf("%s.repeat[%d]", at, i))
		if p == nil {
			continue
		}
		if src := strings.TrimSpace(p.src); src == "$this" || strings.HasPrefix(src, "%resource") || strings.HasPrefix(src, "%rootResource") || strings.HasPrefix(src, "%context") {
			c.errorf("value", p.at, "repeat path %s would never end: it leads back to where it started", src)
			continue
		}
		s.repeat = append(s.repeat, p)
	}
	return repeatType(s.repeat, focusType)
}

// repeatType is the type of the nodes a repeat visits when every path
// leads to one and the same type, from the focus and from that type.
func repeatType(paths []*path, focusType string) string {
	typ := ""
	for _, p := range paths {
		t := p.staticType(focusType)
		if t == "" || (typ != "" && t != typ) {
			return ""
		}
		typ = t
	}
	for _, p := range paths {
		if p.staticType(typ) != typ {
			return ""
		}
	}
	return typ
}

// column compiles one column into s.
func (c *compiler) column(s *selectNode, obj map[string]any, at, focusType string) {
	c.unknown(obj, columnElements, at)
	name := c.optString(obj, "name", at)
	switch {
	case name == "":
		c.errorf("required", at+".name", "a column must have a name")
	case !sqlName.MatchString(name):
		c.errorf("value", at+".name", "column name %q must start with a letter and hold only letters, digits and _", name)
	}
	col := Column{Name: name, Type: c.optString(obj, "type", at), Collection: c.optBool(obj, "collection", at),
		Description: c.optString(obj, "description", at)}
	p := c.path(obj, "path", at, true)
	if p != nil && !col.Collection && !strings.Contains(p.src, "|") {
		if types := p.staticTypes(focusType); len(dedupe(types)) > 1 {
			c.errorf("value", at+".path", "path %q ends at a choice element of types %s: pick one with ofType()", p.src, strings.Join(types, ", "))
		}
	}
	slot := c.slot(col, at)
	s.columns = append(s.columns, column{slot: slot, path: p, collection: col.Collection, at: at})
	s.slots = append(s.slots, slot)
}

// slot is the place of a column in the rows: a new one, or in a unionAll
// branch after the first, the first branch's column of the same rank,
// which must have the same name.
func (c *compiler) slot(col Column, at string) int {
	if n := len(c.reuse); n > 0 {
		l := c.reuse[n-1]
		if l.next >= len(l.slots) {
			c.errorf("structure", at, "a unionAll branch must have the same columns as the first (%s): %q is one too many", l.at, col.Name)
			return -1
		}
		s := l.slots[l.next]
		l.next++
		if c.columns[s].Name != col.Name {
			c.errorf("structure", at+".name", "a unionAll branch must have the same columns in the same order as the first (%s): %q where it has %q", l.at, col.Name, c.columns[s].Name)
		}
		return s
	}
	if prev, dup := c.names[col.Name]; dup && col.Name != "" {
		c.errorf("value", at+".name", "column name %q is already used at %s", col.Name, prev)
	}
	c.names[col.Name] = at
	c.columns = append(c.columns, col)
	return len(c.columns) - 1
}

// unionAll compiles the branches of a unionAll: the first declares the
// columns, each further branch must declare the same ones in order.
func (c *compiler) unionAll(s *selectNode, v any, at, focusType string, depth int) {
	branches := c.objects(v, at)
	if v != nil && len(branches) == 0 && len(c.issues) == 0 {
		c.errorf("required", at, "unionAll must have at least one select")
	}
	var first *selectNode
	for i, obj := range branches {
		bat := fmt.Sprintf("%s[%d]", at, i)
		if first == nil {
			first = c.selectOf(obj, bat, focusType, depth+1)
			s.union = append(s.union, first)
			s.slots = append(s.slots, first.slots...)
			continue
		}
		l := &slotList{slots: first.slots, at: at + "[0]"}
		c.reuse = append(c.reuse, l)
		b := c.selectOf(obj, bat, focusType, depth+1)
		c.reuse = c.reuse[:len(c.reuse)-1]
		if l.next < len(l.slots) {
			c.errorf("structure", bat, "a unionAll branch must have the same columns as the first (%s): %q is missing", l.at, c.columns[l.slots[l.next]].Name)
		}
		s.union = append(s.union, b)
	}
}

func dedupe(list []string) []string {
	out := slices.Clone(list)
	slices.Sort(out)
	return slices.Compact(out)
}
