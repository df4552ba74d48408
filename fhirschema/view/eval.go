package view

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"fhirstore/fhirschema/fhirpath"
)

// evaluator is the state of a view's evaluation, one resource at a
// time: a Stream's worker keeps one for all the resources it evaluates.
type evaluator struct {
	ctx  context.Context
	v    *View
	res  map[string]any
	row  []any
	emit func([]any) error
	rows int
	// env is made on the first path evaluated by the FHIRPath engine;
	// index is %rowIndex, envIndex the value env holds (-1: none yet).
	env             *fhirpath.Env
	index, envIndex int
	// buf holds the nodes a Navigation selects (see eval); focus is the
	// resource's node.
	buf   []fhirpath.Node
	focus [1]fhirpath.Node
}

func (v *View) newEvaluator(ctx context.Context) *evaluator {
	return &evaluator{ctx: ctx, v: v, row: make([]any, len(v.columns))}
}

// run evaluates the view over one resource, calling emit with each row.
func (ev *evaluator) run(resource map[string]any, emit func([]any) error) error {
	if rt, _ := resource["resourceType"].(string); rt != ev.v.Resource {
		return nil
	}
	ev.res, ev.emit, ev.rows = resource, emit, 0
	ev.focus[0] = fhirpath.ResourceNode(resource)
	clear(ev.row)
	if ev.env != nil {
		ev.env.Resource = resource
	}
	keep, err := ev.where()
	if err == nil && keep {
		err = ev.v.root.run(ev, ev.focus[:], 0, ev.emitRow)
	}
	ev.res, ev.emit, ev.focus[0] = nil, nil, fhirpath.Node{}
	return err
}

// engineEnv is the environment of a path evaluated by the FHIRPath
// engine: the resource, the view's constants and %rowIndex.
func (ev *evaluator) engineEnv() *fhirpath.Env {
	if ev.env == nil {
		vars := make(map[string][]fhirpath.Node, len(ev.v.constants)+1)
		maps.Copy(vars, ev.v.constants)
		ev.env, ev.envIndex = &fhirpath.Env{Resource: ev.res, Vars: vars}, -1
	}
	if ev.envIndex != ev.index {
		ev.env.Vars["rowIndex"] = []fhirpath.Node{{Value: int64(ev.index), Type: "System.Integer"}}
		ev.envIndex = ev.index
	}
	return ev.env
}

// failf is an evaluation error of the resource at element at.
func (ev *evaluator) failf(at, format string, args ...any) error {
	id, _ := ev.res["id"].(string)
	return &EvalError{Resource: ev.v.Resource + "/" + id, Expression: at, Msg: fmt.Sprintf(format, args...)}
}

// eval evaluates p on focus, an input collection of at most one node. A
// path that only walks down elements is a Navigation, whose nodes are in
// ev.buf until the next eval: a caller keeping them asks for own.
func (ev *evaluator) eval(p *path, focus []fhirpath.Node, own bool) ([]fhirpath.Node, error) {
	if len(focus) == 1 {
		if nav := p.navigation(focus[0].Type); nav != nil {
			if out, ok := nav.Select(focus[0], &ev.buf); ok {
				if p.refKeys {
					out = referenceKeys(out, p.refType)
				}
				if own {
					out = slices.Clone(out)
				}
				return out, nil
			}
		}
	}
	out, err := p.expr.Eval(ev.ctx, ev.engineEnv(), focus)
	if err != nil {
		if ctxErr := ev.ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		var fe *fhirpath.Error
		if errors.As(err, &fe) {
			return nil, ev.failf(p.at, "%s: %s", p.src, fe.Msg)
		}
		return nil, ev.failf(p.at, "%s: %v", p.src, err)
	}
	if p.refKeys {
		return referenceKeys(out, p.refType), nil
	}
	return out, nil
}

// referenceKeys are the keys of the references among out of typ.
func referenceKeys(out []fhirpath.Node, typ string) []fhirpath.Node {
	keys := out[:0]
	for _, n := range out {
		if ref, ok := n.Value.(string); ok {
			if key, ok := referenceKey(ref, typ); ok {
				keys = append(keys, fhirpath.Node{Value: key, Type: "System.String"})
			}
		}
	}
	return keys
}

// where tells whether the resource passes every where path: a path
// yielding nothing excludes it, one yielding anything but one boolean is
// an error.
func (ev *evaluator) where() (bool, error) {
	focus := ev.focus[:]
	ev.index = 0
	for _, p := range ev.v.where {
		out, err := ev.eval(p, focus, false)
		if err != nil {
			return false, err
		}
		if len(out) == 0 {
			return false, nil
		}
		b, ok := out[0].Value.(bool)
		if len(out) > 1 || !ok {
			return false, ev.failf(p.at, "where path %q must yield one boolean, not %s", p.src, describe(out))
		}
		if !b {
			return false, nil
		}
	}
	return true, nil
}

func describe(out []fhirpath.Node) string {
	if len(out) > 1 {
		return fmt.Sprintf("%d values", len(out))
	}
	if out[0].Type != "" {
		return "a " + out[0].Type
	}
	return fmt.Sprintf("%v", fhirpath.JSONValue(out[0]))
}

// emitRow hands the current row on, counting the rows of the resource.
func (ev *evaluator) emitRow() error {
	ev.rows++
	if ev.rows > ev.v.limits.MaxRowsPerResource {
		return ev.failf(ResourceType+".select", "the resource yields more than %d rows", ev.v.limits.MaxRowsPerResource)
	}
	if err := ev.ctx.Err(); err != nil {
		return err
	}
	return ev.emit(ev.row)
}

// run produces the rows of s over focus (at most one node), whose
// %rowIndex is index, calling next once the row holds them (the rest of
// the row comes from s's siblings, which next produces). A forEachOrNull
// with nothing to iterate produces its rows once over no node at all:
// its columns null, %rowIndex 0.
func (s *selectNode) run(ev *evaluator, focus []fhirpath.Node, index int, next func() error) error {
	foci, own, err := s.foci(ev, focus)
	if err != nil {
		return err
	}
	switch {
	case !own:
		return s.produce(ev, focus, index, next)
	case len(foci) == 0 && s.orNull:
		return s.produce(ev, nil, 0, next)
	}
	for i := range foci {
		if err := s.produce(ev, foci[i:i+1], i, next); err != nil {
			return err
		}
	}
	return nil
}

// foci are the nodes s iterates over; own is false when s has no
// iteration of its own (it runs once, on the focus, with its index).
func (s *selectNode) foci(ev *evaluator, focus []fhirpath.Node) (foci []fhirpath.Node, own bool, err error) {
	switch {
	case s.forEach != nil:
		foci, err = ev.eval(s.forEach, focus, true)
		return foci, true, err
	case len(s.repeat) > 0:
		if len(focus) > 0 {
			err = s.descend(ev, focus, 0, &foci)
		}
		return foci, true, err
	}
	return nil, false, nil
}

// descend collects, depth first, the nodes the repeat paths reach from n.
func (s *selectNode) descend(ev *evaluator, n []fhirpath.Node, depth int, out *[]fhirpath.Node) error {
	if depth >= ev.v.limits.MaxRepeatDepth {
		return ev.failf(s.at+".repeat", "repeat goes deeper than %d levels", ev.v.limits.MaxRepeatDepth)
	}
	for _, p := range s.repeat {
		kids, err := ev.eval(p, n, true)
		if err != nil {
			return err
		}
		for i := range kids {
			*out = append(*out, kids[i])
			if len(*out) > ev.v.limits.MaxRowsPerResource {
				return ev.failf(s.at+".repeat", "repeat reaches more than %d nodes", ev.v.limits.MaxRowsPerResource)
			}
			if err := s.descend(ev, kids[i:i+1], depth+1, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// produce fills s's columns from focus f (at most one node) and the rest of its part of the
// row from its nested selects and unionAll, calling next for each row.
func (s *selectNode) produce(ev *evaluator, f []fhirpath.Node, index int, next func() error) error {
	ev.index = index
	for _, c := range s.columns {
		out, err := ev.eval(c.path, f, false)
		if err != nil {
			return err
		}
		v, err := columnValue(out, c.collection)
		if err != nil {
			return ev.failf(c.at+".path", "%s: %v", c.path.src, err)
		}
		ev.row[c.slot] = v
	}
	return s.chain(ev, f, index, 0, next)
}

// chain runs s's nested selects from the k-th on, then its unionAll, each
// for every row of the previous: their cartesian product.
func (s *selectNode) chain(ev *evaluator, f []fhirpath.Node, index, k int, next func() error) error {
	switch {
	case k < len(s.selects):
		return s.selects[k].run(ev, f, index, func() error { return s.chain(ev, f, index, k+1, next) })
	case k == len(s.selects) && len(s.union) > 0:
		for _, b := range s.union {
			err := b.run(ev, f, index, func() error { return s.chain(ev, f, index, k+1, next) })
			if err != nil {
				return err
			}
		}
		return nil
	}
	return next()
}

// columnValue is a column's value from what its path selected: null, one
// value, or with collection every value as an array.
func columnValue(out []fhirpath.Node, collection bool) (any, error) {
	if collection {
		arr := make([]any, 0, len(out))
		for _, n := range out {
			arr = append(arr, nodeValue(n))
		}
		return arr, nil
	}
	switch len(out) {
	case 0:
		return nil, nil
	case 1:
		return nodeValue(out[0]), nil
	}
	return nil, fmt.Errorf("selects %d values; a column without collection true takes at most one", len(out))
}

// nodeValue is a node as a JSON value; a primitive with only extensions
// has none.
func nodeValue(n fhirpath.Node) any {
	if n.Value == nil {
		return nil
	}
	return fhirpath.JSONValue(n)
}
