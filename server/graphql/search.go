package graphql

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// listCount is the page size of a [type]List without _count: a list is
// one page, so it asks for the largest. A connection pages as a REST
// search does, connectionCount at a time.
const (
	listCount       = "100"
	connectionCount = "10"
)

// searchKind is what a search field answers.
type searchKind struct {
	typ        string
	connection bool
}

// searchField reads a search field's name: [type]List or [type]Connection.
func searchField(name string) (searchKind, bool) {
	if typ, ok := strings.CutSuffix(name, "List"); ok && isResourceType(typ) {
		return searchKind{typ: typ}, true
	}
	if typ, ok := strings.CutSuffix(name, "Connection"); ok && isResourceType(typ) {
		return searchKind{typ: typ, connection: true}, true
	}
	return searchKind{}, false
}

// rootField selects a field of a system-level query: [type](id: …),
// [type]List(…) or [type]Connection(…).
func (x *executor) rootField(f *ast.Field, t target, depth int, path []string, key string) error {
	if isResourceType(f.Name) {
		return x.readField(f, t, depth, path, key)
	}
	k, ok := searchField(f.Name)
	if !ok {
		return errorAt(f.Position, path, "%q is neither a resource type nor a [type]List or [type]Connection search", f.Name)
	}
	params, err := x.searchParams(f, k, path, nil)
	if err != nil {
		return err
	}
	return x.search(node{typ: systemType}, f, t, depth, path, key, k, params)
}

// readField reads the resource [type](id: …).
func (x *executor) readField(f *ast.Field, t target, depth int, path []string, key string) error {
	var id string
	for _, a := range f.Arguments {
		if a.Name != "id" && a.Name != "_id" {
			return errorAt(a.Position, path, "%s takes only the argument id; search with %sList", f.Name, f.Name)
		}
		v, err := x.value(a.Value, path)
		if err != nil {
			return err
		}
		id = fmt.Sprint(v)
	}
	if id == "" {
		return errorAt(f.Position, path, "%s needs the argument id", f.Name)
	}
	if err := x.count(f, path, 1); err != nil {
		return err
	}
	r, err := x.b.Read(x.ctx, f.Name, id)
	switch {
	case err != nil:
		return x.backendError(f, path, err)
	case r == nil:
		return notFound(f, path, f.Name+"/"+id)
	}
	return x.emit(node{typ: systemType}, anyResource, false, f, []any{r}, t, depth, path, key)
}

// reverseField searches the resources of a type that refer to the focus
// resource through the search parameter _reference names:
// ConditionList(_reference: patient).
func (x *executor) reverseField(n node, f *ast.Field, t target, depth int, path []string, key string, k searchKind) error {
	arg := f.Arguments.ForName("_reference")
	if arg == nil {
		return errorAt(f.Position, path, "%s of a resource needs _reference, the search parameter that refers to it", f.Name)
	}
	v, err := x.value(arg.Value, path)
	if err != nil {
		return err
	}
	param, ok := v.(string)
	if !ok || param == "" {
		return errorAt(arg.Position, path, "_reference names a search parameter of %s", k.typ)
	}
	params, err := x.searchParams(f, k, path, map[string]bool{"_reference": true})
	if err != nil {
		return err
	}
	if n.dry {
		return x.emit(n, anyResource, true, f, nil, t, depth, path, key)
	}
	id, _ := n.res["id"].(string)
	params.Add(searchName(param), n.typ+"/"+id)
	return x.search(n, f, t, depth, path, key, k, params)
}

// search runs a list or connection search and selects its answer.
func (x *executor) search(n node, f *ast.Field, t target, depth int, path []string, key string, k searchKind, params url.Values) error {
	offset := 0
	if c := params.Get("_cursor"); c != "" {
		o, store, _ := strings.Cut(c, ".")
		var err error
		if offset, err = strconv.Atoi(o); err != nil || offset < 0 {
			return errorAt(f.Arguments.ForName("_cursor").Position, path, "the _cursor %q is not one this server gave", c)
		}
		params.Del("_cursor")
		if store != "" {
			params.Set("_cursor", store)
		}
	}
	switch {
	case params.Get("_count") != "":
	case k.connection:
		params.Set("_count", connectionCount)
	default:
		params.Set("_count", listCount)
	}
	page, err := x.b.Search(x.ctx, k.typ, params)
	if err != nil {
		return x.backendError(argumentOf(f, err), path, err)
	}
	if err := x.count(f, path, len(page.Resources)); err != nil {
		return err
	}
	vals := make([]any, len(page.Resources))
	for i, r := range page.Resources {
		vals[i] = r
	}
	if !k.connection {
		if len(vals) == 0 && !t.flat && !n.dry { // a search that matches nothing answers an empty list
			t.obj.set(key+t.suffix, []any{})
			return nil
		}
		return x.emit(n, anyResource, true, f, vals, t, depth, path, key)
	}
	return x.emit(n, "#Connection", false, f, []any{connection(page, vals, offset, params)}, t, depth, path, key)
}

// argumentOf is the argument of f that err names, or f itself: the place
// in the query to report a refused search parameter at.
func argumentOf(f *ast.Field, err error) ast.Selection {
	var pe *ParamError
	if errors.As(err, &pe) {
		for _, a := range f.Arguments {
			if name, _, _ := strings.Cut(searchName(a.Name), ":"); name == pe.Param || searchName(a.Name) == pe.Param {
				return &ast.Field{Name: a.Name, Position: a.Position}
			}
		}
	}
	return f
}

// connection is the value of a [type]Connection: the page's edges, its
// place and the cursors of the pages around it.
func connection(page *Page, vals []any, offset int, params url.Values) map[string]any {
	size, _ := strconv.Atoi(params.Get("_count"))
	edges := make([]any, len(vals))
	for i, v := range vals {
		edges[i] = map[string]any{"mode": "match", "resource": v}
	}
	c := map[string]any{"offset": offset, "pagesize": size, "edges": edges, "first": "0"}
	if page.Total >= 0 {
		c["count"] = page.Total
	}
	if page.Next != "" {
		c["next"] = strconv.Itoa(offset+len(vals)) + "." + page.Next
	}
	if page.Previous != "" {
		c["previous"] = strconv.Itoa(max(offset-size, 0)) + "." + page.Previous
	}
	return c
}

// searchParams turns a search field's arguments into REST search
// parameters, leaving out those in skip.
func (x *executor) searchParams(f *ast.Field, k searchKind, path []string, skip map[string]bool) (url.Values, error) {
	params := url.Values{}
	for _, a := range f.Arguments {
		if skip[a.Name] {
			continue
		}
		v, err := x.value(a.Value, path)
		if err != nil {
			return nil, err
		}
		values, err := paramValues(v)
		if err != nil {
			return nil, errorAt(a.Position, path, "the argument %s of %s: %v", a.Name, f.Name, err)
		}
		name := searchName(a.Name)
		params[name] = append(params[name], values...)
	}
	return params, nil
}

// modifiers are the search modifiers an argument's name may end with
// (name_contains is name:contains).
var modifiers = []string{"missing", "exact", "contains", "text", "not", "above", "below", "not_in", "in", "of_type", "identifier", "code_text"}

// searchName is the REST name of a search argument: GraphQL names cannot
// hold - or :, so address_city is address-city and name_contains is
// name:contains; names starting with _ (_id, _count, _sort) stay.
func searchName(arg string) string {
	if strings.HasPrefix(arg, "_") {
		return arg
	}
	mod := ""
	for _, m := range modifiers {
		if stem, ok := strings.CutSuffix(arg, "_"+m); ok && stem != "" {
			arg, mod = stem, ":"+strings.ReplaceAll(m, "_", "-")
			break
		}
	}
	return strings.ReplaceAll(arg, "_", "-") + mod
}

// paramValues are a search argument's values: a list is one parameter per
// item (ANDed), a string, number or Boolean one parameter.
func paramValues(v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []any:
		var out []string
		for _, item := range v {
			s, err := paramValues(item)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case map[string]any:
		return nil, fmt.Errorf("an object is not a search value")
	}
	return []string{fmt.Sprint(v)}, nil
}
