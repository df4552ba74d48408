package fhirpath

// evaluator is one node of a compiled expression. eval maps the focus (the
// input collection) to the output collection; it must not modify focus.
type evaluator interface {
	eval(c *context, focus []item) []item
}

// identExpr is an identifier at the start of a path: a type name (upper-case
// first letter) keeps the focus items of that type, any other name selects
// that child of each focus item.
type identExpr struct{ name string }

// memberExpr selects the child name of every item of recv.
type memberExpr struct {
	recv evaluator
	name string
}

// indexExpr selects the item at index of recv's output.
type indexExpr struct {
	recv  evaluator
	index int
}

// literalExpr yields a constant collection.
type literalExpr struct{ items []item }

// thisExpr yields the focus ($this).
type thisExpr struct{}

// rootExpr yields the resource being evaluated (%resource, %context).
type rootExpr struct{}

// unionExpr merges two collections, removing duplicates (|).
type unionExpr struct{ left, right evaluator }

// equalExpr compares two collections (= and !=).
type equalExpr struct {
	left, right evaluator
	negate      bool
}

// logicExpr combines two booleans with three-valued logic.
type logicExpr struct {
	op          string // and, or, xor, implies
	left, right evaluator
}

// typeExpr is the is/as operator with a type specifier.
type typeExpr struct {
	recv     evaluator
	typeName string
	isOp     bool // true for is, false for as
}

// callExpr invokes a function on recv's output (or on the focus when recv
// is nil, for a function at the start of a path).
type callExpr struct {
	recv     evaluator
	fn       *function
	args     []evaluator
	typeName string // for as(), is(), ofType()
}

func (e identExpr) eval(c *context, focus []item) []item {
	if isTypeName(e.name) {
		return filterType(focus, e.name)
	}
	return children(focus, e.name)
}

func (e memberExpr) eval(c *context, focus []item) []item {
	return children(e.recv.eval(c, focus), e.name)
}

func (e indexExpr) eval(c *context, focus []item) []item {
	in := e.recv.eval(c, focus)
	if e.index < 0 || e.index >= len(in) {
		return nil
	}
	return in[e.index : e.index+1]
}

func (e literalExpr) eval(*context, []item) []item { return e.items }

func (thisExpr) eval(_ *context, focus []item) []item { return focus }

func (rootExpr) eval(c *context, _ []item) []item { return []item{c.rootItem} }

func (e unionExpr) eval(c *context, focus []item) []item {
	return union(e.left.eval(c, focus), e.right.eval(c, focus))
}

func (e equalExpr) eval(c *context, focus []item) []item {
	eq, ok := collectionsEqual(e.left.eval(c, focus), e.right.eval(c, focus))
	if !ok {
		return nil
	}
	return boolItems(eq != e.negate)
}

func (e logicExpr) eval(c *context, focus []item) []item {
	l, lok := toBool(e.left.eval(c, focus))
	r, rok := toBool(e.right.eval(c, focus))
	v, ok := logic(e.op, l, lok, r, rok)
	if !ok {
		return nil
	}
	return boolItems(v)
}

func (e typeExpr) eval(c *context, focus []item) []item {
	in := e.recv.eval(c, focus)
	if !e.isOp {
		return filterType(in, e.typeName)
	}
	if len(in) != 1 {
		return nil
	}
	return boolItems(isType(in[0], e.typeName))
}

func (e *callExpr) eval(c *context, focus []item) []item {
	in := focus
	if e.recv != nil {
		in = e.recv.eval(c, focus)
	}
	return e.fn.impl(c, in, e)
}
