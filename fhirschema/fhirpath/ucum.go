package fhirpath

import (
	"strconv"
	"strings"
)

// dims is a unit's dimension: the exponents of mass, length, time, amount
// of substance, temperature, and of the arbitrary units ([iU], U, eq).
type dims [6]int8

// unitDef is a unit reduced to base units: value in base = value × factor.
type unitDef struct {
	factor float64
	dim    dims
}

// atoms are the UCUM units the engine converts between: the common ones of
// clinical data.
var atoms = map[string]unitDef{
	"g": {1, dims{1}}, "m": {1, dims{0, 1}}, "s": {1, dims{0, 0, 1}}, "mol": {6.02214076e23, dims{0, 0, 0, 1}},
	"K": {1, dims{0, 0, 0, 0, 1}}, "L": {1e-3, dims{0, 3}}, "l": {1e-3, dims{0, 3}},
	"min": {60, dims{0, 0, 1}}, "h": {3600, dims{0, 0, 1}}, "d": {86400, dims{0, 0, 1}},
	"wk": {604800, dims{0, 0, 1}}, "mo": {2629800, dims{0, 0, 1}}, "a": {31557600, dims{0, 0, 1}},
	"[lb_av]": {453.59237, dims{1}}, "[oz_av]": {28.349523125, dims{1}}, "[in_i]": {0.0254, dims{0, 1}},
	"[ft_i]": {0.3048, dims{0, 1}}, "[mi_i]": {1609.344, dims{0, 1}}, "[yd_i]": {0.9144, dims{0, 1}},
	"Pa": {1000, dims{1, -1, -2}}, "mm[Hg]": {133322.387415, dims{1, -1, -2}}, "bar": {1e8, dims{1, -1, -2}},
	"%": {0.01, dims{}}, "1": {1, dims{}}, "[iU]": {1, dims{0, 0, 0, 0, 0, 1}}, "U": {1, dims{0, 0, 0, 0, 0, 1}},
	"eq": {6.02214076e23, dims{0, 0, 0, 1}}, "cal": {4184, dims{1, 2, -2}}, "J": {1000, dims{1, 2, -2}},
	"[pi]": {3.141592653589793, dims{}}, "Hz": {1, dims{0, 0, -1}}, "N": {1000, dims{1, 1, -2}},
}

// prefixes are the UCUM metric prefixes.
var prefixes = map[string]float64{
	"Y": 1e24, "Z": 1e21, "E": 1e18, "P": 1e15, "T": 1e12, "G": 1e9, "M": 1e6, "k": 1e3, "h": 1e2,
	"da": 1e1, "d": 1e-1, "c": 1e-2, "m": 1e-3, "u": 1e-6, "n": 1e-9, "p": 1e-12, "f": 1e-15,
}

// calendarUCUM gives the UCUM unit of each calendar duration keyword.
var calendarUCUM = map[string]string{
	"year": "a", "month": "mo", "week": "wk", "day": "d", "hour": "h", "minute": "min",
	"second": "s", "millisecond": "ms",
}

// parseUnit reduces a UCUM unit expression (mg/dL, kg.m-2, /min, 10*3/uL)
// to base units.
func parseUnit(u string) (unitDef, bool) {
	if c, ok := calendarUCUM[u]; ok {
		u = c
	}
	out := unitDef{factor: 1}
	if u == "" || u == "1" {
		return out, true
	}
	op := byte('.')
	for i := 0; i <= len(u); {
		j := i
		for j < len(u) && u[j] != '.' && u[j] != '/' {
			if u[j] == '[' {
				if k := strings.IndexByte(u[j:], ']'); k > 0 {
					j += k
				}
			}
			j++
		}
		if term := u[i:j]; term != "" || i > 0 || op != '.' {
			d, ok := parseTerm(term)
			if !ok {
				return out, false
			}
			out = combine(out, d, op == '/')
		}
		if j >= len(u) {
			break
		}
		op, i = u[j], j+1
	}
	return out, true
}

// combine multiplies (or divides) two units.
func combine(a, b unitDef, divide bool) unitDef {
	if divide {
		a.factor /= b.factor
		for i := range a.dim {
			a.dim[i] -= b.dim[i]
		}
		return a
	}
	a.factor *= b.factor
	for i := range a.dim {
		a.dim[i] += b.dim[i]
	}
	return a
}

// parseTerm reads one term: an annotation, a number, or a prefixed atom
// with an exponent.
func parseTerm(t string) (unitDef, bool) {
	if i := strings.IndexByte(t, '{'); i >= 0 {
		t = t[:i]
	}
	if t == "" {
		return unitDef{factor: 1}, true
	}
	if strings.HasPrefix(t, "10*") || strings.HasPrefix(t, "10^") {
		e, err := strconv.Atoi(t[3:])
		return unitDef{factor: pow10(e)}, err == nil
	}
	if n, err := strconv.ParseFloat(t, 64); err == nil {
		return unitDef{factor: n}, true
	}
	exp := 1
	k := len(t)
	for k > 0 && (isDigit(t[k-1]) || t[k-1] == '-' || t[k-1] == '+') && t[k-1] != ']' {
		k--
	}
	if k < len(t) && k > 0 {
		e, err := strconv.Atoi(t[k:])
		if err != nil {
			return unitDef{}, false
		}
		exp, t = e, t[:k]
	}
	d, ok := atomWithPrefix(t)
	if !ok {
		return unitDef{}, false
	}
	out := unitDef{factor: 1}
	for i := 0; i < abs(exp); i++ {
		out = combine(out, d, exp < 0)
	}
	return out, true
}

// atomWithPrefix reads an atom, perhaps after a metric prefix.
func atomWithPrefix(t string) (unitDef, bool) {
	if d, ok := atoms[t]; ok {
		return d, true
	}
	for _, n := range []int{2, 1} {
		if len(t) > n {
			if f, ok := prefixes[t[:n]]; ok {
				if d, ok := atoms[t[n:]]; ok {
					d.factor *= f
					return d, true
				}
			}
		}
	}
	return unitDef{}, false
}

func pow10(e int) float64 {
	f := 1.0
	for i := 0; i < abs(e); i++ {
		f *= 10
	}
	if e < 0 {
		return 1 / f
	}
	return f
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// convertQuantity expresses q in unit, when both units are of the same
// dimension.
func convertQuantity(q Quantity, unit string) (float64, bool) {
	if q.Unit == unit {
		return q.Value, true
	}
	from, ok1 := parseUnit(q.Unit)
	to, ok2 := parseUnit(unit)
	if !ok1 || !ok2 || from.dim != to.dim {
		return 0, false
	}
	return q.Value * from.factor / to.factor, true
}

// isCalendarUnit reports whether u is a calendar duration keyword.
func isCalendarUnit(u string) bool { _, ok := calendarUCUM[u]; return ok }

// comparableQuantities brings b to a's unit. strictCal refuses to compare a
// calendar year or month with a UCUM duration (equality does; equivalence
// does not).
func comparableQuantities(a, b Quantity, strictCal bool) (float64, float64, bool) {
	if strictCal && isCalendarUnit(a.Unit) != isCalendarUnit(b.Unit) {
		for _, u := range []string{a.Unit, b.Unit} {
			if u == "year" || u == "month" || u == "a" || u == "mo" {
				return 0, 0, false
			}
		}
	}
	bv, ok := convertQuantity(b, a.Unit)
	return a.Value, bv, ok
}

// ConvertUnit expresses value, in the UCUM unit from, in the UCUM unit to;
// ok is false when either unit is unknown or they measure different
// dimensions.
func ConvertUnit(value float64, from, to string) (float64, bool) {
	return convertQuantity(Quantity{Value: value, Unit: from}, to)
}
