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
		return []Node{{Value: c.now().Format("2006-01-02T15:04:05.000-07:00"), Type: sysDateTime}}, nil
	}},
	{name: "today", impl: func(c *evalCtx, _ *callExpr, _ []Node) ([]Node, error) {
		return []Node{{Value: c.now().Format("2006-01-02"), Type: sysDate}}, nil
	}},
	{name: "timeOfDay", impl: func(c *evalCtx, _ *callExpr, _ []Node) ([]Node, error) {
		return []Node{{Value: c.now().Format("15:04:05.000"), Type: sysTime}}, nil
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
			return momentBoundaryNode(m, high, p, hasP, kindOf(n)), nil
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
	scale := math.Pow(10, float64(p))
	orig := x
	if high {
		x = math.Ceil(math.Round((x+half)*scale*1e6)/1e6) / scale
	} else {
		x = math.Floor(math.Round((x-half)*scale*1e6)/1e6) / scale
	}
	if math.Abs(orig) < 1/scale {
		x = math.Copysign(0, orig)
		if high {
			x = 0
		}
	}
	return []Node{{Value: json.Number(fmt.Sprintf("%.*f", p, x)), Type: sysDecimal}}, nil
}

// momentBoundary fills the fields below m's precision with their lowest
// or highest values, down to milliseconds.
func momentBoundary(m moment, high bool) moment {
	pick := func(lo, hi int) int {
		if high {
			return hi
		}
		return lo
	}
	if !m.isTime {
		if m.prec < precMonth {
			m.month = pick(1, 12)
		}
		if m.prec < precDay {
			m.day = pick(1, daysIn(m.year, m.month))
		}
	}
	if m.prec < precHour {
		m.hour = pick(0, 23)
	}
	if m.prec < precMinute {
		m.minute = pick(0, 59)
	}
	if m.prec < precSecond {
		m.second = pick(0, 59)
	}
	if m.frac == "" {
		m.frac = map[bool]string{false: "000", true: "999"}[high]
	}
	if !m.hasTZ && !m.isTime {
		m.hasTZ, m.tzMin = true, pick(14*60, -12*60)
	}
	m.prec = precSecond
	return m
}

// momentBoundaryNode is lowBoundary or highBoundary of a date, date-time or
// time, at p digits of precision (4 year, 6 month, 8 day, 10 hour, 12
// minute, 14 second, 17 millisecond; 9 for a time's milliseconds).
func momentBoundaryNode(m moment, high bool, p int64, hasP bool, k kind) []Node {
	b := momentBoundary(m, high)
	if !hasP {
		switch k {
		case kDate:
			p = 8
		case kTime:
			p = 9
		default:
			p = 17
		}
	}
	if k == kTime {
		return timeAtDigits(b, p)
	}
	switch p {
	case 4, 6, 8:
		b.prec, b.hasTZ, b.isDateTime = int(p/2-1), false, false
		return []Node{{Value: b.format(), Type: sysDate}}
	case 10, 12, 14:
		b.prec, b.frac = int(p/2-1), ""
	case 17:
	default:
		return nil
	}
	return []Node{{Value: b.format(), Type: sysDateTime}}
}

// timeAtDigits writes a time boundary at 2, 4, 6 or 9 digits.
func timeAtDigits(b moment, p int64) []Node {
	switch p {
	case 2, 4, 6:
		b.prec, b.frac = precHour+int(p/2)-1, ""
	case 9:
	default:
		return nil
	}
	return []Node{{Value: b.format(), Type: sysTime}}
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
