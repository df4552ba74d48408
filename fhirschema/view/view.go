// Package view is the SQL on FHIR v2 view engine: it compiles a
// ViewDefinition (select, column, forEach, forEachOrNull, repeat, unionAll,
// where, constant, getResourceKey() and getReferenceKey()), checks it
// against the rules of the implementation guide, and evaluates it over
// resources one at a time, handing each row to a Sink (JSON, NDJSON, CSV,
// Parquet). A view keeps nothing of a resource once its rows are written,
// so a stream of any length runs in bounded memory.
//
// Paths are evaluated by the FHIRPath engine of fhirschema/fhirpath.
package view

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/fhirpath"
)

// ResourceType is the resource type of a ViewDefinition.
const ResourceType = "ViewDefinition"

// Column is one column of a view's rows, in the order of the rows.
type Column struct {
	Name string
	// Type is the FHIR type column.type names (string, integer, dateTime…);
	// "" when the view leaves it out.
	Type string
	// Collection marks a column holding every value its path selects, as
	// an array.
	Collection  bool
	Description string
}

// View is a compiled ViewDefinition; it is safe for concurrent use.
type View struct {
	// Name, URL and Resource are the view's name, canonical URL and the
	// resource type it reads.
	Name, URL, Resource string
	columns             []Column
	root                *selectNode
	where               []*path
	constants           map[string][]fhirpath.Node
	limits              Limits
	// reached are the top-level elements the view can read (see reach);
	// nil when it can read any.
	reached map[string]bool
	// evaluators are the states Eval evaluates with, kept between calls.
	evaluators sync.Pool
}

// Columns lists the columns of the view's rows, in order.
func (v *View) Columns() []Column { return append([]Column(nil), v.columns...) }

// Limits bound a view's shape and the work of one resource; zero fields
// take the defaults.
type Limits struct {
	// MaxColumns is the most columns a view may have (default 1,000).
	MaxColumns int
	// MaxDepth is the most nested selects (default 32).
	MaxDepth int
	// MaxRowsPerResource is the most rows one resource may yield (default
	// 100,000): past it the evaluation fails rather than run on.
	MaxRowsPerResource int
	// MaxRepeatDepth is how deep a repeat may recurse (default 64).
	MaxRepeatDepth int
}

func (l Limits) withDefaults() Limits {
	if l.MaxColumns <= 0 {
		l.MaxColumns = 1000
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 32
	}
	if l.MaxRowsPerResource <= 0 {
		l.MaxRowsPerResource = 100_000
	}
	if l.MaxRepeatDepth <= 0 {
		l.MaxRepeatDepth = 64
	}
	return l
}

// Options tune Compile.
type Options struct {
	// Stored applies the rules of a ViewDefinition kept as a resource:
	// resourceType and status are required. A view run inline may leave
	// them out, as the official test suite's views do.
	Stored bool
	Limits Limits
}

// InvalidError is a ViewDefinition the rules refuse, with an issue per
// problem, each naming the element (ViewDefinition.select[0].column[1].path).
type InvalidError struct {
	Issues []fhirschema.Issue
}

func (e *InvalidError) Error() string {
	if len(e.Issues) == 0 {
		return "invalid ViewDefinition"
	}
	msg := "invalid ViewDefinition: " + e.Issues[0].Diagnostics
	if e.Issues[0].Expression != "" {
		msg += " at " + e.Issues[0].Expression
	}
	if n := len(e.Issues) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more)", n)
	}
	return msg
}

// EvalError is a failure evaluating a view over one resource: a path that
// failed, a where that is not boolean, a column without collection that
// selected several values, a resource yielding too many rows.
type EvalError struct {
	// Resource is Type/id of the resource being evaluated.
	Resource string
	// Expression is the element of the view whose path failed.
	Expression string
	Msg        string
}

func (e *EvalError) Error() string {
	var b strings.Builder
	b.WriteString("view evaluation")
	if e.Resource != "" {
		b.WriteString(" of " + e.Resource)
	}
	if e.Expression != "" {
		b.WriteString(" at " + e.Expression)
	}
	return b.String() + ": " + e.Msg
}

// Eval evaluates the view over one resource, calling emit with each row
// (one value per column, in the order of Columns: nil, a string, bool,
// json.Number, int64, or for a collection column a []any). The row is
// reused: emit must copy what it keeps. A resource of another type than
// the view's yields no row.
func (v *View) Eval(ctx context.Context, resource map[string]any, emit func(row []any) error) error {
	ev, _ := v.evaluators.Get().(*evaluator)
	if ev == nil {
		ev = v.newEvaluator(ctx)
	}
	ev.ctx = ctx
	err := ev.run(resource, emit)
	ev.ctx = nil
	v.evaluators.Put(ev)
	return err
}
