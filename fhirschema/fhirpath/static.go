package fhirpath

// ElementFunc describes the element name of type def: the types its value
// may have, whether it repeats, and whether def has it (see
// fhirschema.Element).
type ElementFunc func(def, name string) (types []string, repeats, ok bool)

// AtMostOne tells whether the expression selects at most one node of any
// resource of type root, and the types that node may have, reading each
// element's cardinality with element. It answers no whenever it cannot
// tell: a function other than where, first, as, ofType and resolve, an
// operator other than as, or a union other than of different types of one
// element ((Observation.value as Quantity) | (Observation.value as
// SampledData)). The types of a resolved reference are unknown (nil).
func (e *Expr) AtMostOne(root string, element ElementFunc) (types []string, ok bool) {
	if e == nil || e.root == nil {
		return nil, false
	}
	s := shapeOf(e.root, shape{one: true, types: []string{root}, path: root}, element)
	return s.types, s.one
}

// shape is what the analysis knows of a sub-expression's output: at most
// one node (one), of these types (nil: unknown), selected at path, and
// narrowed to type as (as, ofType) when as is set.
type shape struct {
	one   bool
	types []string
	path  string
	as    string
}

var many = shape{}

func shapeOf(ev evaluator, focus shape, element ElementFunc) shape {
	switch x := ev.(type) {
	case *identExpr:
		if isTypeName(x.name) {
			return narrow(focus, x.name)
		}
		return childShape(focus, x.name, element)
	case *memberExpr:
		return childShape(shapeOf(x.recv, focus, element), x.name, element)
	case *indexExpr:
		s := shapeOf(x.recv, focus, element)
		s.one = true
		return s
	case *typeOpExpr:
		if x.isOp {
			return many
		}
		return narrow(shapeOf(x.recv, focus, element), x.typeName)
	case *callExpr:
		return callShape(x, focus, element)
	case *binaryExpr:
		if x.op != "|" {
			return many
		}
		l, r := shapeOf(x.left, focus, element), shapeOf(x.right, focus, element)
		if !l.one || !r.one || l.path != r.path || l.as == "" || r.as == "" || l.as == r.as {
			return many
		}
		return shape{one: true, types: append(append([]string(nil), l.types...), r.types...), path: l.path, as: "|"}
	}
	return many
}

func callShape(x *callExpr, focus shape, element ElementFunc) shape {
	in := focus
	if x.recv != nil {
		in = shapeOf(x.recv, focus, element)
	}
	switch x.fn.name {
	case "where":
		return in
	case "first":
		in.one = true
		return in
	case "as", "ofType":
		return narrow(in, x.typeName)
	case "resolve":
		return shape{one: in.one, path: in.path + ".resolve()"}
	}
	return many
}

// childShape is the shape of element name of every node of s.
func childShape(s shape, name string, element ElementFunc) shape {
	if s.types == nil {
		return many
	}
	out := shape{one: s.one, path: s.path + "." + name}
	for _, t := range s.types {
		types, repeats, ok := element(t, name)
		if !ok {
			return many
		}
		out.one = out.one && !repeats
		out.types = append(out.types, types...)
	}
	return out
}

// narrow keeps the nodes of s of type t.
func narrow(s shape, t string) shape {
	s.as, s.types = t, []string{t}
	return s
}
