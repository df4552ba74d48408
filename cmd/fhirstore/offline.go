package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/igpackage"
	"fhirstore/fhirschema/profile"
	"fhirstore/store"
	"fhirstore/store/schemacheck"
)

// offlineChecker validates resources without a server, with the checks of
// a write: the base definitions and core invariants, then the profiles
// claimed, from the core definitions and those of the packages given.
type offlineChecker struct {
	checker *schemacheck.Checker
	defs    profile.Definitions
	// structures holds the packages' StructureDefinitions by URL, for
	// the extension definitions the base validator asks for.
	structures map[string][]byte
}

// newOfflineChecker reads the conformance resources of pkgs into memory.
func newOfflineChecker(pkgs ...*igpackage.Package) (*offlineChecker, error) {
	v, err := fhirschema.NewValidator()
	if err != nil {
		return nil, err
	}
	mem := profile.NewMemory()
	o := &offlineChecker{checker: schemacheck.New(v), structures: map[string][]byte{}}
	for _, p := range pkgs {
		for _, f := range p.Resources {
			r, err := f.Decode()
			if err != nil {
				return nil, err
			}
			mem.Add(r)
			if f.Type == "StructureDefinition" && f.URL != "" {
				o.structures[f.URL] = f.JSON
			}
		}
	}
	o.defs = profile.Merge(mem, profile.Core())
	return o, nil
}

// check validates one resource of typ, against profiles too, and returns
// every issue found, errors and warnings; full adds the best-practice
// warnings, as $validate does. bundle, when not nil, is the Bundle the
// resource is an entry of.
func (o *offlineChecker) check(ctx context.Context, typ string, body []byte, profiles []string, full bool, bundle *store.Bundle) ([]store.Issue, error) {
	in := store.Validation{Type: typ, Body: body, Find: o.find, Profiles: profiles, Check: full, Bundle: bundle}
	warnings, err := o.checker.Check(ctx, in, o.defs)
	var ie *store.InvalidError
	if errors.As(err, &ie) {
		return ie.Issues, nil
	}
	return warnings, err
}

// find answers the base validator's look-ups of extension definitions
// ("url=..." on StructureDefinition) from the packages.
func (o *offlineChecker) find(_ context.Context, typ, condition string) ([][]byte, error) {
	raw, ok := strings.CutPrefix(condition, "url=")
	if typ != "StructureDefinition" || !ok {
		return nil, nil
	}
	u, err := url.QueryUnescape(raw)
	if err != nil {
		return nil, fmt.Errorf("extension definition %q: %w", raw, err)
	}
	if sd, ok := o.structures[u]; ok {
		return [][]byte{sd}, nil
	}
	return nil, nil
}

// checkProfiles compiles every profile of the packages' resources that
// defines one, so that a StructureDefinition the validator cannot use is
// refused with its file before anything is written.
func (o *offlineChecker) checkProfiles(ctx context.Context, files []*igpackage.File) error {
	v := profile.NewValidator()
	for _, f := range files {
		if f.Type != "StructureDefinition" || f.URL == "" {
			continue
		}
		r, err := f.Decode()
		if err != nil {
			return err
		}
		typ, _ := r["type"].(string)
		if r["kind"] != "resource" || !fhirschema.IsResourceType(typ) {
			continue
		}
		_, err = v.Validate(ctx, o.defs, map[string]any{"resourceType": typ}, f.URL)
		if errors.Is(err, profile.ErrInvalidProfile) {
			return &igpackage.Error{File: f.Path, Reason: err.Error()}
		}
		if err != nil && !errors.Is(err, profile.ErrUnknownProfile) {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	return nil
}
