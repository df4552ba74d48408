package fhirschema

import (
	"slices"
	"strings"

	"fhirstore/fhirschema/fhirpath"
)

// Objects returns the JSON objects of an array as encoding/json decodes
// it: the repetitions of an element, skipping what is not an object; none
// for anything but an array.
func Objects(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// NamedBy reports whether the JSON key of a resource's top-level element
// is among names as _elements names elements: the element itself, its
// primitive's _name twin, or a choice element by its name without its
// type (value names valueQuantity).
func NamedBy(key string, names []string) bool {
	name := strings.TrimPrefix(key, "_")
	if slices.Contains(names, name) {
		return true
	}
	choice, _, ok := fhirpath.ChoiceOf(name)
	return ok && slices.Contains(names, choice)
}
