package fhirpath

import "regexp"

// function is one FHIRPath function.
type function struct {
	name             string
	minArgs, maxArgs int
	typeArg          bool // the first argument is a type specifier
	impl             func(c *evalCtx, call *callExpr, in []Node) ([]Node, error)
}

// callExpr invokes a function on recv's output (on the focus when recv is
// nil, for a call at the start of a path).
type callExpr struct {
	recv     evaluator
	fn       *function
	args     []evaluator
	typeName string         // the type argument of is, as, ofType
	re       *regexp.Regexp // a literal regular expression argument, compiled once
	pos      int
}

func (e *callExpr) eval(c *evalCtx, focus []Node) ([]Node, error) {
	if err := c.enter(e.pos); err != nil {
		return nil, err
	}
	defer c.leave()
	in := focus
	if e.recv != nil {
		var err error
		if in, err = e.recv.eval(c, focus); err != nil {
			return nil, err
		}
	}
	if err := c.tick(1, e.pos); err != nil {
		return nil, err
	}
	out, err := e.fn.impl(c, e, in)
	if err != nil {
		return nil, err
	}
	return out, c.account(out, e.pos)
}

// arg evaluates argument i against the enclosing $this.
func (c *evalCtx) arg(call *callExpr, i int) ([]Node, error) {
	if i >= len(call.args) {
		return nil, nil
	}
	return call.args[i].eval(c, c.scope.this)
}

// each evaluates argument i once per item of in, with $this the item and
// $index its position, and hands each result to fn; fn returns false to
// stop.
func (c *evalCtx) each(call *callExpr, i int, in []Node, fn func(idx int, n Node, res []Node) (bool, error)) error {
	saved := c.scope
	defer func() { c.scope = saved }()
	for idx, n := range in {
		c.scope = scope{this: []Node{n}, index: idx, hasIndex: true, total: saved.total, hasTotal: saved.hasTotal}
		res, err := call.args[i].eval(c, c.scope.this)
		if err != nil {
			return err
		}
		more, err := fn(idx, n, res)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// single reads a collection of at most one item.
func single(call *callExpr, in []Node) (Node, bool, error) {
	switch len(in) {
	case 0:
		return Node{}, false, nil
	case 1:
		return in[0], true, nil
	}
	return Node{}, false, execErr(call.pos, "%s() needs a single input item, not %d", call.fn.name, len(in))
}

// intArg evaluates argument i as a single Integer; ok is false when empty.
func (c *evalCtx) intArg(call *callExpr, i int) (int64, bool, error) {
	a, err := c.arg(call, i)
	if err != nil || len(a) == 0 {
		return 0, false, err
	}
	v, ok := intOf(a[0])
	if len(a) > 1 || !ok || kindOf(a[0]) != kInt {
		return 0, false, execErr(call.pos, "%s() needs an Integer argument", call.fn.name)
	}
	return v, true, nil
}

// strArg evaluates argument i as a single String; ok is false when empty.
func (c *evalCtx) strArg(call *callExpr, i int) (string, bool, error) {
	a, err := c.arg(call, i)
	if err != nil || len(a) == 0 {
		return "", false, err
	}
	s, ok := a[0].Value.(string)
	if len(a) > 1 || !ok {
		return "", false, execErr(call.pos, "%s() needs a String argument", call.fn.name)
	}
	return s, true, nil
}

// strInput reads the input of a string function: empty, or one string.
func strInput(call *callExpr, in []Node) (string, bool, error) {
	n, ok, err := single(call, in)
	if err != nil || !ok {
		return "", false, err
	}
	s, isStr := n.Value.(string)
	if !isStr || kindOf(n) != kStr && !isMoment(kindOf(n)) {
		return "", false, semanticErr(call.pos, "%s() needs a String input, not a %s", call.fn.name, kindOf(n))
	}
	return s, true, nil
}
