// Package graphql answers FHIR GraphQL queries (hl7.org/fhir/R4/graphql.html)
// over a Backend that reads and searches a tenant's resources with the
// caller's rights. Queries are parsed with gqlparser's parser, without its
// schema validation: the schema is the FHIR resource model, and fields are
// resolved by walking the resources themselves.
package graphql

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// Backend reads and searches the resources a query names, with the rights
// of the query's caller.
type Backend interface {
	// Read returns the resource typ/id; nil, nil when it does not exist or
	// was deleted.
	Read(ctx context.Context, typ, id string) (map[string]any, error)
	// Search runs a search of typ with REST search parameters and returns
	// one page of matches.
	Search(ctx context.Context, typ string, params url.Values) (*Page, error)
}

// Page is one page of a search's matches.
type Page struct {
	Resources []map[string]any
	// Total counts the matches across pages; -1 when not known.
	Total int64
	// Next and Previous are opaque cursors of the neighbouring pages ("" if none).
	Next, Previous string
}

// Limits bound one query; zero fields take the defaults.
type Limits struct {
	MaxDepth     int           // nested selections (default 24)
	MaxResources int           // resources read, searched and followed (default 2,000)
	Timeout      time.Duration // default 10s
	MaxTokens    int           // tokens of the query text (default 20,000)
}

// withDefaults fills zero limits.
func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = 24
	}
	if l.MaxResources <= 0 {
		l.MaxResources = 2000
	}
	if l.Timeout <= 0 {
		l.Timeout = 10 * time.Second
	}
	if l.MaxTokens <= 0 {
		l.MaxTokens = 20000
	}
	return l
}

// Request is one GraphQL request: the query, the operation to run when the
// query has several, and the variables' values.
type Request struct {
	Query         string
	OperationName string
	Variables     map[string]any
}

// Error is a query the engine refuses or could not answer, at its place in
// the query.
type Error struct {
	Msg          string
	Line, Column int      // 1-based position in the query; 0 when none
	Path         []string // the fields from the query's root to the one that failed
	// Status is the HTTP status of a refused query (400); 0 when Err, the
	// backend's error, decides it. Code is its OperationOutcome issue code.
	Status int
	Code   string
	Err    error
}

// Error is the message with its line and column.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s (line %d, column %d)", e.Msg, e.Line, e.Column)
	}
	return e.Msg
}

// Unwrap returns the backend's error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Expression is the failing field as a dotted path ("name.family").
func (e *Error) Expression() string { return strings.Join(e.Path, ".") }

// ParamError is a search parameter the backend refused, by its REST name.
type ParamError struct {
	Param string
	Err   error
}

// Error is the backend's message.
func (e *ParamError) Error() string { return e.Err.Error() }

// Unwrap returns the backend's error.
func (e *ParamError) Unwrap() error { return e.Err }

// errorAt is a refused query (400) at pos.
func errorAt(pos *ast.Position, path []string, format string, args ...any) *Error {
	e := &Error{Msg: fmt.Sprintf(format, args...), Status: http.StatusBadRequest, Code: "invalid", Path: slices.Clone(path)}
	if pos != nil {
		e.Line, e.Column = pos.Line, pos.Column
	}
	return e
}

// Execute runs a query. focus is the resource of an instance-level query
// ([type]/[id]/$graphql), nil for a system-level one. The answer is the
// value of "data"; a failure is an *Error.
func Execute(ctx context.Context, b Backend, req Request, focus map[string]any, lim Limits) (any, error) {
	lim = lim.withDefaults()
	if strings.TrimSpace(req.Query) == "" {
		return nil, &Error{Msg: "the request has no query", Status: http.StatusBadRequest, Code: "required"}
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: req.Query}, lim.MaxTokens)
	if err != nil {
		return nil, parseError(err)
	}
	op, err := operation(doc, req.OperationName)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	x := &executor{b: b, lim: lim, doc: doc, op: op, vars: req.Variables, ctx: ctx}
	out := newObject()
	var root node
	if focus != nil {
		root = resourceNode(focus)
	} else {
		root = node{typ: systemType}
	}
	if err := x.selectFields(root, op.SelectionSet, target{obj: out}, 1, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// parseError positions the parser's error.
func parseError(err error) error {
	var ge *gqlerror.Error
	if errors.As(err, &ge) {
		e := &Error{Msg: "the query does not parse: " + ge.Message, Status: http.StatusBadRequest, Code: "structure"}
		if len(ge.Locations) > 0 {
			e.Line, e.Column = ge.Locations[0].Line, ge.Locations[0].Column
		}
		return e
	}
	return &Error{Msg: "the query does not parse: " + err.Error(), Status: http.StatusBadRequest, Code: "structure"}
}

// operation picks the operation to run: the one named, or the only one.
func operation(doc *ast.QueryDocument, name string) (*ast.OperationDefinition, error) {
	var op *ast.OperationDefinition
	switch {
	case name != "":
		op = doc.Operations.ForName(name)
		if op == nil {
			return nil, &Error{Msg: fmt.Sprintf("the query has no operation named %q", name), Status: http.StatusBadRequest, Code: "invalid"}
		}
	case len(doc.Operations) == 1:
		op = doc.Operations[0]
	case len(doc.Operations) == 0:
		return nil, &Error{Msg: "the query has no operation", Status: http.StatusBadRequest, Code: "invalid"}
	default:
		return nil, &Error{Msg: "the query has several operations: name the one to run with operationName", Status: http.StatusBadRequest, Code: "invalid"}
	}
	if op.Operation != ast.Query {
		e := errorAt(op.Position, nil, "%s operations are not supported; only queries are", op.Operation)
		e.Code = "not-supported"
		return nil, e
	}
	return op, nil
}
