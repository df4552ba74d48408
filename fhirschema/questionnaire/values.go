package questionnaire

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"time"

	"fhirstore/fhirschema"
)

// sameValue reports whether two values of FHIR type typ (the value[x]
// suffix) are equal: codings by system and code (a side without a system
// matches any), quantities by value and unit, references by reference,
// primitives by value.
func sameValue(typ string, a, b any) bool {
	switch typ {
	case "Coding":
		x, _ := a.(map[string]any)
		y, _ := b.(map[string]any)
		if x == nil || y == nil || x["code"] != y["code"] {
			return false
		}
		sx, _ := x["system"].(string)
		sy, _ := y["system"].(string)
		return sx == "" || sy == "" || sx == sy
	case "Quantity":
		x, _ := a.(map[string]any)
		y, _ := b.(map[string]any)
		if x == nil || y == nil {
			return false
		}
		c, ok := compareNumbers(x["value"], y["value"])
		return ok && c == 0 && sameUnit(x, y)
	case "Reference":
		x, _ := a.(map[string]any)
		y, _ := b.(map[string]any)
		return x != nil && y != nil && x["reference"] != nil && x["reference"] == y["reference"]
	case "Integer", "Decimal":
		c, ok := compareNumbers(a, b)
		return ok && c == 0
	case "Date", "DateTime", "Time", "Instant":
		as, _ := a.(string)
		bs, _ := b.(string)
		return as != "" && compareTemporal(as, bs) == 0
	}
	return a == b
}

// sameUnit reports whether two quantities name the same unit: by system
// and code when both have a code, else by their unit text.
func sameUnit(x, y map[string]any) bool {
	if x["code"] != nil && y["code"] != nil {
		return x["code"] == y["code"] && x["system"] == y["system"]
	}
	return x["unit"] == y["unit"]
}

// compareValues orders two values of comparable types: numbers,
// dates/times (by their common precision), strings.
func compareValues(typ, at string, a, b any) (int, bool) {
	switch {
	case numericTypes[typ] && numericTypes[at]:
		return compareNumbers(a, b)
	case typ == at && (typ == "Date" || typ == "DateTime" || typ == "Time" || typ == "Instant"):
		as, _ := a.(string)
		bs, _ := b.(string)
		return compareTemporal(as, bs), as != "" && bs != ""
	case typ == at && typ == "String":
		as, _ := a.(string)
		bs, _ := b.(string)
		return strings.Compare(as, bs), true
	}
	return 0, false
}

// compareNumbers compares two JSON numbers exactly: as float64 when both
// are written with at most 15 significant digits (which a float64 holds
// exactly enough to order), else as rationals.
func compareNumbers(a, b any) (int, bool) {
	if x, ok := shortFloat(a); ok {
		if y, ok := shortFloat(b); ok {
			switch {
			case x < y:
				return -1, true
			case x > y:
				return 1, true
			}
			return 0, true
		}
	}
	x, ok1 := number(a)
	y, ok2 := number(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	return x.Cmp(y), true
}

// shortFloat reads a JSON number of at most 15 digits.
func shortFloat(v any) (float64, bool) {
	switch v := v.(type) {
	case json.Number:
		if len(v) > 15 {
			return 0, false
		}
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	case float64:
		return v, true
	case int:
		return float64(v), true
	}
	return 0, false
}

// number reads a JSON number (json.Number, float64 or int) exactly.
func number(v any) (*big.Rat, bool) {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = string(v)
	case float64:
		return new(big.Rat).SetFloat64(v), true
	case int:
		return big.NewRat(int64(v), 1), true
	case int64:
		return big.NewRat(v, 1), true
	default:
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// intValue reads an integer extension value.
func intValue(v any) (int, bool) {
	r, ok := number(v)
	if !ok || !r.IsInt() {
		return 0, false
	}
	return int(r.Num().Int64()), true
}

// compareTemporal orders two FHIR dates, dateTimes or times. Two dateTimes
// with a time of day compare as instants; otherwise they compare as
// written, so that a more precise value is after a less precise one with
// the same start (2022-06-30 is after 2022-06), as the HL7 validator has
// it.
func compareTemporal(a, b string) int {
	if strings.Contains(a, "T") && strings.Contains(b, "T") {
		ta, errA := time.Parse(time.RFC3339Nano, a)
		tb, errB := time.Parse(time.RFC3339Nano, b)
		if errA == nil && errB == nil {
			return ta.Compare(tb)
		}
	}
	return strings.Compare(a, b)
}

// referenceType returns the resource type a reference names: Type/id,
// an absolute URL ending in Type/id, or Type/id/_history/v; "" when none.
func referenceType(ref string) string {
	ref, _, _ = strings.Cut(ref, "?")
	segs := strings.Split(strings.TrimRight(ref, "/"), "/")
	if n := len(segs); n >= 4 && segs[n-2] == "_history" {
		segs = segs[:n-2]
	}
	if len(segs) < 2 {
		return ""
	}
	return segs[len(segs)-2]
}

// isResourceType reports whether name is an R4 resource type.
func isResourceType(name string) bool { return fhirschema.IsResourceType(name) }
