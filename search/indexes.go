package search

// IndexFields lists the stored fields the searches of a type filter on, one
// database index each: idx.<code> for equality, $in and prefix matches, and
// idx.<code>.lo / .hi for the range conditions of dates and quantities.
func (r *Registry) IndexFields(resourceType string) []string {
	var out []string
	for _, p := range r.Params(resourceType) {
		field := "idx." + p.Code
		switch p.Type {
		case "date", "number", "quantity":
			out = append(out, field+".lo", field+".hi")
		case "string":
			out = append(out, field, field+":exact")
		case "token":
			out = append(out, field, field+":text")
		case "reference":
			out = append(out, field, field+":identifier")
		case "uri":
			out = append(out, field)
		}
	}
	return out
}
