// Package fhirschema holds the official FHIR R4 JSON Schema and what is
// derived from it: the table of resource types and structural validation.
package fhirschema

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// SchemaJSON is the official HL7 FHIR R4 (4.0.1) JSON Schema.
//
//go:embed fhir.schema.json
var SchemaJSON []byte

// FHIRVersion is the FHIR release the schema describes.
const FHIRVersion = "4.0.1"

var resourceTypes = sync.OnceValue(func() map[string]bool {
	var s struct {
		Discriminator struct {
			Mapping map[string]string `json:"mapping"`
		} `json:"discriminator"`
	}
	if err := json.Unmarshal(SchemaJSON, &s); err != nil {
		panic(fmt.Sprintf("embedded FHIR schema is not JSON: %v", err))
	}
	types := make(map[string]bool, len(s.Discriminator.Mapping))
	for name := range s.Discriminator.Mapping {
		types[name] = true
	}
	return types
})

// IsResourceType reports whether name is an R4 resource type.
func IsResourceType(name string) bool { return resourceTypes()[name] }

// ResourceTypes lists every R4 resource type in alphabetical order.
func ResourceTypes() []string {
	m := resourceTypes()
	out := make([]string, 0, len(m))
	for name := range m {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// logicalTypes are the resource types served beyond R4: models of
// implementation guides that R4's schema does not define, each checked by
// a package of its own (ViewDefinition, of SQL on FHIR v2: fhirschema/view).
var logicalTypes = map[string]bool{"ViewDefinition": true}

// IsLogicalType reports whether name is a resource type served beyond R4.
func IsLogicalType(name string) bool { return logicalTypes[name] }

// IsStoredType reports whether resources of type name may be stored and
// served: an R4 resource type or a logical type.
func IsStoredType(name string) bool { return resourceTypes()[name] || logicalTypes[name] }

// StoredTypes lists the R4 resource types and the logical types in
// alphabetical order.
func StoredTypes() []string {
	out := ResourceTypes()
	for name := range logicalTypes {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
