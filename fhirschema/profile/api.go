// Package profile validates resources against StructureDefinition profiles
// (cardinality, types, fixed and pattern values, slicing, extensions,
// bindings and invariants) and generates snapshots from differentials. It
// reads conformance resources through Definitions: the R4 core ones built
// into the binary (Core) merged with a tenant's own.
package profile

import (
	"context"
	"errors"

	"fhirstore/fhirschema"
)

// Definitions looks up conformance resources by canonical URL.
type Definitions interface {
	// Resource returns the conformance resource of type typ
	// (StructureDefinition, ValueSet, CodeSystem) whose canonical URL is
	// url ("url" or "url|version"); nil, nil when there is none.
	Resource(ctx context.Context, typ, url string) (map[string]any, error)
	// Generation changes whenever the conformance resources change:
	// compiled profiles and expansions cached under another generation
	// are stale.
	Generation(ctx context.Context) (uint64, error)
}

// Validator checks resources against profiles, caching compiled profiles
// and value set expansions per Definitions generation. Safe for
// concurrent use.
type Validator struct{}

// NewValidator returns a validator.
func NewValidator() *Validator { return &Validator{} }

// Validate checks resource against the profile at profileURL as defs know
// it. An unknown profile yields ErrUnknownProfile. Issues carry a FHIRPath
// expression at the exact element and the profile URL and rule or
// constraint key in their text.
func (v *Validator) Validate(ctx context.Context, defs Definitions, resource map[string]any, profileURL string) ([]fhirschema.Issue, error) {
	return nil, errors.New("profile validation: not implemented")
}

// ErrUnknownProfile reports a profile the definitions do not hold.
var ErrUnknownProfile = errors.New("unknown profile")
