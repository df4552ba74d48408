package store

import (
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"fhirstore/store/document"
)

// ErrPatchFailed is a JSON Patch whose test operation did not hold (422).
var ErrPatchFailed = errors.New("patch test failed")

// applyPatch applies a JSON Patch (RFC 6902) to the current version of a
// resource and returns the patched JSON; the result is then checked like
// any update body.
func (s *Store) applyPatch(typ string, cur *storedDoc, patchJSON []byte) ([]byte, error) {
	patch, err := jsonpatch.DecodePatch(patchJSON)
	if err != nil {
		return nil, syntaxIssue("structure", "the body is not a JSON Patch document: "+err.Error(), "")
	}
	current, err := document.ToJSON(cur.Resource, cur.NumText)
	if err != nil {
		return nil, fmt.Errorf("render %s/%s: %w", typ, cur.ID, err)
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
