// Package fhirpath evaluates the subset of FHIRPath used by the official
// FHIR R4 search parameter expressions over a resource decoded with
// encoding/json (Decoder.UseNumber: objects are map[string]any, arrays
// []any, numbers json.Number).
//
// # Supported subset
//
//   - Paths such as Patient.name.family. An identifier at the start of a
//     path that begins with an upper-case letter is a type name: it keeps
//     the resource only when its resourceType matches (Resource and
//     DomainResource match any resource), so a union over many bases such
//     as "Account.name | ActivityDefinition.name" selects only from the
//     resource's own type. Any other identifier selects a child element.
//     Arrays are flattened at every step; JSON nulls are skipped.
//   - Choice elements: Observation.value selects valueQuantity,
//     valueString, ... and records the type from the suffix, first letter
//     lower-cased for primitive types (dateTime, string) and as-is for
//     complex types (Quantity, CodeableConcept). Only the names of R4 choice
//     elements are looked up this way, and only when the element itself is
//     absent.
//   - Operators: | (union, removing duplicates), = and != (collection
//     equality; numbers compare by value), and, or, xor, implies
//     (three-valued logic), is and as with a type specifier (optionally
//     qualified by FHIR. or System.), parentheses, indexers [n] with an
//     integer literal, unary minus before a number.
//   - Terms: string, integer, decimal and boolean literals, {}, $this,
//     %resource, %rootResource, %context (all the evaluated resource),
//     %ucum, %sct and %loinc.
//   - Functions: where(criteria), select(expr), exists([criteria]),
//     all(criteria), empty(), not(), first(), last(), tail(), count(),
//     hasValue(), as(T), ofType(T), is(T), extension(url), resolve().
//
// Type tests know the FHIR specializations that matter here: Age, Count,
// Distance, Duration, SimpleQuantity and MoneyQuantity are Quantity; code,
// id and markdown are string; canonical, url, oid and uuid are uri;
// positiveInt and unsignedInt are integer. The type of an element reached
// by a plain path is unknown (no schema is consulted) unless it is a
// resource (its resourceType) or a JSON boolean.
//
// # resolve()
//
// References cannot be resolved here. resolve() returns each Reference (or
// canonical/uri string) unchanged, remembering the resource type it names:
// from a relative "Patient/123", an absolute "http://x/fhir/Patient/123"
// (with or without /_history/v), a canonical ".../ValueSet/x|1.0", a
// "#id" pointing into contained, or else the Reference's type element. So
// "subject.where(resolve() is Patient)" keeps the subjects that reference
// a Patient, and resolve() elsewhere yields the references themselves.
//
// # Not supported
//
// Anything else fails to compile with an error naming it: arithmetic (+ -
// * / div mod &), comparison (< > <= >=), equivalence (~ !~), in and
// contains, date/time and quantity literals, $index and $total, other
// environment variables, and functions outside the list above. Where the
// specification reports an evaluation error (a multi-item operand of is,
// a multi-item boolean), evaluation yields an empty collection instead.
package fhirpath
