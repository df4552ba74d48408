package profile

import (
	"context"
	"fmt"
)

// DifferentialError reports a differential element that cannot be applied
// to the base snapshot.
type DifferentialError struct {
	Path   string // the element's id or path
	Reason string
}

func (e *DifferentialError) Error() string {
	return fmt.Sprintf("differential element %s: %s", e.Path, e.Reason)
}

// GenerateSnapshot returns a copy of the StructureDefinition sd with its
// snapshot generated from its differential and its base definition's
// snapshot.
func GenerateSnapshot(ctx context.Context, defs Definitions, sd map[string]any) (map[string]any, error) {
	return nil, fmt.Errorf("not yet")
}
