package terminology

import (
	"regexp"
	"strconv"
	"strings"

	"fhirstore/fhirschema/fhirpath"
)

// Extensions a parameterised value set is written with: its parameters,
// and the expressions that give a filter's value from them.
const (
	parameterExtension      = "http://hl7.org/fhir/tools/StructureDefinition/valueset-parameter"
	parameterExtensionR5    = "http://hl7.org/fhir/StructureDefinition/valueset-parameter"
	filterExpressionURL     = "http://hl7.org/fhir/StructureDefinition/cqf-expression"
	filterExpressionLang    = "text/fhirpath"
	conceptFilterProperties = "concept code"
)

// snomedProperties are the filter properties SNOMED CT's use in FHIR
// defines besides its relationship types (concept identifiers).
var snomedProperties = map[string]bool{"concept": true, "constraint": true, "expression": true, "expressions": true, "inactive": true, "parent": true, "child": true, "moduleId": true, "effectiveTime": true, "definitionStatusId": true}

// hierarchyOps are the filter operations whose value is one code.
var hierarchyOps = map[string]bool{"is-a": true, "is-not-a": true, "descendent-of": true, "generalizes": true, "child-of": true, "descendent-leaf": true, "=": true}

// variable finds the environment variables a FHIRPath expression uses.
var variable = regexp.MustCompile("%([A-Za-z_][A-Za-z0-9_-]*|`[^`]*`|'[^']*')")

// fhirpathVariables are the environment variables FHIRPath and FHIR
// define for every expression.
var fhirpathVariables = map[string]bool{"resource": true, "rootResource": true, "context": true, "ucum": true, "sct": true, "loinc": true, "us-zip": true, "factory": true, "terminologies": true, "server": true}

// valueSetRules checks a ValueSet's compose as terminology: the codes it
// lists and the filters it applies, against the code systems they name.
func (r *run) valueSetRules(vs map[string]any) {
	compose, _ := vs["compose"].(map[string]any)
	if compose == nil {
		return
	}
	params := parameters(vs)
	for _, part := range []string{"include", "exclude"} {
		for i, inc := range objects(compose[part]) {
			at := "ValueSet.compose." + part + "[" + strconv.Itoa(i) + "]"
			sys, _ := inc["system"].(string)
			for j, c := range objects(inc["concept"]) {
				r.listedCode(at+".concept["+strconv.Itoa(j)+"]", sys, c)
			}
			for j, f := range objects(inc["filter"]) {
				fat := at + ".filter[" + strconv.Itoa(j) + "]"
				r.filterExpressions(fat, f, params)
				if r.err != nil {
					return
				}
				r.filter(fat, sys, f)
			}
		}
	}
}

// parameters lists the names of a value set's parameters.
func parameters(vs map[string]any) map[string]bool {
	names := map[string]bool{}
	for _, e := range objects(vs["extension"]) {
		if u, _ := e["url"].(string); u != parameterExtension && u != parameterExtensionR5 {
			continue
		}
		for _, sub := range objects(e["extension"]) {
			if u, _ := sub["url"].(string); u == "name" {
				if n, _ := sub["valueCode"].(string); n != "" {
					names[n] = true
				}
			}
		}
	}
	return names
}

// listedCode checks a code an include lists against its system.
func (r *run) listedCode(at, sys string, c map[string]any) {
	code, _ := c["code"].(string)
	if code == "" || sys == "" {
		return
	}
	if sys == SNOMED {
		if why := snomedCode(code); why != "" {
			r.errorf(at, "the code %q is not valid in the system %s: %s", code, sys, why)
		}
		return
	}
	if cs := r.system(sys); cs != nil && cs.complete() {
		if _, ok := cs.lookup(code); !ok {
			r.errorf(at, "the code %q is not valid in the system %s: it is not one of its codes", code, sys)
		}
	}
}

// filterExpressions checks the expressions that give a filter's value in
// a parameterised value set: FHIRPath that parses, using only the value
// set's parameters.
func (r *run) filterExpressions(at string, f map[string]any, params map[string]bool) {
	ext, _ := f["_value"].(map[string]any)
	for k, e := range objects(ext["extension"]) {
		if u, _ := e["url"].(string); u != filterExpressionURL {
			continue
		}
		x, _ := e["valueExpression"].(map[string]any)
		eat := at + ".value.extension[" + strconv.Itoa(k) + "].value.ofType(Expression)"
		lang, _ := x["language"].(string)
		src, _ := x["expression"].(string)
		if lang != filterExpressionLang {
			r.errorf(eat, "the expression of a value set filter must be in the language %s, not %q", filterExpressionLang, lang)
			continue
		}
		if _, err := fhirpath.Compile(src); err != nil {
			r.errorf(eat, "the expression %q is not valid FHIRPath: %v", src, err)
			continue
		}
		for _, m := range variable.FindAllStringSubmatch(src, -1) {
			name := strings.Trim(m[1], "`'")
			if !params[name] && !fhirpathVariables[name] && !strings.HasPrefix(name, "vs-") && !strings.HasPrefix(name, "ext-") {
				r.errorf(eat, "the expression %q uses %%%s, which is not a parameter of the value set", src, name)
			}
		}
	}
}

// filter checks one filter against the system it filters: its property
// must be one the system has (a warning otherwise), its operation one
// the property allows, its value one of the property's type.
func (r *run) filter(at, sys string, f map[string]any) {
	prop, _ := f["property"].(string)
	op, _ := f["op"].(string)
	value, hasValue := f["value"].(string)
	if !hasValue || prop == "" || sys == "" {
		return
	}
	if sys == SNOMED {
		r.snomedFilter(at, prop, op, value)
		return
	}
	cs := r.system(sys)
	if cs == nil {
		return
	}
	if strings.Contains(conceptFilterProperties, prop) && !strings.Contains(prop, " ") {
		if hierarchyOps[op] && cs.complete() {
			if _, ok := cs.lookup(value); !ok {
				r.errorf(at, "the value of a filter on %s must be a code of the system %s, and %q is not", prop, sys, value)
			}
		}
		return
	}
	typ, ok := cs.props[prop]
	if !ok {
		if typ, ok = standardProperties[prop]; !ok {
			r.warnf(at, "the property %q is not known for the system %s", prop, sys)
			return
		}
	}
	values := []string{value}
	switch op {
	case "exists":
		typ = "boolean"
	case "in", "not-in":
		values = strings.Split(value, ",")
	case "=":
	default:
		return
	}
	for _, v := range values {
		v = strings.TrimSpace(v)
		if why := filterValue(typ, v); why != "" {
			r.errorf(at, "the value of a filter on the property %q must be %s, not %q", prop, why, v)
			return
		}
	}
}

// filterValue says what a filter value of a property of type typ must be,
// "" when v is one.
func filterValue(typ, v string) string {
	switch typ {
	case "boolean":
		if v != "true" && v != "false" {
			return "true or false"
		}
	case "Coding":
		if sys, code, ok := strings.Cut(v, "#"); !ok || sys == "" || code == "" {
			return "a coding written system(|version)#code"
		}
	case "integer":
		if _, err := strconv.Atoi(v); err != nil {
			return "an integer"
		}
	case "decimal":
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return "a decimal"
		}
	}
	return ""
}

// snomedFilter checks a filter on SNOMED CT as its use in FHIR defines
// them: concept filters name concepts, constraints are ECL, and a
// relationship type is filtered with = or in.
func (r *run) snomedFilter(at, prop, op, value string) {
	switch {
	case prop == "concept":
		var ids []string
		switch {
		case hierarchyOps[op]:
			ids = []string{value}
		case op == "in" || op == "not-in":
			ids = strings.Split(value, ",")
		}
		for _, id := range ids {
			if id = strings.TrimSpace(id); !ConceptID(id) {
				r.errorf(at, "the value of a filter on concept must be a SNOMED CT concept identifier, and %q is not", id)
				return
			}
		}
	case prop == "constraint":
		if err := CheckECL(value); err != nil {
			r.errorf(at, "the value %q of a constraint filter is not valid ECL: %v", value, err)
		}
	case snomedProperties[prop]:
	case ConceptID(prop):
		if op != "=" && op != "in" {
			r.errorf(at, "the operation %q is not allowed on the SNOMED CT property %s: only = and in are", op, prop)
		}
	default:
		r.warnf(at, "the property %q is not known for SNOMED CT", prop)
	}
}
