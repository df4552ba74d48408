package fhirpath

import (
	_ "embed"
	"encoding/json"
	"sort"
	"strings"
	"sync"
)

// modelJSON is the R4 type model: for every resource, data type and
// backbone element (named by its path, Patient.contact), its base type and
// its elements' types (see genmodel.go).
//
//go:embed model.json
var modelJSON []byte

//go:generate go run genmodel.go ../../../shared/fhir/definitions/r4-core

// elemInfo is one element of a type: the types it may have (more than one
// for a choice element value[x], named without [x]) and whether it repeats.
type elemInfo struct {
	types []string
	array bool
	keys  []string // the JSON property of each type: value, or valueQuantity… for a choice
	// extKeys are the _name twins of keys (_value, _valueQuantity…).
	extKeys []string
}

// typeInfo is one type of the model.
type typeInfo struct {
	base  string
	elems map[string]*elemInfo
	names []string // element names in sorted order
}

// model reads the embedded model once.
var model = sync.OnceValue(func() map[string]*typeInfo {
	var raw map[string]struct {
		B string            `json:"b"`
		E map[string]string `json:"e"`
	}
	if err := json.Unmarshal(modelJSON, &raw); err != nil {
		panic("fhirpath: embedded model: " + err.Error())
	}
	m := make(map[string]*typeInfo, len(raw))
	for name, t := range raw {
		ti := &typeInfo{base: t.B, elems: make(map[string]*elemInfo, len(t.E))}
		for el, spec := range t.E {
			ei := &elemInfo{array: strings.HasPrefix(spec, "*")}
			ei.types = strings.Split(strings.TrimPrefix(spec, "*"), "|")
			for _, typ := range ei.types {
				key := el
				if len(ei.types) > 1 {
					key += upperFirst(typ)
				}
				ei.keys = append(ei.keys, key)
				ei.extKeys = append(ei.extKeys, "_"+key)
			}
			ti.elems[el] = ei
			ti.names = append(ti.names, el)
		}
		sort.Strings(ti.names)
		m[name] = ti
	}
	return m
})

// upperFirst upper-cases the first letter: the choice suffix of a type.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// lookupType returns the model's type name, or nil.
func lookupType(name string) *typeInfo { return model()[name] }

// elementOf returns element name of type typ, looking through its bases
// (SimpleQuantity has Quantity's elements).
func elementOf(typ, name string) (*elemInfo, bool) {
	for t := typ; t != ""; {
		ti := model()[t]
		if ti == nil {
			return nil, false
		}
		if el, ok := ti.elems[name]; ok {
			return el, true
		}
		if len(ti.elems) > 0 {
			return nil, false
		}
		t = ti.base
	}
	return nil, false
}

// hasElements reports whether the model describes typ's elements.
func hasElements(typ string) bool {
	for t := typ; t != ""; {
		ti := model()[t]
		if ti == nil {
			return false
		}
		if len(ti.elems) > 0 {
			return true
		}
		t = ti.base
	}
	return false
}

// baseType returns the base of a FHIR type ("" at the root).
func baseType(typ string) string {
	if ti := model()[typ]; ti != nil {
		return ti.base
	}
	return ""
}

// isResourceType reports whether name is a resource type of the model.
func isResourceType(name string) bool {
	for t := name; t != ""; t = baseType(t) {
		if t == "Resource" {
			return true
		}
	}
	return false
}

// publicType is the type name FHIRPath shows for a FHIR type: backbone
// elements, named by their path in the model, are BackboneElement or
// Element.
func publicType(typ string) string {
	if strings.IndexByte(typ, '.') > 0 && !strings.HasPrefix(typ, "System.") && !strings.HasPrefix(typ, "FHIR.") {
		return baseType(typ)
	}
	return typ
}

// isPrimitiveType reports whether typ is a FHIR primitive type (their
// names alone start with a lower-case letter).
func isPrimitiveType(typ string) bool {
	return typ != "" && 'a' <= typ[0] && typ[0] <= 'z'
}
