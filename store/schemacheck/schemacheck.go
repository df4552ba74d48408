// Package schemacheck puts the official R4 schema (package fhirschema) on
// the store's write path: every create, update and bundle entry is checked
// before anything is written.
package schemacheck

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/store"
)

// Validator adapts v to the store's Validator: schema errors become an
// *store.InvalidError, everything else warnings. Extensions whose
// definition is a StructureDefinition of the tenant are checked against it.
func Validator(v *fhirschema.Validator) store.Validator {
	return func(ctx context.Context, in store.Validation) ([]store.Issue, error) {
		defs := &tenantExtensions{ctx: ctx, find: in.Find, known: map[string][]string{}, lookedUp: map[string]bool{}}
		r := v.Validate(in.Type, in.Body, fhirschema.Options{Lenient: in.Lenient, Extensions: defs.types, BestPractice: in.Check})
		if defs.err != nil {
			return nil, fmt.Errorf("read extension definitions: %w", defs.err)
		}
		var errs, warnings []store.Issue
		for _, is := range r.Issues {
			si := store.Issue{Severity: is.Severity, Code: is.Code, Diagnostics: is.Diagnostics, Expression: is.Expression, Key: is.Key, Source: is.Source}
			if is.Severity == "error" {
				errs = append(errs, si)
			} else {
				warnings = append(warnings, si)
			}
		}
		if len(errs) > 0 {
			return nil, &store.InvalidError{Issues: append(errs, warnings...)}
		}
		return warnings, nil
	}
}

// tenantExtensions finds extension definitions among the tenant's
// StructureDefinitions, each URL once per validation.
type tenantExtensions struct {
	ctx  context.Context
	find func(ctx context.Context, typ, condition string) ([][]byte, error)
	// known holds what the definitions read so far say (see
	// fhirschema.ExtensionDefinitions); looked up records the URLs asked for.
	known    map[string][]string
	lookedUp map[string]bool
	err      error
}

// types answers for url, or url#name for an extension nested in the one
// defined at url.
func (t *tenantExtensions) types(u string) ([]string, bool) {
	base, _, _ := strings.Cut(u, "#")
	// Only an absolute URL names a definition; the relative ones name the
	// parts of a complex extension.
	if t.find == nil || t.err != nil || !strings.Contains(base, ":") {
		return nil, false
	}
	if !t.lookedUp[base] {
		t.lookedUp[base] = true
		t.err = t.read(base)
	}
	types, ok := t.known[u]
	return types, ok
}

// read adds what the tenant's definition of the extension at url says.
func (t *tenantExtensions) read(u string) error {
	found, err := t.find(t.ctx, "StructureDefinition", "url="+url.QueryEscape(u))
	if err != nil {
		return err
	}
	for _, sd := range found {
		defs, err := fhirschema.ExtensionDefinitions(sd)
		if err != nil {
			continue // not ours to judge here: it was validated when stored
		}
		for key, types := range defs {
			if key == u || strings.HasPrefix(key, u+"#") {
				t.known[key] = types
			}
		}
	}
	return nil
}
