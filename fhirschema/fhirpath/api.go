package fhirpath

import (
	"context"
	"fmt"
	"time"
)

// Node is one item of a collection: a value and, when known, its type.
//
// Value is what the resource's JSON holds (map[string]any for a complex
// element or resource, string, bool, json.Number; nil for a primitive that
// has only extensions) or a value computed by the expression: int64
// (Integer), json.Number (Decimal), string (String, or a Date, DateTime or
// Time in its FHIR form without the @), Quantity.
type Node struct {
	Value any
	// Type is the FHIR type (string, dateTime, HumanName, Patient,
	// Observation.component for a backbone element) or the System type of a
	// computed value (System.String, System.Integer, System.Quantity…);
	// "" when unknown.
	Type string
	// ext is the _name twin of a FHIR primitive: its id and extensions.
	ext map[string]any
}

// Quantity is a FHIRPath quantity literal or computed quantity.
type Quantity struct {
	Value float64
	Unit  string // a UCUM code or a calendar duration keyword (year, month, …)
	scale int    // digits after the decimal point of the value as written
}

// Error is a compile or evaluation error, positioned in the expression.
type Error struct {
	Kind string // syntax, semantic or execution
	Pos  int    // 1-based character offset in the expression; 0 when unknown
	Msg  string
}

func (e *Error) Error() string {
	if e.Pos > 0 {
		return fmt.Sprintf("fhirpath %s error at %d: %s", e.Kind, e.Pos, e.Msg)
	}
	return fmt.Sprintf("fhirpath %s error: %s", e.Kind, e.Msg)
}

// Resolver finds the resource a reference names beyond the evaluated
// resource and its Bundle (a store lookup). It returns nil, nil when there
// is none.
type Resolver interface {
	Resolve(ctx context.Context, reference string) (map[string]any, error)
}

// Terminology answers memberOf() against the value sets the server holds.
// known is false when the value set is not available.
type Terminology interface {
	MemberOf(ctx context.Context, system, code, valueSetURL string) (member, known bool, err error)
}

// Conformance answers conformsTo() and elementDefinition()/slice() with the
// profiles in scope.
type Conformance interface {
	ConformsTo(ctx context.Context, resource map[string]any, profileURL string) (bool, error)
}

// Env is what one evaluation sees beyond its input. The zero Env is valid.
type Env struct {
	// Resource is %resource (and %context, and %rootResource unless
	// RootResource is set).
	Resource     map[string]any
	RootResource map[string]any
	// Vars are further environment variables, by name without the %.
	Vars map[string][]Node
	// Resolver, Terminology and Conformance are consulted when set.
	Resolver    Resolver
	Terminology Terminology
	Conformance Conformance
	// Trace receives trace() output; nil drops it.
	Trace func(name string, nodes []Node)
	// Strict makes navigation to an element the model does not know, and
	// type-incorrect function inputs, errors instead of empty.
	Strict bool
	// Limits bound one evaluation; zero fields take the defaults.
	MaxSteps int           // default 1,000,000 node visits
	MaxDepth int           // default 1,000 nested evaluations
	Timeout  time.Duration // default 2s
	// Now fixes now(), today() and timeOfDay(); zero means the clock.
	Now time.Time
}
