package fhirpath

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// maxNesting bounds how deeply an expression nests (parentheses, function
// arguments, operators), so that parsing and evaluation never exhaust the
// stack.
const maxNesting = 300

// parser is a precedence-climbing parser over the token list.
type parser struct {
	toks  []token
	i     int
	depth int
}

// parse compiles src into an evaluator tree.
func parse(src string) (evaluator, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if p.peek().kind == tokEOF {
		return nil, syntaxErr(1, "empty expression")
	}
	e, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, syntaxErr(t.pos, "unexpected %s", t.describe())
	}
	return e, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tokOp && t.text == op
}

func (p *parser) expect(op string) error {
	if t := p.peek(); !p.isOp(op) {
		return syntaxErr(t.pos, "expected '%s', found %s", op, t.describe())
	}
	p.next()
	return nil
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > maxNesting {
		return syntaxErr(pos, "expression nested too deeply (more than %d levels)", maxNesting)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// binaryPrec gives each binary operator its precedence; higher binds
// tighter.
var binaryPrec = map[string]int{
	"implies": 1, "or": 2, "xor": 2, "and": 3, "in": 4, "contains": 4,
	"=": 5, "~": 5, "!=": 5, "!~": 5, "<": 6, ">": 6, "<=": 6, ">=": 6,
	"|": 7, "is": 8, "as": 8, "+": 9, "-": 9, "&": 9, "*": 10, "/": 10, "div": 10, "mod": 10,
}

// binaryOp returns the operator the current token spells, if any.
func (p *parser) binaryOp() (string, int, bool) {
	t := p.peek()
	if t.kind != tokOp && t.kind != tokIdent {
		return "", 0, false
	}
	prec, ok := binaryPrec[t.text]
	return t.text, prec, ok
}

// expr parses operators of precedence above min, left-associatively.
func (p *parser) expr(min int) (evaluator, error) {
	if err := p.enter(p.peek().pos); err != nil {
		return nil, err
	}
	defer p.leave()
	left, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		op, prec, ok := p.binaryOp()
		if !ok || prec <= min {
			return left, nil
		}
		t := p.next()
		if op == "is" || op == "as" {
			name, err := p.typeSpecifier()
			if err != nil {
				return nil, err
			}
			left = &typeOpExpr{recv: left, typeName: name, isOp: op == "is", pos: t.pos}
			continue
		}
		right, err := p.expr(prec)
		if err != nil {
			return nil, err
		}
		left = newBinary(op, left, right, t.pos)
	}
}

// typeSpecifier parses a possibly qualified type name (FHIR.Patient).
func (p *parser) typeSpecifier() (string, error) {
	var parts []string
	for {
		t := p.next()
		if t.kind != tokIdent && t.kind != tokQuoted {
			return "", syntaxErr(t.pos, "expected a type name, found %s", t.describe())
		}
		parts = append(parts, t.text)
		if !p.isOp(".") || len(parts) == 2 {
			return strings.Join(parts, "."), nil
		}
		p.next()
	}
}

// unary parses a prefix + or - before a postfix expression.
func (p *parser) unary() (evaluator, error) {
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		operand, err := p.unary()
		if err != nil {
			return nil, err
		}
		if t.text == "+" {
			return operand, nil
		}
		return negate(operand, t.pos), nil
	}
	return p.postfix()
}

// postfix parses a term followed by member accesses, calls and indexers.
func (p *parser) postfix() (evaluator, error) {
	e, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.isOp("."):
			p.next()
			t := p.next()
			if t.kind != tokIdent && t.kind != tokQuoted {
				return nil, syntaxErr(t.pos, "expected a name after '.', found %s", t.describe())
			}
			if t.kind == tokIdent && p.isOp("(") {
				if e, err = p.call(e, t); err != nil {
					return nil, err
				}
				continue
			}
			e = &memberExpr{recv: e, name: t.text, pos: t.pos}
		case p.isOp("["):
			t := p.next()
			idx, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
			e = &indexExpr{recv: e, index: idx, pos: t.pos}
		default:
			return e, nil
		}
	}
}

// term parses a literal, an identifier, a function call, a variable or a
// parenthesized expression.
func (p *parser) term() (evaluator, error) {
	t := p.next()
	switch t.kind {
	case tokNumber:
		return p.number(t)
	case tokString:
		return literal(Node{Value: t.text, Type: sysString}), nil
	case tokDate:
		n, err := dateLiteral(t)
		var e *Error
		if errors.As(err, &e) && e.Kind == "execution" {
			return errorExpr{err: e}, nil
		}
		if err != nil {
			return nil, err
		}
		return literal(n), nil
	case tokEnv:
		return &envExpr{name: t.text, pos: t.pos}, nil
	case tokSpecial:
		switch t.text {
		case "$this":
			return thisExpr{}, nil
		case "$index":
			return indexVarExpr{}, nil
		case "$total":
			return totalExpr{}, nil
		}
		return nil, syntaxErr(t.pos, "unknown special variable %s", t.text)
	case tokQuoted:
		return &identExpr{name: t.text, pos: t.pos}, nil
	case tokIdent:
		return p.identTerm(t)
	case tokOp:
		switch t.text {
		case "(":
			e, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			return e, p.expect(")")
		case "{":
			return literal(), p.expect("}")
		}
	}
	return nil, syntaxErr(t.pos, "unexpected %s", t.describe())
}

// identTerm parses an identifier at the start of a term: true, false, a
// function call or a name.
func (p *parser) identTerm(t token) (evaluator, error) {
	switch {
	case t.text == "true" || t.text == "false":
		return literal(Node{Value: t.text == "true", Type: sysBoolean}), nil
	case p.isOp("("):
		return p.call(nil, t)
	}
	if _, isOp := binaryPrec[t.text]; isOp && t.text != "contains" && t.text != "in" && t.text != "as" && t.text != "is" {
		return nil, syntaxErr(t.pos, "unexpected %s", t.describe())
	}
	return &identExpr{name: t.text, pos: t.pos}, nil
}

// number parses an integer, decimal, long or quantity literal.
func (p *parser) number(t token) (evaluator, error) {
	text := t.text
	var n Node
	switch {
	case strings.HasSuffix(text, "L"):
		v, err := strconv.ParseInt(strings.TrimSuffix(text, "L"), 10, 64)
		if err != nil {
			return nil, syntaxErr(t.pos, "long %s out of range", text)
		}
		n = Node{Value: v, Type: sysLong}
	case strings.Contains(text, "."):
		n = Node{Value: json.Number(trimLeadingZeros(text)), Type: sysDecimal}
	default:
		v, err := strconv.ParseInt(text, 10, 32)
		if err != nil {
			return nil, syntaxErr(t.pos, "integer %s out of range", text)
		}
		n = Node{Value: v, Type: sysInteger}
	}
	if u := p.peek(); u.kind == tokString || (u.kind == tokIdent && calendarUnits[u.text] != "") {
		p.next()
		f, _ := strconv.ParseFloat(strings.TrimSuffix(text, "L"), 64)
		unit := u.text
		if u.kind == tokIdent {
			unit = calendarUnits[u.text]
		}
		return literal(Node{Value: Quantity{Value: f, Unit: unit}, Type: sysQuantity}), nil
	}
	return literal(n), nil
}

// trimLeadingZeros writes 007.50 as 7.50 and 00.5 as 0.5.
func trimLeadingZeros(s string) string {
	for len(s) > 1 && s[0] == '0' && isDigit(s[1]) {
		s = s[1:]
	}
	return s
}

// call parses the argument list of function t invoked on recv (nil for a
// call at the start of a path).
func (p *parser) call(recv evaluator, t token) (evaluator, error) {
	fn, ok := functions[t.text]
	if !ok {
		return nil, syntaxErr(t.pos, "unknown function '%s'", t.text)
	}
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	p.next() // "("
	c := &callExpr{recv: recv, fn: fn, pos: t.pos}
	for !p.isOp(")") {
		if len(c.args) > 0 {
			if err := p.expect(","); err != nil {
				return nil, err
			}
		}
		if fn.typeArg && len(c.args) == 0 {
			name, err := p.typeSpecifier()
			if err != nil {
				return nil, err
			}
			c.typeName = name
			c.args = append(c.args, literal())
			continue
		}
		a, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		c.args = append(c.args, a)
	}
	p.next() // ")"
	if err := precompile(c); err != nil {
		return nil, err
	}
	if len(c.args) < fn.minArgs || len(c.args) > fn.maxArgs {
		return nil, &Error{Kind: "semantic", Pos: t.pos, Msg: arity(fn, len(c.args))}
	}
	return c, nil
}

// arity describes a wrong argument count.
func arity(fn *function, got int) string {
	want := strconv.Itoa(fn.minArgs)
	if fn.maxArgs != fn.minArgs {
		want += " to " + strconv.Itoa(fn.maxArgs)
	}
	return fn.name + "() takes " + want + " arguments, not " + strconv.Itoa(got)
}

// precompile compiles a literal regular expression argument once.
func precompile(c *callExpr) error {
	if (c.fn.name != "matches" && c.fn.name != "replaceMatches") || len(c.args) == 0 {
		return nil
	}
	l, ok := c.args[0].(literalExpr)
	if !ok || len(l.nodes) != 1 {
		return nil
	}
	s, ok := l.nodes[0].Value.(string)
	if !ok {
		return nil
	}
	re, err := compileRegex(s)
	if err != nil {
		return semanticErr(c.pos, "bad regular expression: %v", err)
	}
	c.re = re
	return nil
}
