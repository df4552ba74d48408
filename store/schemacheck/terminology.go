package schemacheck

import (
	"context"
	"fmt"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
	tx "fhirstore/fhirschema/terminology"
	"fhirstore/store"
)

// terms checks the terminology of every write; what it caches is keyed by
// the definitions and their generation, so checkers share it.
var terms = tx.NewChecker(profile.NewValidator())

// checkTerminology checks the codes of the resource against the code
// systems and value sets of the tenant and the core (package
// fhirschema/terminology), and a CodeSystem or ValueSet as terminology.
func checkTerminology(ctx context.Context, in store.Validation, defs profile.Definitions) ([]fhirschema.Issue, error) {
	r, err := decodeResource(in)
	if err != nil {
		return nil, nil // the base validation has said what is wrong
	}
	issues, err := terms.Check(ctx, defs, r)
	if err != nil {
		return nil, fmt.Errorf("check terminology: %w", err)
	}
	return issues, nil
}
