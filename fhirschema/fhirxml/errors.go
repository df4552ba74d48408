package fhirxml

import "fmt"

// Error is why a resource could not be converted, at which element.
type Error struct {
	// Path locates the element, FHIRPath style: Patient.name[0].given[1].
	Path string
	// Line is the line of the XML input (0 when converting JSON).
	Line int
	// Msg says what is wrong.
	Msg string
}

// Error implements error.
func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Path != "":
		return fmt.Sprintf("XML line %d, %s: %s", e.Line, e.Path, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("XML line %d: %s", e.Line, e.Msg)
	case e.Path != "":
		return fmt.Sprintf("%s: %s", e.Path, e.Msg)
	}
	return e.Msg
}

// errorAt is an Error at a path without a line.
func errorAt(path, msg string) *Error { return &Error{Path: path, Msg: msg} }
