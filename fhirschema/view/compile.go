package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// sqlName is the IG's rule for view and column names: usable unquoted in SQL.
var sqlName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// viewElements are the elements a ViewDefinition may have: the IG's
// logical model with the elements of a canonical resource.
var viewElements = map[string]bool{
	"resourceType": true, "id": true, "meta": true, "implicitRules": true, "language": true, "text": true,
	"contained": true, "extension": true, "modifierExtension": true, "url": true, "identifier": true,
	"version": true, "versionAlgorithmString": true, "versionAlgorithmCoding": true, "name": true,
	"title": true, "status": true, "experimental": true, "date": true, "publisher": true, "contact": true,
	"description": true, "useContext": true, "jurisdiction": true, "purpose": true, "copyright": true,
	"copyrightLabel": true, "resource": true, "resourceVersion": true, "fhirVersion": true, "profile": true,
	"constant": true, "select": true, "where": true,
}

// selectElements, columnElements and whereElements are the elements of a
// select, a column and a where.
var (
	selectElements = map[string]bool{"id": true, "extension": true, "modifierExtension": true, "column": true,
		"select": true, "forEach": true, "forEachOrNull": true, "repeat": true, "unionAll": true}
	columnElements = map[string]bool{"id": true, "extension": true, "modifierExtension": true, "name": true,
		"path": true, "description": true, "collection": true, "type": true, "tag": true}
	whereElements = map[string]bool{"id": true, "extension": true, "modifierExtension": true, "path": true, "description": true}
)

// statuses are the PublicationStatus codes.
var statuses = map[string]bool{"draft": true, "active": true, "retired": true, "unknown": true}

// Compile parses and checks a ViewDefinition in JSON. A view the rules
// refuse is an *InvalidError listing every problem found.
func Compile(def []byte, opts Options) (*View, error) {
	dec := json.NewDecoder(bytes.NewReader(def))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &InvalidError{Issues: []fhirschema.Issue{issue("structure", ResourceType, "the ViewDefinition is not valid JSON: %v", err)}}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, &InvalidError{Issues: []fhirschema.Issue{issue("structure", ResourceType, "a ViewDefinition must be a JSON object")}}
	}
	return CompileMap(obj, opts)
}

// CompileMap is Compile for a view already decoded (numbers as json.Number).
func CompileMap(obj map[string]any, opts Options) (*View, error) {
	c := &compiler{limits: opts.Limits.withDefaults(), names: map[string]string{}, constants: map[string]bool{}, reached: map[string]bool{}}
	v := c.view(obj, opts.Stored)
	if len(c.issues) > 0 {
		return nil, &InvalidError{Issues: c.issues}
	}
	v.columns, v.limits = c.columns, c.limits
	if !c.whole {
		v.reached = c.reached
	}
	return v, nil
}

// compiler gathers the issues of one view while building it.
type compiler struct {
	limits  Limits
	issues  []fhirschema.Issue
	columns []Column
	// names maps each column name to where it was first declared.
	names map[string]string
	// constants are the names of the view's constants.
	constants map[string]bool
	// reuse are the unionAll branches being compiled after the first: their
	// columns take the first branch's slots, in order.
	reuse []*slotList
	// reached are the names the paths use; whole is set when a path can
	// see the whole resource (see reach).
	reached map[string]bool
	whole   bool
}

// slotList is the columns a unionAll's first branch declared, which each
// further branch must declare alike.
type slotList struct {
	slots []int
	next  int
	at    string
}

func issue(code, at, format string, args ...any) fhirschema.Issue {
	return fhirschema.Issue{Severity: "error", Code: code, Expression: at, Diagnostics: fmt.Sprintf(format, args...)}
}

func (c *compiler) errorf(code, at, format string, args ...any) {
	c.issues = append(c.issues, issue(code, at, format, args...))
}

// view checks the top-level elements and compiles the selects.
func (c *compiler) view(obj map[string]any, stored bool) *View {
	at := ResourceType
	c.unknown(obj, viewElements, at)
	v := &View{}
	rt, hasRT := obj["resourceType"]
	if (stored || hasRT) && rt != ResourceType {
		c.errorf("invalid", at+".resourceType", "resourceType must be ViewDefinition")
	}
	v.Name = c.optString(obj, "name", at)
	if v.Name != "" && !sqlName.MatchString(v.Name) {
		c.errorf("value", at+".name", "name %q must start with a letter and hold only letters, digits and _ (the IG's sql-name rule)", v.Name)
	}
	v.URL = c.optString(obj, "url", at)
	status := c.optString(obj, "status", at)
	switch {
	case status == "" && stored:
		c.errorf("required", at+".status", "a ViewDefinition must have a status (draft, active, retired or unknown)")
	case status != "" && !statuses[status]:
		c.errorf("code-invalid", at+".status", "status %q is not draft, active, retired or unknown", status)
	}
	v.Resource = c.optString(obj, "resource", at)
	switch {
	case v.Resource == "":
		c.errorf("required", at+".resource", "a ViewDefinition must name the resource type it reads in resource")
	case !fhirschema.IsResourceType(v.Resource):
		c.errorf("code-invalid", at+".resource", "resource %q is not a FHIR R4 resource type", v.Resource)
	}
	v.constants = c.constantList(obj["constant"], at+".constant")
	v.where = c.whereList(obj["where"], at+".where", v.Resource)
	sel, ok := obj["select"].([]any)
	if !ok || len(sel) == 0 {
		if obj["select"] != nil && !ok {
			c.errorf("structure", at+".select", "select must be an array")
		} else {
			c.errorf("required", at+".select", "a ViewDefinition must have at least one select")
		}
		return v
	}
	v.root = &selectNode{}
	c.children(v.root, sel, at+".select", v.Resource, 1)
	if len(c.columns) == 0 && len(c.issues) == 0 {
		c.errorf("required", at+".select", "the view declares no column")
	}
	if len(c.columns) > c.limits.MaxColumns {
		c.errorf("too-costly", at+".select", "the view has %d columns, more than the %d allowed", len(c.columns), c.limits.MaxColumns)
	}
	return v
}

// unknown reports the elements of obj that allowed does not list.
func (c *compiler) unknown(obj map[string]any, allowed map[string]bool, at string) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		if !allowed[k] && !strings.HasPrefix(k, "_") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		c.errorf("structure", at+"."+k, "unknown element %q", k)
	}
}

// optString reads a string element, reporting a value of another type.
func (c *compiler) optString(obj map[string]any, key, at string) string {
	v, ok := obj[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		c.errorf("structure", at+"."+key, "%s must be a string", key)
	}
	return s
}

// optBool reads a boolean element.
func (c *compiler) optBool(obj map[string]any, key, at string) bool {
	v, ok := obj[key]
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		c.errorf("structure", at+"."+key, "%s must be true or false", key)
	}
	return b
}

// objects reads an array of objects.
func (c *compiler) objects(v any, at string) []map[string]any {
	if v == nil {
		return nil
	}
	arr, ok := v.([]any)
	if !ok {
		c.errorf("structure", at, "must be an array")
		return nil
	}
	out := make([]map[string]any, 0, len(arr))
	for i, item := range arr {
		obj, ok := item.(map[string]any)
		if !ok {
			c.errorf("structure", fmt.Sprintf("%s[%d]", at, i), "must be an object")
			continue
		}
		out = append(out, obj)
	}
	return out
}

// constantList reads the view's constants as FHIRPath values of their
// FHIR type.
func (c *compiler) constantList(v any, at string) map[string][]fhirpath.Node {
	out := map[string][]fhirpath.Node{}
	for i, obj := range c.objects(v, at) {
		cat := fmt.Sprintf("%s[%d]", at, i)
		name := c.optString(obj, "name", cat)
		switch {
		case name == "":
			c.errorf("required", cat+".name", "a constant must have a name")
		case !sqlName.MatchString(name):
			c.errorf("value", cat+".name", "constant name %q must start with a letter and hold only letters, digits and _", name)
		case c.constants[name] || reservedVars[name]:
			c.errorf("value", cat+".name", "constant %q is defined twice or shadows %%%s", name, name)
		}
		var values []fhirpath.Node
		for k, val := range obj {
			typ, ok := strings.CutPrefix(k, "value")
			if !ok || typ == "" {
				if k != "name" && k != "id" && k != "extension" {
					c.errorf("structure", cat+"."+k, "unknown element %q", k)
				}
				continue
			}
			typ = strings.ToLower(typ[:1]) + typ[1:]
			if !constantTypes[typ] {
				c.errorf("structure", cat+"."+k, "%s is not a primitive type a constant may have", k)
				continue
			}
			values = append(values, fhirpath.Node{Value: val, Type: typ})
		}
		if len(values) != 1 {
			c.errorf("required", cat, "constant %q must have exactly one value[x]", name)
			continue
		}
		c.constants[name] = true
		out[name] = values
	}
	return out
}

// constantTypes are the types of constant.value[x].
var constantTypes = map[string]bool{
	"base64Binary": true, "boolean": true, "canonical": true, "code": true, "date": true, "dateTime": true,
	"decimal": true, "id": true, "instant": true, "integer": true, "integer64": true, "oid": true,
	"string": true, "positiveInt": true, "time": true, "unsignedInt": true, "uri": true, "url": true, "uuid": true,
}

// whereList compiles the view's where paths, each of which must be able
// to yield a boolean.
func (c *compiler) whereList(v any, at, resource string) []*path {
	var out []*path
	for i, obj := range c.objects(v, at) {
		wat := fmt.Sprintf("%s[%d]", at, i)
		c.unknown(obj, whereElements, wat)
		p := c.path(obj, "path", wat, true)
		if p == nil {
			continue
		}
		if types := p.staticTypes(resource); types != nil && !slices.Contains(types, "boolean") {
			c.errorf("value", wat+".path", "where path %q yields %s, not a boolean", p.src, strings.Join(types, " or "))
			continue
		}
		out = append(out, p)
	}
	return out
}
