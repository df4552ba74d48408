package terminology

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"

	"fhirstore/fhirschema/profile"
)

// maxDepth bounds the nesting a walk follows (contained resources,
// extensions in extensions).
const maxDepth = 64

// elementInfo is what the walk reads of a core element definition.
type elementInfo struct {
	types    []string
	strength string
	valueSet string
	// ref is the path of the element whose definition this one reuses
	// (contentReference).
	ref string
	// parent tells an element whose children the same definition lists.
	parent bool
}

// typeDef indexes a core StructureDefinition's snapshot by path.
type typeDef struct {
	elems map[string]*elementInfo
}

// typeDefs holds the core definitions read so far, by type name; nil for
// a name the core does not define. The core never changes.
var typeDefs sync.Map

// coreType returns the core definition of the resource or data type
// name.
func coreType(name string) *typeDef {
	if v, ok := typeDefs.Load(name); ok {
		return v.(*typeDef)
	}
	var td *typeDef
	sd, err := profile.Core().Resource(context.Background(), "StructureDefinition", "http://hl7.org/fhir/StructureDefinition/"+name)
	if err == nil && sd != nil {
		td = indexType(sd)
	}
	typeDefs.Store(name, td)
	return td
}

func indexType(sd map[string]any) *typeDef {
	td := &typeDef{elems: map[string]*elementInfo{}}
	snap, _ := sd["snapshot"].(map[string]any)
	for _, e := range objects(snap["element"]) {
		path, _ := e["path"].(string)
		if path == "" {
			continue
		}
		info := &elementInfo{}
		for _, t := range objects(e["type"]) {
			if code, _ := t["code"].(string); code != "" {
				info.types = append(info.types, code)
			}
		}
		if b, ok := e["binding"].(map[string]any); ok {
			info.strength, _ = b["strength"].(string)
			info.valueSet, _ = b["valueSet"].(string)
		}
		if ref, _ := e["contentReference"].(string); ref != "" {
			info.ref = strings.TrimPrefix(ref, "#")
		}
		td.elems[path] = info
		if i := strings.LastIndexByte(path, '.'); i > 0 {
			if p := td.elems[path[:i]]; p != nil {
				p.parent = true
			}
		}
	}
	return td
}

// child finds the definition of the JSON property key of the element at
// path: a plain element, or a choice element named with its type
// (valueCoding), whose type it then returns.
func (td *typeDef) child(path, key string) (*elementInfo, string, string) {
	p := path + "." + key
	if info := td.elems[p]; info != nil {
		if len(info.types) == 1 {
			return info, p, info.types[0]
		}
		return info, p, ""
	}
	for i := 1; i < len(key); i++ {
		if key[i] < 'A' || key[i] > 'Z' {
			continue
		}
		cp := path + "." + key[:i] + "[x]"
		info := td.elems[cp]
		if info == nil {
			continue
		}
		suffix := key[i:]
		for _, t := range info.types {
			if strings.EqualFold(t[:1], suffix[:1]) && t[1:] == suffix[1:] {
				return info, cp, t
			}
		}
		return nil, "", ""
	}
	return nil, "", ""
}

// resource walks a resource of type typ at the FHIRPath at.
func (r *run) resource(typ, at string, res map[string]any, depth int) {
	td := coreType(typ)
	if td == nil || depth > maxDepth {
		return
	}
	r.object(td, typ, at, res, depth)
}

// object walks the properties of an element of td at the definition
// path path and the FHIRPath at.
func (r *run) object(td *typeDef, path, at string, obj map[string]any, depth int) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if r.err != nil {
			return
		}
		if key == "resourceType" {
			continue
		}
		if name, ok := strings.CutPrefix(key, "_"); ok {
			r.extendedPrimitive(td, path, at, name, obj)
			continue
		}
		info, epath, typ := td.child(path, key)
		if info == nil {
			continue
		}
		v := obj[key]
		if list, ok := v.([]any); ok {
			for i, item := range list {
				r.value(td, info, epath, typ, at+"."+key+"["+strconv.Itoa(i)+"]", item, depth)
			}
			continue
		}
		name := key
		if strings.HasSuffix(epath, "[x]") {
			// FHIRPath names a choice by its element and type
			name = strings.TrimSuffix(epath[strings.LastIndexByte(epath, '.')+1:], "[x]") + ".ofType(" + typ + ")"
		}
		r.value(td, info, epath, typ, at+"."+name, v, depth)
	}
}

// value checks one value of an element and walks into it.
func (r *run) value(td *typeDef, info *elementInfo, epath, typ, at string, v any, depth int) {
	obj, isObject := v.(map[string]any)
	if info.strength == "required" || info.strength == "extensible" {
		r.binding(info, typ, at, v)
	}
	if !isObject || depth > maxDepth {
		return
	}
	switch typ {
	case "Coding":
		r.coding(at, obj)
	case "Identifier":
		r.identifierRule(at, obj)
	case "Resource":
		rt, _ := obj["resourceType"].(string)
		r.resource(rt, at, obj, depth+1)
		return
	}
	switch {
	case info.parent:
		r.object(td, epath, at, obj, depth+1)
	case info.ref != "":
		r.object(td, info.ref, at, obj, depth+1)
	case typ != "" && typ[0] >= 'A' && typ[0] <= 'Z':
		if t := coreType(typ); t != nil {
			r.object(t, typ, at, obj, depth+1)
		}
	}
}

// extendedPrimitive checks a primitive given by its extensions (_name):
// an element with a required binding needs its code even so.
func (r *run) extendedPrimitive(td *typeDef, path, at, name string, obj map[string]any) {
	info, _, typ := td.child(path, name)
	if info == nil || typ != "code" || info.strength != "required" {
		return
	}
	ext := obj["_"+name]
	val := obj[name]
	if list, ok := ext.([]any); ok {
		vals, _ := val.([]any)
		for i, e := range list {
			if e == nil {
				continue
			}
			if i >= len(vals) || vals[i] == nil {
				r.errorf(at+"."+name+"["+strconv.Itoa(i)+"]", "no code is given, and a code from the value set %s is required", info.valueSet)
			}
		}
		return
	}
	if ext != nil && val == nil {
		r.errorf(at+"."+name, "no code is given, and a code from the value set %s is required", info.valueSet)
	}
}
