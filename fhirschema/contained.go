package fhirschema

import (
	"regexp"
	"strings"
)

// narrativeLink is an href or src attribute of narrative XHTML that points
// inside the resource: <img src="#logo"/>, <a href="#med1">.
var narrativeLink = regexp.MustCompile(`\b(?:href|src)\s*=\s*["']#([^"']+)["']`)

// containedResourcesReferenced is dom-3 (every contained resource is
// referred to from elsewhere in the resource) where it holds without
// FHIRPath: each contained resource is named by a Reference below the
// resource, or by a link of its narrative. R4's expression looks at the
// references, canonicals and URIs only, but narrative.html lets the
// narrative show a contained image (<img src="#a1"/>), and that image is
// then what refers to it. When this cannot tell, the expression decides.
func containedResourcesReferenced(v any) (holds, known bool) {
	if containedReferenced(v) {
		return true, true
	}
	obj, _ := v.(map[string]any)
	contained, _ := obj["contained"].([]any)
	if len(contained) == 0 {
		return false, false
	}
	refs := map[string]bool{}
	for _, child := range obj {
		collectReferences(child, refs)
		collectNarrativeLinks(child, refs)
	}
	for _, c := range contained {
		id, ok := c.(map[string]any)["id"].(string)
		if !ok || !refs["#"+id] {
			return false, false
		}
	}
	return true, true
}

// collectNarrativeLinks adds "#"+id to refs for each link to id in the
// narrative XHTML (a div) in v and below it.
func collectNarrativeLinks(v any, refs map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if div, ok := x["div"].(string); ok && strings.Contains(div, "#") {
			for _, m := range narrativeLink.FindAllStringSubmatch(div, -1) {
				refs["#"+m[1]] = true
			}
		}
		for _, child := range x {
			collectNarrativeLinks(child, refs)
		}
	case []any:
		for _, item := range x {
			collectNarrativeLinks(item, refs)
		}
	}
}
