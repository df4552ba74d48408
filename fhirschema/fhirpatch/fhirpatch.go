// Package fhirpatch applies FHIRPath Patch (hl7.org/fhir/R4/fhirpatch.html):
// a Parameters resource whose operations (add, insert, delete, replace,
// move) locate the elements they change by FHIRPath. It works on JSON
// alone; the server validates and stores what it returns like any update.
package fhirpatch

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"fhirstore/fhirschema/fhirpath"
)

// Error is a FHIRPath Patch that cannot be applied.
type Error struct {
	// Param is the index of the operation in Parameters.parameter, -1 for
	// the Parameters as a whole; Part the index of the part at fault, -1
	// for the operation.
	Param, Part int
	// Invalid is set when the Parameters themselves are malformed, unset
	// when they cannot be applied to this resource.
	Invalid bool
	Msg     string
}

func (e *Error) Error() string {
	if e.Param < 0 {
		return e.Msg
	}
	return fmt.Sprintf("operation %d: %s", e.Param, e.Msg)
}

// Expression is where the fault is in the Parameters, as FHIRPath.
func (e *Error) Expression() string {
	switch {
	case e.Param < 0:
		return "Parameters"
	case e.Part < 0:
		return fmt.Sprintf("Parameters.parameter[%d]", e.Param)
	}
	return fmt.Sprintf("Parameters.parameter[%d].part[%d]", e.Param, e.Part)
}

// evalTimeout bounds the evaluation of one operation's path.
const evalTimeout = 2 * time.Second

// Apply applies the FHIRPath Patch params (a Parameters resource as JSON)
// to resource (JSON) and returns the patched resource; resource itself is
// not changed. An error is an *Error naming the operation at fault.
func Apply(ctx context.Context, resource, params []byte) ([]byte, error) {
	t := newTree()
	p, err := t.decode(params)
	if err != nil {
		return nil, &Error{Param: -1, Part: -1, Invalid: true, Msg: "the body is not JSON: " + err.Error()}
	}
	ops, err := operations(p)
	if err != nil {
		return nil, err
	}
	r, err := t.decode(resource)
	root, ok := r.(map[string]any)
	if err != nil || !ok {
		return nil, fmt.Errorf("decode the resource to patch: %v", err)
	}
	pt := &patcher{tree: t, root: root, ctx: ctx}
	for _, op := range ops {
		if err := pt.apply(op); err != nil {
			return nil, err
		}
	}
	prune(root)
	var buf bytes.Buffer
	if err := t.encode(&buf, root); err != nil {
		return nil, fmt.Errorf("encode the patched resource: %w", err)
	}
	return buf.Bytes(), nil
}

// patcher applies operations to one resource.
type patcher struct {
	tree *tree
	root map[string]any
	ctx  context.Context
}

// apply runs one operation.
func (p *patcher) apply(op *operation) error {
	var err error
	switch op.kind {
	case "add":
		err = p.add(op)
	case "insert":
		err = p.insert(op)
	case "delete":
		err = p.delete(op)
	case "replace":
		err = p.replace(op)
	case "move":
		err = p.move(op)
	}
	return err
}

// eval evaluates expr over the resource (the focus when expr is nil).
func (p *patcher) eval(op *operation, expr *fhirpath.Expr) ([]fhirpath.Node, error) {
	focus := []fhirpath.Node{fhirpath.ResourceNode(p.root)}
	if expr == nil {
		return focus, nil
	}
	env := &fhirpath.Env{Resource: p.root, Strict: true, Timeout: evalTimeout}
	out, err := expr.Eval(p.ctx, env, focus)
	if err != nil {
		return nil, op.fail("path", true, "path %s: %v", op.path, err)
	}
	return out, nil
}

// fail is an error of the operation at part name.
func (op *operation) fail(part string, invalid bool, format string, args ...any) error {
	k, ok := op.at[part]
	if !ok {
		k = -1
	}
	return &Error{Param: op.param, Part: k, Invalid: invalid, Msg: fmt.Sprintf(format, args...)}
}
