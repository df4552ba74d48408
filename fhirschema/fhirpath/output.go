package fhirpath

import (
	"encoding/json"
	"sync"
)

// JSONValue returns n as FHIR JSON: primitives as their JSON values
// (Decimals as numbers with their written precision, dates and times as
// strings), a Quantity as a Quantity object, complex values as they are; a
// primitive with only extensions as its id and extensions.
func JSONValue(n Node) any {
	switch v := n.Value.(type) {
	case nil:
		if n.ext != nil {
			return n.ext
		}
		return nil
	case Quantity:
		q := map[string]any{"value": json.Number(quantityText(v))}
		if code, ok := calendarUCUM[v.Unit]; ok {
			q["unit"], q["system"], q["code"] = v.Unit, "http://unitsofmeasure.org", code
			return q
		}
		q["unit"], q["system"], q["code"] = v.Unit, "http://unitsofmeasure.org", v.Unit
		return q
	}
	return n.Value
}

// Cache compiles each distinct expression once; safe for concurrent use.
// It holds at most its size; past that, it starts afresh.
type Cache struct {
	mu   sync.Mutex
	max  int
	exps map[string]cached
}

type cached struct {
	expr *Expr
	err  error
}

// NewCache returns a cache holding at most max compiled expressions.
func NewCache(max int) *Cache {
	return &Cache{max: max, exps: map[string]cached{}}
}

// Compile returns the compiled expression for src, compiling it on first
// use; a compile error is remembered too.
func (c *Cache) Compile(src string) (*Expr, error) {
	c.mu.Lock()
	if e, ok := c.exps[src]; ok {
		c.mu.Unlock()
		return e.expr, e.err
	}
	c.mu.Unlock()
	e, err := Compile(src)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.exps) >= c.max {
		c.exps = map[string]cached{}
	}
	c.exps[src] = cached{e, err}
	return e, err
}
