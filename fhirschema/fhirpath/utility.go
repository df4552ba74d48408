package fhirpath

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// utilityFunctions: trace, the clock, boundaries and precision.
var utilityFunctions = []*function{
	{name: "trace", minArgs: 1, maxArgs: 2, impl: fnTrace},
	{name: "now", impl: func(c *evalCtx, _ *callExpr, _ []Node) ([]Node, error) {
		return []Node{{Value: c.now.Format("2006-01-02T15:04:05.000-07:00"), Type: sysDateTime}}, nil
	}},
	{name: "today", impl: func(c *evalCtx, _ *callExpr, _ []Node) ([]Node, error) {
		return []Node{{Value: c.now.Format("2006-01-02"), Type: sysDate}}, nil
	}},
	{name: "timeOfDay", impl: func(c *evalCtx, _ *callExpr, _ []Node) ([]Node, error) {
		return []Node{{Value: c.now.Format("15:04:05.000"), Type: sysTime}}, nil
	}},
	{name: "lowBoundary", maxArgs: 1, impl: fnBoundary(false)},
	{name: "highBoundary", maxArgs: 1, impl: fnBoundary(true)},
	{name: "precision", impl: fnPrecision},
}

func fnTrace(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	name, _, err := c.strArg(call, 0)
	if err != nil {
		return nil, err
	}
	if c.env.Trace == nil {
		return in, nil
	}
	shown := in
	if len(call.args) > 1 {
		shown = nil
		err := c.each(call, 1, in, func(_ int, _ Node, res []Node) (bool, error) {
			shown = append(shown, res...)
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	c.env.Trace(name, shown)
	return in, nil
}

// fnBoundary builds lowBoundary([precision]) and highBoundary([precision]).
func fnBoundary(high bool) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		n, ok, err := single(call, in)
		if err != nil || !ok {
			return nil, err
		}
		p, hasP, err := c.intArg(call, 0)
		if err != nil {
			return nil, err
		}
		switch kindOf(n) {
		case kInt, kDec:
			return decimalBoundary(n, high, p, hasP)
		case kDate, kDateTime, kTime:
			m, ok := momentOf(n)
			if !ok {
				return nil, nil
			}
			return []Node{momentNode(momentBoundary(m, high), n)}, nil
		case kQty:
			q, _ := qtyOf(n)
			b, err := decimalBoundary(Node{Value: json.Number(quantityText(q)), Type: sysDecimal}, high, p, hasP)
			if err != nil || len(b) == 0 {
				return nil, err
			}
			f, _ := decOf(b[0])
			return []Node{qtyNode(Quantity{Value: f, Unit: q.Unit, scale: numScale(b[0])})}, nil
		}
		return nil, nil
	}
}

// decimalBoundary is the lowest or highest value a number of its precision
// may stand for, written with p digits (8 by default).
func decimalBoundary(n Node, high bool, p int64, hasP bool) ([]Node, error) {
	if !hasP {
		p = 8
	}
	if p < 0 || p > 28 {
		return nil, nil
	}
	x, _ := decOf(n)
	half := 0.5 * math.Pow(10, -float64(numScale(n)))
	if kindOf(n) == kInt {
		half = 0.5
	}
	if high {
		x += half
	} else {
		x -= half
	}
	return []Node{{Value: json.Number(fmt.Sprintf("%.*f", p, x)), Type: sysDecimal}}, nil
}

// momentBoundary fills the fields below m's precision with their lowest or
// highest values.
func momentBoundary(m moment, high bool) moment {
	if !m.isTime {
		if m.prec < precMonth {
			m.month = map[bool]int{false: 1, true: 12}[high]
		}
		if m.prec < precDay {
			m.day = map[bool]int{false: 1, true: daysIn(m.year, m.month)}[high]
		}
	}
	if m.isTime || m.isDateTime {
		if m.prec < precHour {
			m.hour = map[bool]int{false: 0, true: 23}[high]
		}
		if m.prec < precMinute {
			m.minute = map[bool]int{false: 0, true: 59}[high]
		}
		if m.prec < precSecond {
			m.second = map[bool]int{false: 0, true: 59}[high]
		}
		if m.frac == "" {
			m.frac = map[bool]string{false: "000", true: "999"}[high]
		}
		m.prec = precSecond
		if !m.hasTZ && m.isDateTime {
			m.hasTZ, m.tzMin = true, map[bool]int{false: 14 * 60, true: -12 * 60}[high]
		}
		return m
	}
	m.prec = precDay
	return m
}

func fnPrecision(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	n, ok, err := single(call, in)
	if err != nil || !ok {
		return nil, err
	}
	switch kindOf(n) {
	case kDec, kInt:
		return []Node{intNode(int64(numScale(n)))}, nil
	case kDate, kDateTime, kTime:
		s := n.Value.(string)
		if i := strings.IndexAny(s, "Z+"); i > 0 {
			s = s[:i]
		} else if i := strings.LastIndexByte(s, '-'); i > 7 {
			s = s[:i]
		}
		digits := 0
		for i := 0; i < len(s); i++ {
			if isDigit(s[i]) {
				digits++
			}
		}
		return []Node{intNode(int64(digits))}, nil
	}
	return nil, nil
}
