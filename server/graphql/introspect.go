package graphql

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/vektah/gqlparser/v2/ast"

	"fhirstore/fhirschema"
)

// Introspection: __schema and __type(name:) describe the FHIR model as a
// GraphQL schema, for tools that build queries from it (GraphiQL,
// Postman's GraphQL client). The description is built once; its values
// are selected like any other, through the meta types below.
var metaTypes = map[string]map[string]element{
	"#__Schema": {
		"description": {typ: "string"}, "types": {typ: "#__Type", repeats: true}, "queryType": {typ: "#__Type"},
		"mutationType": {typ: "#__Type"}, "subscriptionType": {typ: "#__Type"}, "directives": {typ: "#__Directive", repeats: true},
	},
	"#__Type": {
		"kind": {typ: "string"}, "name": {typ: "string"}, "description": {typ: "string"}, "specifiedByURL": {typ: "string"},
		"fields": {typ: "#__Field", repeats: true}, "interfaces": {typ: "#__Type", repeats: true},
		"possibleTypes": {typ: "#__Type", repeats: true}, "enumValues": {typ: "#__EnumValue", repeats: true},
		"inputFields": {typ: "#__InputValue", repeats: true}, "ofType": {typ: "#__Type"}, "isOneOf": {typ: "boolean"},
	},
	"#__Field": {
		"name": {typ: "string"}, "description": {typ: "string"}, "args": {typ: "#__InputValue", repeats: true},
		"type": {typ: "#__Type"}, "isDeprecated": {typ: "boolean"}, "deprecationReason": {typ: "string"},
	},
	"#__InputValue": {
		"name": {typ: "string"}, "description": {typ: "string"}, "type": {typ: "#__Type"}, "defaultValue": {typ: "string"},
		"isDeprecated": {typ: "boolean"}, "deprecationReason": {typ: "string"},
	},
	"#__EnumValue": {"name": {typ: "string"}, "description": {typ: "string"}, "isDeprecated": {typ: "boolean"}, "deprecationReason": {typ: "string"}},
	"#__Directive": {
		"name": {typ: "string"}, "description": {typ: "string"}, "locations": {typ: "string", repeats: true},
		"args": {typ: "#__InputValue", repeats: true}, "isRepeatable": {typ: "boolean"},
	},
}

// isMeta tells a type of the introspection answer.
func isMeta(typ string) bool { return strings.HasPrefix(typ, "#__") }

// introspection is the schema's description and its types by name.
type introspection struct {
	schema map[string]any
	types  map[string]map[string]any
}

// describe builds the description once.
var describe = sync.OnceValue(func() *introspection {
	in := &introspection{types: map[string]map[string]any{}}
	for _, s := range []string{"String", "Boolean", "Int", "ID"} {
		in.add(map[string]any{"kind": "SCALAR", "name": s})
	}
	in.add(resourceInterface())
	for _, def := range modelDefinitions() {
		in.addDefinition(def)
	}
	in.add(queryType(in))
	types := make([]any, 0, len(in.types))
	for _, name := range slices.Sorted(maps.Keys(in.types)) {
		types = append(types, in.types[name])
	}
	in.schema = map[string]any{
		"description": "FHIR R4 resources as FHIR GraphQL (hl7.org/fhir/R4/graphql.html) reads them",
		"queryType":   named("OBJECT", "Query"), "types": types, "directives": directives(),
	}
	return in
})

// add registers a type.
func (in *introspection) add(t map[string]any) { in.types[t["name"].(string)] = t }

// modelDefinitions are the names of the FHIR schema's definitions: every
// resource, data type, backbone element and primitive.
func modelDefinitions() []string { return slices.Sorted(maps.Keys(propertyTable())) }

// propertyTable reads every definition's JSON properties once.
var propertyTable = sync.OnceValue(func() map[string][]string {
	var schema struct {
		Definitions map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"definitions"`
	}
	out := map[string][]string{}
	if json.Unmarshal(fhirschema.SchemaJSON, &schema) != nil {
		return out
	}
	for name, d := range schema.Definitions {
		out[name] = slices.Sorted(maps.Keys(d.Properties))
	}
	return out
})

// addDefinition describes one definition: a scalar for a primitive, an
// object with its elements for the others.
func (in *introspection) addDefinition(def string) {
	switch {
	case def == anyResource:
		return
	case isPrimitive(def):
		in.add(map[string]any{"kind": "SCALAR", "name": def, "description": "the FHIR primitive " + def})
		return
	}
	fields := []any{}
	for _, p := range propertyTable()[def] {
		el, ok := elementOf(def, p)
		if !ok {
			if p == "resourceType" {
				fields = append(fields, field(p, named("SCALAR", "String")))
			}
			continue
		}
		fields = append(fields, elementField(p, el))
	}
	if def == "Reference" {
		f := field("resource", named("INTERFACE", "Resource"))
		f["args"] = []any{argument("type", named("SCALAR", "String")), argument("optional", named("SCALAR", "Boolean"))}
		fields = append(fields, f)
	}
	t := map[string]any{"kind": "OBJECT", "name": def, "fields": fields, "interfaces": []any{}}
	if fhirschema.IsResourceType(def) {
		t["interfaces"] = []any{named("INTERFACE", "Resource")}
	}
	in.add(t)
}

// elementField describes an element; a repeating one takes the list
// arguments.
func elementField(name string, el element) map[string]any {
	var ref map[string]any
	switch {
	case el.typ == anyResource:
		ref = named("INTERFACE", "Resource")
	case isPrimitive(el.typ):
		ref = named("SCALAR", el.typ)
	default:
		ref = named("OBJECT", el.typ)
	}
	if !el.repeats {
		return field(name, ref)
	}
	f := field(name, map[string]any{"kind": "LIST", "name": nil, "ofType": ref})
	f["args"] = []any{argument("_count", named("SCALAR", "Int")), argument("_offset", named("SCALAR", "Int")), argument("fhirpath", named("SCALAR", "String"))}
	return f
}

// resourceInterface is what every resource has.
func resourceInterface() map[string]any {
	var possible []any
	for _, t := range fhirschema.ResourceTypes() {
		possible = append(possible, named("OBJECT", t))
	}
	return map[string]any{"kind": "INTERFACE", "name": "Resource", "interfaces": []any{}, "possibleTypes": possible,
		"fields": []any{field("id", named("SCALAR", "id")), field("resourceType", named("SCALAR", "String"))}}
}

// queryType is the system-level query: [type](id:), [type]List and
// [type]Connection for every resource type, with their connection and
// edge types.
func queryType(in *introspection) map[string]any {
	search := func() []any {
		return []any{argument("_count", named("SCALAR", "Int")), argument("_cursor", named("SCALAR", "String")),
			argument("_sort", named("SCALAR", "String")), argument("_id", named("SCALAR", "String"))}
	}
	var fields []any
	for _, t := range fhirschema.ResourceTypes() {
		byID := field(t, named("OBJECT", t))
		byID["args"] = []any{argument("id", map[string]any{"kind": "NON_NULL", "name": nil, "ofType": named("SCALAR", "ID")})}
		list := field(t+"List", map[string]any{"kind": "LIST", "name": nil, "ofType": named("OBJECT", t)})
		list["args"] = search()
		conn := field(t+"Connection", named("OBJECT", t+"Connection"))
		conn["args"] = search()
		fields = append(fields, byID, list, conn)
		in.add(map[string]any{"kind": "OBJECT", "name": t + "Edge", "interfaces": []any{}, "fields": []any{
			field("mode", named("SCALAR", "String")), field("score", named("SCALAR", "decimal")), field("resource", named("OBJECT", t))}})
		in.add(map[string]any{"kind": "OBJECT", "name": t + "Connection", "interfaces": []any{}, "fields": []any{
			field("count", named("SCALAR", "Int")), field("offset", named("SCALAR", "Int")), field("pagesize", named("SCALAR", "Int")),
			field("first", named("SCALAR", "String")), field("previous", named("SCALAR", "String")), field("next", named("SCALAR", "String")),
			field("last", named("SCALAR", "String")), field("edges", map[string]any{"kind": "LIST", "name": nil, "ofType": named("OBJECT", t+"Edge")})}})
	}
	return map[string]any{"kind": "OBJECT", "name": "Query", "fields": fields, "interfaces": []any{}}
}

// directives describes the directives the engine knows.
func directives() []any {
	onField := []any{"FIELD"}
	boolean := map[string]any{"kind": "NON_NULL", "name": nil, "ofType": named("SCALAR", "Boolean")}
	d := func(name, desc string, locations []any, args ...any) any {
		return map[string]any{"name": name, "description": desc, "locations": locations, "args": append([]any{}, args...), "isRepeatable": false}
	}
	return []any{
		d("skip", "leave the selection out when if is true", []any{"FIELD", "FRAGMENT_SPREAD", "INLINE_FRAGMENT"}, argument("if", boolean)),
		d("include", "keep the selection only when if is true", []any{"FIELD", "FRAGMENT_SPREAD", "INLINE_FRAGMENT"}, argument("if", boolean)),
		d("flatten", "put the field's own fields in its parent", onField),
		d("first", "only the first repetition", onField),
		d("singleton", "under @flatten, one value rather than a list", onField),
		d("slice", "under @flatten, suffix each repetition's fields with path's value in it", onField,
			argument("path", map[string]any{"kind": "NON_NULL", "name": nil, "ofType": named("SCALAR", "String")})),
	}
}

// named is a reference to a named type.
func named(kind, name string) map[string]any { return map[string]any{"kind": kind, "name": name} }

// field describes a field without arguments.
func field(name string, typ map[string]any) map[string]any {
	return map[string]any{"name": name, "type": typ, "args": []any{}, "isDeprecated": false}
}

// argument describes an argument.
func argument(name string, typ map[string]any) any {
	return map[string]any{"name": name, "type": typ, "isDeprecated": false}
}

// introspect answers __schema, and __type(name:) with the type of that
// name (left out when there is none).
func (x *executor) introspect(n node, f *ast.Field, t target, depth int, path []string, key string) error {
	in := describe()
	if f.Name == "__schema" {
		return x.emit(n, "#__Schema", false, f, []any{in.schema}, t, depth, path, key)
	}
	arg := f.Arguments.ForName("name")
	if arg == nil {
		return errorAt(f.Position, path, "__type needs the argument name")
	}
	v, err := x.value(arg.Value, path)
	if err != nil {
		return err
	}
	name, _ := v.(string)
	var vals []any
	if typ, ok := in.types[name]; ok {
		vals = []any{typ}
	}
	return x.emit(n, "#__Type", false, f, vals, t, depth, path, key)
}
