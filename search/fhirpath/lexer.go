package fhirpath

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// tokenKind classifies a lexical token.
type tokenKind int

const (
	tokEOF    tokenKind = iota
	tokIdent            // plain identifier or keyword (and, as, is, true, ...)
	tokQuoted           // `delimited identifier`
	tokString           // 'string literal'
	tokNumber           // 123 or 1.5
	tokEnv              // %name
	tokThis             // $this (and other $ names, rejected by the parser)
	tokOp               // punctuation and symbolic operators
)

// token is one lexical token with its byte offset in the source.
type token struct {
	kind tokenKind
	text string // identifier name, unescaped string, number text or operator
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

// symbolic operators, longest first so that "!=" wins over "!".
var operators = []string{"!=", "!~", "<=", ">=", ".", ",", "(", ")", "[", "]", "{", "}",
	"|", "=", "~", "<", ">", "+", "-", "*", "/", "&"}

// lex splits src into tokens, ending with a tokEOF token.
func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; ; {
		i = skipSpace(src, i)
		if i < 0 {
			return nil, fmt.Errorf("unterminated comment")
		}
		if i >= len(src) {
			return append(toks, token{kind: tokEOF, pos: i}), nil
		}
		tok, next, err := lexOne(src, i)
		if err != nil {
			return nil, fmt.Errorf("at offset %d: %w", i, err)
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
		case strings.ContainsRune(" \t\r\n\f", rune(src[i])):
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
		return token{kind: tokIdent, text: src[i:end], pos: i}, end, nil
	case isDigit(c):
		end := numberEnd(src, i)
		return token{kind: tokNumber, text: src[i:end], pos: i}, end, nil
	case c == '\'':
		return lexQuoted(src, i, '\'', tokString)
	case c == '`':
		return lexQuoted(src, i, '`', tokQuoted)
	case c == '%':
		return lexPrefixed(src, i, tokEnv)
	case c == '$':
		return lexPrefixed(src, i, tokThis)
	case c == '@':
		return token{}, 0, fmt.Errorf("date/time literals are not supported")
	}
	for _, op := range operators {
		if strings.HasPrefix(src[i:], op) {
			return token{kind: tokOp, text: op, pos: i}, i + len(op), nil
		}
	}
	r, _ := utf8.DecodeRuneInString(src[i:])
	return token{}, 0, fmt.Errorf("unexpected character %q", r)
}

// lexPrefixed reads %name or $name (the name may also be `quoted` or
// 'quoted' after %).
func lexPrefixed(src string, i int, kind tokenKind) (token, int, error) {
	if i+1 < len(src) && isIdentStart(src[i+1]) {
		end := identEnd(src, i+1)
		return token{kind: kind, text: src[i+1 : end], pos: i}, end, nil
	}
	if kind == tokEnv && i+1 < len(src) && (src[i+1] == '`' || src[i+1] == '\'') {
		tok, end, err := lexQuoted(src, i+1, src[i+1], kind)
		tok.pos = i
		return tok, end, err
	}
	return token{}, 0, fmt.Errorf("expected a name after %q", src[i])
}

// lexQuoted reads a quoted string or identifier, resolving escapes.
func lexQuoted(src string, i int, quote byte, kind tokenKind) (token, int, error) {
	var b strings.Builder
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case quote:
			return token{kind: kind, text: b.String(), pos: i}, j + 1, nil
		case '\\':
			n, err := unescape(src, j, &b)
			if err != nil {
				return token{}, 0, err
			}
			j = n
		default:
			b.WriteByte(src[j])
		}
	}
	return token{}, 0, fmt.Errorf("unterminated %c-quoted text", quote)
}

// simpleEscapes maps the character after a backslash to its value.
var simpleEscapes = map[byte]byte{'\'': '\'', '"': '"', '`': '`', '\\': '\\', '/': '/',
	'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescape writes the escape sequence starting at the backslash src[j] to b
// and returns the offset of its last byte.
func unescape(src string, j int, b *strings.Builder) (int, error) {
	if j+1 >= len(src) {
		return 0, fmt.Errorf("unterminated escape sequence")
	}
	if v, ok := simpleEscapes[src[j+1]]; ok {
		b.WriteByte(v)
		return j + 1, nil
	}
	if src[j+1] != 'u' || j+6 > len(src) {
		return 0, fmt.Errorf("invalid escape sequence %q", src[j:min(j+2, len(src))])
	}
	code, err := strconv.ParseUint(src[j+2:j+6], 16, 16)
	if err != nil {
		return 0, fmt.Errorf("invalid unicode escape %q: %w", src[j:j+6], err)
	}
	b.WriteRune(rune(code))
	return j + 5, nil
}

// identEnd returns the offset just past the identifier starting at i.
func identEnd(src string, i int) int {
	for i < len(src) && (isIdentStart(src[i]) || isDigit(src[i])) {
		i++
	}
	return i
}

// numberEnd returns the offset just past the number starting at i; a
// decimal point counts only when a digit follows it.
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
	return i
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
