package fhirpath

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// mathFunctions: the math functions.
var mathFunctions = []*function{
	{name: "abs", impl: fnAbs},
	{name: "ceiling", impl: mathFn(math.Ceil, true)},
	{name: "floor", impl: mathFn(math.Floor, true)},
	{name: "truncate", impl: mathFn(math.Trunc, true)},
	{name: "exp", impl: mathFn(math.Exp, false)},
	{name: "ln", impl: mathFn(math.Log, false)},
	{name: "sqrt", impl: mathFn(math.Sqrt, false)},
	{name: "log", minArgs: 1, maxArgs: 1, impl: fnLog},
	{name: "power", minArgs: 1, maxArgs: 1, impl: fnPower},
	{name: "round", maxArgs: 1, impl: fnRound},
}

// numInput reads the single number input of a math function.
func numInput(call *callExpr, in []Node) (Node, bool, error) {
	n, ok, err := single(call, in)
	if err != nil || !ok {
		return n, false, err
	}
	if !isNumber(kindOf(n)) && kindOf(n) != kQty {
		return n, false, execErr(call.pos, "%s() needs a number, not a %s", call.fn.name, kindOf(n))
	}
	return n, true, nil
}

func fnAbs(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	n, ok, err := numInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	switch kindOf(n) {
	case kInt:
		i, _ := intOf(n)
		if i < 0 {
			i = -i
		}
		return []Node{intNode(i)}, nil
	case kQty:
		q, _ := qtyOf(n)
		q.Value = math.Abs(q.Value)
		return []Node{qtyNode(q)}, nil
	}
	s := string(n.Value.(json.Number))
	return []Node{{Value: json.Number(strings.TrimPrefix(s, "-")), Type: sysDecimal}}, nil
}

// mathFn builds a one-argument math function; toInt functions return an
// Integer.
func mathFn(f func(float64) float64, toInt bool) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return func(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		n, ok, err := numInput(call, in)
		if err != nil || !ok {
			return nil, err
		}
		x, _ := decOf(n)
		v := f(x)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil
		}
		if toInt {
			return []Node{intNode(int64(v))}, nil
		}
		return []Node{decimalNode(v)}, nil
	}
}

func fnLog(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	n, ok, err := numInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	b, err := c.arg(call, 0)
	if err != nil || len(b) != 1 {
		return nil, err
	}
	x, _ := decOf(n)
	base, _ := decOf(b[0])
	v := math.Log(x) / math.Log(base)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, nil
	}
	return []Node{decimalNode(v)}, nil
}

func fnPower(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	n, ok, err := numInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	e, err := c.arg(call, 0)
	if err != nil || len(e) != 1 {
		return nil, err
	}
	x, _ := decOf(n)
	y, _ := decOf(e[0])
	v := math.Pow(x, y)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, nil
	}
	if kindOf(n) == kInt && kindOf(e[0]) == kInt && y >= 0 {
		return []Node{intNode(int64(v))}, nil
	}
	return []Node{decimalNode(v)}, nil
}

func fnRound(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	n, ok, err := numInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	p, _, err := c.intArg(call, 0)
	if err != nil {
		return nil, err
	}
	if p < 0 {
		return nil, execErr(call.pos, "round() needs a precision of 0 or more")
	}
	x, _ := decOf(n)
	return []Node{{Value: json.Number(strconv.FormatFloat(roundTo(x, int(p)), 'f', int(p), 64)), Type: sysDecimal}}, nil
}
