package graphql

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// referenceField follows a Reference to the resource it names (the field
// resource): a contained resource (#id) or a stored one (Type/id, or a URL
// ending so). With type: only a resource of that type; with optional:
// true, a reference that does not resolve leaves the field out instead of
// failing the query.
func (x *executor) referenceField(n node, f *ast.Field, t target, depth int, path []string, key string) error {
	var optional bool
	var only string
	for _, a := range f.Arguments {
		v, err := x.value(a.Value, path)
		if err != nil {
			return err
		}
		switch a.Name {
		case "optional":
			b, ok := v.(bool)
			if !ok {
				return errorAt(a.Position, path, "optional must be a Boolean")
			}
			optional = b
		case "type":
			s, ok := v.(string)
			if !ok || !isResourceType(s) {
				return errorAt(a.Position, path, "type must name a resource type, not %v", v)
			}
			only = s
		default:
			return errorAt(a.Position, path, "resource takes the arguments type and optional, not %s", a.Name)
		}
	}
	if len(f.SelectionSet) == 0 {
		return errorAt(f.Position, path, "\"resource\" is a resource: select its fields")
	}
	if n.dry {
		return nil
	}
	m, _ := n.value.(map[string]any)
	ref, _ := m["reference"].(string)
	r, err := x.resolve(f, path, n, ref, only)
	switch {
	case err != nil:
		return err
	case r == nil && (optional || only != "" && ref != "" && !refersTo(ref, only)):
		return nil
	case r == nil:
		return notFound(f, path, fmt.Sprintf("the resource of the reference %q", ref))
	}
	return x.emit(n, anyResource, false, f, []any{r}, t, depth, path, key)
}

// resolve finds the resource ref names; nil when there is none (or not of
// the type only).
func (x *executor) resolve(f *ast.Field, path []string, n node, ref, only string) (map[string]any, error) {
	if id, ok := strings.CutPrefix(ref, "#"); ok {
		for _, c := range items(n.res["contained"]) {
			if m, ok := c.(map[string]any); ok && m["id"] == id {
				if rt, _ := m["resourceType"].(string); only == "" || rt == only {
					return m, nil
				}
			}
		}
		return nil, nil
	}
	typ, id, ok := splitReference(ref)
	if !ok || (only != "" && typ != only) {
		return nil, nil
	}
	if err := x.count(f, path, 1); err != nil {
		return nil, err
	}
	r, err := x.b.Read(x.ctx, typ, id)
	if err != nil {
		return nil, x.backendError(f, path, err)
	}
	return r, nil
}

// splitReference reads Type/id, Type/id/_history/v or a URL ending so.
func splitReference(ref string) (typ, id string, ok bool) {
	if i := strings.Index(ref, "/_history/"); i >= 0 {
		ref = ref[:i]
	}
	parts := strings.Split(ref, "/")
	if len(parts) < 2 {
		return "", "", false
	}
	typ, id = parts[len(parts)-2], parts[len(parts)-1]
	if !isResourceType(typ) || id == "" {
		return "", "", false
	}
	return typ, id, true
}

// refersTo tells whether ref names a resource of type typ.
func refersTo(ref, typ string) bool {
	t, _, ok := splitReference(ref)
	return ok && t == typ
}

// filter applies a field's arguments to its values: fhirpath: keeps those
// for which the expression is true, _offset and _count page through them,
// any other argument keeps those whose element of that name has that
// value (name(use: official), extension(url: "…")).
func (x *executor) filter(n node, el element, f *ast.Field, vals []any, path []string) ([]any, error) {
	offset, count := 0, -1
	for _, a := range f.Arguments {
		v, err := x.value(a.Value, path)
		if err != nil {
			return nil, err
		}
		switch a.Name {
		case "_offset", "_count":
			i, err := strconv.Atoi(fmt.Sprint(v))
			if err != nil || i < 0 {
				return nil, errorAt(a.Position, path, "%s must be a whole number, not %v", a.Name, v)
			}
			if a.Name == "_offset" {
				offset = i
			} else {
				count = i
			}
		case "fhirpath":
			if vals, err = x.keepTrue(n, el, vals, fmt.Sprint(v), a, path); err != nil {
				return nil, err
			}
		default:
			if vals, err = keepEqual(el, vals, a, v, path); err != nil {
				return nil, err
			}
		}
	}
	vals = vals[min(offset, len(vals)):]
	if count >= 0 && count < len(vals) {
		vals = vals[:count]
	}
	return vals, nil
}

// keepTrue keeps the values for which the FHIRPath expression is true.
func (x *executor) keepTrue(n node, el element, vals []any, src string, a *ast.Argument, path []string) ([]any, error) {
	var out []any
	for _, v := range vals {
		res, err := x.evaluate(node{value: v, typ: el.typ, res: n.res}, src, a.Position, path)
		if err != nil {
			return nil, err
		}
		if len(res) == 1 && res[0].Value == true {
			out = append(out, v)
		}
	}
	return out, nil
}

// keepEqual keeps the values whose element a.Name has the value want.
func keepEqual(el element, vals []any, a *ast.Argument, want any, path []string) ([]any, error) {
	if isPrimitive(el.typ) {
		return nil, errorAt(a.Position, path, "a %s has no element %q to filter by", el.typ, a.Name)
	}
	sub, ok := elementOf(el.typ, a.Name)
	if !ok {
		return nil, errorAt(a.Position, path, "%s has no element %q to filter by", displayType(el.typ), a.Name)
	}
	w := fmt.Sprint(want)
	var out []any
	for _, v := range vals {
		m, _ := v.(map[string]any)
		for _, got := range items(m[sub.key]) {
			if fmt.Sprint(got) == w {
				out = append(out, v)
				break
			}
		}
	}
	return out, nil
}

// value is an argument's value, its variables replaced by theirs.
func (x *executor) value(v *ast.Value, path []string) (any, error) {
	switch v.Kind {
	case ast.Variable:
		if val, ok := x.vars[v.Raw]; ok {
			return val, nil
		}
		def := x.op.VariableDefinitions.ForName(v.Raw)
		if def == nil {
			return nil, errorAt(v.Position, path, "the variable $%s is not declared", v.Raw)
		}
		if def.DefaultValue != nil {
			return x.value(def.DefaultValue, path)
		}
		return nil, nil
	case ast.IntValue, ast.FloatValue:
		return json.Number(v.Raw), nil
	case ast.ListValue:
		out := make([]any, 0, len(v.Children))
		for _, c := range v.Children {
			item, err := x.value(c.Value, path)
			if err != nil {
				return nil, err
			}
			out = append(out, item)
		}
		return out, nil
	case ast.ObjectValue:
		out := make(map[string]any, len(v.Children))
		for _, c := range v.Children {
			item, err := x.value(c.Value, path)
			if err != nil {
				return nil, err
			}
			out[c.Name] = item
		}
		return out, nil
	}
	return v.Value(nil)
}
