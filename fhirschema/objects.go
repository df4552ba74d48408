package fhirschema

// Objects returns the JSON objects of an array as encoding/json decodes
// it (the one object, for an object; none for anything else): the
// repetitions of an element, skipping what is not an object.
func Objects(v any) []map[string]any {
	switch v := v.(type) {
	case []any:
		out := make([]map[string]any, 0, len(v))
		for _, x := range v {
			if m, ok := x.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	case map[string]any:
		return []map[string]any{v}
	}
	return nil
}
