package fhirpath

import "fmt"

// Expr is a compiled expression; safe for concurrent use.
type Expr struct {
	src  string
	root evaluator
}

// Node is one selected value.
type Node struct {
	Value any    // map[string]any, string, json.Number or bool
	Type  string // the FHIR type when known: from a choice suffix (valueQuantity → "Quantity", effectiveDateTime → "dateTime"), from as/ofType, else ""
}

// Compile parses a FHIRPath expression of the supported subset.
func Compile(expr string) (*Expr, error) {
	root, err := parse(expr)
	if err != nil {
		return nil, fmt.Errorf("fhirpath: compile %q: %w", expr, err)
	}
	return &Expr{src: expr, root: root}, nil
}

// Evaluate returns the nodes the expression selects from resource.
func (e *Expr) Evaluate(resource map[string]any) []Node {
	if e == nil || e.root == nil || resource == nil {
		return nil
	}
	c := &context{root: resource, rootItem: item{value: resource}}
	c.rootItem.typ = typeOf(c.rootItem)
	out := e.root.eval(c, []item{c.rootItem})
	if len(out) == 0 {
		return nil
	}
	nodes := make([]Node, len(out))
	for i, it := range out {
		nodes[i] = Node{Value: it.value, Type: it.typ}
	}
	return nodes
}

// String returns the source expression.
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	return e.src
}

// EvaluateAt returns the nodes the expression selects from focus, an
// element of resource (a composite parameter's components are relative to
// the element; %resource is still the resource).
func (e *Expr) EvaluateAt(resource map[string]any, focus Node) []Node {
	if e == nil || e.root == nil || resource == nil || focus.Value == nil {
		return nil
	}
	c := &context{root: resource, rootItem: item{value: resource}}
	c.rootItem.typ = typeOf(c.rootItem)
	out := e.root.eval(c, []item{{value: focus.Value, typ: focus.Type}})
	if len(out) == 0 {
		return nil
	}
	nodes := make([]Node, len(out))
	for i, it := range out {
		nodes[i] = Node{Value: it.value, Type: it.typ}
	}
	return nodes
}
