package view

import (
	"strings"
	"unicode"
)

// wholeResource are the functions and variables that can reach any
// element of the resource: a view using one decodes every element.
var wholeResource = map[string]bool{
	"descendants": true, "children": true, "resolve": true, "conformsTo": true, "toJson": true,
	"%resource": true, "%rootResource": true, "%context": true,
}

// reach records the names a path uses: a view reads at most the top-level
// elements its paths name (an identifier anywhere may be one), unless a
// path can see the whole resource.
func (c *compiler) reach(rewritten string) {
	if c.whole {
		return
	}
	if strings.TrimSpace(rewritten) == "$this" {
		c.whole = true // the resource itself, as a column's value
		return
	}
	for _, name := range identifiers(rewritten) {
		if wholeResource[name] {
			c.whole = true
			return
		}
		c.reached[name] = true
	}
}

// identifiers lists the identifiers of FHIRPath source (quoted ones
// unquoted) and its %variables (with their %), leaving strings and
// comments out.
func identifiers(src string) []string {
	var out []string
	for i := 0; i < len(src); {
		switch ch := src[i]; {
		case ch == '\'':
			i = skipQuoted(src, i)
		case ch == '`':
			j := skipQuoted(src, i)
			out = append(out, strings.Trim(src[i:j], "`"))
			i = j
		case ch == '/' && i+1 < len(src) && (src[i+1] == '/' || src[i+1] == '*'):
			i = skipComment(src, i)
		case ch == '%':
			name, j := envName(src, i+1)
			out = append(out, "%"+name)
			i = j
		case isIdentStart(ch):
			j := i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			out = append(out, src[i:j])
			i = j
		default:
			i++
		}
	}
	return out
}

// keepKey tells whether the top-level element key is one of reached, or
// a type of a choice element reached (value → valueQuantity), or the
// _key twin of one.
func keepKey(reached map[string]bool, key string) bool {
	key = strings.TrimPrefix(key, "_")
	if reached[key] || key == "resourceType" || key == "id" {
		return true
	}
	for i := 1; i < len(key); i++ {
		if unicode.IsUpper(rune(key[i])) && reached[key[:i]] {
			return true
		}
	}
	return false
}
