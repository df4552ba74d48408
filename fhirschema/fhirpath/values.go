package fhirpath

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// The System types of computed values.
const (
	sysBoolean  = "System.Boolean"
	sysString   = "System.String"
	sysInteger  = "System.Integer"
	sysLong     = "System.Long"
	sysDecimal  = "System.Decimal"
	sysDate     = "System.Date"
	sysDateTime = "System.DateTime"
	sysTime     = "System.Time"
	sysQuantity = "System.Quantity"
)

// kind is the System type a node's value takes part in operations as.
type kind int

const (
	kNone kind = iota
	kBool
	kInt
	kDec
	kStr
	kDate
	kDateTime
	kTime
	kQty
	kObj
)

var kindNames = [...]string{"nothing", "Boolean", "Integer", "Decimal", "String", "Date", "DateTime", "Time", "Quantity", "object"}

func (k kind) String() string { return kindNames[k] }

// kindOf returns the System kind of n: FHIR primitives take the kind of
// their System counterpart, a FHIR Quantity (and its specializations) is a
// Quantity.
func kindOf(n Node) kind {
	switch v := n.Value.(type) {
	case bool:
		return kBool
	case int64:
		return kInt
	case json.Number:
		switch n.Type {
		case "integer", "positiveInt", "unsignedInt", sysInteger, sysLong, "integer64":
			return kInt
		case "decimal", sysDecimal:
			return kDec
		}
		if strings.ContainsAny(string(v), ".eE") {
			return kDec
		}
		return kInt
	case float64:
		return kDec
	case string:
		switch n.Type {
		case "date", sysDate:
			return kDate
		case "dateTime", "instant", sysDateTime:
			return kDateTime
		case "time", sysTime:
			return kTime
		}
		return kStr
	case Quantity:
		return kQty
	case map[string]any:
		if isQuantityType(n.Type) {
			return kQty
		}
		return kObj
	}
	return kNone
}

// isQuantityType reports whether typ is Quantity or one of its
// specializations.
func isQuantityType(typ string) bool {
	for t := typ; t != ""; t = baseType(t) {
		if t == "Quantity" {
			return true
		}
	}
	return false
}

// intOf returns n's Integer value.
func intOf(n Node) (int64, bool) {
	switch v := n.Value.(type) {
	case int64:
		return v, true
	case json.Number:
		i, err := strconv.ParseInt(string(v), 10, 64)
		return i, err == nil
	}
	return 0, false
}

// decOf returns n's value as a Decimal (an Integer too).
func decOf(n Node) (float64, bool) {
	switch v := n.Value.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	}
	return 0, false
}

// qtyOf returns n's value as a Quantity: a quantity value, or a FHIR
// Quantity element (its code, else its unit).
func qtyOf(n Node) (Quantity, bool) {
	switch v := n.Value.(type) {
	case Quantity:
		return v, true
	case map[string]any:
		num, ok := v["value"].(json.Number)
		if !ok {
			return Quantity{}, false
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			return Quantity{}, false
		}
		unit, _ := v["code"].(string)
		if unit == "" {
			unit, _ = v["unit"].(string)
			if u := calendarUnits[unit]; u != "" {
				unit = u
			}
		}
		return Quantity{Value: f, Unit: unit, scale: scaleOf(string(num))}, true
	}
	return Quantity{}, false
}

// scaleOf counts the digits after the decimal point of a number's text.
func scaleOf(s string) int {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		end := strings.IndexAny(s, "eE")
		if end < 0 {
			end = len(s)
		}
		return end - i - 1
	}
	return 0
}

// decimalNode is a computed Decimal.
func decimalNode(f float64) Node {
	return Node{Value: json.Number(formatDecimal(f)), Type: sysDecimal}
}

// formatDecimal writes f the shortest way that reads back the same, with no
// exponent.
func formatDecimal(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "0"
	}
	// Round away float noise such as 0.30000000000000004.
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if r := strconv.FormatFloat(f, 'g', 15, 64); len(r) < len(s) && !strings.ContainsAny(r, "eE") {
		return r
	}
	if r := strconv.FormatFloat(f, 'f', 8, 64); len(s) > 18 {
		return trimZeros(r)
	}
	return s
}

// trimZeros removes trailing fraction zeros (and a bare point).
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func intNode(i int64) Node           { return Node{Value: i, Type: sysInteger} }
func boolNode(b bool) Node           { return Node{Value: b, Type: sysBoolean} }
func strNode(s string) Node          { return Node{Value: s, Type: sysString} }
func qtyNode(q Quantity) Node        { return Node{Value: q, Type: sysQuantity} }
func boolOut(b bool) []Node          { return []Node{boolNode(b)} }
func literal(ns ...Node) literalExpr { return literalExpr{nodes: ns} }
