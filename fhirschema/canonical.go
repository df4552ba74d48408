package fhirschema

// The official R4 JSON Schema leaves out the _name twin of the elements of
// type canonical (CapabilityStatement.rest.resource._supportedProfile,
// QuestionnaireResponse._questionnaire): valid JSON resources extend them
// like any other primitive. The validator adds the twins to what it reads
// of the schema.

const canonicalRef = "#/definitions/canonical"

// addCanonicalTwins adds the missing twins to the schema's definitions as
// the JSON Schema compiler reads them.
func addCanonicalTwins(defs map[string]any) {
	for _, d := range defs {
		props, _ := d.(map[string]any)["properties"].(map[string]any)
		for name, p := range props {
			if _, ok := props["_"+name]; ok {
				continue
			}
			p, _ := p.(map[string]any)
			items, _ := p["items"].(map[string]any)
			switch {
			case p["$ref"] == canonicalRef:
				props["_"+name] = map[string]any{"$ref": "#/definitions/Element"}
			case items["$ref"] == canonicalRef:
				props["_"+name] = map[string]any{"type": "array", "items": map[string]any{"$ref": "#/definitions/Element"}}
			}
		}
	}
}

// addCanonicalTwinDefinitions adds the missing twins to the definitions
// the element table reads.
func addCanonicalTwinDefinitions(defs map[string]schemaDefinition) {
	for _, d := range defs {
		for name, p := range d.Properties {
			if _, ok := d.Properties["_"+name]; ok {
				continue
			}
			switch {
			case p.Ref == canonicalRef:
				d.Properties["_"+name] = schemaProperty{Ref: "#/definitions/Element"}
			case p.Items != nil && p.Items.Ref == canonicalRef:
				d.Properties["_"+name] = schemaProperty{Type: "array", Items: &schemaProperty{Ref: "#/definitions/Element"}}
			}
		}
	}
}
