package fhirpath

import (
	"context"
	"errors"
)

// Expr is a compiled expression; safe for concurrent use.
type Expr struct {
	src  string
	root evaluator
}

// Compile parses a FHIRPath expression. A syntax error is an *Error of
// kind syntax naming the position.
func Compile(src string) (*Expr, error) {
	root, err := parse(src)
	if err != nil {
		return nil, err
	}
	return &Expr{src: src, root: root}, nil
}

// MustCompile is Compile for expressions known to be valid; it panics on
// an error.
func MustCompile(src string) *Expr {
	e, err := Compile(src)
	if err != nil {
		panic(err)
	}
	return e
}

// String returns the source expression.
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	return e.src
}

// Eval evaluates the expression with focus as its input collection ($this
// at the start). An evaluation error is an *Error of kind execution (or
// semantic, in strict mode).
func (e *Expr) Eval(ctx context.Context, env *Env, focus []Node) ([]Node, error) {
	if env == nil {
		env = &Env{}
	}
	return e.eval(ctx, env, focus)
}

// Evaluate returns the nodes the expression selects from resource; an
// evaluation error yields none. Search parameter extraction uses it.
func (e *Expr) Evaluate(resource map[string]any) []Node {
	if e == nil || resource == nil {
		return nil
	}
	out, err := e.run(context.Background(), &Env{Resource: resource}, []Node{ResourceNode(resource)}, true)
	if err != nil || len(out) == 0 {
		return nil
	}
	return out
}

// EvaluateAt returns the nodes the expression selects from focus, an
// element of resource (%resource is still the resource); an evaluation
// error yields none.
func (e *Expr) EvaluateAt(resource map[string]any, focus Node) []Node {
	if e == nil || resource == nil || (focus.Value == nil && focus.ext == nil) {
		return nil
	}
	out, err := e.run(context.Background(), &Env{Resource: resource}, []Node{focus}, true)
	if err != nil || len(out) == 0 {
		return nil
	}
	return out
}

// ResourceNode is the node of a resource: its value and its resourceType
// as type.
func ResourceNode(resource map[string]any) Node {
	rt, _ := resource["resourceType"].(string)
	return Node{Value: resource, Type: rt}
}

// IsSyntax reports whether err is a syntax error.
func IsSyntax(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == "syntax"
}
