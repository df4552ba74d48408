package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	stdmaps "maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"fhirstore/fhirschema/fhirpath"
)

// Definition is one of a tenant's SearchParameter resources, as the
// registry reads it (ParseDefinition).
type Definition struct {
	def definition
	// written is the expression as the resource has it.
	written string
}

// ParseDefinition reads a SearchParameter resource from its JSON. A
// choice element its expressions name as JSON does (valueDateTime) is
// searched as FHIRPath names it (value.ofType(dateTime)) as well.
func ParseDefinition(body []byte) (*Definition, error) {
	var d definition
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("read SearchParameter: %w", err)
	}
	d.tenant = true
	written := d.Expression
	d.Expression = rewriteChoices(d.Expression, lenientChoice)
	for i := range d.Component {
		d.Component[i].Expression = rewriteChoices(d.Component[i].Expression, lenientChoice)
	}
	return &Definition{def: d, written: written}, nil
}

// lenientChoice is a choice element named as JSON does in a form that
// finds it whether its parent has the element so named or the choice.
func lenientChoice(name, element, typ string) string {
	return "select(" + name + " | " + element + ".ofType(" + typ + "))"
}

// strictChoice is the FHIRPath form of a choice element named as JSON does.
func strictChoice(_, element, typ string) string {
	return element + ".ofType(" + typ + ")"
}

// rewriteChoices replaces each identifier of expr that names a choice
// element with its type (valueDateTime), outside string literals,
// variables, function names and type specifiers, by form of it.
func rewriteChoices(expr string, form func(name, element, typ string) string) string {
	var b strings.Builder
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '\'' || c == '`':
			j := closing(expr, i)
			b.WriteString(expr[i:j])
			i = j
		case c == '%' || c == '@' || isIdentStart(c):
			j := i + 1
			for j < len(expr) && (isIdentStart(expr[j]) || expr[j] >= '0' && expr[j] <= '9') {
				j++
			}
			name := expr[i:j]
			el, typ, ok := fhirpath.ChoiceOf(name)
			if ok && isIdentStart(c) && !strings.HasPrefix(strings.TrimLeft(expr[j:], " "), "(") && !typePosition(expr[:i]) {
				name = form(name, el, typ)
			}
			b.WriteString(name)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// closing is the index after the literal or quoted identifier at i.
func closing(expr string, i int) int {
	for j := i + 1; j < len(expr); j++ {
		switch expr[j] {
		case '\\':
			j++
		case expr[i]:
			return j + 1
		}
	}
	return len(expr)
}

// typePosition tells whether what follows before names a type: after is
// or as, or inside is(), as() or ofType().
func typePosition(before string) bool {
	before = strings.TrimRight(before, " ")
	if rest, ok := strings.CutSuffix(before, "("); ok {
		before = strings.TrimRight(rest, " ")
		return strings.HasSuffix(before, "ofType") || strings.HasSuffix(before, "as") || strings.HasSuffix(before, "is")
	}
	for _, kw := range []string{"is", "as"} {
		if rest, ok := strings.CutSuffix(before, kw); ok && (rest == "" || !isIdentStart(rest[len(rest)-1])) {
			return true
		}
	}
	return false
}

// URL is the canonical URL of the definition.
func (d *Definition) URL() string { return d.def.URL }

// Active reports whether the definition is in force: every status but
// retired is.
func (d *Definition) Active() bool { return d.def.Status != "retired" }

// DefinitionIssue is one problem of a SearchParameter resource; Path is
// the FHIRPath of the element at fault (SearchParameter.expression).
type DefinitionIssue struct {
	Path, Msg string
}

// DefinitionError refuses a SearchParameter resource whose parameter
// cannot be searched.
type DefinitionError struct {
	Issues []DefinitionIssue
}

func (e *DefinitionError) Error() string {
	msgs := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		msgs[i] = is.Path + ": " + is.Msg
	}
	return "search parameter: " + strings.Join(msgs, "; ")
}

// ParamUse names a tenant's own parameter that a query reads.
type ParamUse struct {
	Type, Code string
}

// paramTypes are the parameter types a tenant's SearchParameter may have.
var paramTypes = map[string]bool{
	"number": true, "date": true, "string": true, "token": true, "reference": true,
	"composite": true, "quantity": true, "uri": true,
}

// codePattern is the syntax of a tenant's parameter code: no ':' or '.',
// which name modifiers and chains, and no leading '_', which FHIR keeps
// for its own parameters.
var codePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_\-]{0,63}$`)

// Check tells whether the definition d can be put in force in the
// registry r (a tenant's, or the built-in one): every element a search
// needs is there and valid, its expression compiles for each base, and no
// other SearchParameter of the tenant has its code on one of its bases.
// A retired definition is not checked, nor one with the URL of a built-in
// definition (R4's own, whose built-in parameter stays in force).
// Warnings name what keeps a valid definition from taking effect yet (a
// component not defined yet).
func (r *Registry) Check(d *Definition) (warnings []DefinitionIssue, err error) {
	b := r.builtinRegistry()
	if _, builtin := b.defs[d.def.URL]; !d.Active() || builtin {
		return nil, nil
	}
	c := &defCheck{r: r, b: b, d: d.def, written: d.written}
	c.required()
	if len(c.errs) == 0 {
		c.code()
		c.bases()
		c.expression()
		c.targets()
		c.components()
	}
	if len(c.errs) > 0 {
		return c.warns, &DefinitionError{Issues: c.errs}
	}
	return c.warns, nil
}

// defCheck gathers the problems of one definition.
type defCheck struct {
	r, b        *Registry // the tenant's registry and the built-in one
	d           definition
	written     string // the expression as written (d has its lenient form)
	errs, warns []DefinitionIssue
}

func (c *defCheck) fail(path, format string, args ...any) {
	c.errs = append(c.errs, DefinitionIssue{Path: "SearchParameter." + path, Msg: fmt.Sprintf(format, args...)})
}

// required checks the elements every search parameter needs.
func (c *defCheck) required() {
	d := c.d
	switch {
	case d.URL == "":
		c.fail("url", "a search parameter needs a canonical url")
	case d.Code == "":
		c.fail("code", "a search parameter needs a code")
	case len(d.Base) == 0:
		c.fail("base", "a search parameter needs at least one base resource type")
	case d.Type == "special":
		c.fail("type", "special search parameters are not supported: their searches are not defined by an expression")
	case !paramTypes[d.Type]:
		c.fail("type", "unknown search parameter type %q", d.Type)
	case strings.TrimSpace(d.Expression) == "":
		c.fail("expression", "a search parameter of type %s needs an expression", d.Type)
	}
}

// code checks the code's syntax and that no other SearchParameter of the
// tenant claims it on a base. A code starting with '_' may only restate
// a built-in parameter.
func (c *defCheck) code() {
	if !codePattern.MatchString(c.d.Code) && !c.restatesAll() {
		c.fail("code", "%q is not a usable code: letters, digits, '-' and '_', starting with a letter (codes starting with '_' are FHIR's own)", c.d.Code)
		return
	}
	for _, base := range c.d.Base {
		if p, ok := c.r.byType[base][c.d.Code]; ok && p.Tenant && p.URL != c.d.URL {
			c.fail("code", "%s already has a search parameter %q, defined by %s", base, c.d.Code, p.URL)
		}
	}
}

// restatesAll tells whether d restates a built-in parameter on every base.
func (c *defCheck) restatesAll() bool {
	for _, base := range c.d.Base {
		if !c.b.restates(base, c.d) {
			return false
		}
	}
	return true
}

// bases checks that each base is a resource type; Resource and
// DomainResource only restate the built-in parameters of every type.
func (c *defCheck) bases() {
	for i, base := range c.d.Base {
		switch {
		case base == "Resource" || base == "DomainResource":
			if !resourceLevel[c.d.Code] && !textParams[c.d.Code] {
				c.fail(fmt.Sprintf("base[%d]", i), "a search parameter of the tenant names the resource types it searches; %s is only supported for FHIR's own parameters", base)
			}
		case !c.b.types[base]:
			c.fail(fmt.Sprintf("base[%d]", i), "%q is not a resource type", base)
		}
	}
}

// expression compiles the expression's branches of each base and
// evaluates them, strictly, on an empty resource of that type: a path
// that starts at another type or names an element the type does not have
// is refused, as is anything the engine cannot compile. A choice element
// named as JSON does passes when its FHIRPath form does.
func (c *defCheck) expression() {
	for _, base := range c.d.Base {
		if !c.b.types[base] {
			continue
		}
		if err := checkExpression(base, branchesFor(c.written, base, c.d.Base)); err != nil {
			strict := rewriteChoices(c.written, strictChoice)
			if strict == c.written || checkExpression(base, branchesFor(strict, base, c.d.Base)) != nil {
				c.fail("expression", "%s: %v", base, err)
			}
		}
	}
}

// checkExpression compiles src and evaluates it strictly on an empty
// resource of type base.
func checkExpression(base, src string) error {
	expr, err := fhirpath.Compile(src)
	if err != nil {
		return err
	}
	res := map[string]any{"resourceType": base}
	_, err = expr.Eval(context.Background(), &fhirpath.Env{Resource: res, Strict: true}, []fhirpath.Node{fhirpath.ResourceNode(res)})
	return err
}

// targets checks the target types of a reference parameter.
func (c *defCheck) targets() {
	if c.d.Type != "reference" {
		return
	}
	for i, t := range c.d.Target {
		if !c.b.types[t] {
			c.fail(fmt.Sprintf("target[%d]", i), "%q is not a resource type", t)
		}
	}
}

// components checks a composite's parts: two to eight, each an
// expression that compiles and the definition of a parameter that is not
// itself composite. A definition the tenant does not hold yet is a
// warning: the composite takes effect once it does.
func (c *defCheck) components() {
	if c.d.Type != "composite" {
		return
	}
	if n := len(c.d.Component); n < 2 || n > len(componentKeys) {
		c.fail("component", "a composite parameter has 2 to %d components, not %d", len(componentKeys), n)
		return
	}
	for i, comp := range c.d.Component {
		at := fmt.Sprintf("component[%d]", i)
		if _, err := fhirpath.Compile(comp.Expression); err != nil || strings.TrimSpace(comp.Expression) == "" {
			c.fail(at+".expression", "the component's expression does not compile: %v", err)
		}
		def, ok := c.r.defs[comp.Definition]
		switch {
		case !ok:
			c.warns = append(c.warns, DefinitionIssue{Path: "SearchParameter." + at + ".definition",
				Msg: fmt.Sprintf("no search parameter %s is defined yet: the composite takes effect once it is", comp.Definition)})
		case def.Type == "composite" || def.Type == "special":
			c.fail(at+".definition", "a component is a parameter of a simple type, not %s", def.Type)
		}
	}
}

// restates tells whether d states a built-in parameter of base again: the
// same code with the same definition URL, a parameter of every resource
// (_id, _lastUpdated…) or of the same type and expression for base (and
// the same components). The built-in one's index answers for it.
func (r *Registry) restates(base string, d definition) bool {
	if base == "Resource" || base == "DomainResource" {
		return resourceLevel[d.Code] || textParams[d.Code]
	}
	p, ok := r.byType[base][d.Code]
	switch {
	case !ok:
		return false
	case d.URL != "" && d.URL == p.URL, resourceLevel[d.Code], textParams[d.Code]:
		return true
	case d.Type != p.Type || p.expr == nil:
		return false
	}
	if compact(branchesFor(d.Expression, base, d.Base)) != compact(p.expr.String()) || len(d.Component) != len(p.Components) {
		return false
	}
	for i, comp := range d.Component {
		if compact(comp.Expression) != compact(p.Components[i].Expression) {
			return false
		}
	}
	return true
}

// compact is an expression without the spaces outside its string
// literals, so that two writings of one expression compare equal.
func compact(expr string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(expr); i++ {
		ch := expr[i]
		switch {
		case ch == '\'' && (i == 0 || expr[i-1] != '\\'):
			quoted = !quoted
		case !quoted && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'):
			continue
		}
		b.WriteByte(ch)
	}
	return b.String()
}

// builtinRegistry is the registry of the built-in parameters r extends.
func (r *Registry) builtinRegistry() *Registry {
	if r.builtin != nil {
		return r.builtin
	}
	return r
}

// With returns the registry of a tenant: the built-in parameters of r
// and the tenant's definitions in force, earlier ones first. A
// definition that restates a built-in parameter (see restates) lends it
// its URL and leaves its index alone; another one adds its code to its
// bases, or replaces the built-in parameter of that code there. When two
// definitions claim one code of a type, the earlier keeps it. Definitions
// that cannot be put in force (Check) are skipped, as are composites
// whose components are not defined.
func (r *Registry) With(defs []*Definition) *Registry {
	b := r.builtinRegistry()
	if len(defs) == 0 {
		return b
	}
	out := &Registry{byType: stdmaps.Clone(b.byType), sorted: stdmaps.Clone(b.sorted), types: b.types,
		skipped: slices.Clip(b.skipped), defs: stdmaps.Clone(b.defs), builtin: b}
	var active []definition
	for _, d := range defs {
		if !d.Active() {
			continue
		}
		active = append(active, d.def)
		if _, builtin := b.defs[d.def.URL]; !builtin && d.def.URL != "" {
			out.defs[d.def.URL] = d.def
		}
	}
	// Composites last: their components may be the tenant's own.
	sort.SliceStable(active, func(i, j int) bool { return active[i].Type != "composite" && active[j].Type == "composite" })
	touched, claimed := map[string]bool{}, map[string]string{}
	compiled := map[string]*fhirpath.Expr{}
	for _, d := range active {
		for _, base := range d.Base {
			key := base + " " + d.Code
			if url, ok := claimed[key]; (ok && url != d.URL) || !b.types[base] {
				continue
			}
			claimed[key] = d.URL
			out.own(base, touched)
			out.addTenant(base, d, compiled)
		}
	}
	for t := range touched {
		out.sortType(t)
	}
	return out
}

// own gives r its own copy of t's parameters, once.
func (r *Registry) own(t string, touched map[string]bool) {
	if touched[t] {
		return
	}
	r.byType[t] = stdmaps.Clone(r.byType[t])
	if r.byType[t] == nil {
		r.byType[t] = map[string]*Param{}
	}
	touched[t] = true
}

// addTenant puts the tenant's definition d in force on base.
func (r *Registry) addTenant(base string, d definition, compiled map[string]*fhirpath.Expr) {
	if r.builtin.restates(base, d) {
		p := *r.builtin.byType[base][d.Code]
		p.URL = d.URL
		r.byType[base][d.Code] = &p
		return
	}
	if !codePattern.MatchString(d.Code) || d.Type == "special" || !paramTypes[d.Type] {
		r.skipped = append(r.skipped, Skip{d.Code, d.Type, d.Base, "not a usable tenant parameter"})
		return
	}
	one := d
	one.Base, one.Expression = []string{base}, branchesFor(d.Expression, base, d.Base)
	if d.Type == "composite" {
		r.addComposite(one, r.defs, compiled)
		return
	}
	_ = r.add(one, compiled) // one concrete base: add fails only for Resource-level bases
}

// TenantTypes lists the resource types that have parameters of the
// tenant's own, sorted.
func (r *Registry) TenantTypes() []string {
	var out []string
	for t, params := range r.byType {
		for _, p := range params {
			if p.Tenant {
				out = append(out, t)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// TenantSignatures maps the code of each of the tenant's own parameters
// of resourceType to a signature of what its stored values depend on
// (type, expression, components, code system): when a signature changes,
// the stored values of that code must be extracted again.
func (r *Registry) TenantSignatures(resourceType string) map[string]string {
	out := map[string]string{}
	for code, p := range r.byType[resourceType] {
		if p.Tenant {
			out[code] = p.signature()
		}
	}
	return out
}

// signature is a digest of what p's stored values depend on.
func (p *Param) signature() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%v\n", p.Type, p.expr.String(), p.system, p.single)
	for _, c := range p.Components {
		fmt.Fprintf(h, "%s\n%s\n%s\n", c.Code, c.Type, c.Expression)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
