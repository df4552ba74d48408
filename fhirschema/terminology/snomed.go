package terminology

import (
	"fmt"
	"strings"
)

// SNOMED is the canonical URL of SNOMED CT.
const SNOMED = "http://snomed.info/sct"

// verhoeff holds the dihedral multiplication and permutation tables of
// the Verhoeff check digit SNOMED CT identifiers end with.
var verhoeffD = [10][10]int{
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 0, 6, 7, 8, 9, 5}, {2, 3, 4, 0, 1, 7, 8, 9, 5, 6},
	{3, 4, 0, 1, 2, 8, 9, 5, 6, 7}, {4, 0, 1, 2, 3, 9, 5, 6, 7, 8}, {5, 9, 8, 7, 6, 0, 4, 3, 2, 1},
	{6, 5, 9, 8, 7, 1, 0, 4, 3, 2}, {7, 6, 5, 9, 8, 2, 1, 0, 4, 3}, {8, 7, 6, 5, 9, 3, 2, 1, 0, 4},
	{9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
}

var verhoeffP = [8][10]int{
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 5, 7, 6, 2, 8, 3, 0, 9, 4}, {5, 8, 0, 3, 7, 9, 6, 1, 4, 2},
	{8, 9, 1, 6, 0, 4, 3, 5, 2, 7}, {9, 4, 5, 3, 1, 2, 6, 8, 7, 0}, {4, 2, 8, 6, 5, 7, 3, 9, 0, 1},
	{2, 7, 9, 3, 8, 0, 6, 4, 1, 5}, {7, 0, 4, 6, 9, 1, 3, 2, 5, 8},
}

// ConceptID reports whether s is a SNOMED CT concept identifier: 6 to 18
// digits without a leading zero, the partition of a concept (00, or 10
// in a namespace) and a Verhoeff check digit that matches.
func ConceptID(s string) bool {
	if len(s) < 6 || len(s) > 18 || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	if p := s[len(s)-3 : len(s)-1]; p != "00" && p != "10" {
		return false
	}
	c := 0
	for i := 0; i < len(s); i++ {
		c = verhoeffD[c][verhoeffP[i%8][int(s[len(s)-1-i]-'0')]]
	}
	return c == 0
}

// snomedCode says what is wrong with a code of SNOMED CT, "" when it is a
// concept identifier or has the shape of a post-coordinated expression
// (which only a terminology server can evaluate).
func snomedCode(code string) string {
	if strings.ContainsAny(code, ":=+{}()|") {
		return ""
	}
	if ConceptID(code) {
		return ""
	}
	return fmt.Sprintf("%q is not a SNOMED CT concept identifier (digits with a concept partition and a valid check digit) nor an expression", code)
}

// CheckECL parses a SNOMED CT Expression Constraint Language expression
// (the brief syntax of ECL 1.x: constraint operators, member-of,
// conjunctions, refinements with attribute groups and cardinalities,
// concrete values and dotted attributes) and checks that every concept
// identifier in it is one. Filter blocks ({{ }}) are accepted unread.
func CheckECL(s string) error {
	p := &eclParser{}
	if err := p.lex(s); err != nil {
		return err
	}
	if len(p.toks) == 0 {
		return fmt.Errorf("empty expression")
	}
	if err := p.expression(); err != nil {
		return err
	}
	if p.pos < len(p.toks) {
		return fmt.Errorf("unexpected %q", p.toks[p.pos].text)
	}
	return nil
}

type eclToken struct {
	kind byte // 'n' number, 'w' word, 's' string, 't' term, 'f' filter block, else the symbol itself ('<' stands for every constraint operator)
	text string
}

type eclParser struct {
	toks []eclToken
	pos  int
}

// eclOperators are the constraint operators, longest first.
var eclOperators = []string{"!!>", "!!<", "<<!", ">>!", "<<", ">>", "<!", ">!", "<", ">"}

func (p *eclParser) lex(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return fmt.Errorf("unterminated comment")
			}
			i += end + 4
		case strings.HasPrefix(s[i:], "{{"):
			end := strings.Index(s[i:], "}}")
			if end < 0 {
				return fmt.Errorf("unterminated filter")
			}
			p.toks = append(p.toks, eclToken{'f', s[i : i+end+2]})
			i += end + 2
		case c == '|':
			end := strings.IndexByte(s[i+1:], '|')
			if end < 0 {
				return fmt.Errorf("unterminated term")
			}
			p.toks = append(p.toks, eclToken{'t', s[i : i+end+2]})
			i += end + 2
		case c == '"':
			end := strings.IndexByte(s[i+1:], '"')
			if end < 0 {
				return fmt.Errorf("unterminated string")
			}
			p.toks = append(p.toks, eclToken{'s', s[i : i+end+2]})
			i += end + 2
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' && j+1 < len(s) && s[j+1] != '.') {
				j++
			}
			p.toks = append(p.toks, eclToken{'n', s[i:j]})
			i = j
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] == '-') {
				j++
			}
			p.toks = append(p.toks, eclToken{'w', s[i:j]})
			i = j
		default:
			matched := false
			for _, op := range eclOperators {
				if strings.HasPrefix(s[i:], op) {
					// <= and >= compare concrete values
					if (op == "<" || op == ">") && i+1 < len(s) && s[i+1] == '=' {
						break
					}
					p.toks = append(p.toks, eclToken{'<', op})
					i += len(op)
					matched = true
					break
				}
			}
			if matched {
				continue
			}
			for _, sym := range []string{"!=", "<=", ">=", "..", "=", "^", "*", "(", ")", "{", "}", "[", "]", ",", ":", ".", "#", "-", "+"} {
				if strings.HasPrefix(s[i:], sym) {
					p.toks = append(p.toks, eclToken{sym[0], sym})
					i += len(sym)
					matched = true
					break
				}
			}
			if !matched {
				return fmt.Errorf("unexpected character %q", c)
			}
		}
	}
	return nil
}

func (p *eclParser) peek() eclToken {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return eclToken{}
}

func (p *eclParser) word(w string) bool {
	t := p.peek()
	return t.kind == 'w' && strings.EqualFold(t.text, w)
}

func (p *eclParser) expect(sym string) error {
	if t := p.peek(); t.text != sym {
		if t.kind == 0 {
			return fmt.Errorf("expected %q at the end", sym)
		}
		return fmt.Errorf("expected %q, found %q", sym, t.text)
	}
	p.pos++
	return nil
}

// expression: compound [":" refinement]
func (p *eclParser) expression() error {
	if err := p.compound(); err != nil {
		return err
	}
	if p.peek().text == ":" {
		p.pos++
		return p.refinement()
	}
	return nil
}

// compound: sub { (AND|OR|MINUS|",") sub }
func (p *eclParser) compound() error {
	if err := p.sub(); err != nil {
		return err
	}
	for p.word("AND") || p.word("OR") || p.word("MINUS") || p.peek().text == "," {
		p.pos++
		if err := p.sub(); err != nil {
			return err
		}
	}
	return nil
}

// sub: [operator] [^] focus {"." attribute} [filter]
func (p *eclParser) sub() error {
	if p.peek().kind == '<' {
		p.pos++
	} else if p.word("descendantOf") || p.word("descendantOrSelfOf") || p.word("childOf") || p.word("ancestorOf") || p.word("ancestorOrSelfOf") || p.word("parentOf") {
		p.pos++
	}
	if p.peek().text == "^" || p.word("memberOf") {
		p.pos++
	}
	if err := p.focus(); err != nil {
		return err
	}
	for p.peek().kind == 'f' {
		p.pos++
	}
	for p.peek().text == "." {
		p.pos++
		if p.peek().kind == '<' {
			p.pos++
		}
		if err := p.focus(); err != nil {
			return err
		}
	}
	return nil
}

// focus: concept reference, wildcard or a nested expression.
func (p *eclParser) focus() error {
	t := p.peek()
	switch {
	case t.text == "*" || p.word("ANY"):
		p.pos++
	case t.text == "(":
		p.pos++
		if err := p.expression(); err != nil {
			return err
		}
		return p.expect(")")
	case t.kind == 'n':
		if !ConceptID(t.text) {
			return fmt.Errorf("%s is not a SNOMED CT concept identifier", t.text)
		}
		p.pos++
		if p.peek().kind == 't' {
			p.pos++
		}
	case t.kind == 0:
		return fmt.Errorf("a concept is missing at the end")
	default:
		return fmt.Errorf("expected a concept, found %q", t.text)
	}
	return nil
}

// refinement: item { (AND|OR|",") item }
func (p *eclParser) refinement() error {
	if err := p.refinementItem(); err != nil {
		return err
	}
	for p.word("AND") || p.word("OR") || p.peek().text == "," {
		p.pos++
		if err := p.refinementItem(); err != nil {
			return err
		}
	}
	return nil
}

// refinementItem: [cardinality] "{" refinement "}" | "(" refinement ")" | attribute
func (p *eclParser) refinementItem() error {
	if p.peek().text == "[" {
		if err := p.cardinality(); err != nil {
			return err
		}
	}
	switch p.peek().text {
	case "{":
		p.pos++
		if err := p.refinement(); err != nil {
			return err
		}
		return p.expect("}")
	case "(":
		// a nested refinement, or an attribute name that is an expression
		save := p.pos
		p.pos++
		if err := p.refinement(); err == nil && p.expect(")") == nil {
			return nil
		}
		p.pos = save
	}
	return p.attribute()
}

// attribute: ["R"] name comparison value
func (p *eclParser) attribute() error {
	if p.word("R") || p.word("reverseOf") {
		p.pos++
	}
	if err := p.sub(); err != nil {
		return err
	}
	t := p.peek()
	switch t.text {
	case "=", "!=", "<", ">", "<=", ">=":
	default:
		if t.kind == '<' && (t.text == "<" || t.text == ">") {
			break
		}
		if t.kind == 0 {
			return fmt.Errorf("an attribute has no value")
		}
		return fmt.Errorf("expected a comparison, found %q", t.text)
	}
	p.pos++
	switch v := p.peek(); {
	case v.text == "#":
		p.pos++
		if p.peek().text == "-" || p.peek().text == "+" {
			p.pos++
		}
		if p.peek().kind != 'n' {
			return fmt.Errorf("expected a number after #")
		}
		p.pos++
	case v.kind == 's' || p.word("true") || p.word("false"):
		p.pos++
	default:
		return p.sub()
	}
	return nil
}

// cardinality: "[" n ".." (n|"*") "]"
func (p *eclParser) cardinality() error {
	p.pos++
	if p.peek().kind != 'n' {
		return fmt.Errorf("a cardinality needs a minimum")
	}
	p.pos++
	if err := p.expect(".."); err != nil {
		return err
	}
	if t := p.peek(); t.kind == 'n' || t.text == "*" {
		p.pos++
	} else {
		return fmt.Errorf("a cardinality needs a maximum")
	}
	return p.expect("]")
}
