package fhirpath

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"
)

// evaluator is one node of a compiled expression: it maps its input
// collection (the focus) to its output, never modifying the input.
type evaluator interface {
	eval(c *evalCtx, focus []Node) ([]Node, error)
}

// Default limits of one evaluation.
const (
	defaultMaxSteps = 1_000_000
	defaultMaxDepth = 1000
	defaultTimeout  = 2 * time.Second
)

// scope is what $this, $index and $total name inside a function argument.
type scope struct {
	this     []Node
	index    int
	total    []Node
	hasIndex bool
	hasTotal bool
}

// evalCtx is the state of one evaluation.
type evalCtx struct {
	ctx      context.Context
	env      *Env
	resource []Node // %resource
	root     []Node // %rootResource
	context  []Node // %context
	scope    scope
	steps    int
	maxSteps int
	depth    int
	maxDepth int
	deadline time.Time
	// stubs makes resolve() return a stub {resourceType, id} for a
	// reference it cannot find, so that resolve() is Patient still tests
	// the reference's target type (search parameter extraction).
	stubs bool
}

// eval runs the expression over focus with env.
func (e *Expr) eval(ctx context.Context, env *Env, focus []Node) ([]Node, error) {
	return e.run(ctx, env, focus, false)
}

func (e *Expr) run(ctx context.Context, env *Env, focus []Node, stubs bool) ([]Node, error) {
	if e == nil || e.root == nil {
		return nil, nil
	}
	c := &evalCtx{ctx: ctx, env: env, context: focus, scope: scope{this: focus}, stubs: stubs,
		maxSteps: orInt(env.MaxSteps, defaultMaxSteps), maxDepth: orInt(env.MaxDepth, defaultMaxDepth)}
	if env.Resource != nil {
		c.resource = []Node{ResourceNode(env.Resource)}
	}
	c.root = c.resource
	if env.RootResource != nil {
		c.root = []Node{ResourceNode(env.RootResource)}
	}
	timeout := env.Timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	c.deadline = time.Now().Add(timeout)
	return e.root.eval(c, focus)
}

// now is the evaluation's clock: Env.Now, else the time.
func (c *evalCtx) now() time.Time {
	if !c.env.Now.IsZero() {
		return c.env.Now
	}
	return time.Now()
}

func orInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// tick counts n steps and checks the limits.
func (c *evalCtx) tick(n int, pos int) error {
	c.steps += n
	if c.steps > c.maxSteps {
		return execErr(pos, "evaluation exceeded %d steps", c.maxSteps)
	}
	if c.steps&0x3ff < n || n > 0x3ff {
		if time.Now().After(c.deadline) {
			return execErr(pos, "evaluation timed out")
		}
		if c.ctx != nil && c.ctx.Err() != nil {
			return execErr(pos, "evaluation canceled: %v", c.ctx.Err())
		}
	}
	return nil
}

// maxString bounds the length of a string an expression computes.
const maxString = 16 << 20

// account counts the strings a step computed as steps (one per 256 bytes)
// and refuses one longer than maxString.
func (c *evalCtx) account(out []Node, pos int) error {
	size := 0
	for _, n := range out {
		if s, ok := n.Value.(string); ok {
			if len(s) > maxString {
				return execErr(pos, "a string of more than %d bytes", maxString)
			}
			size += len(s)
		}
	}
	if size < 256 {
		return nil
	}
	return c.tick(size/256, pos)
}

// enter counts one level of nested evaluation.
func (c *evalCtx) enter(pos int) error {
	c.depth++
	if c.depth > c.maxDepth {
		return execErr(pos, "evaluation nested deeper than %d levels", c.maxDepth)
	}
	return nil
}

func (c *evalCtx) leave() { c.depth-- }

// literalExpr yields a constant collection.
type literalExpr struct{ nodes []Node }

func (l literalExpr) eval(*evalCtx, []Node) ([]Node, error) { return l.nodes, nil }

// thisExpr yields $this.
type thisExpr struct{}

func (thisExpr) eval(c *evalCtx, _ []Node) ([]Node, error) { return c.scope.this, nil }

// indexVarExpr yields $index.
type indexVarExpr struct{}

func (indexVarExpr) eval(c *evalCtx, _ []Node) ([]Node, error) {
	if !c.scope.hasIndex {
		return nil, nil
	}
	return []Node{intNode(int64(c.scope.index))}, nil
}

// totalExpr yields $total inside aggregate().
type totalExpr struct{}

func (totalExpr) eval(c *evalCtx, _ []Node) ([]Node, error) { return c.scope.total, nil }

// envExpr yields an environment variable.
type envExpr struct {
	name string
	pos  int
}

func (e *envExpr) eval(c *evalCtx, _ []Node) ([]Node, error) {
	switch e.name {
	case "resource":
		return c.resource, nil
	case "rootResource":
		return c.root, nil
	case "context":
		return c.context, nil
	case "ucum":
		return []Node{strNode("http://unitsofmeasure.org")}, nil
	case "sct":
		return []Node{strNode("http://snomed.info/sct")}, nil
	case "loinc":
		return []Node{strNode("http://loinc.org")}, nil
	}
	if v, ok := c.env.Vars[e.name]; ok {
		return v, nil
	}
	switch {
	case strings.HasPrefix(e.name, "vs-"):
		return []Node{strNode("http://hl7.org/fhir/ValueSet/" + e.name[3:])}, nil
	case strings.HasPrefix(e.name, "ext-"):
		return []Node{strNode("http://hl7.org/fhir/StructureDefinition/" + e.name[4:])}, nil
	}
	return nil, semanticErr(e.pos, "unknown environment variable %%%s", e.name)
}

// identExpr is an identifier at the start of a path: a type name keeps the
// focus items of that type; any other name selects that child.
type identExpr struct {
	name string
	pos  int
}

func (e *identExpr) eval(c *evalCtx, focus []Node) ([]Node, error) {
	if isTypeName(e.name) && lookupType(e.name) == nil && len(focus) > 0 && nodeType(focus[0]) == e.name {
		return focus, nil // a resource type the model does not know (ViewDefinition)
	}
	if isTypeName(e.name) && (lookupType(e.name) != nil) {
		var out []Node
		for _, n := range focus {
			if isType(n, e.name) {
				out = append(out, n)
			}
		}
		if out == nil && c.env.Strict && len(focus) > 0 && isResourceType(e.name) && isResource(focus[0]) {
			return nil, semanticErr(e.pos, "the input is a %s, not a %s", focus[0].Type, e.name)
		}
		return out, nil
	}
	return c.children(focus, e.name, e.pos)
}

// isTypeName reports whether an identifier names a type: its first letter
// is upper-case.
func isTypeName(name string) bool { return name != "" && 'A' <= name[0] && name[0] <= 'Z' }

// memberExpr selects the child name of every item of recv.
type memberExpr struct {
	recv evaluator
	name string
	pos  int
}

func (e *memberExpr) eval(c *evalCtx, focus []Node) ([]Node, error) {
	in, err := e.recv.eval(c, focus)
	if err != nil || len(in) == 0 {
		return nil, err
	}
	return c.children(in, e.name, e.pos)
}

// indexExpr selects the item at an index of recv's output.
type indexExpr struct {
	recv, index evaluator
	pos         int
}

func (e *indexExpr) eval(c *evalCtx, focus []Node) ([]Node, error) {
	in, err := e.recv.eval(c, focus)
	if err != nil || len(in) == 0 {
		return nil, err
	}
	idx, err := e.index.eval(c, c.scope.this)
	if err != nil || len(idx) == 0 {
		return nil, err
	}
	i, ok := intOf(idx[0])
	if len(idx) > 1 || !ok || kindOf(idx[0]) != kInt {
		return nil, execErr(e.pos, "an index must be a single Integer")
	}
	if i < 0 || i >= int64(len(in)) {
		return nil, nil
	}
	return in[i : i+1], nil
}

// children selects the child name of each node: through the model when
// the node's type is known (choice elements value[x] by their typed
// properties), else by the JSON property, with a primitive's _name twin.
func (c *evalCtx) children(in []Node, name string, pos int) ([]Node, error) {
	var out []Node
	var unknownIn string // a type of the input that has no such element
	known := false       // some item may have the element
	for _, n := range in {
		m, ok := n.Value.(map[string]any)
		if !ok {
			if n.ext != nil && (name == "extension" || name == "id") {
				out = appendJSON(out, n.ext[name], typeOfChild("Element", name), nil)
			}
			continue
		}
		var has bool
		out, has = child(out, n, m, name)
		if has {
			known = true
		} else {
			unknownIn = n.Type
		}
	}
	if c.env.Strict && !known && unknownIn != "" {
		return nil, semanticErr(pos, "%s has no element '%s'", publicType(unknownIn), name)
	}
	return out, c.tick(len(out)+1, pos)
}

// child appends the child name of one complex node; has is false when
// the node's type is known and has no such element.
func child(out []Node, n Node, m map[string]any, name string) (_ []Node, has bool) {
	typ := n.Type
	if strings.HasPrefix(typ, "System.") {
		if s, ok := m[name].(string); ok {
			return append(out, strNode(s)), true
		}
		return out, true
	}
	if typ != "" && hasElements(typ) {
		el, ok := elementOf(typ, name)
		if !ok {
			// A choice named as JSON names it (valueQuantity): found, but
			// not an element FHIRPath knows by that name.
			if _, t, isChoice := ChoiceOf(name); isChoice {
				out = appendJSON(out, m[name], t, m["_"+name])
			}
			return out, false
		}
		for i, key := range el.keys {
			out = appendJSON(out, m[key], el.types[i], m[el.extKeys[i]])
		}
		return out, true
	}
	if v, ok := m[name]; ok {
		return appendJSON(out, v, "", m["_"+name]), true
	}
	if _, ok := m["_"+name]; ok {
		return appendJSON(out, nil, "", m["_"+name]), true
	}
	if choiceNames[name] {
		return appendChoices(out, m, name), true
	}
	return out, true
}

// typeOfChild returns the single type of element name of typ, or "".
func typeOfChild(typ, name string) string {
	if el, ok := elementOf(typ, name); ok && len(el.types) == 1 {
		return el.types[0]
	}
	return ""
}

// appendJSON appends the JSON value v (each element of an array) as nodes
// of type typ, pairing each with its _name twin ext.
func appendJSON(out []Node, v any, typ string, ext any) []Node {
	if list, ok := v.([]any); ok {
		exts, _ := ext.([]any)
		for i, x := range list {
			var e any
			if i < len(exts) {
				e = exts[i]
			}
			out = appendOne(out, x, typ, e)
		}
		for i := len(list); i < len(exts); i++ {
			out = appendOne(out, nil, typ, exts[i])
		}
		return out
	}
	if v == nil {
		if exts, ok := ext.([]any); ok {
			for _, e := range exts {
				out = appendOne(out, nil, typ, e)
			}
			return out
		}
	}
	return appendOne(out, v, typ, ext)
}

// appendOne appends one JSON value; null without extensions is skipped.
func appendOne(out []Node, v any, typ string, ext any) []Node {
	em, _ := ext.(map[string]any)
	switch x := v.(type) {
	case nil:
		if em == nil {
			return out
		}
	case map[string]any:
		if rt, ok := x["resourceType"].(string); ok && (typ == "" || typ == "Resource" || typ == "DomainResource") {
			typ = rt
		}
	case float64:
		v = json.Number(formatDecimal(x))
	case bool:
		if typ == "" {
			typ = "boolean"
		}
	case []any:
		return out
	}
	return append(out, Node{Value: v, Type: typ, ext: em})
}

// appendChoices appends, for a node of unknown type, the values of the
// choice properties name+Type of m, in key order.
func appendChoices(out []Node, m map[string]any, name string) []Node {
	var keys []string
	for k := range m {
		if len(k) > len(name) && strings.HasPrefix(k, name) {
			if _, ok := choiceType(k[len(name):]); ok {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		t, _ := choiceType(k[len(name):])
		out = appendJSON(out, m[k], t, m["_"+k])
	}
	return out
}

// choiceType returns the type named by a choice suffix (Quantity for
// valueQuantity, dateTime for effectiveDateTime).
func choiceType(suffix string) (string, bool) {
	if suffix == "" {
		return "", false
	}
	if t := strings.ToLower(suffix[:1]) + suffix[1:]; isPrimitiveType(t) && lookupType(t) != nil {
		return t, true
	}
	if lookupType(suffix) != nil && !isResourceType(suffix) {
		return suffix, true
	}
	return "", false
}

// errorExpr fails when evaluated: a literal the specification makes an
// execution error.
type errorExpr struct{ err *Error }

func (e errorExpr) eval(*evalCtx, []Node) ([]Node, error) { return nil, e.err }
