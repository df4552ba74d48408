package fhirschema

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// element is what the validator knows of one JSON property of a definition.
type element struct {
	// path is the FHIRPath step that names the element: "birthDate",
	// "value.ofType(Quantity)" for the JSON property valueQuantity, and the
	// primitive's own step for its _name twin.
	path string
	// typ is the definition of the value: "date", "HumanName",
	// "ResourceList" (any resource), "Element" for a _name twin; "" when the
	// schema gives none (resourceType).
	typ string
	// choice is the element's name without its type suffix ("value") when
	// the element is one type of a choice element value[x].
	choice    string
	array     bool
	primitive bool // typ is a primitive type
	shadow    bool // the _name twin of a primitive element

	// What the schema checks of a value besides its shape, which the
	// walker checks too (see walker.schemaWould): the codes an enumerated
	// code takes, and the pattern a primitive's string matches.
	enum    map[string]bool
	pattern func(string) bool
}

// schemaDefinition is the part of a schema definition the element table reads.
type schemaDefinition struct {
	Properties map[string]schemaProperty `json:"properties"`
	Required   []string                  `json:"required"`
	Pattern    string                    `json:"pattern"`
}

type schemaProperty struct {
	Ref     string          `json:"$ref"`
	Type    string          `json:"type"`
	Pattern string          `json:"pattern"`
	Enum    []any           `json:"enum"`
	Const   any             `json:"const"`
	Items   *schemaProperty `json:"items"`
}

func (p schemaProperty) ref() string {
	if p.Ref == "" && p.Items != nil {
		return strings.TrimPrefix(p.Items.Ref, "#/definitions/")
	}
	return strings.TrimPrefix(p.Ref, "#/definitions/")
}

// isPrimitive reports whether a definition is a FHIR primitive type: their
// names alone start with a lower-case letter.
func isPrimitive(def string) bool { return def != "" && unicode.IsLower(rune(def[0])) }

// schemaTables is what the validator reads of the embedded schema's
// definitions: their elements, and the properties each requires.
type schemaTables struct {
	elements map[string]map[string]*element
	present  map[string][]string
}

// readSchemaTables reads the tables of the embedded schema, once.
var readSchemaTables = sync.OnceValues(func() (*schemaTables, error) {
	var typed struct {
		Definitions map[string]schemaDefinition `json:"definitions"`
	}
	if err := json.Unmarshal(SchemaJSON, &typed); err != nil {
		return nil, fmt.Errorf("read FHIR schema: %w", err)
	}
	addCanonicalTwinDefinitions(typed.Definitions)
	t := &schemaTables{elements: elementTable(typed.Definitions), present: map[string][]string{}}
	for name, d := range typed.Definitions {
		if len(d.Required) > 0 {
			t.present[name] = d.Required
		}
	}
	return t, nil
})

// Element describes the element name of definition def (a type such as
// "Observation", "Reference" or "Observation_Component", the schema's
// name of a backbone element): the definitions its value may have (each
// type of a choice element, named without [x]: "value" of an
// Observation), whether it repeats, and whether def has it at all.
func Element(def, name string) (types []string, repeats, ok bool) {
	tables, err := readSchemaTables()
	if err != nil {
		return nil, false, false
	}
	m := tables.elements[def]
	if el := m[name]; el != nil && !el.shadow && el.choice == "" {
		return []string{el.typ}, el.array, true
	}
	for _, el := range m {
		if el.choice == name && !el.shadow {
			types, repeats, ok = append(types, el.typ), repeats || el.array, true
		}
	}
	slices.Sort(types)
	return types, repeats, ok
}

// elementTable reads, for every definition, what each of its properties is.
// The schema does not mark choice elements: a property is one type of a
// choice when its name is a stem followed by its own type's name, at least
// one sibling shares the stem the same way and the stem itself is no
// property. Its primitive types are written inline rather than by $ref, so
// their type is read from the name.
func elementTable(defs map[string]schemaDefinition) map[string]map[string]*element {
	out := make(map[string]map[string]*element, len(defs))
	patterns := map[string]func(string) bool{}
	for name, d := range defs {
		m := make(map[string]*element, len(d.Properties))
		stems := map[string]int{}
		for p, sp := range d.Properties {
			if strings.HasPrefix(p, "_") || sp.Const != nil {
				continue
			}
			el := &element{path: p, typ: propertyType(sp), array: sp.Type == "array"}
			// A primitive of a choice is inline, never a $ref.
			if stem, typ, ok := splitChoice(p, defs); ok && !el.array && (el.typ == "" || el.typ == typ && !isPrimitive(typ)) {
				if _, taken := d.Properties[stem]; !taken {
					el.choice, el.typ = stem, typ
					stems[stem]++
				}
			}
			el.primitive = isPrimitive(el.typ)
			el.enum, el.pattern = schemaChecks(sp, defs[el.typ], patterns)
			m[p] = el
		}
		for p, el := range m {
			if el.shadow { // added by this loop
				continue
			}
			if el.choice != "" && stems[el.choice] < 2 {
				el.choice = ""
			}
			if el.choice != "" {
				el.path = el.choice + ".ofType(" + el.typ + ")"
			}
			if _, ok := d.Properties["_"+p]; ok && el.primitive {
				m["_"+p] = &element{path: el.path, typ: "Element", choice: el.choice, array: el.array, shadow: true}
			}
		}
		out[name] = m
	}
	return out
}

// schemaChecks are the enumeration and the pattern the schema gives a
// property (or the primitive definition it refers to). Patterns are
// compiled once each; one that does not compile is dropped.
func schemaChecks(sp schemaProperty, def schemaDefinition, patterns map[string]func(string) bool) (map[string]bool, func(string) bool) {
	var enum map[string]bool
	values := sp.Enum
	if values == nil && sp.Items != nil {
		values = sp.Items.Enum
	}
	for _, v := range values {
		if s, ok := v.(string); ok {
			if enum == nil {
				enum = map[string]bool{}
			}
			enum[s] = true
		}
	}
	src := sp.Pattern
	if src == "" && sp.Items != nil {
		src = sp.Items.Pattern
	}
	if src == "" {
		src = def.Pattern
	}
	if src == "" {
		return enum, nil
	}
	match, seen := patterns[src]
	if !seen {
		match = compilePattern(src)
		patterns[src] = match
	}
	return enum, match
}

// compilePattern is a schema pattern as a function, nil when it does not
// compile. The patterns of string, uri and code, met on nearly every
// element, are matched byte by byte (patterns_test.go holds them to the
// regular expressions): 50 ns for a code where the expression takes 700.
func compilePattern(src string) func(string) bool {
	if match := plainPatterns[src]; match != nil {
		return match
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil
	}
	return re.MatchString
}

// plainPatterns match what their regular expressions match, with Go's \s
// being [\t\n\f\r ].
var plainPatterns = map[string]func(string) bool{
	`^[ \r\n\t\S]+$`:      func(s string) bool { return s != "" && strings.IndexByte(s, '\f') < 0 },
	`^\S*$`:               func(s string) bool { return !strings.ContainsAny(s, "\t\n\f\r ") },
	`^[^\s]+(\s[^\s]+)*$`: isCodeText,
}

// isCodeText matches ^[^\s]+(\s[^\s]+)*$: no whitespace at either end and
// none twice in a row.
func isCodeText(s string) bool {
	if s == "" {
		return false
	}
	space := true // at the start, as after a space
	for i := 0; i < len(s); i++ {
		isSpace := asciiSpace(s[i])
		if isSpace && space {
			return false
		}
		space = isSpace
	}
	return !space
}

func asciiSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\f' || b == '\r' }

// propertyType is the definition a property's value has: its $ref, code for
// an inline enumeration, "" for what only its name can tell.
func propertyType(sp schemaProperty) string {
	if ref := sp.ref(); ref != "" {
		return ref
	}
	if sp.Enum != nil || sp.Items != nil && sp.Items.Enum != nil {
		return "code"
	}
	return ""
}

// splitChoice splits valueQuantity into value and Quantity, valueDateTime
// into value and dateTime: the longest type name that ends the property.
func splitChoice(p string, defs map[string]schemaDefinition) (stem, typ string, ok bool) {
	for i := 1; i < len(p); i++ {
		if !unicode.IsUpper(rune(p[i])) {
			continue
		}
		suffix := p[i:]
		prim := strings.ToLower(suffix[:1]) + suffix[1:]
		if _, found := defs[prim]; found && isPrimitive(prim) {
			return p[:i], prim, true
		}
		if _, found := defs[suffix]; found && !strings.Contains(suffix, "_") {
			return p[:i], suffix, true
		}
	}
	return "", "", false
}
