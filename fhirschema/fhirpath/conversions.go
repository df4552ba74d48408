package fhirpath

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// conversionFunctions: to* and convertsTo*.
var conversionFunctions = []*function{
	converter("Boolean", toBoolean), converter("Integer", toInteger), converter("Decimal", toDecimal),
	converter("String", toString), converter("Date", toDate), converter("DateTime", toDateTime),
	converter("Time", toTime),
	{name: "toQuantity", maxArgs: 1, impl: fnToQuantity(false)},
	{name: "convertsToQuantity", maxArgs: 1, impl: fnToQuantity(true)},
}

// converter builds toX() and its convertsToX() twin from one conversion.
func converter(typ string, conv func(Node) (Node, bool)) *function {
	return &function{name: "to" + typ, impl: func(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		n, ok, err := single(call, in)
		if err != nil || !ok {
			return nil, err
		}
		if out, ok := conv(n); ok {
			return []Node{out}, nil
		}
		return nil, nil
	}}
}

// addConvertsTo adds convertsToX() for each toX() conversion: whether the
// conversion gives a value.
func addConvertsTo() {
	for _, typ := range []string{"Boolean", "Integer", "Decimal", "String", "Date", "DateTime", "Time"} {
		to := functions["to"+typ]
		conv := to.impl
		functions["convertsTo"+typ] = &function{name: "convertsTo" + typ, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
			if len(in) == 0 {
				return nil, nil
			}
			out, err := conv(c, call, in)
			if err != nil {
				return nil, err
			}
			return boolOut(len(out) > 0), nil
		}}
	}
}

func toBoolean(n Node) (Node, bool) {
	switch kindOf(n) {
	case kBool:
		return boolNode(n.Value.(bool)), true
	case kInt, kDec:
		f, _ := decOf(n)
		if f == 0 || f == 1 {
			return boolNode(f == 1), true
		}
	case kStr:
		switch strings.ToLower(n.Value.(string)) {
		case "true", "t", "yes", "y", "1", "1.0":
			return boolNode(true), true
		case "false", "f", "no", "n", "0", "0.0":
			return boolNode(false), true
		}
	}
	return Node{}, false
}

var integerText = regexp.MustCompile(`^[+-]?\d+$`)

func toInteger(n Node) (Node, bool) {
	switch kindOf(n) {
	case kInt:
		i, _ := intOf(n)
		return intNode(i), true
	case kBool:
		if n.Value.(bool) {
			return intNode(1), true
		}
		return intNode(0), true
	case kStr:
		s := n.Value.(string)
		if integerText.MatchString(s) {
			if i, err := strconv.ParseInt(s, 10, 32); err == nil {
				return intNode(i), true
			}
		}
	}
	return Node{}, false
}

var decimalText = regexp.MustCompile(`^[+-]?\d+(\.\d+)?$`)

func toDecimal(n Node) (Node, bool) {
	switch kindOf(n) {
	case kInt, kDec:
		switch v := n.Value.(type) {
		case json.Number:
			return Node{Value: v, Type: sysDecimal}, true
		case int64:
			return Node{Value: json.Number(strconv.FormatInt(v, 10)), Type: sysDecimal}, true
		}
	case kBool:
		if n.Value.(bool) {
			return Node{Value: json.Number("1.0"), Type: sysDecimal}, true
		}
		return Node{Value: json.Number("0.0"), Type: sysDecimal}, true
	case kStr:
		if s := n.Value.(string); decimalText.MatchString(s) {
			return Node{Value: json.Number(strings.TrimPrefix(s, "+")), Type: sysDecimal}, true
		}
	}
	return Node{}, false
}

func toString(n Node) (Node, bool) {
	switch kindOf(n) {
	case kStr, kDate, kDateTime, kTime:
		return strNode(n.Value.(string)), true
	case kBool:
		return strNode(strconv.FormatBool(n.Value.(bool))), true
	case kInt:
		i, _ := intOf(n)
		return strNode(strconv.FormatInt(i, 10)), true
	case kDec:
		return strNode(string(n.Value.(json.Number))), true
	case kQty:
		q, _ := qtyOf(n)
		return strNode(formatQuantity(q)), true
	}
	return Node{}, false
}

// formatQuantity writes a quantity as FHIRPath does: 4.5 'mg', 3 days.
func formatQuantity(q Quantity) string {
	v := quantityText(q)
	if isCalendarUnit(q.Unit) {
		return v + " " + q.Unit
	}
	return v + " '" + q.Unit + "'"
}

// quantityText writes a quantity's value with its written precision.
func quantityText(q Quantity) string {
	return padScale(formatDecimal(q.Value), q.scale)
}

func toDate(n Node) (Node, bool) {
	switch kindOf(n) {
	case kDate, kDateTime, kStr:
		m, ok := parseMoment(n.Value.(string), false)
		if !ok {
			return Node{}, false
		}
		m.isDateTime = false
		m.prec = min(m.prec, precDay)
		m.hasTZ = false
		return Node{Value: m.format(), Type: sysDate}, true
	}
	return Node{}, false
}

func toDateTime(n Node) (Node, bool) {
	switch kindOf(n) {
	case kDate, kDateTime, kStr:
		s := n.Value.(string)
		m, ok := parseMoment(s, false)
		if !ok {
			return Node{}, false
		}
		return Node{Value: m.format(), Type: sysDateTime}, true
	}
	return Node{}, false
}

func toTime(n Node) (Node, bool) {
	switch kindOf(n) {
	case kTime, kStr:
		m, ok := parseMoment(n.Value.(string), true)
		if !ok {
			return Node{}, false
		}
		return Node{Value: m.format(), Type: sysTime}, true
	}
	return Node{}, false
}

var quantityPattern = regexp.MustCompile(`^([+-]?\d+(?:\.\d+)?)\s*(?:'([^']+)'|([a-z]+))?$`)

// fnToQuantity builds toQuantity([unit]) and, with test, convertsToQuantity.
func fnToQuantity(test bool) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		n, ok, err := single(call, in)
		if err != nil || !ok {
			return nil, err
		}
		q, ok := quantityOf(n)
		if ok && len(call.args) > 0 {
			unit, has, err := c.strArg(call, 0)
			if err != nil {
				return nil, err
			}
			if has {
				v, conv := convertQuantity(q, unit)
				q, ok = Quantity{Value: v, Unit: unit}, conv
			}
		}
		if test {
			return boolOut(ok), nil
		}
		if !ok {
			return nil, nil
		}
		return []Node{qtyNode(q)}, nil
	}
}

// quantityOf converts a number, Boolean, quantity or string to a Quantity.
func quantityOf(n Node) (Quantity, bool) {
	switch kindOf(n) {
	case kQty:
		return qtyOf(n)
	case kInt, kDec:
		f, _ := decOf(n)
		return Quantity{Value: f, Unit: "1", scale: numScale(n)}, true
	case kBool:
		if n.Value.(bool) {
			return Quantity{Value: 1, Unit: "1"}, true
		}
		return Quantity{Value: 0, Unit: "1"}, true
	case kStr:
		m := quantityPattern.FindStringSubmatch(strings.TrimSpace(n.Value.(string)))
		if m == nil {
			return Quantity{}, false
		}
		f, _ := strconv.ParseFloat(m[1], 64)
		unit := m[2]
		if m[3] != "" {
			if unit = calendarUnits[m[3]]; unit == "" {
				return Quantity{}, false
			}
		}
		if unit == "" {
			unit = "1"
		}
		return Quantity{Value: f, Unit: unit, scale: scaleOf(m[1])}, true
	}
	return Quantity{}, false
}
