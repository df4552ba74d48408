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
		defs := &tenantExtensions{ctx: ctx, find: in.Find, known: map[string]extension{}}
		r := v.Validate(in.Type, in.Body, fhirschema.Options{Lenient: in.Lenient, Extensions: defs.types})
		if defs.err != nil {
			return nil, fmt.Errorf("read extension definitions: %w", defs.err)
		}
		var errs, warnings []store.Issue
		for _, is := range r.Issues {
			si := store.Issue{Severity: is.Severity, Code: is.Code, Diagnostics: is.Diagnostics, Expression: is.Expression}
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
	ctx   context.Context
	find  func(ctx context.Context, typ, condition string) ([][]byte, error)
	known map[string]extension
	err   error
}

type extension struct {
	types []string
	ok    bool
}

func (t *tenantExtensions) types(u string) ([]string, bool) {
	// Only an absolute URL names a definition; the relative ones name the
	// parts of a complex extension.
	if t.find == nil || t.err != nil || !strings.Contains(u, ":") {
		return nil, false
	}
	if e, seen := t.known[u]; seen {
		return e.types, e.ok
	}
	var e extension
	found, err := t.find(t.ctx, "StructureDefinition", "url="+url.QueryEscape(u))
	if err != nil {
		t.err = err
		return nil, false
	}
	for _, sd := range found {
		defined, types, ok, err := fhirschema.ExtensionDefinition(sd)
		if err == nil && ok && defined == u {
			e = extension{types: types, ok: true}
			break
		}
	}
	t.known[u] = e
	return e.types, e.ok
}
