package fhirpath

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// argKind tells how a function's arguments are parsed and evaluated.
type argKind int

const (
	argNone     argKind = iota // no arguments
	argCriteria                // an expression evaluated once per input item
	argType                    // a type specifier
	argValue                   // an expression evaluated against the input item
)

// function is one supported FHIRPath function.
type function struct {
	name     string
	args     argKind
	optional bool // the single argument may be omitted
	impl     func(c *context, in []item, call *callExpr) []item
}

// functions lists the supported functions by name.
var functions = indexFunctions([]*function{
	{name: "where", args: argCriteria, impl: fnWhere},
	{name: "select", args: argCriteria, impl: fnSelect},
	{name: "exists", args: argCriteria, optional: true, impl: fnExists},
	{name: "all", args: argCriteria, impl: fnAll},
	{name: "empty", impl: fnEmpty},
	{name: "not", impl: fnNot},
	{name: "first", impl: fnFirst},
	{name: "last", impl: fnLast},
	{name: "tail", impl: fnTail},
	{name: "count", impl: fnCount},
	{name: "hasValue", impl: fnHasValue},
	{name: "as", args: argType, impl: fnAs},
	{name: "ofType", args: argType, impl: fnAs},
	{name: "is", args: argType, impl: fnIs},
	{name: "resolve", impl: fnResolve},
	{name: "extension", args: argValue, impl: fnExtension},
})

// indexFunctions maps each function's name to it.
func indexFunctions(list []*function) map[string]*function {
	m := make(map[string]*function, len(list))
	for _, f := range list {
		m[f.name] = f
	}
	return m
}

// parseCall parses "(args)" after the function name t; recv is nil for a
// call at the start of a path.
func (p *parser) parseCall(recv evaluator, t token) (evaluator, error) {
	fn, ok := functions[t.text]
	if !ok {
		return nil, p.errorf(t, "function '%s' is not supported", t.text)
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	p.next() // "("
	call := &callExpr{recv: recv, fn: fn}
	if err := p.parseArgs(call); err != nil {
		return nil, fmt.Errorf("in %s(): %w", fn.name, err)
	}
	return call, nil
}

// parseArgs parses the argument list of call up to and including ")".
func (p *parser) parseArgs(call *callExpr) error {
	if p.isOp(")") {
		p.next()
		if call.fn.args != argNone && !call.fn.optional {
			return p.errorf(p.peek(), "missing argument")
		}
		return nil
	}
	if call.fn.args == argNone {
		return p.errorf(p.peek(), "takes no arguments")
	}
	if call.fn.args == argType {
		name, err := p.parseTypeSpecifier()
		if err != nil {
			return err
		}
		call.typeName = name
		return p.expect(")")
	}
	arg, err := p.parseBinary(1)
	if err != nil {
		return err
	}
	call.args = []evaluator{arg}
	return p.expect(")")
}

func fnWhere(c *context, in []item, call *callExpr) []item {
	var out []item
	for _, it := range in {
		if isTrue(call.args[0].eval(c, []item{it})) {
			out = append(out, it)
		}
	}
	return out
}

func fnSelect(c *context, in []item, call *callExpr) []item {
	var out []item
	for _, it := range in {
		out = append(out, call.args[0].eval(c, []item{it})...)
	}
	return out
}

func fnExists(c *context, in []item, call *callExpr) []item {
	if len(call.args) == 0 {
		return boolItems(len(in) > 0)
	}
	return boolItems(len(fnWhere(c, in, call)) > 0)
}

func fnAll(c *context, in []item, call *callExpr) []item {
	return boolItems(len(fnWhere(c, in, call)) == len(in))
}

func fnEmpty(_ *context, in []item, _ *callExpr) []item { return boolItems(len(in) == 0) }

func fnNot(_ *context, in []item, _ *callExpr) []item {
	b, ok := toBool(in)
	if !ok {
		return nil
	}
	return boolItems(!b)
}

func fnFirst(_ *context, in []item, _ *callExpr) []item {
	if len(in) == 0 {
		return nil
	}
	return in[:1]
}

func fnLast(_ *context, in []item, _ *callExpr) []item {
	if len(in) == 0 {
		return nil
	}
	return in[len(in)-1:]
}

func fnTail(_ *context, in []item, _ *callExpr) []item {
	if len(in) < 2 {
		return nil
	}
	return in[1:]
}

func fnCount(_ *context, in []item, _ *callExpr) []item {
	return []item{{value: json.Number(strconv.Itoa(len(in))), typ: "integer"}}
}

// fnHasValue is true for a single primitive value.
func fnHasValue(_ *context, in []item, _ *callExpr) []item {
	if len(in) != 1 {
		return boolItems(false)
	}
	_, isMap := in[0].value.(map[string]any)
	return boolItems(!isMap)
}

func fnAs(_ *context, in []item, call *callExpr) []item { return filterType(in, call.typeName) }

func fnIs(_ *context, in []item, call *callExpr) []item {
	if len(in) != 1 {
		return nil
	}
	return boolItems(isType(in[0], call.typeName))
}

// fnResolve cannot fetch the target; it returns each reference unchanged,
// remembering the target type its reference names for a later is/as.
func fnResolve(c *context, in []item, _ *callExpr) []item {
	out := make([]item, 0, len(in))
	for _, it := range in {
		it.resolved = true
		it.target = c.referenceTarget(it.value)
		out = append(out, it)
	}
	return out
}

// fnExtension selects the extensions of each item whose url equals the
// argument.
func fnExtension(c *context, in []item, call *callExpr) []item {
	var out []item
	for _, it := range in {
		url, ok := singleString(call.args[0].eval(c, []item{it}))
		if !ok {
			continue
		}
		for _, ext := range children([]item{it}, "extension") {
			if m, isMap := ext.value.(map[string]any); isMap && m["url"] == url {
				ext.typ = "Extension"
				out = append(out, ext)
			}
		}
	}
	return out
}

// singleString returns the value of a one-string collection.
func singleString(in []item) (string, bool) {
	if len(in) != 1 {
		return "", false
	}
	s, ok := in[0].value.(string)
	return s, ok
}
