package search

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// filterNode is one node of a parsed _filter expression: a logical
// operation over its children, or a test (path op value).
type filterNode struct {
	logic string // "and", "or", "not"; "" for a test
	kids  []*filterNode
	path  []pathStep
	op    string
	value string
	pos   int // 1-based character position in the expression, for errors
}

// pathStep is one parameter of a path: name, possibly name[filter].
type pathStep struct {
	name  string
	inner *filterNode
	pos   int
}

// filterOperators are the comparison operators of the _filter grammar.
var filterOperators = map[string]bool{
	"eq": true, "ne": true, "co": true, "sw": true, "ew": true, "gt": true, "lt": true, "ge": true, "le": true,
	"ap": true, "sa": true, "eb": true, "pr": true, "po": true, "ss": true, "sb": true, "in": true, "ni": true, "re": true,
}

// filterParser reads the _filter grammar of FHIR R4 (search_filter.html):
//
//	filter    = unary (("and" / "or") unary)*   left to right, no precedence
//	unary     = "not" "(" filter ")" / "(" filter ")" / test
//	test      = paramPath SP compareOp SP compValue
//	paramPath = paramName ("[" filter "]")? ("." paramPath)?
//	compValue = JSON string / token (no whitespace, ")" or "]")
type filterParser struct {
	s string
	i int
}

// parseFilterExpr parses a whole _filter value.
func parseFilterExpr(s string) (*filterNode, error) {
	p := &filterParser{s: s}
	p.space()
	if p.i == len(p.s) {
		return nil, p.fail("the filter is empty")
	}
	n, err := p.filter()
	if err != nil {
		return nil, err
	}
	if p.space(); p.i < len(p.s) {
		return nil, p.fail("unexpected %q", p.rest())
	}
	return n, nil
}

// position is the 1-based character position of byte offset i.
func (p *filterParser) position(i int) int { return utf8.RuneCountInString(p.s[:i]) + 1 }

func (p *filterParser) fail(format string, args ...any) *Error {
	return p.failAt(p.i, format, args...)
}

func (p *filterParser) failAt(i int, format string, args ...any) *Error {
	return errorf("_filter", "syntax error at position %d: %s", p.position(i), fmt.Sprintf(format, args...))
}

// rest is a short excerpt of what is left, for errors.
func (p *filterParser) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20] + "…"
	}
	return r
}

func (p *filterParser) space() {
	for p.i < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.i:])
		if !unicode.IsSpace(r) {
			return
		}
		p.i += n
	}
}

// filter reads unary (("and" / "or") unary)*, folding left to right.
func (p *filterParser) filter() (*filterNode, error) {
	left, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		p.space()
		start := p.i
		word := strings.ToLower(p.word())
		if word != "and" && word != "or" {
			p.i = start
			return left, nil
		}
		if at := p.i; !p.spaceAfter() && p.i < len(p.s) && p.s[at] != '(' {
			return nil, p.failAt(at, "expected a space after %q", word)
		}
		right, err := p.unary()
		if err != nil {
			return nil, err
		}
		left = &filterNode{logic: word, kids: []*filterNode{left, right}, pos: left.pos}
	}
}

// spaceAfter skips the whitespace a keyword needs after it.
func (p *filterParser) spaceAfter() bool {
	start := p.i
	p.space()
	return p.i > start && p.i < len(p.s)
}

// word reads letters.
func (p *filterParser) word() string {
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z') {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *filterParser) unary() (*filterNode, error) {
	p.space()
	start := p.i
	if p.i == len(p.s) {
		return nil, p.fail("expected a test, \"(\" or \"not\" but the filter ends")
	}
	if p.s[p.i] == '(' {
		return p.group(start, "")
	}
	if w := p.word(); strings.EqualFold(w, "not") {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '(' {
			return p.group(start, "not")
		}
	}
	p.i = start
	return p.test()
}

// group reads "(" filter ")"; logic "not" negates it.
func (p *filterParser) group(start int, logic string) (*filterNode, error) {
	open := p.i
	p.i++
	inner, err := p.filter()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i == len(p.s) || p.s[p.i] != ')' {
		if p.i == len(p.s) {
			return nil, p.failAt(open, "the parenthesis opened here is never closed")
		}
		return nil, p.fail("expected \")\" but found %q", p.rest())
	}
	p.i++
	if logic == "" {
		return inner, nil
	}
	return &filterNode{logic: logic, kids: []*filterNode{inner}, pos: p.position(start)}, nil
}

// test reads paramPath SP compareOp SP compValue.
func (p *filterParser) test() (*filterNode, error) {
	n := &filterNode{pos: p.position(p.i)}
	path, err := p.paramPath()
	if err != nil {
		return nil, err
	}
	n.path = path
	if !p.spaceAfter() {
		return nil, p.fail("expected a space and an operator after the parameter")
	}
	opAt := p.i
	n.op = strings.ToLower(p.word())
	if !filterOperators[n.op] {
		return nil, p.failAt(opAt, "%q is not an operator (eq ne co sw ew gt lt ge le sa eb ap pr po ss sb in ni re)", p.s[opAt:p.i]+p.nonSpace())
	}
	if !p.spaceAfter() {
		return nil, p.fail("expected a space and a value after %q", n.op)
	}
	n.value, err = p.compValue()
	return n, err
}

// nonSpace reads up to the next whitespace, for error messages.
func (p *filterParser) nonSpace() string {
	start := p.i
	for p.i < len(p.s) && !unicode.IsSpace(rune(p.s[p.i])) {
		p.i++
	}
	return p.s[start:p.i]
}

// paramPath reads name ("[" filter "]")? ("." paramPath)?.
func (p *filterParser) paramPath() ([]pathStep, error) {
	var steps []pathStep
	for {
		start := p.i
		if p.i < len(p.s) && (isAlpha(p.s[p.i]) || p.s[p.i] == '_') {
			p.i++
			for p.i < len(p.s) && (isAlpha(p.s[p.i]) || p.s[p.i] == '_' || p.s[p.i] == '-' || p.s[p.i] >= '0' && p.s[p.i] <= '9') {
				p.i++
			}
		}
		if p.i == start {
			if p.i == len(p.s) {
				return nil, p.fail("expected a search parameter name but the filter ends")
			}
			return nil, p.fail("expected a search parameter name but found %q", p.rest())
		}
		step := pathStep{name: p.s[start:p.i], pos: p.position(start)}
		if p.i < len(p.s) && p.s[p.i] == '[' {
			open := p.i
			p.i++
			inner, err := p.filter()
			if err != nil {
				return nil, err
			}
			p.space()
			if p.i == len(p.s) || p.s[p.i] != ']' {
				return nil, p.failAt(open, "the \"[\" opened here is never closed")
			}
			p.i++
			step.inner = inner
		}
		steps = append(steps, step)
		if p.i == len(p.s) || p.s[p.i] != '.' {
			if step.inner != nil {
				return nil, p.fail("a filtered parameter name[...] must be followed by .parameter")
			}
			return steps, nil
		}
		p.i++
	}
}

func isAlpha(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// compValue reads a JSON string or a token.
func (p *filterParser) compValue() (string, error) {
	start := p.i
	if p.s[p.i] == '"' {
		p.i++
		for p.i < len(p.s) && p.s[p.i] != '"' {
			if p.s[p.i] == '\\' {
				p.i++
			}
			p.i++
		}
		if p.i >= len(p.s) {
			return "", p.failAt(start, "the string that starts here is never closed")
		}
		p.i++
		var v string
		if err := json.Unmarshal([]byte(p.s[start:p.i]), &v); err != nil {
			return "", p.failAt(start, "the string is not a valid JSON string")
		}
		return v, nil
	}
	for p.i < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.i:])
		if unicode.IsSpace(r) || r == ')' || r == ']' {
			break
		}
		p.i += n
	}
	if p.i == start {
		return "", p.fail("expected a value")
	}
	return p.s[start:p.i], nil
}
