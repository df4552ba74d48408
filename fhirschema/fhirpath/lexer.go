package fhirpath

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// tokenKind classifies a lexical token.
type tokenKind int

const (
	tokEOF     tokenKind = iota
	tokIdent             // identifier or keyword (and, as, is, true, ...)
	tokQuoted            // `delimited identifier`
	tokString            // 'string literal'
	tokNumber            // 123, 1.5 or 10L
	tokDate              // @2014-01-25T14:30, @T14:30 (text without the @)
	tokEnv               // %name, %`name` or %'name'
	tokSpecial           // $this, $index, $total
	tokOp                // punctuation and symbolic operators
)

// token is one lexical token with its 1-based character position.
type token struct {
	kind tokenKind
	text string // name, unescaped string, number text, date text or operator
	pos  int
}

// describe renders the token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of expression"
	case tokString:
		return strconv.Quote(t.text)
	default:
		return "'" + t.text + "'"
	}
}

// operators are the symbolic operators, longest first so that "!=" wins.
var operators = []string{"!=", "!~", "<=", ">=", ".", ",", "(", ")", "[", "]", "{", "}",
	"|", "=", "~", "<", ">", "+", "-", "*", "/", "&"}

// maxTokens bounds the length of an expression.
const maxTokens = 100_000

// lex splits src into tokens, ending with a tokEOF token.
func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; ; {
		i = skipSpace(src, i)
		if i < 0 {
			return nil, syntaxErr(len(src), "unterminated comment")
		}
		if i >= len(src) {
			return append(toks, token{kind: tokEOF, pos: i + 1}), nil
		}
		if len(toks) >= maxTokens {
			return nil, syntaxErr(i+1, "expression too long (more than %d tokens)", maxTokens)
		}
		tok, next, err := lexOne(src, i)
		if err != nil {
			return nil, err
		}
		toks = append(toks, tok)
		i = next
	}
}

// skipSpace skips white space and comments from i; -1 means an unterminated
// block comment.
func skipSpace(src string, i int) int {
	for i < len(src) {
		switch {
		case strings.IndexByte(" \t\r\n\f", src[i]) >= 0:
			i++
		case strings.HasPrefix(src[i:], "//"):
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				return len(src)
			}
			i += end + 1
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return -1
			}
			i += end + 4
		default:
			return i
		}
	}
	return i
}

// lexOne reads the token starting at src[i] and returns it with the offset
// just past it.
func lexOne(src string, i int) (token, int, error) {
	c := src[i]
	switch {
	case isIdentStart(c):
		end := identEnd(src, i)
		return token{kind: tokIdent, text: src[i:end], pos: i + 1}, end, nil
	case isDigit(c):
		end := numberEnd(src, i)
		return token{kind: tokNumber, text: src[i:end], pos: i + 1}, end, nil
	case c == '\'':
		return lexQuoted(src, i, '\'', tokString)
	case c == '`':
		return lexQuoted(src, i, '`', tokQuoted)
	case c == '%':
		return lexEnv(src, i)
	case c == '$':
		end := identEnd(src, i+1)
		return token{kind: tokSpecial, text: src[i:end], pos: i + 1}, end, nil
	case c == '@':
		end := dateEnd(src, i+1)
		if end == i+1 {
			return token{}, 0, syntaxErr(i+1, "a date or time must follow @")
		}
		return token{kind: tokDate, text: src[i+1 : end], pos: i + 1}, end, nil
	}
	for _, op := range operators {
		if strings.HasPrefix(src[i:], op) {
			return token{kind: tokOp, text: op, pos: i + 1}, i + len(op), nil
		}
	}
	r, _ := utf8.DecodeRuneInString(src[i:])
	return token{}, 0, syntaxErr(i+1, "unexpected character %q", r)
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// identEnd returns the offset past the identifier characters from i.
func identEnd(src string, i int) int {
	for i < len(src) && (isIdentStart(src[i]) || isDigit(src[i])) {
		i++
	}
	return i
}

// numberEnd returns the offset past the number starting at i: digits, an
// optional fraction, an optional L suffix.
func numberEnd(src string, i int) int {
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	if i+1 < len(src) && src[i] == '.' && isDigit(src[i+1]) {
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && src[i] == 'L' && (i+1 == len(src) || !isIdentStart(src[i+1]) && !isDigit(src[i+1])) {
		i++
	}
	return i
}

// dateEnd returns the offset past a date, date-time or time literal body.
func dateEnd(src string, i int) int {
	for i < len(src) {
		c := src[i]
		switch {
		case isDigit(c) || c == '-' || c == ':' || c == 'T' || c == 'Z':
			i++
		case c == '+' && i+1 < len(src) && isDigit(src[i+1]):
			i++
		case c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			i++
		default:
			return i
		}
	}
	return i
}

// lexEnv reads %name, %`name` or %'name'.
func lexEnv(src string, i int) (token, int, error) {
	if i+1 < len(src) && (src[i+1] == '`' || src[i+1] == '\'') {
		t, end, err := lexQuoted(src, i+1, src[i+1], tokEnv)
		t.pos = i + 1
		return t, end, err
	}
	end := identEnd(src, i+1)
	if end == i+1 {
		return token{}, 0, syntaxErr(i+1, "a name must follow %%")
	}
	return token{kind: tokEnv, text: src[i+1 : end], pos: i + 1}, end, nil
}

// lexQuoted reads a string literal or delimited identifier with its escapes.
func lexQuoted(src string, i int, quote byte, kind tokenKind) (token, int, error) {
	var b strings.Builder
	for j := i + 1; j < len(src); j++ {
		c := src[j]
		if c == quote {
			return token{kind: kind, text: b.String(), pos: i + 1}, j + 1, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		j++
		if j >= len(src) {
			break
		}
		n, err := unescape(src, j, &b)
		if err != nil {
			return token{}, 0, err
		}
		j = n
	}
	return token{}, 0, syntaxErr(i+1, "unterminated %s", map[bool]string{true: "string", false: "identifier"}[quote == '\''])
}

// unescape writes the escape sequence at src[j] (after the backslash) and
// returns the offset of its last byte.
func unescape(src string, j int, b *strings.Builder) (int, error) {
	switch c := src[j]; c {
	case '\'', '"', '`', '\\', '/':
		b.WriteByte(c)
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'u':
		if j+4 >= len(src) {
			return 0, syntaxErr(j, "incomplete \\u escape")
		}
		r, err := strconv.ParseUint(src[j+1:j+5], 16, 32)
		if err != nil {
			return 0, syntaxErr(j, "bad \\u escape %q", src[j+1:j+5])
		}
		b.WriteRune(rune(r))
		return j + 4, nil
	default:
		return 0, syntaxErr(j, "unknown escape \\%c", c)
	}
	return j, nil
}
