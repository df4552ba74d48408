package fhirpatch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"fhirstore/fhirschema/fhirpath"
)

// operation is one parameter of a FHIRPath Patch.
type operation struct {
	param int // its index in Parameters.parameter
	kind  string
	path  *fhirpath.Expr
	name  string
	value *value
	// index (insert), source and destination (move); -1 when absent.
	index, source, destination int
	// at are the indexes of its parts by name, for errors.
	at map[string]int
}

// value is the value part of an operation: a value[x] or resource, or an
// anonymous value given as parts (a backbone element).
type value struct {
	json any
	ext  any    // the _value[x] twin of a primitive: its id and extensions
	typ  string // the type of value[x] (date, HumanName); "" otherwise
	// parts are the elements of an anonymous value, in order.
	parts []namedValue
}

type namedValue struct {
	name string
	v    *value
}

// kinds are the operation types and the parts each needs besides type and
// path.
var kinds = map[string][]string{
	"add":     {"name", "value"},
	"insert":  {"value", "index"},
	"delete":  nil,
	"replace": {"value"},
	"move":    {"source", "destination"},
}

// operations reads the operations of a Parameters resource.
func operations(params any) ([]*operation, error) {
	p, ok := params.(map[string]any)
	if !ok || p["resourceType"] != "Parameters" {
		return nil, &Error{Param: -1, Part: -1, Invalid: true, Msg: "a FHIRPath Patch is a Parameters resource"}
	}
	raw, present := p["parameter"]
	list, isList := raw.([]any)
	if present && !isList {
		return nil, &Error{Param: -1, Part: -1, Invalid: true, Msg: "Parameters.parameter must be an array"}
	}
	ops := make([]*operation, 0, len(list))
	for i, e := range list {
		op, err := parseOperation(i, e)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func parseOperation(i int, raw any) (*operation, error) {
	bad := func(part int, format string, args ...any) error {
		return &Error{Param: i, Part: part, Invalid: true, Msg: fmt.Sprintf(format, args...)}
	}
	p, _ := raw.(map[string]any)
	if p == nil || p["name"] != "operation" {
		return nil, bad(-1, "each parameter of a FHIRPath Patch is named operation")
	}
	parts, _ := p["part"].([]any)
	op := &operation{param: i, index: -1, source: -1, destination: -1, at: map[string]int{}}
	for k, raw := range parts {
		part, _ := raw.(map[string]any)
		name, _ := part["name"].(string)
		if _, dup := op.at[name]; dup {
			return nil, bad(k, "the operation has two %s parts", name)
		}
		op.at[name] = k
		if err := op.read(name, part); err != nil {
			return nil, bad(k, "%v", err)
		}
	}
	return op, op.complete(bad)
}

// read sets the operation's part name from part.
func (op *operation) read(name string, part map[string]any) error {
	var err error
	switch name {
	case "type":
		op.kind, err = primitive[string](part, "valueCode")
		if _, known := kinds[op.kind]; err == nil && !known {
			err = fmt.Errorf("unknown operation type %q; the types are add, insert, delete, replace and move", op.kind)
		}
	case "path":
		var src string
		if src, err = primitive[string](part, "valueString"); err == nil {
			if op.path, err = fhirpath.Compile(src); err != nil {
				err = fmt.Errorf("path %q: %w", src, err)
			}
		}
	case "name":
		op.name, err = primitive[string](part, "valueString")
	case "value":
		op.value, err = readValue(part)
	case "index":
		op.index, err = position(part)
	case "source":
		op.source, err = position(part)
	case "destination":
		op.destination, err = position(part)
	default:
		err = fmt.Errorf("unknown part %q", name)
	}
	return err
}

// complete checks the operation has the parts its type needs.
func (op *operation) complete(bad func(int, string, ...any) error) error {
	if op.kind == "" {
		return bad(-1, "the operation has no type part")
	}
	if op.path == nil {
		return bad(-1, "the %s operation has no path part", op.kind)
	}
	for _, need := range kinds[op.kind] {
		if _, ok := op.at[need]; !ok {
			return bad(-1, "the %s operation needs a %s part", op.kind, need)
		}
	}
	return nil
}

// primitive reads the property key of a part as a T.
func primitive[T any](part map[string]any, key string) (T, error) {
	v, ok := part[key].(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("the %s part needs %s", part["name"], key)
	}
	return v, nil
}

// position reads a valueInteger that is 0 or more.
func position(part map[string]any) (int, error) {
	n, err := primitive[json.Number](part, "valueInteger")
	if err != nil {
		return 0, err
	}
	i, err := strconv.Atoi(n.String())
	if err != nil || i < 0 {
		return 0, fmt.Errorf("the %s part needs an integer of 0 or more, not %s", part["name"], n)
	}
	return i, nil
}

// readValue reads a value part: value[x], resource or nested parts.
func readValue(part map[string]any) (*value, error) {
	for k, v := range part {
		if el, typ, ok := fhirpath.ChoiceOf(k); ok && el == "value" {
			return &value{json: v, ext: part["_"+k], typ: typ}, nil
		}
	}
	if r, ok := part["resource"]; ok {
		return &value{json: r}, nil
	}
	parts, _ := part["part"].([]any)
	if len(parts) == 0 {
		return nil, fmt.Errorf("the %s part has no value[x], resource or part", part["name"])
	}
	out := &value{}
	for _, raw := range parts {
		sub, _ := raw.(map[string]any)
		name, _ := sub["name"].(string)
		if strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("a part of the %s part has no name", part["name"])
		}
		v, err := readValue(sub)
		if err != nil {
			return nil, err
		}
		out.parts = append(out.parts, namedValue{name: name, v: v})
	}
	return out, nil
}
