package fhirpath

import "strings"

// Navigation is an expression that only walks down elements — names,
// first(), [n] with a literal n, ofType(T), extension('url') — compiled
// for a focus of one type: it selects what Eval selects, reading the JSON
// straight from the model's keys without the evaluator's work. A view
// evaluates most of its columns so, over every resource it reads.
type Navigation struct {
	typ   string
	steps []navStep
}

// navStep is one step of a Navigation.
type navStep struct {
	op navOp
	// name, keys, extKeys and types are a member step's element, its JSON
	// properties, their _name twins and their types (narrowed by an
	// ofType right after it).
	name                string
	keys, extKeys       []string
	types               []string
	index               int    // navIndex
	typeName, extension string // navOfType, navExtension
}

type navOp int

const (
	navMember navOp = iota
	navFirst
	navIndex
	navOfType
	navExtension
)

// maxNavNodes bounds the nodes a Navigation selects in all, and
// maxNavSteps its steps: past them, Select leaves the work to Eval, which
// counts its steps and its depth against the limits of an evaluation.
const (
	maxNavNodes = 10_000
	maxNavSteps = 64
)

// Navigation compiles the expression for a focus of type focusType; nil
// when it is not a walk down elements from a type the model describes
// (any function but those above, an operator, a variable, a type name, a
// step into a resource or a primitive).
func (e *Expr) Navigation(focusType string) *Navigation {
	if e == nil || e.root == nil || focusType == "" {
		return nil
	}
	n := &Navigation{typ: focusType}
	if _, ok := n.compile(e.root, []string{focusType}); !ok || len(n.steps) > maxNavSteps {
		return nil
	}
	return n
}

// compile appends the steps of ev, whose focus has types in, and returns
// the types of its output.
func (n *Navigation) compile(ev evaluator, in []string) ([]string, bool) {
	switch x := ev.(type) {
	case *identExpr:
		if isTypeName(x.name) {
			return nil, false
		}
		return n.member(x.name, in)
	case *memberExpr:
		in, ok := n.compile(x.recv, in)
		if !ok {
			return nil, false
		}
		return n.member(x.name, in)
	case *indexExpr:
		in, ok := n.compile(x.recv, in)
		if !ok {
			return nil, false
		}
		l, isLit := x.index.(literalExpr)
		if !isLit || len(l.nodes) != 1 || kindOf(l.nodes[0]) != kInt {
			return nil, false
		}
		i, ok := intOf(l.nodes[0])
		if !ok || i < 0 || i > maxNavNodes {
			return nil, false
		}
		n.steps = append(n.steps, navStep{op: navIndex, index: int(i)})
		return in, true
	case *callExpr:
		if x.recv != nil {
			var ok bool
			if in, ok = n.compile(x.recv, in); !ok {
				return nil, false
			}
		}
		return n.call(x, in)
	}
	return nil, false
}

// member appends a step to element name of the types in, which must be
// one complex type the model describes.
func (n *Navigation) member(name string, in []string) ([]string, bool) {
	if len(in) != 1 || !navigable(in[0]) {
		return nil, false
	}
	el, ok := elementOf(in[0], name)
	if !ok {
		return nil, false
	}
	n.steps = append(n.steps, navStep{op: navMember, name: name, keys: el.keys, extKeys: el.extKeys, types: el.types})
	return el.types, true
}

// navigable tells whether nodes of typ are objects whose elements the
// model names, and keep typ whatever they hold (a Resource takes the type
// its resourceType names).
func navigable(typ string) bool {
	if typ == "Resource" || typ == "DomainResource" || strings.HasPrefix(typ, "System.") {
		return false
	}
	return !isPrimitiveType(typ) && hasElements(typ)
}

// call appends the step of a function call on nodes of the types in.
func (n *Navigation) call(x *callExpr, in []string) ([]string, bool) {
	switch x.fn.name {
	case "first":
		n.steps = append(n.steps, navStep{op: navFirst})
		return in, true
	case "ofType":
		if !validTypeName(x.typeName) {
			return nil, false
		}
		var out []string
		for _, t := range in {
			if typeMatches(Node{Type: t}, x.typeName, true) {
				out = append(out, t)
			}
		}
		if k := len(n.steps) - 1; k >= 0 && n.steps[k].op == navMember {
			// Narrow the member step to the keys of the type: a choice
			// element read through one of its JSON properties.
			s := &n.steps[k]
			var keys, extKeys, types []string
			for i, t := range s.types {
				if typeMatches(Node{Type: t}, x.typeName, true) {
					keys, extKeys, types = append(keys, s.keys[i]), append(extKeys, s.extKeys[i]), append(types, t)
				}
			}
			s.keys, s.extKeys, s.types = keys, extKeys, types
			return out, true
		}
		n.steps = append(n.steps, navStep{op: navOfType, typeName: x.typeName})
		return out, true
	case "extension":
		l, ok := x.args[0].(literalExpr)
		if !ok || len(l.nodes) != 1 {
			return nil, false
		}
		url, ok := l.nodes[0].Value.(string)
		if !ok {
			return nil, false
		}
		n.steps = append(n.steps, navStep{op: navExtension, extension: url})
		return []string{"Extension"}, true
	}
	return nil, false
}

// Select returns what the expression selects from focus, using *buf (kept
// by the caller from one call to the next) for its nodes; ok is false
// when the focus is not of the type the Navigation was compiled for or
// the data is not what it expects (an element holding only its _name
// twin asked for its id or extensions, a string longer than an
// evaluation takes, more than a few thousand nodes): Eval answers then.
func (n *Navigation) Select(focus Node, buf *[]Node) (out []Node, ok bool) {
	if focus.Type != n.typ {
		return nil, false
	}
	b := append((*buf)[:0], focus)
	start, end := 0, 1
	for i := range n.steps {
		s := &n.steps[i]
		switch s.op {
		case navFirst:
			end = min(end, start+1)
			if !shortStrings(b[start:end]) {
				return nil, false
			}
			continue
		case navIndex:
			if start+s.index >= end {
				start = end
			} else {
				start, end = start+s.index, start+s.index+1
			}
			continue
		}
		from := len(b)
		for _, node := range b[start:end] {
			switch s.op {
			case navMember:
				m, isMap := node.Value.(map[string]any)
				if !isMap {
					if node.ext != nil && (s.name == "extension" || s.name == "id") {
						return nil, false
					}
					continue
				}
				for k, key := range s.keys {
					if v, x := m[key], m[s.extKeys[k]]; v != nil || x != nil {
						b = appendJSON(b, v, s.types[k], x)
					}
				}
			case navOfType:
				if typeMatches(node, s.typeName, true) {
					b = append(b, node)
				}
			case navExtension:
				var list any
				if m, isMap := node.Value.(map[string]any); isMap {
					list = m["extension"]
				} else if node.ext != nil {
					list = node.ext["extension"]
				}
				items, _ := list.([]any)
				for _, item := range items {
					if m, isMap := item.(map[string]any); isMap && m["url"] == s.extension {
						b = append(b, Node{Value: m, Type: "Extension"})
					}
				}
			}
		}
		start, end = from, len(b)
		if end > maxNavNodes || (s.op == navOfType && !shortStrings(b[start:end])) {
			return nil, false
		}
	}
	*buf = b
	return b[start:end], true
}

// shortStrings tells whether no string of out is longer than an
// evaluation lets a function return (see evalCtx.account).
func shortStrings(out []Node) bool {
	for _, n := range out {
		if s, ok := n.Value.(string); ok && len(s) > maxString {
			return false
		}
	}
	return true
}
