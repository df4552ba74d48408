package fhirpath

import "strings"

// primitiveTypes are the FHIR R4 primitive types, as spelled in a choice
// suffix (valueDateTime) mapped to the type name (dateTime).
var primitiveTypes = suffixMap("base64Binary", "boolean", "canonical", "code", "date",
	"dateTime", "decimal", "id", "instant", "integer", "markdown", "oid", "positiveInt",
	"string", "time", "unsignedInt", "uri", "url", "uuid")

// complexTypes are the FHIR R4 data types that may appear as a choice
// suffix (valueQuantity).
var complexTypes = suffixMap("Address", "Age", "Annotation", "Attachment", "CodeableConcept",
	"Coding", "ContactDetail", "ContactPoint", "Contributor", "Count", "DataRequirement",
	"Distance", "Dosage", "Duration", "Expression", "HumanName", "Identifier", "Meta", "Money",
	"ParameterDefinition", "Period", "Quantity", "Range", "Ratio", "Reference",
	"RelatedArtifact", "SampledData", "Signature", "Timing", "TriggerDefinition", "UsageContext")

// parentTypes gives the base type of the FHIR types that specialize
// another one, so that "is Quantity" accepts an Age.
var parentTypes = map[string]string{
	"Age": "Quantity", "Count": "Quantity", "Distance": "Quantity", "Duration": "Quantity",
	"SimpleQuantity": "Quantity", "MoneyQuantity": "Quantity",
	"code": "string", "id": "string", "markdown": "string",
	"canonical": "uri", "url": "uri", "oid": "uri", "uuid": "uri",
	"positiveInt": "integer", "unsignedInt": "integer",
}

// systemTypes maps FHIRPath System type names to the FHIR type they
// correspond to.
var systemTypes = map[string]string{
	"Boolean": "boolean", "String": "string", "Integer": "integer", "Decimal": "decimal",
	"Date": "date", "DateTime": "dateTime", "Time": "time",
}

// suffixMap maps each type's choice suffix (first letter upper-cased) to
// the type name.
func suffixMap(names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[strings.ToUpper(n[:1])+n[1:]] = n
	}
	return m
}

// choiceType returns the type named by the suffix of a choice element
// (Quantity for valueQuantity, dateTime for effectiveDateTime).
func choiceType(suffix string) (string, bool) {
	if t, ok := primitiveTypes[suffix]; ok {
		return t, true
	}
	t, ok := complexTypes[suffix]
	return t, ok
}

// canonicalTypeName resolves System type names to FHIR ones.
func canonicalTypeName(name string) string {
	if t, ok := systemTypes[name]; ok {
		return t
	}
	return name
}

// isTypeName reports whether an identifier at the start of a path names a
// type (an upper-case first letter) rather than a child element.
func isTypeName(name string) bool {
	return name != "" && 'A' <= name[0] && name[0] <= 'Z'
}

// typeOf returns the FHIR type of an item when known: the target named by
// a resolved reference, the recorded type, a resource's resourceType, or
// boolean for a JSON boolean.
func typeOf(it item) string {
	if it.resolved {
		return it.target
	}
	if it.typ != "" {
		return it.typ
	}
	switch v := it.value.(type) {
	case map[string]any:
		rt, _ := v["resourceType"].(string)
		return rt
	case bool:
		return "boolean"
	}
	return ""
}

// isResource reports whether the item is (or, resolved, refers to) a
// resource.
func isResource(it item) bool {
	if it.resolved {
		return it.target != ""
	}
	m, ok := it.value.(map[string]any)
	if !ok {
		return false
	}
	_, ok = m["resourceType"].(string)
	return ok
}

// isType implements "is": the item's type is want or specializes it.
func isType(it item, want string) bool {
	if want == "Resource" || want == "DomainResource" {
		return isResource(it)
	}
	for t := typeOf(it); t != ""; t = parentTypes[t] {
		if t == want {
			return true
		}
	}
	return false
}

// filterType implements "as" and ofType(): the items of type want.
func filterType(in []item, want string) []item {
	var out []item
	for _, it := range in {
		if isType(it, want) {
			out = append(out, it)
		}
	}
	return out
}

// referenceTarget returns the resource type a Reference (or canonical/uri
// string) points to, from its reference string or else its type element;
// "" when unknown.
func (c *context) referenceTarget(v any) string {
	switch v := v.(type) {
	case string:
		return c.typeFromReference(v)
	case map[string]any:
		if s, ok := v["reference"].(string); ok {
			if t := c.typeFromReference(s); t != "" {
				return t
			}
		}
		if s, ok := v["type"].(string); ok {
			if t := s[strings.LastIndexByte(s, '/')+1:]; isResourceTypeName(t) {
				return t
			}
		}
	}
	return ""
}

// typeFromReference extracts the type from "Type/id", ".../Type/id",
// ".../Type/id/_history/v", a canonical "…/Type/id|version" or a
// "#contained" reference.
func (c *context) typeFromReference(ref string) string {
	if strings.HasPrefix(ref, "#") {
		return c.containedType(ref[1:])
	}
	if i := strings.IndexAny(ref, "?#|"); i >= 0 {
		ref = ref[:i]
	}
	segs := strings.Split(ref, "/")
	if n := len(segs); n >= 4 && segs[n-2] == "_history" {
		segs = segs[:n-2]
	}
	n := len(segs)
	if n < 2 || segs[n-1] == "" || !isResourceTypeName(segs[n-2]) {
		return ""
	}
	return segs[n-2]
}

// containedType returns the resourceType of the contained resource with
// the given id ("" names the container itself).
func (c *context) containedType(id string) string {
	if id == "" {
		rt, _ := c.root["resourceType"].(string)
		return rt
	}
	list, _ := c.root["contained"].([]any)
	for _, r := range list {
		if m, ok := r.(map[string]any); ok && m["id"] == id {
			rt, _ := m["resourceType"].(string)
			return rt
		}
	}
	return ""
}

// isResourceTypeName reports whether s looks like a resource type name:
// an upper-case letter followed by letters.
func isResourceTypeName(s string) bool {
	if !isTypeName(s) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}
