package schemacheck

import (
	"bytes"
	"context"
	"encoding/json"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/bundle"
	"fhirstore/fhirschema/profile"
	"fhirstore/store"
)

// checkBundle checks the rules that hold a Bundle's entries together
// (package fhirschema/bundle): fullUrls, what a document or a message
// must hold, the entries of a search result, references found inside.
func checkBundle(_ context.Context, in store.Validation, _ profile.Definitions) ([]fhirschema.Issue, error) {
	if in.Type != "Bundle" {
		return nil, nil
	}
	b := in.Resource
	if b == nil {
		dec := json.NewDecoder(bytes.NewReader(in.Body))
		dec.UseNumber()
		if err := dec.Decode(&b); err != nil {
			return nil, nil // the base validation has said what is wrong
		}
	}
	return bundle.Check(b), nil
}
