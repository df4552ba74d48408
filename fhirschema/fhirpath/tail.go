package fhirpath

// Tail splits an expression that ends in a step to a child element (name,
// X.name or X.name[n] with a literal n) into the expression before the
// step (nil for a bare name: the focus itself), the element's name and the
// index (-1 without one). ok is false for any other ending: a function, an
// operator, a type name. FHIRPath Patch finds the element it changes so.
func (e *Expr) Tail() (parent *Expr, name string, index int, ok bool) {
	if e == nil || e.root == nil {
		return nil, "", -1, false
	}
	ev, index := e.root, -1
	if x, isIndex := ev.(*indexExpr); isIndex {
		lit, isLit := x.index.(literalExpr)
		if !isLit || len(lit.nodes) != 1 {
			return nil, "", -1, false
		}
		i, isInt := lit.nodes[0].Value.(int64)
		if !isInt || i < 0 {
			return nil, "", -1, false
		}
		ev, index = x.recv, int(i)
	}
	switch x := ev.(type) {
	case *memberExpr:
		return &Expr{src: e.src, root: x.recv}, x.name, index, true
	case *identExpr:
		if !isTypeName(x.name) {
			return nil, x.name, index, true
		}
	}
	return nil, "", -1, false
}

// ElementOf describes element name of type typ (a resource, a data type,
// or a backbone element named by its path, such as Patient.contact): its
// types, whether it repeats, and the JSON property of each type (name, or
// valueQuantity… for a choice element); ok is false when the model does
// not know it.
func ElementOf(typ, name string) (types []string, repeats bool, keys []string, ok bool) {
	el, ok := elementOf(typ, name)
	if !ok {
		return nil, false, nil, false
	}
	return el.types, el.array, el.keys, true
}
