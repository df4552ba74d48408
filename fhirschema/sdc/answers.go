package sdc

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"fhirstore/fhirschema"
)

// answerValue converts a value an expression yielded (as FHIR JSON) to
// the answer value[x] of item qi: its type suffix and value.
func answerValue(v any, qi map[string]any) (string, any, error) {
	itemType := str(qi["type"])
	switch itemType {
	case "boolean":
		if b, ok := v.(bool); ok {
			return "Boolean", b, nil
		}
	case "decimal":
		if n, ok := number(v); ok {
			return "Decimal", n, nil
		}
	case "integer":
		if n, ok := number(v); ok {
			if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
				return "Integer", json.Number(strconv.FormatInt(i, 10)), nil
			}
			if f, err := n.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return "Integer", json.Number(strconv.FormatInt(int64(f), 10)), nil
			}
		}
	case "date":
		if s, ok := v.(string); ok && len(s) >= 4 {
			if i := strings.IndexByte(s, 'T'); i > 0 {
				s = s[:i]
			}
			return "Date", s, nil
		}
	case "dateTime":
		if s, ok := v.(string); ok && len(s) >= 4 {
			return "DateTime", s, nil
		}
	case "time":
		if s, ok := v.(string); ok {
			return "Time", s, nil
		}
	case "string", "text":
		if s, ok := text(v); ok {
			return "String", s, nil
		}
	case "url":
		if s, ok := v.(string); ok {
			return "Uri", s, nil
		}
	case "choice", "open-choice":
		return choiceAnswer(v, qi)
	case "attachment":
		if m, ok := v.(map[string]any); ok {
			return "Attachment", m, nil
		}
	case "reference":
		if m, ok := v.(map[string]any); ok {
			if _, ok := m["reference"]; ok {
				return "Reference", m, nil
			}
			if ref := referenceTo(m); ref != nil {
				return "Reference", ref, nil
			}
		}
	case "quantity":
		if q := quantityAnswer(v, qi); q != nil {
			return "Quantity", q, nil
		}
	default:
		return "", nil, fmt.Errorf("items of type %q take no answers", itemType)
	}
	return "", nil, fmt.Errorf("%s does not fit an item of type %s", describe(v), itemType)
}

// number is a numeric value, a Quantity's value included, as a JSON number.
func number(v any) (json.Number, bool) {
	switch x := v.(type) {
	case json.Number:
		return x, true
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), true
	case int:
		return json.Number(strconv.Itoa(x)), true
	case float64:
		return json.Number(strconv.FormatFloat(x, 'f', -1, 64)), true
	case map[string]any:
		if isQuantity(x) {
			return number(x["value"])
		}
	}
	return "", false
}

// isQuantity tells a Quantity object from other objects.
func isQuantity(m map[string]any) bool {
	_, value := m["value"]
	_, unit := m["unit"]
	_, code := m["code"]
	_, coding := m["coding"]
	return value && (unit || code) && !coding
}

// unitOf is the questionnaire-unit Coding of an item; nil when it has none.
func unitOf(qi map[string]any) map[string]any {
	ext := extension(qi, ExtUnit)
	c, _ := ext["valueCoding"].(map[string]any)
	return c
}

// quantityOf is a Quantity of value in unit (a questionnaire-unit Coding;
// nil for a bare value).
func quantityOf(value json.Number, unit map[string]any) map[string]any {
	q := map[string]any{"value": value}
	if unit == nil {
		return q
	}
	code := str(unit["code"])
	q["unit"] = code
	if d := str(unit["display"]); d != "" {
		q["unit"] = d
	}
	if code != "" {
		q["code"] = code
		q["system"] = UCUM
		if s := str(unit["system"]); s != "" {
			q["system"] = s
		}
	}
	return q
}

// quantityAnswer is the answer of a quantity item: a Quantity as it is
// (its unit taken from the item when it has none), a number in the item's
// unit.
func quantityAnswer(v any, qi map[string]any) map[string]any {
	if m, ok := v.(map[string]any); ok && isQuantity(m) {
		q := fhirschema.CopyJSON(m).(map[string]any)
		if u := unitOf(qi); u != nil && q["code"] == nil && q["unit"] == nil {
			for k, x := range quantityOf("0", u) {
				if k != "value" {
					q[k] = x
				}
			}
		}
		return q
	}
	if n, ok := number(v); ok {
		return quantityOf(n, unitOf(qi))
	}
	return nil
}

// choiceAnswer is the answer of a choice or open-choice item: a Coding
// as it is (a CodeableConcept's first Coding), a code or string matched
// against the item's options, a string as it is for open-choice.
func choiceAnswer(v any, qi map[string]any) (string, any, error) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["code"]; ok && !isQuantity(x) {
			return "Coding", codingOf(x), nil
		}
		if cs := objects(x["coding"]); len(cs) > 0 {
			return "Coding", codingOf(cs[0]), nil
		}
	case string:
		for _, opt := range objects(qi["answerOption"]) {
			if c, ok := opt["valueCoding"].(map[string]any); ok && c["code"] == x {
				return "Coding", codingOf(c), nil
			}
			if opt["valueString"] == x {
				return "String", x, nil
			}
		}
		if qi["type"] == "open-choice" {
			return "String", x, nil
		}
		if len(objects(qi["answerOption"])) == 0 {
			return "Coding", map[string]any{"code": x}, nil
		}
		return "", nil, fmt.Errorf("%q is none of the item's options", x)
	default:
		if n, ok := number(v); ok {
			for _, opt := range objects(qi["answerOption"]) {
				if o, ok := number(opt["valueInteger"]); ok && o.String() == n.String() {
					return "Integer", o, nil
				}
			}
		}
	}
	return "", nil, fmt.Errorf("%s does not fit an item of type %s", describe(v), str(qi["type"]))
}

// codingOf keeps the Coding elements of c.
func codingOf(c map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"system", "version", "code", "display", "userSelected"} {
		if v, ok := c[k]; ok {
			out[k] = v
		}
	}
	return out
}

// describe names a value in an issue.
func describe(v any) string {
	switch x := v.(type) {
	case map[string]any:
		if isQuantity(x) {
			return "a Quantity"
		}
		if rt := str(x["resourceType"]); rt != "" {
			return "a " + rt
		}
		return "an object"
	case string:
		return strconv.Quote(x)
	case nil:
		return "an empty value"
	}
	if s, ok := text(v); ok {
		return s
	}
	return fmt.Sprintf("%v", v)
}
