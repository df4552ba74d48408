// Package profile validates resources against StructureDefinition profiles
// (cardinality, types, fixed and pattern values, slicing, extensions,
// bindings and invariants) and generates snapshots from differentials. It
// reads conformance resources through Definitions: the R4 core ones built
// into the binary (Core), a tenant's own merged over them (Merge), or a
// set held in memory (NewMemory, for a package read offline).
//
// # Validating
//
// Validator.Validate checks one resource against one profile and returns
// issues, each with a FHIRPath expression at the exact element
// (Patient.identifier, Patient.name[0], Observation.component) and the
// profile's URL and the rule or constraint key in its text; invariant
// issues also carry the key and the profile in Issue.Key and Issue.Source.
// It checks cardinality at every level, types and choice types, reference
// targets (by the reference's type, and a target contained or in the same
// Bundle by the profile it claims, or else the one it conforms to),
// fixed[x] and pattern[x], maxLength, minValue and maxValue, slicing
// (value, pattern, type, profile and exists discriminators; open, closed
// and openAtEnd rules; ordered slices; each slice's cardinality),
// extensions by their definitions (context, cardinality, value types; an
// unknown modifier extension is an error, another unknown extension a
// warning), bindings (a code outside a required value set is an error,
// outside an extensible or preferred one a warning, and a value set that
// cannot be expanded from the definitions — a VSAC one not installed — a
// warning saying so) and the invariants the profile adds beyond the core
// ones (CoreInvariant), which the base validator checks, evaluated by the
// FHIRPath engine with memberOf() answered from the definitions' value
// sets, conformsTo() by validation, slice() from the profiles' slices and
// elementDefinition() from the profile applied to the resource.
// mustSupport is not enforced. The resources inside the resource
// (contained, Bundle entries, parameters) are checked against the profiles
// they claim. Validation is bounded: a profile that refers to itself, or
// slicing that recurses, stops at 64 nested levels, and any validation
// after a million steps, with a warning.
//
// An unknown profile is ErrUnknownProfile; a profile that cannot be used (a
// malformed snapshot, a differential that cannot be applied, a base that
// is missing or is the profile itself) is ErrInvalidProfile.
//
// WithBundle names the Bundle a resource is an entry of, so that its
// references resolve among the entries; WithIndexedBundle does so with the
// entries indexed once (IndexBundle) for the validation of many entries,
// or given as JSON and decoded as references name them (IndexEntries: the
// entries of a transaction or batch the server validates one by one).
//
// # Caching
//
// A Validator compiles each profile and expands each value set once per
// Definitions value and generation: Definitions values that compare equal
// (the same pointer, or Merge of the same values) share them, and a new
// Generation discards them. Definitions that are not comparable are
// compiled afresh at each validation.
//
// # Snapshots
//
// GenerateSnapshot builds a StructureDefinition's snapshot from its
// differential and its base's snapshot (generated in turn when the base
// has none); a profile that has only a differential gets one when it is
// first used. Data types and slices are spelled out where the differential
// constrains their elements; a choice named by one of its types
// (valueQuantity) restricts the choice to that type when the differential
// types or requires it, and is otherwise an open slice by type. A
// differential element that cannot be applied (an element the base does
// not have, a cardinality or type wider than the base's) is a
// *DifferentialError naming it. CheckSnapshot tells whether a snapshot
// given with a StructureDefinition (a package's) contradicts its base.
//
// # Core
//
// The core definitions are those of R4 4.0.1 (profiles-resources,
// profiles-types, extension-definitions, valuesets, v3-codesystems and
// v2-tables), stripped of what validation does not read and deflated one
// by one in core.bin, which gencore.go writes; each is inflated when it is
// looked up.
package profile

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
type Validator struct {
	mu     sync.Mutex
	scopes map[any]*scope
}

// NewValidator returns a validator.
func NewValidator() *Validator { return &Validator{} }

// Option tunes one validation.
type Option func(*options)

type options struct {
	bundle map[string]any
	index  *Bundle
}

// WithBundle tells that the resource is an entry of bundle: references
// resolve among its entries, whose claimed profiles then count for
// targetProfile.
func WithBundle(bundle map[string]any) Option {
	return func(o *options) { o.bundle = bundle }
}

// WithIndexedBundle is WithBundle with the Bundle indexed once
// (IndexBundle) for the validation of many of its entries. A Bundle of
// IndexEntries resolves references among its entries the same way, while
// %rootResource stays the resource (the entries of a transaction are
// stored on their own).
func WithIndexedBundle(b *Bundle) Option {
	return func(o *options) { o.bundle, o.index = b.bundle, b }
}

// Validate checks resource against the profile at profileURL as defs know
// it. An unknown profile yields ErrUnknownProfile, a profile that cannot
// be used ErrInvalidProfile. Issues carry a FHIRPath expression at the
// exact element and the profile URL and rule or constraint key in their
// text.
func (v *Validator) Validate(ctx context.Context, defs Definitions, resource map[string]any, profileURL string, opts ...Option) ([]fhirschema.Issue, error) {
	sc, p, err := v.find(ctx, defs, profileURL)
	if err != nil {
		return nil, err
	}
	w := &walker{ctx: ctx, v: v, sc: sc}
	for _, o := range opts {
		o(&w.opts)
	}
	w.root = w.opts.bundle
	typ, _ := resource["resourceType"].(string)
	w.validateResource(p, resource, typ)
	return w.issues, nil
}

// Lookup reports whether Validate can check against the profile at
// profileURL: nil, or the ErrUnknownProfile or ErrInvalidProfile that
// Validate would return, without a resource to decode first. What it
// compiles is cached for Validate.
func (v *Validator) Lookup(ctx context.Context, defs Definitions, profileURL string) error {
	_, _, err := v.find(ctx, defs, profileURL)
	return err
}

// find is the scope of defs and the profile at profileURL compiled in it.
func (v *Validator) find(ctx context.Context, defs Definitions, profileURL string) (*scope, *compiled, error) {
	sc, err := v.scope(ctx, defs)
	if err != nil {
		return nil, nil, err
	}
	p, err := sc.profile(ctx, profileURL)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("%w %s: %w", ErrInvalidProfile, profileURL, err)
	}
	if p == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrUnknownProfile, profileURL)
	}
	return sc, p, nil
}

// ErrUnknownProfile reports a profile the definitions do not hold.
var ErrUnknownProfile = errors.New("unknown profile")

// ErrInvalidProfile reports a profile that cannot be used: a malformed
// StructureDefinition, or a differential that cannot be applied.
var ErrInvalidProfile = errors.New("invalid profile")
