package fhirpath

import "fmt"

// syntaxErr returns a syntax *Error at pos.
func syntaxErr(pos int, format string, args ...any) error {
	return &Error{Kind: "syntax", Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// execErr returns an execution *Error at pos.
func execErr(pos int, format string, args ...any) error {
	return &Error{Kind: "execution", Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// semanticErr returns a semantic *Error at pos.
func semanticErr(pos int, format string, args ...any) error {
	return &Error{Kind: "semantic", Pos: pos, Msg: fmt.Sprintf(format, args...)}
}
