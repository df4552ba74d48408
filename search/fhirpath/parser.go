package fhirpath

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// maxDepth bounds the nesting of parentheses, calls and unary operators so
// that hostile input cannot exhaust the stack.
const maxDepth = 100

// binaryOp describes an infix operator: its precedence (higher binds
// tighter) and whether this package evaluates it.
type binaryOp struct {
	prec      int
	supported bool
}

// binaryOps lists the FHIRPath infix operators by precedence.
var binaryOps = map[string]binaryOp{
	"implies": {1, true}, "or": {2, true}, "xor": {2, true}, "and": {3, true},
	"in": {4, false}, "contains": {4, false},
	"=": {5, true}, "!=": {5, true}, "~": {5, false}, "!~": {5, false},
	"<": {6, false}, ">": {6, false}, "<=": {6, false}, ">=": {6, false},
	"|": {7, true}, "is": {8, true}, "as": {8, true},
	"+": {9, false}, "-": {9, false}, "&": {9, false},
	"*": {10, false}, "/": {10, false}, "div": {10, false}, "mod": {10, false},
}

// parser is a recursive-descent parser over the token list.
type parser struct {
	toks  []token
	pos   int
	depth int
}

// parse builds the evaluator tree for src.
func parse(src string) (evaluator, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	e, err := p.parseBinary(1)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.errorf(t, "unexpected %s", t.describe())
	}
	return e, nil
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

// isOp reports whether the next token is the operator op.
func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tokOp && t.text == op
}

// expect consumes the operator op or fails.
func (p *parser) expect(op string) error {
	if t := p.next(); t.kind != tokOp || t.text != op {
		return p.errorf(t, "expected '%s', found %s", op, t.describe())
	}
	return nil
}

func (p *parser) errorf(t token, format string, args ...any) error {
	return fmt.Errorf("at offset %d: %s", t.pos, fmt.Sprintf(format, args...))
}

// enter guards recursion depth; the caller must defer p.leave().
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf(p.peek(), "expression nested deeper than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// peekBinary returns the infix operator at the current token, if any.
func (p *parser) peekBinary() (string, binaryOp, bool) {
	t := p.peek()
	if t.kind != tokOp && t.kind != tokIdent {
		return "", binaryOp{}, false
	}
	op, ok := binaryOps[t.text]
	return t.text, op, ok
}

// parseBinary parses operators of precedence minPrec and above by
// precedence climbing.
func (p *parser) parseBinary(minPrec int) (evaluator, error) {
	left, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for {
		name, op, ok := p.peekBinary()
		if !ok || op.prec < minPrec {
			return left, nil
		}
		t := p.next()
		if !op.supported {
			return nil, p.errorf(t, "operator '%s' is not supported", name)
		}
		if left, err = p.parseRight(name, op, left); err != nil {
			return nil, err
		}
	}
}

// parseRight parses the right operand of name and combines it with left.
func (p *parser) parseRight(name string, op binaryOp, left evaluator) (evaluator, error) {
	if name == "is" || name == "as" {
		typ, err := p.parseTypeSpecifier()
		if err != nil {
			return nil, fmt.Errorf("operand of '%s': %w", name, err)
		}
		return typeExpr{recv: left, typeName: typ, isOp: name == "is"}, nil
	}
	right, err := p.parseBinary(op.prec + 1)
	if err != nil {
		return nil, err
	}
	switch name {
	case "|":
		return unionExpr{left, right}, nil
	case "=", "!=":
		return equalExpr{left: left, right: right, negate: name == "!="}, nil
	default:
		return logicExpr{op: name, left: left, right: right}, nil
	}
}

// parseUnary parses an optional sign (numbers only) and a postfix
// expression.
func (p *parser) parseUnary() (evaluator, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if !p.isOp("-") && !p.isOp("+") {
		return p.parsePostfix()
	}
	sign := p.next()
	t := p.peek()
	if t.kind != tokNumber {
		return nil, p.errorf(sign, "unary '%s' is only supported before a number", sign.text)
	}
	p.next()
	text := t.text
	if sign.text == "-" {
		text = "-" + text
	}
	return p.postfixLoop(numberLiteral(text))
}

// parsePostfix parses a term followed by member accesses, function calls
// and indexers.
func (p *parser) parsePostfix() (evaluator, error) {
	term, err := p.parseTerm()
	if err != nil {
		return nil, err
	}
	return p.postfixLoop(term)
}

// postfixLoop applies .member, .function(...) and [index] to e.
func (p *parser) postfixLoop(e evaluator) (evaluator, error) {
	for {
		var err error
		switch {
		case p.isOp("."):
			p.next()
			e, err = p.parseInvocation(e)
		case p.isOp("["):
			p.next()
			e, err = p.parseIndexer(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// parseIndexer parses "index]" after "[".
func (p *parser) parseIndexer(recv evaluator) (evaluator, error) {
	t := p.next()
	if t.kind != tokNumber {
		return nil, p.errorf(t, "indexer must be a non-negative integer literal, found %s", t.describe())
	}
	n, err := strconv.Atoi(t.text)
	if err != nil {
		return nil, p.errorf(t, "indexer must be a non-negative integer literal: %v", err)
	}
	if err := p.expect("]"); err != nil {
		return nil, err
	}
	return indexExpr{recv: recv, index: n}, nil
}

// parseInvocation parses the member or function name after a dot.
func (p *parser) parseInvocation(recv evaluator) (evaluator, error) {
	t := p.next()
	if t.kind != tokIdent && t.kind != tokQuoted {
		return nil, p.errorf(t, "expected a name after '.', found %s", t.describe())
	}
	if t.kind == tokIdent && p.isOp("(") {
		return p.parseCall(recv, t)
	}
	return memberExpr{recv: recv, name: t.text}, nil
}

// parseTerm parses a literal, parenthesized expression, variable, or an
// identifier or function call at the start of a path.
func (p *parser) parseTerm() (evaluator, error) {
	t := p.next()
	switch t.kind {
	case tokString:
		return literalExpr{[]item{{value: t.text, typ: "string"}}}, nil
	case tokNumber:
		return numberLiteral(t.text), nil
	case tokEnv:
		return p.parseEnv(t)
	case tokThis:
		if t.text != "this" {
			return nil, p.errorf(t, "variable '$%s' is not supported", t.text)
		}
		return thisExpr{}, nil
	case tokQuoted:
		return identExpr{t.text}, nil
	case tokIdent:
		return p.parseIdentTerm(t)
	case tokOp:
		return p.parseOpTerm(t)
	}
	return nil, p.errorf(t, "unexpected %s", t.describe())
}

// parseIdentTerm parses a boolean literal, a function call or an
// identifier at the start of a path.
func (p *parser) parseIdentTerm(t token) (evaluator, error) {
	switch {
	case p.isOp("("):
		return p.parseCall(nil, t)
	case t.text == "true" || t.text == "false":
		return literalExpr{boolItems(t.text == "true")}, nil
	}
	if _, isOp := binaryOps[t.text]; isOp {
		return nil, p.errorf(t, "unexpected operator '%s'", t.text)
	}
	return identExpr{t.text}, nil
}

// parseOpTerm parses "(expr)" or "{}".
func (p *parser) parseOpTerm(t token) (evaluator, error) {
	switch t.text {
	case "(":
		e, err := p.parseBinary(1)
		if err != nil {
			return nil, err
		}
		return e, p.expect(")")
	case "{":
		return literalExpr{}, p.expect("}")
	}
	return nil, p.errorf(t, "unexpected %s", t.describe())
}

// environment variables with constant values.
var envConstants = map[string]string{
	"ucum":  "http://unitsofmeasure.org",
	"sct":   "http://snomed.info/sct",
	"loinc": "http://loinc.org",
}

// parseEnv parses %resource, %rootResource, %context and the constants.
func (p *parser) parseEnv(t token) (evaluator, error) {
	switch t.text {
	case "resource", "rootResource", "context":
		return rootExpr{}, nil
	}
	if v, ok := envConstants[t.text]; ok {
		return literalExpr{[]item{{value: v, typ: "uri"}}}, nil
	}
	return nil, p.errorf(t, "environment variable '%%%s' is not supported", t.text)
}

// parseTypeSpecifier parses a possibly qualified type name such as
// Quantity, FHIR.Quantity or System.String.
func (p *parser) parseTypeSpecifier() (string, error) {
	t := p.next()
	if t.kind != tokIdent && t.kind != tokQuoted {
		return "", p.errorf(t, "expected a type name, found %s", t.describe())
	}
	name := t.text
	if p.isOp(".") && (name == "FHIR" || name == "System") {
		p.next()
		q := p.next()
		if q.kind != tokIdent && q.kind != tokQuoted {
			return "", p.errorf(q, "expected a type name after '%s.', found %s", name, q.describe())
		}
		name = q.text
	}
	return canonicalTypeName(name), nil
}

// numberLiteral makes an integer or decimal literal.
func numberLiteral(text string) literalExpr {
	typ := "integer"
	for i := 0; i < len(text); i++ {
		if text[i] == '.' {
			typ = "decimal"
		}
	}
	return literalExpr{[]item{{value: json.Number(text), typ: typ}}}
}
