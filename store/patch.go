package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"fhirstore/fhirschema/fhirpatch"
	"fhirstore/store/document"
)

// ErrPatchFailed is a JSON Patch whose test operation did not hold (422).
var ErrPatchFailed = errors.New("patch test failed")

// applyPatch applies a patch to the current version of a resource and
// returns the patched JSON; the result is then checked like any update
// body. The patch is a FHIRPath Patch (a Parameters resource, a JSON
// object) or a JSON Patch (RFC 6902, a JSON array).
func (s *Store) applyPatch(typ string, cur *storedDoc, patchJSON []byte) ([]byte, error) {
	current, err := document.ToJSON(cur.Resource, cur.NumText)
	if err != nil {
		return nil, fmt.Errorf("render %s/%s: %w", typ, cur.ID, err)
	}
	if bytes.HasPrefix(bytes.TrimSpace(patchJSON), []byte("{")) {
		// The evaluation of each path is bounded in time by the engine.
		return applyFHIRPathPatch(context.Background(), current, patchJSON)
	}
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return nil, syntaxIssue("structure", "the body is not a JSON Patch document: "+err.Error(), "")
	}
	out, err := patch.Apply(current)
	switch {
	case errors.Is(err, jsonpatch.ErrTestFailed):
		return nil, fmt.Errorf("%w: %v", ErrPatchFailed, err)
	case err != nil:
		return nil, syntaxIssue("processing", "the JSON Patch cannot be applied: "+err.Error(), "")
	}
	return out, nil
}

// applyFHIRPathPatch applies a FHIRPath Patch: malformed Parameters are a
// 400, operations that do not fit the resource a 422, each pointing at the
// operation.
func applyFHIRPathPatch(ctx context.Context, current, params []byte) ([]byte, error) {
	out, err := fhirpatch.Apply(ctx, current, params)
	var pe *fhirpatch.Error
	if errors.As(err, &pe) {
		code := "processing"
		if pe.Invalid {
			code = "invalid"
		}
		issue := Issue{Severity: "error", Code: code, Diagnostics: pe.Error(), Expression: pe.Expression()}
		return nil, &InvalidError{Syntax: pe.Invalid, Issues: []Issue{issue}}
	}
	return out, err
}
