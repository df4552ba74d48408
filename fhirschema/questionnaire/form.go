package questionnaire

import (
	"fmt"
	"strconv"
	"strings"

	"fhirstore/fhirschema"
)

// CheckForm checks the rules of a Questionnaire that R4's invariants do
// not: every linkId is used once, every enableWhen names a question the
// form has, and every FHIRPath expression of its extensions (SDC's
// initialExpression, calculatedExpression, enableWhenExpression,
// variables, the {{…}} parts of x-fhir-query) parses.
func (c *Checker) CheckForm(q map[string]any) []fhirschema.Issue {
	f := &formCheck{c: c, first: map[string]string{}}
	f.expressions(q, "Questionnaire")
	f.linkIDs(q["item"], "Questionnaire")
	f.enableWhen(q["item"], "Questionnaire")
	return f.issues
}

type formCheck struct {
	c      *Checker
	first  map[string]string // linkId → where it is first used
	issues []fhirschema.Issue
}

func (f *formCheck) errorf(at, code, format string, args ...any) {
	f.issues = append(f.issues, fhirschema.Issue{Severity: "error", Code: code, Diagnostics: fmt.Sprintf(format, args...), Expression: at})
}

// linkIDs reports every linkId used a second time.
func (f *formCheck) linkIDs(items any, path string) {
	for i, it := range objects(items) {
		at := path + ".item[" + strconv.Itoa(i) + "]"
		id, _ := it["linkId"].(string)
		if first, dup := f.first[id]; dup {
			f.errorf(at+".linkId", "business-rule", "linkId %q is used twice: first at %s", id, first)
		} else {
			f.first[id] = at
		}
		f.expressions(it, at)
		f.linkIDs(it["item"], at)
	}
}

// enableWhen reports enableWhen conditions on questions the form does not
// have, or on the item itself.
func (f *formCheck) enableWhen(items any, path string) {
	for i, it := range objects(items) {
		at := path + ".item[" + strconv.Itoa(i) + "]"
		for j, cond := range objects(it["enableWhen"]) {
			q, _ := cond["question"].(string)
			cat := at + ".enableWhen[" + strconv.Itoa(j) + "].question"
			switch {
			case q == it["linkId"]:
				f.errorf(cat, "business-rule", "the enableWhen of item %q names the item itself", q)
			case f.first[q] == "":
				f.errorf(cat, "business-rule", "the enableWhen of item %q names question %q, which the Questionnaire does not have", linkID(it), q)
			}
		}
		f.enableWhen(it["item"], at)
	}
}

// expressions checks the FHIRPath of el's extensions (and of the
// extensions nested in them) parses.
func (f *formCheck) expressions(el map[string]any, path string) {
	for k, ext := range objects(el["extension"]) {
		at := path + ".extension[" + strconv.Itoa(k) + "]"
		if e, ok := ext["valueExpression"].(map[string]any); ok {
			f.expression(e, at+".valueExpression.expression")
		}
		f.expressions(ext, at)
	}
}

// expression checks one Expression's FHIRPath, or the FHIRPath embedded in
// an x-fhir-query.
func (f *formCheck) expression(e map[string]any, at string) {
	src, _ := e["expression"].(string)
	lang, _ := e["language"].(string)
	switch lang {
	case "text/fhirpath":
		if _, err := f.c.exprs.Compile(src); err != nil {
			f.errorf(at, "invalid", "the expression %q does not parse: %v", src, err)
		}
	case "application/x-fhir-query":
		parts, err := EmbeddedExpressions(src)
		if err != nil {
			f.errorf(at, "invalid", "the query %q: %v", src, err)
			return
		}
		for _, p := range parts {
			if _, err := f.c.exprs.Compile(p); err != nil {
				f.errorf(at, "invalid", "the expression {{%s}} in the query %q does not parse: %v", p, src, err)
			}
		}
	}
}

// EmbeddedExpressions returns the FHIRPath expressions an x-fhir-query
// embeds between {{ and }}, in order.
func EmbeddedExpressions(query string) ([]string, error) {
	var out []string
	for {
		start := strings.Index(query, "{{")
		if start < 0 {
			if strings.Contains(query, "}}") {
				return nil, fmt.Errorf("}} without {{")
			}
			return out, nil
		}
		end := strings.Index(query[start:], "}}")
		if end < 0 {
			return nil, fmt.Errorf("{{ without }}")
		}
		out = append(out, strings.TrimSpace(query[start+2:start+end]))
		query = query[start+end+2:]
	}
}
