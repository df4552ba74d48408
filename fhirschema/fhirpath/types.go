package fhirpath

import (
	"encoding/json"
	"strings"
)

// systemTypeNames are the names of the System types.
var systemTypeNames = map[string]bool{
	"Boolean": true, "String": true, "Integer": true, "Long": true, "Decimal": true, "Date": true,
	"DateTime": true, "Time": true, "Quantity": true,
}

// splitTypeName splits a type specifier into its namespace (FHIR, System or
// "" when unqualified) and name.
func splitTypeName(spec string) (ns, name string) {
	if i := strings.IndexByte(spec, '.'); i > 0 && (spec[:i] == "FHIR" || spec[:i] == "System") {
		return spec[:i], spec[i+1:]
	}
	return "", spec
}

// validTypeName reports whether spec names a type of the model or a System
// type.
func validTypeName(spec string) bool {
	ns, name := splitTypeName(spec)
	fhir := lookupType(name) != nil
	sys := systemTypeNames[name]
	switch ns {
	case "FHIR":
		return fhir
	case "System":
		return sys || fhir
	}
	return fhir || sys
}

// isType implements is: n's type is spec or specializes it.
func isType(n Node, spec string) bool { return typeMatches(n, spec, false) }

// typeMatches tests n's type against spec; exact (as and ofType) does not
// let a primitive type stand for its base (a code is no string there).
func typeMatches(n Node, spec string, exact bool) bool {
	ns, name := splitTypeName(spec)
	t := nodeType(n)
	if t == "" {
		return false
	}
	if strings.HasPrefix(t, "System.") {
		return ns != "FHIR" && (t[7:] == name || (name == "Integer" && t == sysLong))
	}
	if ns == "System" {
		return false
	}
	if exact && ns == "" && systemTypeNames[name] && isPrimitiveType(t) && lookupType(name) == nil {
		// For as and ofType, an unqualified System name (DateTime) stands
		// for the FHIR primitives of that System type, as R4's own search
		// parameters write it (value.as(DateTime)); is stays strict, as
		// the official suite has it (Patient.active.is(Boolean) is false).
		return systemOf(t) == name
	}
	if exact && isPrimitiveType(t) {
		return t == name
	}
	for x := t; x != ""; x = baseType(x) {
		if x == name || publicType(x) == name {
			return true
		}
	}
	return false
}

// nodeType is n's type, inferring it where the path did not record one:
// a resource by its resourceType, a JSON boolean, a computed value by its
// Go type.
func nodeType(n Node) string {
	if n.Type != "" {
		return n.Type
	}
	switch v := n.Value.(type) {
	case map[string]any:
		rt, _ := v["resourceType"].(string)
		return rt
	case bool:
		return "boolean"
	case int64:
		return sysInteger
	case Quantity:
		return sysQuantity
	}
	return ""
}

// isResource reports whether n is a resource.
func isResource(n Node) bool {
	m, ok := n.Value.(map[string]any)
	if !ok {
		return false
	}
	_, ok = m["resourceType"].(string)
	return ok
}

// typeInfo returns what type() gives for n: its namespace and name.
func typeInfoOf(n Node) Node {
	t := nodeType(n)
	ns, name := "FHIR", publicType(t)
	if strings.HasPrefix(t, "System.") {
		ns, name = "System", t[7:]
	}
	if t == "" {
		ns, name = "System", kindOf(n).String()
	}
	return Node{Value: map[string]any{"namespace": ns, "name": name}, Type: "System.SimpleTypeInfo"}
}

// typeOpExpr is the is and as operators.
type typeOpExpr struct {
	recv     evaluator
	typeName string
	isOp     bool
	pos      int
}

func (e *typeOpExpr) eval(c *evalCtx, focus []Node) ([]Node, error) {
	in, err := e.recv.eval(c, focus)
	if err != nil {
		return nil, err
	}
	return typeOp(c, in, e.typeName, e.isOp, e.pos)
}

// typeOp applies is (isOp) or as to a collection of at most one item.
func typeOp(c *evalCtx, in []Node, spec string, isOp bool, pos int) ([]Node, error) {
	if !validTypeName(spec) {
		return nil, execErr(pos, "unknown type %s", spec)
	}
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > 1 {
		if !isOp && !c.env.Strict {
			return ofType(in, spec), nil
		}
		return nil, execErr(pos, "'%s' needs a single item, not %d", map[bool]string{true: "is", false: "as"}[isOp], len(in))
	}
	if isOp {
		return boolOut(isType(in[0], spec)), nil
	}
	return ofType(in, spec), nil
}

// ofType keeps the items of type spec.
func ofType(in []Node, spec string) []Node {
	var out []Node
	for _, n := range in {
		if typeMatches(n, spec, true) {
			out = append(out, n)
		}
	}
	return out
}

// systemOf names the System type a FHIR primitive's values take.
func systemOf(t string) string {
	switch kindOf(Node{Value: sample[t], Type: t}) {
	case kBool:
		return "Boolean"
	case kInt:
		return "Integer"
	case kDec:
		return "Decimal"
	case kDate:
		return "Date"
	case kDateTime:
		return "DateTime"
	case kTime:
		return "Time"
	}
	return "String"
}

// sample holds a value of each FHIR primitive type whose System type is
// not String, for systemOf.
var sample = map[string]any{
	"boolean": true, "integer": json.Number("0"), "positiveInt": json.Number("1"),
	"unsignedInt": json.Number("0"), "decimal": json.Number("0.0"), "date": "2000",
	"dateTime": "2000", "instant": "2000", "time": "00:00",
}
