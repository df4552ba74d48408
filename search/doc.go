// Package search turns FHIR search parameters into database queries and
// normalizes the values they compare against.
//
// # Registry
//
// The official R4 SearchParameter definitions (search-parameters.json,
// embedded) give each parameter its code, type, base resource types and
// FHIRPath expression. Registry compiles the expressions with the FHIRPath
// engine of package fhirschema/fhirpath once at start-up.
//
// # A tenant's own parameters
//
// A tenant's SearchParameter resources (ParseDefinition) are checked
// against the registry before they are stored (Registry.Check: each
// element a search needs, the expression compiled and evaluated strictly
// on an empty resource of each base) and put in force by Registry.With,
// which returns the tenant's registry: the built-in parameters, shared,
// with the tenant's own added or put in place of a built-in one of the
// same code. A definition that states a built-in parameter again (same
// URL, or same type and expression) keeps the built-in one's index. The
// tenant's parameters are marked (Param.Tenant); a query parsed by a
// tenant's registry lists those it reads (Query.Uses), so that the store
// can tell whether their values are complete yet, and TenantSignatures
// says what their stored values depend on, so that it can tell which
// rows to index again.
//
// # Index values
//
// At write time Extract evaluates the expressions of every parameter of the
// resource's type and stores normalized values in the resource's idx
// document, one field per parameter code. Search reads only idx, never the
// resource. Every value is shaped so that MongoDB and the embedded engine
// answer it with plain equality, $in, anchored-prefix $regex and range
// conditions on scalar fields (no $elemMatch, no arrays inside arrays):
//
//	string     idx[code]          []string  folded: lower case, accents removed, spaces collapsed
//	           idx[code+":exact"] []string  the value as written
//	token      idx[code]          []string  for a coding (system s, code c): "s|c", "c"; without
//	                                        a system: "|c", "c"; without a code: "s|". A search
//	                                        of a system alone (s|) is a prefix match of "s|"
//	                                        (Identifier: system/value; ContactPoint: value;
//	                                        boolean, code, string, id: "c" and "|c")
//	           idx[code+":text"]  []string  folded CodeableConcept.text, Coding.display, Identifier.type.text
//	           idx[code+":of-type"] []string Identifier "typeSystem|typeCode|value"
//	reference  idx[code]          []string  "Type/id", "id" for relative and contained-resolved references,
//	                                        the absolute URL as written, canonical "url" and "url|version"
//	           idx[code+":identifier"] []string token forms of Reference.identifier
//	date       idx[code]          []Range   {lo, hi} instants (BSON dates) covering the value's precision;
//	                                        Period: start..end (open ends are the min/max instant);
//	                                        Timing: its outer limits, as FHIR search says
//	number     idx[code]          []Range   {lo, hi} float64 bounds from the value's precision
//	quantity   idx[code]          []Range   {lo, hi, s: "system|code", u: unit} (s, u empty when absent)
//	uri        idx[code]          []string  the URI as written
//
// A date, number or quantity parameter whose expression selects at most one
// element (Observation date, Patient birthdate) holds its one Range itself,
// not a list: idx.<code>.lo and .hi are then scalar paths, which it sorts by.
//
// A parameter with no value in the resource has no idx field, which is what
// :missing tests. Two kinds of parameter store no idx field at all: _id,
// searched on the row's own key, and a union such as Observation's
// combo-code ("Observation.code | Observation.component.code"), searched
// as code or component-code (see linkCombos). Sorting uses scalars in sort[code]: {a: lowest value, d:
// highest value} (strings folded, dates and numbers by lo and hi), because
// sorting through arrays of objects is not portable; a parameter with one
// value holds only a, and one with one range none (it sorts by
// idx.<code>.lo ascending, .hi descending). A parameter with no
// value has no sort field either: the store reads the rows without one
// after the others, whichever the direction. _id and _lastUpdated have none
// at all: the store sorts by the row's own _id and lastUpdated fields.
//
// # Deferred parts and _filter
//
// Some conditions need another lookup before they can run: the codes of a
// ValueSet (:in, :not-in) or of a code hierarchy (:below, :above on
// tokens), and, in _filter, chained paths and the branches of an or or a
// not that the index cannot answer exactly alone. Parse leaves a Deferred
// as the value of the condition's field; the store resolves it
// (Query.Resolve) into an $in or $nin list of codes, references or ids,
// so the database still sees only index-friendly conditions. _filter
// (filter.go, filtercond.go) translates each test into the condition the
// parameter's own search builds.
package search
