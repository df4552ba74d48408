package search

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

//go:embed search-parameters.json
var searchParametersJSON []byte

// customParametersJSON defines the parameters of the service contract that
// R4 does not (Patient agency, Practitioner qualification), in the same form.
//
//go:embed custom-parameters.json
var customParametersJSON []byte

// Param is one search parameter of one resource type.
type Param struct {
	Code, Type                         string
	Base, Target, Modifier, Comparator []string
	Expression                         string // the official one
	Description                        string
	// URL is the canonical URL of the SearchParameter that defines it
	// (the service's own are under https://fhirstore.dev/fhir/); empty
	// for a parameter defined without one.
	URL string
	// Tenant marks a parameter of the tenant's own SearchParameters (see
	// Registry.With): its values may still be re-indexed.
	Tenant bool

	// Components are the parts of a composite parameter, in the order its
	// values name them.
	Components []Component

	expr *fhirpath.Expr // the branches of Expression for this type; nil for Resource-level parameters
	// system is the code system of a code element bound to one (see
	// code-systems.json): its codes are also indexed as system|code.
	system string
	// single marks a composite of the resource itself: one stored element.
	single bool
	// oneSortValue marks a parameter whose values on any resource give at
	// most one sort value (see hasOneSortValue): its sort field holds only
	// the least (.a), which is also the greatest.
	oneSortValue bool
	// oneRange marks a date, number or quantity parameter that selects at
	// most one element, so at most one stored range: it sorts by that
	// range's bounds (idx.<code>.lo ascending, .hi descending) and stores
	// no sort values.
	oneRange bool
	// pointKey marks a token$quantity or token$number composite, whose
	// elements also store point keys (see withPointKeys).
	pointKey bool
	// union are the composites whose elements together are this one's
	// (see linkCombos); it stores no values of its own.
	union []*Param
}

// field is the stored path p's searches filter on: idx.<code>, or for _id
// the row's own key, which every row holds and the engines index.
func (p *Param) field() string {
	if p.Code == "_id" {
		return "_id"
	}
	return "idx." + p.Code
}

// codeSystemsJSON maps "Type.param" to the code system its codes come from.
//
//go:embed code-systems.json
var codeSystemsJSON []byte

// Skip is an official parameter the registry does not index, with the reason.
type Skip struct {
	Code, Type string
	Base       []string
	Reason     string
}

// Registry holds the search parameters of every resource type: the
// built-in ones (NewRegistry), or those and a tenant's own (With).
type Registry struct {
	byType  map[string]map[string]*Param
	sorted  map[string][]*Param
	types   map[string]bool
	skipped []Skip
	// defs are the definitions by canonical URL, which composites name
	// their components by.
	defs map[string]definition
	// builtin is the registry of the built-in parameters a tenant's
	// registry extends; nil in that registry itself.
	builtin *Registry
	// uses, set while a tenant's registry parses a query, collects the
	// tenant's parameters the query reads (Query.Uses).
	uses *[]ParamUse
}

// resourceLevel are the parameters of base Resource that Extract computes
// directly instead of through their expressions.
var resourceLevel = map[string]bool{
	"_id": true, "_lastUpdated": true, "_tag": true, "_security": true, "_profile": true, "_source": true,
}

type definition struct {
	URL         string   `json:"url"`
	Code        string   `json:"code"`
	Type        string   `json:"type"`
	Base        []string `json:"base"`
	Target      []string `json:"target"`
	Modifier    []string `json:"modifier"`
	Comparator  []string `json:"comparator"`
	Expression  string   `json:"expression"`
	Description string   `json:"description"`
	Component   []struct {
		Definition string `json:"definition"`
		Expression string `json:"expression"`
	} `json:"component"`
	Status string `json:"status"`
	// tenant marks a definition of the tenant's own (Registry.With).
	tenant bool
}

// NewRegistry parses the embedded R4 definitions and compiles their
// expressions; resourceTypes are the types that Resource-level parameters
// apply to.
func NewRegistry(resourceTypes []string) (*Registry, error) {
	var bundle, custom struct {
		Entry []struct {
			Resource definition `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(searchParametersJSON, &bundle); err != nil {
		return nil, fmt.Errorf("search parameters: %w", err)
	}
	if err := json.Unmarshal(customParametersJSON, &custom); err != nil {
		return nil, fmt.Errorf("custom search parameters: %w", err)
	}
	bundle.Entry = append(bundle.Entry, custom.Entry...)
	r := &Registry{byType: map[string]map[string]*Param{}, sorted: map[string][]*Param{}, types: map[string]bool{}, defs: map[string]definition{}}
	for _, t := range resourceTypes {
		r.types[t] = true
	}
	compiled := map[string]*fhirpath.Expr{}
	for _, e := range bundle.Entry {
		if e.Resource.URL != "" {
			r.defs[e.Resource.URL] = e.Resource
		}
	}
	for _, e := range bundle.Entry {
		if e.Resource.Type == "composite" {
			r.addComposite(e.Resource, r.defs, compiled)
			continue
		}
		if err := r.add(e.Resource, compiled); err != nil {
			return nil, err
		}
	}
	var systems map[string]string
	if err := json.Unmarshal(codeSystemsJSON, &systems); err != nil {
		return nil, fmt.Errorf("code systems: %w", err)
	}
	for key, system := range systems {
		typ, code, _ := strings.Cut(key, ".")
		if p, ok := r.byType[typ][code]; ok {
			p.system = system
		}
	}
	r.linkCombos()
	for t := range r.byType {
		r.sortType(t)
	}
	return r, nil
}

// sortType lists the parameters of t by code (Params).
func (r *Registry) sortType(t string) {
	list := make([]*Param, 0, len(r.byType[t]))
	for _, p := range r.byType[t] {
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Code < list[j].Code })
	r.sorted[t] = list
}

func (r *Registry) add(d definition, compiled map[string]*fhirpath.Expr) error {
	skip := func(reason string) { r.skipped = append(r.skipped, Skip{d.Code, d.Type, d.Base, reason}) }
	switch {
	case textParams[d.Code]:
		r.addText(d)
		return nil
	case d.Type == "special":
		skip(d.Type + " parameter")
		return nil
	case d.Expression == "":
		skip("no expression")
		return nil
	}
	p := Param{Code: d.Code, Type: d.Type, Base: d.Base, Target: d.Target, Modifier: d.Modifier,
		Comparator: d.Comparator, Expression: d.Expression, Description: d.Description, URL: d.URL, Tenant: d.tenant}
	if len(d.Base) == 1 && (d.Base[0] == "Resource" || d.Base[0] == "DomainResource") {
		if !resourceLevel[d.Code] {
			return fmt.Errorf("search parameter %s: Resource-level parameter without extraction", d.Code)
		}
		shared := &p
		for t := range r.types {
			r.register(t, shared)
		}
		return nil
	}
	for _, base := range d.Base {
		src := branchesFor(d.Expression, base, d.Base)
		expr, ok := compiled[src]
		if !ok {
			var err error
			if expr, err = fhirpath.Compile(src); err != nil {
				skip(fmt.Sprintf("%s: expression %q: %v", base, src, err))
				continue
			}
			compiled[src] = expr
		}
		pt := p
		pt.expr = expr
		pt.oneSortValue = hasOneSortValue(&pt, base)
		pt.oneRange = hasOneRange(&pt, base)
		r.register(base, &pt)
	}
	return nil
}

// SortKey is the _sort key of p in the given direction.
func (p *Param) SortKey(descending bool) SortKey {
	return SortKey{Param: p.Code, Descending: descending, Type: p.Type, OneValue: p.oneSortValue, Range: p.oneRange}
}

// oneSortTypes are the complex types whose element gives one sort value:
// a Coding its code, an Identifier or ContactPoint its value, a Reference
// its reference. A primitive gives its own value.
var oneSortTypes = map[string]bool{"Coding": true, "Identifier": true, "ContactPoint": true, "Reference": true}

// hasOneSortValue tells whether p's values on any resource of type base
// give at most one sort value, by the element definitions: its expression
// selects at most one element, of a type with one sort value (a
// CodeableConcept, HumanName or Address has several).
func hasOneSortValue(p *Param, base string) bool {
	switch p.Type {
	case "token", "reference", "string", "uri":
	default:
		return false // dates and numbers sort by the bounds of their ranges
	}
	types, ok := p.expr.AtMostOne(base, fhirschema.Element)
	if !ok || len(types) == 0 {
		return false
	}
	for _, t := range types {
		if !oneSortTypes[t] && (t == "" || !unicode.IsLower(rune(t[0]))) {
			return false
		}
	}
	return true
}

// hasOneRange tells whether p is a date, number or quantity parameter
// whose expression selects at most one element on any resource of type
// base, by the element definitions: an element gives at most one range
// (a Timing its outer limits).
func hasOneRange(p *Param, base string) bool {
	switch p.Type {
	case "date", "number", "quantity":
	default:
		return false
	}
	types, ok := p.expr.AtMostOne(base, fhirschema.Element)
	return ok && len(types) > 0
}

func (r *Registry) register(t string, p *Param) {
	if r.byType[t] == nil {
		r.byType[t] = map[string]*Param{}
	}
	r.byType[t][p.Code] = p
}

// Lookup returns the parameter code of resourceType.
func (r *Registry) Lookup(resourceType, code string) (*Param, bool) {
	p, ok := r.byType[resourceType][code]
	if ok && p.Tenant && r.uses != nil {
		*r.uses = append(*r.uses, ParamUse{Type: resourceType, Code: code})
	}
	return p, ok
}

// Params returns the parameters of resourceType sorted by code.
func (r *Registry) Params(resourceType string) []*Param {
	return r.sorted[resourceType]
}

// Skipped returns the official parameters that are not indexed (special,
// without expression, or whose expression does not compile).
func (r *Registry) Skipped() []Skip {
	return r.skipped
}

// branchesFor keeps the union branches of expr that start at base or at no
// other base of the parameter, so that each type evaluates only its own.
func branchesFor(expr, base string, bases []string) string {
	if len(bases) < 2 {
		return expr
	}
	others := map[string]bool{}
	for _, b := range bases {
		others[b] = b != base
	}
	var keep []string
	for _, br := range splitUnion(expr) {
		if !others[rootName(br)] {
			keep = append(keep, br)
		}
	}
	if len(keep) == 0 {
		return expr
	}
	return strings.Join(keep, " | ")
}

// splitUnion splits expr at the "|" operators outside parentheses and strings.
func splitUnion(expr string) []string {
	var out []string
	depth, start, quoted := 0, 0, false
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; {
		case c == '\'' && (i == 0 || expr[i-1] != '\\'):
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '|' && depth == 0:
			out = append(out, strings.TrimSpace(expr[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(expr[start:]))
}

// rootName is the leading identifier of a branch, after any parentheses.
func rootName(branch string) string {
	branch = strings.TrimLeft(branch, "( ")
	end := strings.IndexAny(branch, ". ()")
	if end < 0 {
		return branch
	}
	return branch[:end]
}
