package fhirschema

// schemaCorrections are elements the R4 JSON Schema closes to an enum
// although their binding is not required: the schema lists a value set's
// codes for them, the StructureDefinition binds them extensibly.
// Expression.language is bound to ExpressionLanguage (extensible): text/cql
// with a version, or another language's media type, is valid R4.
var schemaCorrections = map[string][]string{
	"Expression": {"language"},
}

// correctSchema gives each element of schemaCorrections the schema of a
// code, in place of its enum.
func correctSchema(defs map[string]any) {
	for def, props := range schemaCorrections {
		d, _ := defs[def].(map[string]any)
		p, _ := d["properties"].(map[string]any)
		for _, name := range props {
			if el, ok := p[name].(map[string]any); ok {
				delete(el, "enum")
				el["$ref"] = "#/definitions/code"
			}
		}
	}
}
