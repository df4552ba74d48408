// Package fhirpath is the FHIRPath engine of the FHIR R4 server: the
// normative FHIRPath language (N1) with the functions FHIR adds, over
// resources decoded from JSON with encoding/json (Decoder.UseNumber:
// objects are map[string]any, arrays []any, numbers json.Number).
//
// Search parameters, the core invariants of the R4 StructureDefinitions,
// profiles' constraints and SQL on FHIR views all evaluate through it.
//
// # Compile once, evaluate many times
//
// Compile parses an expression into an Expr, safe for concurrent use; a
// Cache keeps compiled expressions by their text. Expr.Eval evaluates it
// over an input collection with an Env: %resource, %rootResource and
// %context, further variables, a Resolver for resolve() beyond the
// resource and its Bundle, a Terminology for memberOf(), a Conformance for
// conformsTo() (and, when it is a Slicer, slice() and elementDefinition()),
// a trace sink and limits.
//
// # Types
//
// The engine knows the R4 type model (model.json, generated from the
// official StructureDefinitions by genmodel.go): every element of every
// resource, data type and backbone element, with its types and
// cardinality. Navigation records each node's FHIR type, so is, as,
// ofType and type() answer for FHIR and System types alike; a choice
// element value[x] is navigated as value and yields valueQuantity,
// valueString… with their types. In strict mode (Env.Strict), naming an
// element that no input item's type has is an error.
//
// Values computed by an expression are System values: Boolean (bool),
// Integer (int64), Decimal (json.Number), String, Date, DateTime and Time
// (string, their FHIR form) and Quantity. Equality, equivalence and
// comparison follow the specification: dates of different precision
// compare as unknown (empty) where the answer depends on the missing
// part, quantities compare after UCUM unit conversion, strings compare
// case- and space-insensitively under ~.
//
// # Limits
//
// An expression nests at most 300 levels and has at most 100,000 tokens;
// an evaluation takes at most Env.MaxSteps steps (1,000,000 by default),
// nests at most Env.MaxDepth levels (1,000) and runs at most Env.Timeout (2 s);
// past any of them it fails with an *Error, never a hang or a crash.
package fhirpath
