package fhirpatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"fhirstore/fhirschema/fhirpatch"
	"fhirstore/fhirschema/fhirxml"
)

// FuzzApply applies arbitrary Parameters to the official cases' inputs:
// Apply never panics, fails only with an *Error for a bad patch, and
// writes JSON when it succeeds. Seeds: the official cases.
func FuzzApply(f *testing.F) {
	for _, c := range suiteCases(f) {
		in, err1 := fhirxml.ToJSON([]byte(c.Input))
		diff, err2 := fhirxml.ToJSON([]byte(c.Diff))
		if err1 == nil && err2 == nil {
			f.Add(in, diff)
		}
	}
	f.Fuzz(func(t *testing.T, resource, params []byte) {
		if !json.Valid(resource) {
			return
		}
		var r map[string]any
		if json.Unmarshal(resource, &r) != nil || r == nil {
			return
		}
		out, err := fhirpatch.Apply(context.Background(), resource, params)
		var pe *fhirpatch.Error
		switch {
		case errors.As(err, &pe):
		case err != nil:
			t.Fatalf("error %v is not an *Error", err)
		case !json.Valid(out):
			t.Fatalf("wrote invalid JSON %s", out)
		}
	})
}
