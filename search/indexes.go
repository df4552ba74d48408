package search

import (
	"sort"
	"strings"
)

// IndexFields lists the stored fields the searches of a type filter on, one
// database index each: idx.<code> for equality, $in and prefix matches, and
// idx.<code>.lo / .hi for the range conditions of dates and quantities,
// and the first component of a composite (idx.<code>.a).
func (r *Registry) IndexFields(resourceType string) []string {
	var out []string
	for _, p := range r.Params(resourceType) {
		if len(p.union) > 0 || p.field() != "idx."+p.Code {
			continue // searched through the parameters it unites, or the row's key
		}
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
		case "uri", "special":
			out = append(out, field)
		case "composite":
			// Every R4 composite starts with a token or reference: its
			// equality drives the search, the other components narrow the
			// index's matches (MongoDB allows 64 indexes a collection).
			out = append(out, field+"."+string(componentKeys[0]))
		}
	}
	return out
}

// ResourceTypes lists the resource types the registry knows, sorted.
func (r *Registry) ResourceTypes() []string {
	out := make([]string, 0, len(r.types))
	for t := range r.types {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// WordListFields are the index fields holding word lists, sorted: an
// engine may keep them in a full-text index of its own, as they are only
// ever searched by equality and prefix.
func WordListFields() []string {
	out := make([]string, 0, len(textParams))
	for code := range textParams {
		out = append(out, "idx."+code)
	}
	sort.Strings(out)
	return out
}

// IsWordList reports whether an index field holds a resource's word list
// (_text, _content): one value per word, so as a whole it grows with the
// resource's text.
func IsWordList(field string) bool {
	code := strings.TrimPrefix(field, "idx.")
	return textParams[code]
}
