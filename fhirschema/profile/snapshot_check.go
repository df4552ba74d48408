package profile

import (
	"context"
	"fmt"
)

// CheckSnapshot reports whether the snapshot of sd contradicts the
// snapshot of its base: an element whose cardinality or types are wider
// than those of the base element it constrains is a *DifferentialError
// naming it. A StructureDefinition without a snapshot, or whose base is a
// specialization's (a resource or data type defined anew), passes.
func CheckSnapshot(ctx context.Context, defs Definitions, sd map[string]any) error {
	elems := snapshotElements(sd)
	if len(elems) == 0 || sd["derivation"] == "specialization" {
		return nil
	}
	url, _ := sd["url"].(string)
	baseURL, _ := sd["baseDefinition"].(string)
	base, err := lookup(ctx, defs, "StructureDefinition", baseURL)
	if err != nil {
		return err
	}
	if base == nil {
		return fmt.Errorf("StructureDefinition %s: its base %s is not known", url, baseURL)
	}
	if len(snapshotElements(base)) == 0 {
		if base, err = GenerateSnapshot(ctx, defs, base); err != nil {
			return fmt.Errorf("base of %s: %w", url, err)
		}
	}
	byID, byPath := indexElements(snapshotElements(base))
	for _, e := range elems {
		b := baseElement(e, byID, byPath)
		if b == nil {
			continue // inside a data type the base does not spell out
		}
		id, _ := e["id"].(string)
		if id == "" {
			id, _ = e["path"].(string)
		}
		probe := map[string]any{"min": e["min"], "max": e["max"], "type": e["type"]}
		if _, slice := e["sliceName"]; slice {
			probe["sliceName"] = e["sliceName"]
		}
		if err := narrows(b, probe); err != nil {
			return &DifferentialError{Path: id, Reason: "the snapshot contradicts its base: " + err.Error()}
		}
	}
	return nil
}

// indexElements indexes snapshot elements by id and by path (the first
// element at each path, the unsliced one).
func indexElements(elems []map[string]any) (byID, byPath map[string]map[string]any) {
	byID, byPath = map[string]map[string]any{}, map[string]map[string]any{}
	for _, e := range elems {
		if id, _ := e["id"].(string); id != "" {
			byID[id] = e
		}
		if p, _ := e["path"].(string); p != "" {
			if _, ok := byPath[p]; !ok {
				byPath[p] = e
			}
		}
	}
	return byID, byPath
}

// baseElement finds the base element e constrains: the one of the same
// id, or, for a slice or what lies under one, of the same path.
func baseElement(e map[string]any, byID, byPath map[string]map[string]any) map[string]any {
	if id, _ := e["id"].(string); id != "" {
		if b := byID[id]; b != nil {
			return b
		}
	}
	p, _ := e["path"].(string)
	return byPath[p]
}
