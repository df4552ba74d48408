package graphql

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// executor runs one query.
type executor struct {
	ctx       context.Context
	b         Backend
	lim       Limits
	doc       *ast.QueryDocument
	op        *ast.OperationDefinition
	vars      map[string]any
	resources int // read so far
	exprs     map[string]*fhirpath.Expr
}

// selectFields selects sel from n into t. depth counts the nested
// selections, fragments included.
func (x *executor) selectFields(n node, sel ast.SelectionSet, t target, depth int, path []string) error {
	for _, s := range sel {
		if depth > x.lim.MaxDepth {
			p := path
			if f, ok := s.(*ast.Field); ok {
				p = append(path, f.Name)
			}
			return tooCostly(errorAt(s.GetPosition(), p, "the query nests deeper than %d levels", x.lim.MaxDepth))
		}
		if err := x.ctx.Err(); err != nil {
			return x.bound(s.GetPosition(), path, err)
		}
		if err := x.selectOne(n, s, t, depth, path); err != nil {
			return err
		}
	}
	return nil
}

// selectOne selects one field or fragment.
func (x *executor) selectOne(n node, s ast.Selection, t target, depth int, path []string) error {
	switch s := s.(type) {
	case *ast.Field:
		if skip, err := x.skipped(s.Directives, path); skip || err != nil {
			return err
		}
		// Siblings reuse the path's backing array: errors copy it (errorAt).
		return x.field(n, s, t, depth, append(path, s.Name))
	case *ast.InlineFragment:
		if skip, err := x.skipped(s.Directives, path); skip || err != nil {
			return err
		}
		if !knownType(s.TypeCondition) {
			return errorAt(s.Position, path, "there is no type %q", s.TypeCondition)
		}
		if !appliesTo(s.TypeCondition, n) {
			return nil
		}
		return x.selectFields(n, s.SelectionSet, t, depth+1, path)
	case *ast.FragmentSpread:
		if skip, err := x.skipped(s.Directives, path); skip || err != nil {
			return err
		}
		f := x.doc.Fragments.ForName(s.Name)
		if f == nil {
			return errorAt(s.Position, path, "there is no fragment named %q", s.Name)
		}
		if !knownType(f.TypeCondition) {
			return errorAt(f.Position, path, "there is no type %q", f.TypeCondition)
		}
		if !appliesTo(f.TypeCondition, n) {
			return nil
		}
		return x.selectFields(n, f.SelectionSet, t, depth+1, path)
	}
	return errorAt(s.GetPosition(), path, "unknown selection")
}

// knownType tells whether a fragment's type condition names a type:
// none, a resource type, Resource, DomainResource or a data type.
func knownType(typ string) bool {
	if typ == "" || typ == "Resource" || typ == "DomainResource" || isResourceType(typ) || metaTypes["#"+typ] != nil {
		return true
	}
	_, _, ok := fhirschema.Element(typ, "extension")
	return ok
}

// appliesTo tells whether a fragment on typ applies to n.
func appliesTo(typ string, n node) bool {
	switch {
	case typ == "" || typ == n.typ || "#"+typ == n.typ || n.dry:
		return true
	case typ == "Resource" || typ == "DomainResource":
		return n.isResource()
	}
	return false
}

// field selects one field of n into t.
func (x *executor) field(n node, f *ast.Field, t target, depth int, path []string) error {
	key := f.Alias
	if key == "" {
		key = f.Name
	}
	if f.Name == "__typename" {
		return t.put(f, path, key, []any{strings.TrimPrefix(n.typ, "#")}, true, true)
	}
	if f.Name == "__schema" || f.Name == "__type" {
		return x.introspect(n, f, t, depth, path, key)
	}
	if n.typ == systemType {
		return x.rootField(f, t, depth, path, key)
	}
	if typ, ok := searchField(f.Name); ok && n.isResource() {
		return x.reverseField(n, f, t, depth, path, key, typ)
	}
	if n.typ == "Reference" && f.Name == "resource" {
		return x.referenceField(n, f, t, depth, path, key)
	}
	if f.Name == "resourceType" && n.isResource() {
		return t.put(f, path, key, []any{n.typ}, true, hasDirective(f, "singleton"))
	}
	el, ok := elementOf(n.typ, f.Name)
	if !ok {
		return errorAt(f.Position, path, "%s has no field %q", displayType(n.typ), f.Name)
	}
	var vals []any
	if m, ok := n.value.(map[string]any); ok {
		vals = items(m[el.key])
	}
	if isMeta(n.typ) { // introspection: its arguments (includeDeprecated) change nothing here
		if el.repeats && len(vals) == 0 && !n.dry {
			t.obj.set(key, []any{}) // tools read an empty list where there is nothing
			return nil
		}
		return x.emit(n, el.typ, el.repeats, f, vals, t, depth, path, key)
	}
	vals, err := x.filter(n, el, f, vals, path)
	if err != nil {
		return err
	}
	return x.emit(n, el.typ, el.repeats, f, vals, t, depth, path, key)
}

// emit selects f's sub-fields from each of its values and puts the
// results in t, following the directives @first, @flatten, @slice and
// @singleton.
func (x *executor) emit(parent node, typ string, repeats bool, f *ast.Field, vals []any, t target, depth int, path []string, key string) error {
	first := hasDirective(f, "first")
	if first && len(vals) > 1 {
		vals = vals[:1]
	}
	complexType := !isPrimitive(typ)
	switch {
	case complexType && len(f.SelectionSet) == 0:
		return errorAt(f.Position, path, "%q is a %s: select its fields", f.Name, displayType(typ))
	case !complexType && len(f.SelectionSet) > 0:
		return errorAt(f.Position, path, "%q is a %s, which has no fields to select", f.Name, typ)
	}
	if len(vals) == 0 && complexType && typ != anyResource && !isMeta(typ) {
		// The names of an absent element's selection are checked all the same.
		vals = []any{map[string]any{}}
		parent.dry = true
	}
	if hasDirective(f, "flatten") {
		return x.flatten(parent, typ, f, vals, t, depth, path)
	}
	out := make([]any, 0, len(vals))
	for _, v := range vals {
		if !complexType {
			out = append(out, v)
			continue
		}
		obj := &object{keys: make([]string, 0, len(f.SelectionSet)), vals: make([]any, 0, len(f.SelectionSet))}
		child := x.child(parent, typ, v)
		if err := x.selectFields(child, f.SelectionSet, target{obj: obj}, depth+1, path); err != nil {
			return err
		}
		out = append(out, obj)
	}
	if parent.dry {
		return nil
	}
	return t.put(f, path, key, out, !repeats || first, hasDirective(f, "singleton"))
}

// child is the node of one value of an element of type typ.
func (x *executor) child(parent node, typ string, v any) node {
	if m, ok := v.(map[string]any); ok && typ == anyResource {
		return resourceNode(m)
	}
	return node{value: v, typ: typ, res: parent.res, dry: parent.dry}
}

// flatten selects f's sub-fields from each value into t itself (@flatten),
// each name suffixed with the value of @slice's path.
func (x *executor) flatten(parent node, typ string, f *ast.Field, vals []any, t target, depth int, path []string) error {
	slice := directive(f, "slice")
	for i, v := range vals {
		child := x.child(parent, typ, v)
		ft := target{obj: t.obj, flat: true, suffix: t.suffix}
		if slice != nil {
			suffix, err := x.sliceName(child, slice, i, path)
			if err != nil {
				return err
			}
			ft.suffix += "." + suffix
		}
		if parent.dry {
			ft = target{obj: newObject(), flat: true}
		}
		if err := x.selectFields(child, f.SelectionSet, ft, depth+1, path); err != nil {
			return err
		}
	}
	return nil
}

// sliceName is the suffix @slice(path: …) gives the fields of the i-th
// value: the value's index for $index, else the path's value in it.
func (x *executor) sliceName(n node, d *ast.Directive, i int, path []string) (string, error) {
	arg := d.Arguments.ForName("path")
	if arg == nil {
		return "", errorAt(d.Position, path, "@slice needs a path argument")
	}
	v, err := x.value(arg.Value, path)
	if err != nil {
		return "", err
	}
	p, ok := v.(string)
	if !ok {
		return "", errorAt(arg.Position, path, "@slice's path must be a string")
	}
	if p == "$index" {
		return fmt.Sprint(i), nil
	}
	nodes, err := x.evaluate(n, p, arg.Position, path)
	if err != nil || len(nodes) == 0 {
		return "", err
	}
	return fmt.Sprint(fhirpath.JSONValue(nodes[0])), nil
}

// skipped applies @skip(if:) and @include(if:).
func (x *executor) skipped(ds ast.DirectiveList, path []string) (bool, error) {
	for _, d := range ds {
		switch d.Name {
		case "skip", "include":
			arg := d.Arguments.ForName("if")
			if arg == nil {
				return false, errorAt(d.Position, path, "@%s needs an if argument", d.Name)
			}
			v, err := x.value(arg.Value, path)
			if err != nil {
				return false, err
			}
			b, ok := v.(bool)
			if !ok {
				return false, errorAt(arg.Position, path, "@%s's if must be a Boolean", d.Name)
			}
			if b == (d.Name == "skip") {
				return true, nil
			}
		case "flatten", "first", "singleton", "slice":
		default:
			return false, errorAt(d.Position, path, "unknown directive @%s", d.Name)
		}
	}
	return false, nil
}

// directive is f's directive name, if any.
func directive(f *ast.Field, name string) *ast.Directive {
	return f.Directives.ForName(name)
}

// hasDirective tells whether f carries the directive name.
func hasDirective(f *ast.Field, name string) bool { return directive(f, name) != nil }

// displayType names a type in messages.
func displayType(typ string) string {
	switch typ {
	case systemType:
		return "the system-level query"
	case anyResource:
		return "a resource"
	}
	return strings.TrimPrefix(pathType(typ), "#")
}

// evaluate runs a FHIRPath expression on n.
func (x *executor) evaluate(n node, src string, pos *ast.Position, path []string) ([]fhirpath.Node, error) {
	e, ok := x.exprs[src]
	if !ok {
		var err error
		if e, err = fhirpath.Compile(src); err != nil {
			return nil, errorAt(pos, path, "the FHIRPath %q is not valid: %v", src, err)
		}
		if x.exprs == nil {
			x.exprs = map[string]*fhirpath.Expr{}
		}
		x.exprs[src] = e
	}
	focus := fhirpath.Node{Value: n.value, Type: pathType(n.typ)}
	out, err := e.Eval(x.ctx, &fhirpath.Env{Resource: n.res}, []fhirpath.Node{focus})
	if err != nil {
		return nil, errorAt(pos, path, "the FHIRPath %q failed: %v", src, err)
	}
	return out, nil
}

// bound reports a query stopped by its time limit.
func (x *executor) bound(pos *ast.Position, path []string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return tooCostly(errorAt(pos, path, "the query ran longer than %s", x.lim.Timeout))
	}
	e := errorAt(pos, path, "the query was cancelled")
	e.Status, e.Err = 0, err
	return e
}

// backendError wraps an error of the backend at s.
func (x *executor) backendError(s ast.Selection, path []string, err error) error {
	if x.ctx.Err() != nil {
		return x.bound(s.GetPosition(), path, x.ctx.Err())
	}
	e := errorAt(s.GetPosition(), path, "%v", err)
	e.Status, e.Err = 0, err
	return e
}

// count notes n more resources read, failing past the limit.
func (x *executor) count(f *ast.Field, path []string, n int) error {
	x.resources += n
	if x.resources > x.lim.MaxResources {
		return tooCostly(errorAt(f.Position, path, "the query reads more than %d resources", x.lim.MaxResources))
	}
	return nil
}

// tooCostly marks the error of a query past one of its bounds.
func tooCostly(e *Error) *Error {
	e.Code = "too-costly"
	return e
}

// notFound is the error of a resource that a query needs and is not there.
func notFound(f *ast.Field, path []string, what string) error {
	e := errorAt(f.Position, path, "%s was not found", what)
	e.Status, e.Code = http.StatusNotFound, "not-found"
	return e
}

// isResourceType tells a FHIR resource type.
func isResourceType(typ string) bool { return fhirschema.IsResourceType(typ) }
