package terminology

import (
	"regexp"
	"strconv"
	"strings"

	"fhirstore/fhirschema"
)

// codeSystem is what checks read of a CodeSystem.
type codeSystem struct {
	url, version  string
	content       string
	supplements   string
	caseSensitive bool
	// displays holds each code's display and designations; folded the
	// codes lower-cased when the system is not case sensitive.
	displays map[string][]string
	folded   map[string]string
	// props holds the types of the properties the system defines.
	props map[string]string
}

func readCodeSystem(res map[string]any) *codeSystem {
	cs := &codeSystem{displays: map[string][]string{}, props: map[string]string{}}
	cs.url, _ = res["url"].(string)
	cs.version, _ = res["version"].(string)
	cs.content, _ = res["content"].(string)
	cs.supplements, _ = res["supplements"].(string)
	cs.caseSensitive, _ = res["caseSensitive"].(bool)
	for _, p := range objects(res["property"]) {
		code, _ := p["code"].(string)
		typ, _ := p["type"].(string)
		if _, dup := cs.props[code]; code != "" && !dup {
			cs.props[code] = typ
		}
	}
	var read func(v any)
	read = func(v any) {
		for _, c := range objects(v) {
			code, _ := c["code"].(string)
			if code == "" {
				continue
			}
			var names []string
			if d, _ := c["display"].(string); d != "" {
				names = append(names, d)
			}
			for _, d := range objects(c["designation"]) {
				if s, _ := d["value"].(string); s != "" {
					names = append(names, s)
				}
			}
			cs.displays[code] = names
			read(c["concept"])
		}
	}
	read(res["concept"])
	if !cs.caseSensitive {
		cs.folded = make(map[string]string, len(cs.displays))
		for code := range cs.displays {
			cs.folded[strings.ToLower(code)] = code
		}
	}
	return cs
}

// complete reports whether the resource holds every code of the system.
func (cs *codeSystem) complete() bool { return cs.content == "complete" && cs.supplements == "" }

// lookup returns the code as the system spells it.
func (cs *codeSystem) lookup(code string) (string, bool) {
	if _, ok := cs.displays[code]; ok {
		return code, true
	}
	if cs.folded != nil {
		c, ok := cs.folded[strings.ToLower(code)]
		return c, ok
	}
	return "", false
}

// standardProperties are the properties http://hl7.org/fhir/concept-properties
// defines, with their types: a code system that uses one of their URIs
// gives it this type, and should give it this code.
var standardProperties = map[string]string{
	"status": "code", "inactive": "boolean", "effectiveDate": "dateTime", "deprecated": "dateTime",
	"deprecationDate": "dateTime", "retirementDate": "dateTime", "notSelectable": "boolean",
	"parent": "code", "child": "code", "partOf": "code", "synonym": "code", "comment": "string",
	"itemWeight": "decimal",
}

const conceptPropertiesURI = "http://hl7.org/fhir/concept-properties#"

// valueTypes maps a concept property's value[x] to the property type it
// fits.
var valueTypes = map[string]string{
	"valueCode": "code", "valueCoding": "Coding", "valueString": "string", "valueInteger": "integer",
	"valueBoolean": "boolean", "valueDateTime": "dateTime", "valueDecimal": "decimal",
}

// uriValue tells an absolute URI: a scheme, then a colon.
var uriValue = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*:\S`)

// codeSystemRules checks a CodeSystem as terminology.
func (r *run) codeSystemRules(cs map[string]any) {
	content, _ := cs["content"].(string)
	supplements, _ := cs["supplements"].(string)
	concepts := objects(cs["concept"])
	switch {
	case content == "not-present" && len(concepts) > 0:
		r.errorf("CodeSystem.concept[0]", "the code system says its content is not present (content not-present), but it has concepts")
	case supplements != "" && content != "supplement":
		r.errorf("CodeSystem.content", "a code system that supplements another (supplements %s) must have the content supplement, not %q", supplements, content)
	case content == "supplement" && supplements == "":
		r.errorf("CodeSystem.supplements", "a code system with the content supplement must say which code system it supplements")
	}
	if supplements != "" {
		if base := r.system(supplements); base != nil && base.complete() {
			for i, c := range concepts {
				if code, _ := c["code"].(string); code != "" {
					if _, ok := base.lookup(code); !ok {
						r.errorf("CodeSystem.concept["+strconv.Itoa(i)+"]", "the code %q is not defined by the code system %s: a supplement cannot define codes", code, supplements)
					}
				}
			}
		}
	}
	defined := r.propertyDefinitions(objects(cs["property"]))
	var walk func(list []map[string]any, at string)
	walk = func(list []map[string]any, at string) {
		for i, c := range list {
			here := at + "[" + strconv.Itoa(i) + "]"
			for j, p := range objects(c["property"]) {
				r.conceptProperty(here+".property["+strconv.Itoa(j)+"]", p, defined)
			}
			walk(objects(c["concept"]), here+".concept")
		}
	}
	walk(concepts, "CodeSystem.concept")
}

// propertyDefinitions checks CodeSystem.property: codes and URIs each
// defined once, a standard URI with its standard type and code; it
// returns the type of each code as first defined.
func (r *run) propertyDefinitions(props []map[string]any) map[string]string {
	types := map[string]string{}
	uris := map[string]bool{}
	for i, p := range props {
		at := "CodeSystem.property[" + strconv.Itoa(i) + "]"
		code, _ := p["code"].(string)
		uri, _ := p["uri"].(string)
		typ, _ := p["type"].(string)
		if _, dup := types[code]; dup && code != "" {
			r.errorf(at, "a property is already defined with the code %q", code)
		} else if code != "" {
			types[code] = typ
		}
		if uris[uri] && uri != "" {
			r.errorf(at, "a property is already defined with the URI %s", uri)
		}
		uris[uri] = true
		std, isStd := strings.CutPrefix(uri, conceptPropertiesURI)
		switch want, known := standardProperties[std]; {
		case isStd && known:
			if typ != "" && typ != want {
				r.errorf(at, "the type %s is wrong: the URI %s identifies a property of the type %s", typ, uri, want)
			}
			if code != std {
				r.warnf(at, "the URI %s is normally given the code %q; the code %q will confuse value set filters", uri, std, code)
			}
		case uri == "":
			if want, known := standardProperties[code]; known {
				r.warnf(at, "the property has the standard code %q but not the standard URI %s%s", code, conceptPropertiesURI, code)
				if typ != "" && typ != want {
					r.warnf(at, "the type %s differs from the type %s of the standard property %q", typ, want, code)
				}
			}
		}
	}
	return types
}

// conceptProperty checks one concept's property against its definition.
func (r *run) conceptProperty(at string, p map[string]any, defined map[string]string) {
	code, _ := p["code"].(string)
	want, ok := defined[code]
	if !ok {
		if code != "" {
			r.warnf(at, "the property %q is not defined in CodeSystem.property", code)
		}
		return
	}
	for k := range p {
		got, isValue := valueTypes[k]
		if !isValue || want == "" {
			continue
		}
		if got != want {
			r.errorf(at, "the property %q has a value of the type %s, but is defined with the type %s", code, got, want)
		}
	}
}

// identifierRule checks an Identifier: one whose system says its value is
// a URI (urn:ietf:rfc:3986) must have an absolute URI as its value.
func (r *run) identifierRule(l *loc, id map[string]any) {
	sys, _ := id["system"].(string)
	value, ok := id["value"].(string)
	if sys == "urn:ietf:rfc:3986" && ok && !uriValue.MatchString(value) {
		r.errorf(l.String(), "the identifier's system is urn:ietf:rfc:3986, so its value must be an absolute URI (starting with a scheme such as urn:oid:), not %q", value)
	}
}

// objects returns the objects of a JSON array.
func objects(v any) []map[string]any { return fhirschema.Objects(v) }
