package profile

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"fhirstore/fhirschema"
)

// expand spells out the children of element i from its type's definition
// (its profile's, when it names one), or from the element its
// contentReference names.
func (b *builder) expand(i int) error {
	e := b.elems[i]
	if b.expandSlice(i) {
		return nil
	}
	if ref, _ := e["contentReference"].(string); ref != "" {
		src := b.find(ref[strings.IndexByte(ref, '#')+1:])
		if src < 0 {
			return fmt.Errorf("the contentReference %s names no element", ref)
		}
		b.insert(i+1, rebase(copyElements(b.elems[src+1:b.subtreeEnd(src)]), b.str(src, "id"), b.str(src, "path"), b.str(i, "id"), b.str(i, "path")))
		return nil
	}
	types := objects(e["type"])
	if len(types) != 1 {
		return fmt.Errorf("%s has %d types: constrain it to one before its children", b.str(i, "path"), len(types))
	}
	code, _ := types[0]["code"].(string)
	url := coreBase + typeCode(code)
	if ps := strings1(types[0]["profile"]); len(ps) == 1 {
		url = ps[0]
	}
	sd, err := lookup(b.ctx, b.defs, "StructureDefinition", url)
	if err != nil {
		return err
	}
	if sd == nil {
		return fmt.Errorf("the definition %s of the type of %s is not known", url, b.str(i, "path"))
	}
	if len(snapshotElements(sd)) == 0 {
		if sd, err = generate(b.ctx, b.defs, sd, b.visiting); err != nil {
			return err
		}
	}
	elems := snapshotElements(sd)
	if len(elems) < 2 {
		return fmt.Errorf("the type %s of %s has no elements", code, b.str(i, "path"))
	}
	rootID, _ := elems[0]["id"].(string)
	rootPath, _ := elems[0]["path"].(string)
	if rootID == "" {
		rootID = rootPath
	}
	b.insert(i+1, rebase(copyElements(elems[1:]), rootID, rootPath, b.str(i, "id"), b.str(i, "path")))
	return nil
}

// expandSlice spells out the children of slice i as those of the element
// it slices in the base snapshot (or, failing that, in the snapshot being
// built); false when neither has any.
func (b *builder) expandSlice(i int) bool {
	id := b.str(i, "id")
	name := b.str(i, "sliceName")
	baseID, ok := strings.CutSuffix(id, ":"+name)
	if name == "" || !ok {
		return false
	}
	for _, src := range []*[]map[string]any{&b.orig, &b.elems} {
		from := &builder{elems: *src}
		j := from.find(baseID)
		if j < 0 || !from.hasChildren(j) {
			continue
		}
		kids := copyElements(from.elems[j+1 : from.subtreeEnd(j)])
		b.insert(i+1, rebase(kids, baseID, b.str(i, "path"), id, b.str(i, "path")))
		return true
	}
	return false
}

// rebase moves copied elements from under fromID/fromPath to under
// toID/toPath.
func rebase(elems []map[string]any, fromID, fromPath, toID, toPath string) []map[string]any {
	for _, e := range elems {
		if id, _ := e["id"].(string); strings.HasPrefix(id, fromID) {
			e["id"] = toID + id[len(fromID):]
		}
		if p, _ := e["path"].(string); strings.HasPrefix(p, fromPath) {
			e["path"] = toPath + p[len(fromPath):]
		}
	}
	return elems
}

// slice returns the index of slice name of element i, making it from a
// copy of the element as the base snapshot has it, optional, placed after
// the element's last slice; its children are spelled out when the
// differential constrains them.
func (b *builder) slice(i int, name string) int {
	baseID := b.str(i, "id")
	sliceID := baseID + ":" + name
	if j := b.find(sliceID); j >= 0 {
		return j
	}
	at := b.subtreeEnd(i)
	for at < len(b.elems) && strings.HasPrefix(b.str(at, "id"), baseID+":") {
		at++
	}
	src := b.elems[i]
	if j := (&builder{elems: b.orig}).find(baseID); j >= 0 && b.elems[i]["sliceName"] == nil {
		src = b.orig[j]
	}
	copies := copyElements([]map[string]any{src})
	copies[0]["id"] = sliceID
	copies[0]["sliceName"] = name
	copies[0]["min"] = json.Number("0")
	delete(copies[0], "slicing")
	if _, ok := b.elems[i]["slicing"]; !ok && isExtensionPath(b.str(i, "path")) {
		b.elems[i]["slicing"] = map[string]any{
			"discriminator": []any{map[string]any{"type": "value", "path": "url"}},
			"ordered":       false, "rules": "open",
		}
	}
	b.insert(at, copies)
	return at
}

func isExtensionPath(p string) bool {
	return strings.HasSuffix(p, ".extension") || strings.HasSuffix(p, ".modifierExtension")
}

// mergeElement applies the differential element d to the snapshot element
// e: what d says replaces what e says, constraints add up, and d may only
// narrow e's cardinality and types.
func mergeElement(e, d map[string]any, id string) error {
	if err := narrows(e, d); err != nil {
		return &DifferentialError{id, err.Error()}
	}
	if err := keepsFixed(e, d); err != nil {
		return &DifferentialError{id, err.Error()}
	}
	for k, v := range d {
		switch k {
		case "id", "path", "base":
		case "constraint":
			e[k] = mergeConstraints(e[k], v)
		case "slicing", "binding":
			e[k] = mergeObject(e[k], v)
		default:
			e[k] = fhirschema.CopyJSON(v)
		}
	}
	if !bindable(e) {
		delete(e, "binding")
	}
	return nil
}

// keepsFixed checks that d does not fix e to another value than its base
// fixes it to: a fixed value is a constraint every derived profile keeps.
func keepsFixed(e, d map[string]any) error {
	for k, base := range e {
		if !strings.HasPrefix(k, "fixed") {
			continue
		}
		if v, ok := d[k]; ok && !reflect.DeepEqual(base, v) {
			return fmt.Errorf("%s is fixed to %s in the base; a derived profile cannot fix it to %s", k, compactJSON(base), compactJSON(v))
		}
	}
	return nil
}

// bindable reports whether one of e's types takes a binding.
func bindable(e map[string]any) bool {
	types := objects(e["type"])
	for _, t := range types {
		c, _ := t["code"].(string)
		if codedTypes[c] || quantityTypes[c] || c == "CodeableReference" || strings.HasPrefix(c, "http://hl7.org/fhirpath/System.") {
			return true
		}
	}
	return len(types) == 0
}

// narrows checks that d does not widen e's cardinality or types.
func narrows(e, d map[string]any) error {
	emin, err1 := intOf(e["min"], 0)
	dmin, err2 := intOf(d["min"], emin)
	emax, err3 := maxOf(e["max"])
	dmax, err4 := maxOf(d["max"])
	if d["max"] == nil {
		dmax = emax
	}
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return err
		}
	}
	// A slice is one part of its element's repetitions: its cardinality is
	// not the element's (the element's own max still bounds them all, when
	// resources are validated), so neither bound is compared.
	_, slice := d["sliceName"]
	if !slice && dmin < emin {
		return fmt.Errorf("min %d is less than the base's %d", dmin, emin)
	}
	if !slice && emax >= 0 && (dmax < 0 || dmax > emax) {
		return fmt.Errorf("max %s is more than the base's %d", maxText(dmax), emax)
	}
	if dmax >= 0 && dmin > dmax {
		return fmt.Errorf("min %d is more than max %d", dmin, dmax)
	}
	return typesNarrow(objects(e["type"]), objects(d["type"]))
}

func maxText(n int) string {
	if n < 0 {
		return "*"
	}
	return fmt.Sprint(n)
}

// typesNarrow checks that each type of d is one of e's.
func typesNarrow(base, diff []map[string]any) error {
	if len(base) == 0 || len(diff) == 0 {
		return nil
	}
	var codes []string
	for _, t := range base {
		c, _ := t["code"].(string)
		codes = append(codes, typeCode(c))
	}
	for _, t := range diff {
		c, _ := t["code"].(string)
		if isPrimitive(c) && containsAny(codes, "string", "boolean", "integer", "decimal") {
			continue // a System type, as in Extension.url: its FHIR type is not recorded
		}
		if !allowsType(codes, typeCode(c)) && !(resourceTypes[c] && containsAny(codes, "Resource", "DomainResource")) {
			return fmt.Errorf("type %s is not among the base's types %s", c, strings.Join(codes, ", "))
		}
	}
	return nil
}

func containsAny(list []string, xs ...string) bool {
	for _, l := range list {
		for _, x := range xs {
			if l == x {
				return true
			}
		}
	}
	return false
}

// mergeConstraints adds d's constraints to e's, one per key.
func mergeConstraints(e, d any) any {
	out, _ := fhirschema.CopyJSON(e).([]any)
	seen := map[string]bool{}
	for _, c := range objects(out) {
		k, _ := c["key"].(string)
		seen[k] = true
	}
	for _, c := range objects(d) {
		if k, _ := c["key"].(string); !seen[k] {
			out = append(out, fhirschema.CopyJSON(c))
		}
	}
	return out
}

// mergeObject overlays d's properties on e's.
func mergeObject(e, d any) any {
	out, _ := fhirschema.CopyJSON(e).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	dm, _ := d.(map[string]any)
	for k, v := range dm {
		out[k] = fhirschema.CopyJSON(v)
	}
	return out
}

// copyElements deep-copies snapshot elements.
func copyElements(elems []map[string]any) []map[string]any {
	out := make([]map[string]any, len(elems))
	for i, e := range elems {
		out[i] = fhirschema.CopyJSON(e).(map[string]any)
		if _, ok := out[i]["id"]; !ok {
			out[i]["id"] = out[i]["path"]
		}
	}
	return out
}
