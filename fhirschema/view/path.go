package view

import (
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// path is a compiled FHIRPath expression of a view and where it is.
type path struct {
	src  string
	expr *fhirpath.Expr
	at   string
	// refKeys marks a path ending with getReferenceKey, evaluated as the
	// references it keys (see referenceTail); refType is its type.
	refKeys bool
	refType string
	// navs are the path compiled as a Navigation for each type of focus
	// it was evaluated on (see navigation).
	navs atomic.Pointer[[]navigation]
}

// navigation is a path's Navigation from a focus of type typ; nil when
// the path is more than a walk down elements.
type navigation struct {
	typ string
	nav *fhirpath.Navigation
}

// maxNavTypes bounds the types of focus a path keeps a Navigation for.
const maxNavTypes = 16

// navigation returns the path's Navigation from a focus of type typ,
// compiling it on first use: a path sees one type of focus, or a few (a
// forEach over contained resources).
func (p *path) navigation(typ string) *fhirpath.Navigation {
	var known []navigation
	old := p.navs.Load()
	if old != nil {
		known = *old
	}
	for i := range known {
		if known[i].typ == typ {
			return known[i].nav
		}
	}
	nav := p.expr.Navigation(typ)
	if len(known) < maxNavTypes {
		list := append(known[:len(known):len(known)], navigation{typ: typ, nav: nav})
		p.navs.CompareAndSwap(old, &list) // lost to another goroutine's: compiled again next time
	}
	return nav
}

// reservedVars are the environment variables a view's paths may name
// besides its constants.
var reservedVars = map[string]bool{
	"rowIndex": true, "resource": true, "rootResource": true, "context": true,
	"ucum": true, "sct": true, "loinc": true,
}

// path compiles the path element key of obj.
func (c *compiler) path(obj map[string]any, key, at string, required bool) *path {
	v, ok := obj[key]
	if !ok || v == nil {
		if required {
			c.errorf("required", at+"."+key, "%s is required", key)
		}
		return nil
	}
	return c.pathText(v, at+"."+key)
}

// pathText compiles a path given as the JSON value v.
func (c *compiler) pathText(v any, at string) *path {
	src, ok := v.(string)
	if !ok {
		c.errorf("structure", at, "a path must be a string, not %s", jsonKind(v))
		return nil
	}
	if strings.TrimSpace(src) == "" {
		c.errorf("required", at, "the path is empty")
		return nil
	}
	text, refType, refKeys := referenceTail(src)
	if !refKeys {
		text = src
	}
	rewritten, vars, err := rewrite(text)
	if err != nil {
		c.errorf("invalid", at, "path %q does not compile: %v", src, err)
		return nil
	}
	for _, name := range vars {
		if !c.constants[name] && !reservedVars[name] && !strings.HasPrefix(name, "vs-") && !strings.HasPrefix(name, "ext-") {
			c.errorf("invalid", at, "path %q names %%%s, which is not a constant of the view", src, name)
			return nil
		}
	}
	expr, err := fhirpath.Compile(rewritten)
	if err != nil {
		c.errorf("invalid", at, "path %q does not compile: %v", src, err)
		return nil
	}
	c.reach(rewritten)
	return &path{src: src, expr: expr, at: at, refKeys: refKeys, refType: refType}
}

func jsonKind(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return "a number"
}

// staticTypes are the types the path may yield from a focus of type
// focus, as far as the R4 model tells; nil when it cannot.
func (p *path) staticTypes(focus string) []string {
	if focus == "" {
		return nil
	}
	types, _ := p.expr.AtMostOne(focus, fhirschema.Element)
	return types
}

// staticType is the one type the path yields from focus, "" when it may
// yield several or the model cannot tell.
func (p *path) staticType(focus string) string {
	types := dedupe(p.staticTypes(focus))
	if len(types) != 1 {
		return ""
	}
	return types[0]
}

// Reference keys: getReferenceKey() is the id part of a literal reference
// (relative or absolute, with or without _history), getReferenceKey(T)
// the same when the reference is to a T; getResourceKey() is the
// resource's id. A key of one equals the key of the other for the same
// resource.
const (
	referenceKeyPattern = `^(?:.*/)?%s/([^/]+)(?:/_history/[^/]+)?$`
	anyType             = `[A-Z][A-Za-z]+`
)

// typeArg is a type specifier given to getReferenceKey.
var typeArg = regexp.MustCompile(`^(?:FHIR\.)?([A-Z][A-Za-z]+)$`)

// rewrite replaces the view functions the FHIRPath engine does not have
// by plain FHIRPath, and lists the environment variables the expression
// names. String literals, quoted identifiers and comments are left alone.
func rewrite(src string) (string, []string, error) {
	var out strings.Builder
	var vars []string
	for i := 0; i < len(src); {
		switch ch := src[i]; {
		case ch == '\'' || ch == '`':
			j := skipQuoted(src, i)
			out.WriteString(src[i:j])
			i = j
		case ch == '/' && i+1 < len(src) && (src[i+1] == '/' || src[i+1] == '*'):
			j := skipComment(src, i)
			out.WriteString(src[i:j])
			i = j
		case ch == '%':
			name, j := envName(src, i+1)
			vars = append(vars, name)
			out.WriteString(src[i:j])
			i = j
		case isIdentStart(ch):
			j := i
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			repl, next, err := keyCall(src, src[i:j], j)
			if err != nil {
				return "", nil, err
			}
			if next > j {
				out.WriteString(repl)
			} else {
				out.WriteString(src[i:j])
			}
			i = max(next, j)
		default:
			out.WriteByte(ch)
			i++
		}
	}
	return out.String(), vars, nil
}

// keyCall rewrites a call of getResourceKey or getReferenceKey whose name
// ends at j, returning where the call ends; next == j when ident is no
// such call.
func keyCall(src, ident string, j int) (repl string, next int, err error) {
	if ident != "getResourceKey" && ident != "getReferenceKey" {
		return "", j, nil
	}
	k := j
	for k < len(src) && (src[k] == ' ' || src[k] == '\t' || src[k] == '\n' || src[k] == '\r') {
		k++
	}
	if k >= len(src) || src[k] != '(' {
		return "", j, nil
	}
	end := strings.IndexByte(src[k:], ')')
	if end < 0 {
		return "", 0, fmt.Errorf("%s( is not closed", ident)
	}
	arg := strings.TrimSpace(src[k+1 : k+end])
	next = k + end + 1
	if ident == "getResourceKey" {
		if arg != "" {
			return "", 0, fmt.Errorf("getResourceKey() takes no argument")
		}
		return "id", next, nil
	}
	typ := anyType
	if arg != "" {
		m := typeArg.FindStringSubmatch(arg)
		if m == nil || !fhirschema.IsResourceType(m[1]) {
			return "", 0, fmt.Errorf("getReferenceKey(%s): the argument must be a resource type", arg)
		}
		typ = m[1]
	}
	re := fmt.Sprintf(referenceKeyPattern, typ)
	return fmt.Sprintf("reference.where(matches('%s')).replaceMatches('%s', '$1')", re, re), next, nil
}

// skipQuoted returns the end of the quoted string or identifier at i.
func skipQuoted(src string, i int) int {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return len(src)
}

// skipComment returns the end of the comment at i.
func skipComment(src string, i int) int {
	if src[i+1] == '/' {
		if k := strings.IndexByte(src[i:], '\n'); k >= 0 {
			return i + k
		}
		return len(src)
	}
	if k := strings.Index(src[i+2:], "*/"); k >= 0 {
		return i + 2 + k + 2
	}
	return len(src)
}

// envName reads the name of an environment variable starting at i (after
// the %): an identifier, or a quoted one.
func envName(src string, i int) (string, int) {
	if i < len(src) && (src[i] == '`' || src[i] == '\'') {
		j := skipQuoted(src, i)
		return strings.Trim(src[i:j], "`'"), j
	}
	j := i
	for j < len(src) && isIdentPart(src[j]) {
		j++
	}
	return src[i:j], j
}

func isIdentStart(ch byte) bool {
	return ch == '_' || ('a' <= ch && ch <= 'z') || ('A' <= ch && ch <= 'Z')
}

func isIdentPart(ch byte) bool { return isIdentStart(ch) || ('0' <= ch && ch <= '9') }

// tailReferenceKey matches a path that ends with getReferenceKey([Type])
// applied to a plain path (no operator outside brackets): the common
// subject.getReferenceKey(Patient). Such a path is evaluated as
// prefix.reference and its keys taken in Go, without regular expressions.
var tailReferenceKey = regexp.MustCompile(`^(.+)\.getReferenceKey\(\s*((?:FHIR\.)?[A-Za-z]*)\s*\)$`)

// referenceTail splits such a path into the path of its references and
// the type its keys must be of ("" for any); ok is false for any other path.
func referenceTail(src string) (refs, typ string, ok bool) {
	m := tailReferenceKey.FindStringSubmatch(strings.TrimSpace(src))
	if m == nil || strings.Contains(m[1], "getReferenceKey") || strings.Contains(m[1], "getResourceKey") || !plainPath(m[1]) {
		return "", "", false
	}
	typ = strings.TrimPrefix(m[2], "FHIR.")
	if typ != "" && !fhirschema.IsResourceType(typ) {
		return "", "", false // the rewrite reports it
	}
	return m[1] + ".reference", typ, true
}

// plainPath tells whether src has no operator, space or comment outside
// its brackets and quotes: a chain of navigations and calls.
func plainPath(src string) bool {
	depth := 0
	for i := 0; i < len(src); i++ {
		switch ch := src[i]; {
		case ch == '\'' || ch == '`':
			i = skipQuoted(src, i) - 1
		case ch == '(' || ch == '[':
			depth++
		case ch == ')' || ch == ']':
			depth--
		case depth == 0 && !(isIdentPart(ch) || ch == '.' || ch == '$'):
			return false
		}
	}
	return depth == 0
}

// referenceKey is the key a literal reference names, when of typ (any
// type when typ is ""): the id of Type/id, relative or absolute, with or
// without _history.
func referenceKey(ref, typ string) (string, bool) {
	if i := strings.Index(ref, "/_history/"); i >= 0 {
		ref = ref[:i]
	}
	slash := strings.LastIndexByte(ref, '/')
	if slash <= 0 || slash == len(ref)-1 {
		return "", false
	}
	id, rest := ref[slash+1:], ref[:slash]
	t := rest[strings.LastIndexByte(rest, '/')+1:]
	if t == "" || t[0] < 'A' || t[0] > 'Z' || (typ != "" && t != typ) {
		return "", false
	}
	for i := 1; i < len(t); i++ {
		if !('a' <= t[i] && t[i] <= 'z' || 'A' <= t[i] && t[i] <= 'Z') {
			return "", false
		}
	}
	return id, true
}
