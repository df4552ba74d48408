// Package viewcheck puts the rules of SQL on FHIR v2 (package
// fhirschema/view) on the store's write path: every ViewDefinition created
// or updated is compiled and checked before anything is written. R4's
// schema knows no ViewDefinition, so other validators never see one.
package viewcheck

import (
	"context"
	"errors"
	"fmt"

	"fhirstore/fhirschema/view"
	"fhirstore/store"
)

// Validator checks ViewDefinitions and hands every other resource to next.
func Validator(next store.Validator) store.Validator {
	return func(ctx context.Context, in store.Validation) ([]store.Issue, error) {
		if in.Type != view.ResourceType {
			if next == nil {
				return nil, nil
			}
			return next(ctx, in)
		}
		_, err := view.Compile(in.Body, view.Options{Stored: true})
		var ie *view.InvalidError
		if errors.As(err, &ie) {
			issues := make([]store.Issue, len(ie.Issues))
			for i, is := range ie.Issues {
				issues[i] = store.Issue{Severity: is.Severity, Code: is.Code, Diagnostics: is.Diagnostics, Expression: is.Expression}
			}
			return nil, &store.InvalidError{Issues: issues}
		}
		if err != nil {
			return nil, fmt.Errorf("check ViewDefinition: %w", err)
		}
		return nil, nil
	}
}
