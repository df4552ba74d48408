// Package schemacheck puts the official R4 schema (package fhirschema) on
// the store's write path: every create, update and bundle entry is checked
// before anything is written.
package schemacheck

import (
	"context"

	"fhirstore/fhirschema"
	"fhirstore/store"
)

// Validator adapts v to the store's Validator: schema errors become an
// *store.InvalidError, everything else warnings.
func Validator(v *fhirschema.Validator) store.Validator {
	return func(_ context.Context, typ string, body []byte, lenient bool) ([]store.Issue, error) {
		r := v.Validate(typ, body, fhirschema.Options{Lenient: lenient})
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
