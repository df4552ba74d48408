package profile

import (
	"context"
	"fmt"
	"strings"

	"fhirstore/fhirschema"
)

// maxBaseDepth bounds a chain of profiles each based on the next.
const maxBaseDepth = 16

// DifferentialError reports a differential element that cannot be applied
// to the base snapshot.
type DifferentialError struct {
	Path   string // the element's id: Observation.component:systolic.code
	Reason string
}

// Error names the element and the reason.
func (e *DifferentialError) Error() string {
	return fmt.Sprintf("differential element %s: %s", e.Path, e.Reason)
}

// GenerateSnapshot returns a copy of the StructureDefinition sd with its
// snapshot generated from its differential and the snapshot of its
// baseDefinition (itself generated when the base has none). Only
// constraints (derivation constraint) can be generated. A differential
// element that cannot be applied is a *DifferentialError naming it; a
// profile whose chain of bases comes back to itself is an error.
func GenerateSnapshot(ctx context.Context, defs Definitions, sd map[string]any) (map[string]any, error) {
	return generate(ctx, defs, sd, map[string]bool{})
}

func generate(ctx context.Context, defs Definitions, sd map[string]any, visiting map[string]bool) (map[string]any, error) {
	url, _ := sd["url"].(string)
	if visiting[url] {
		return nil, fmt.Errorf("StructureDefinition %s derives from itself", url)
	}
	if len(visiting) >= maxBaseDepth {
		return nil, fmt.Errorf("StructureDefinition %s: more than %d bases", url, maxBaseDepth)
	}
	visiting[url] = true
	defer delete(visiting, url)
	if d, _ := sd["derivation"].(string); d == "specialization" {
		return nil, fmt.Errorf("StructureDefinition %s: a snapshot can be generated only for a constraint, not a specialization", url)
	}
	baseURL, _ := sd["baseDefinition"].(string)
	if baseURL == "" {
		return nil, fmt.Errorf("StructureDefinition %s has no baseDefinition", url)
	}
	base, err := lookup(ctx, defs, "StructureDefinition", baseURL)
	if err != nil {
		return nil, err
	}
	if base == nil {
		return nil, fmt.Errorf("StructureDefinition %s: its base %s is not known", url, baseURL)
	}
	if len(snapshotElements(base)) == 0 {
		if base, err = generate(ctx, defs, base, visiting); err != nil {
			return nil, fmt.Errorf("base of %s: %w", url, err)
		}
	}
	b := &builder{ctx: ctx, defs: defs, visiting: visiting, elems: copyElements(snapshotElements(base))}
	b.orig = copyElements(b.elems)
	b.renamed = map[string]string{}
	if err := b.applyAll(elementList(sd, "differential")); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(sd)+1)
	for k, v := range sd {
		out[k] = v
	}
	list := make([]any, len(b.elems))
	for i, e := range b.elems {
		list[i] = e
	}
	out["snapshot"] = map[string]any{"element": list}
	return out, nil
}

// builder applies a differential to a copy of the base snapshot.
type builder struct {
	ctx      context.Context
	defs     Definitions
	visiting map[string]bool
	elems    []map[string]any
	orig     []map[string]any  // the base snapshot, which new slices copy
	renamed  map[string]string // valueQuantity's id → the element it names
}

// applyAll applies each differential element in turn.
func (b *builder) applyAll(diff []map[string]any) error {
	if len(b.elems) == 0 {
		return fmt.Errorf("the base has no snapshot elements")
	}
	last := map[string]string{} // path → id of the latest element at it
	for _, d := range diff {
		id := diffID(d, last)
		path, _ := d["path"].(string)
		if !idMatchesPath(id, path) {
			return &DifferentialError{id, fmt.Sprintf("its path %s names another element than its id", path)}
		}
		last[path] = id
		i, err := b.ensure(id, d)
		if err != nil {
			return err
		}
		if err := mergeElement(b.elems[i], d, id); err != nil {
			return err
		}
		if err := discriminatorsResolve(b.elems[i], id); err != nil {
			return err
		}
	}
	return nil
}

// diffID is a differential element's id, or one made from its path, its
// slice name and the slices of the elements before it.
func diffID(d map[string]any, last map[string]string) string {
	if id, _ := d["id"].(string); id != "" {
		return id
	}
	path, _ := d["path"].(string)
	id := path
	for p := parentPath(path); p != ""; p = parentPath(p) {
		if pid, ok := last[p]; ok {
			id = pid + path[len(p):]
			break
		}
	}
	if s, _ := d["sliceName"].(string); s != "" {
		id += ":" + s
	}
	return id
}

// idMatchesPath reports whether an element's id (without its slice
// names) and its path name the same element: the same segments, a choice
// named by its element (value[x]) on one side and by one of its types
// (valueQuantity) on the other allowed.
func idMatchesPath(id, path string) bool {
	segs := splitID(id)
	for i, seg := range segs {
		segs[i], _, _ = strings.Cut(seg, ":")
	}
	idPath := strings.Join(segs, ".")
	if path == "" || idPath == path {
		return true
	}
	a, b := strings.Split(idPath, "."), strings.Split(path, ".")
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !choiceOf(a[i], b[i]) && !choiceOf(b[i], a[i]) {
			return false
		}
	}
	return true
}

// choiceOf reports whether name is the choice element x (value[x]) named
// by one of its types (valueQuantity).
func choiceOf(x, name string) bool {
	base, ok := strings.CutSuffix(x, "[x]")
	return ok && strings.HasPrefix(name, base) && len(name) > len(base) && name[len(base)] >= 'A' && name[len(base)] <= 'Z'
}

func parentPath(p string) string {
	if i := strings.LastIndexByte(p, '.'); i > 0 {
		return p[:i]
	}
	return ""
}

// ensure returns the index of the element with id, expanding data types,
// making slices and resolving choices named by one of their types
// (valueQuantity for value[x]) on the way; d is the differential element
// that names it.
func (b *builder) ensure(id string, d map[string]any) (int, error) {
	segs := splitID(id)
	root := b.str(0, "id")
	if segs[0] != root {
		return 0, &DifferentialError{id, fmt.Sprintf("the base's root is %s", root)}
	}
	cur := 0
	for k, seg := range segs[1:] {
		name, slice, _ := strings.Cut(seg, ":")
		next, err := b.child(cur, name)
		if err != nil {
			next = b.typeChoice(cur, name, strings.Contains(b.str(cur, "id"), ":") || k == len(segs)-2 && restricts(d))
			if next < 0 {
				return 0, &DifferentialError{id, err.Error()}
			}
		}
		if slice != "" {
			next = b.slice(next, slice)
		}
		cur = next
	}
	return cur, nil
}

// splitID splits an element id at the dots outside slice names.
func splitID(id string) []string {
	return strings.Split(id, ".")
}

// str reads a string property of element i.
func (b *builder) str(i int, key string) string {
	s, _ := b.elems[i][key].(string)
	return s
}

// find returns the index of the element with id, -1 for none.
func (b *builder) find(id string) int {
	for i := range b.elems {
		if b.str(i, "id") == id {
			return i
		}
	}
	return -1
}

// child returns the index of the child name of element parent.
func (b *builder) child(parent int, name string) (int, error) {
	id := b.str(parent, "id") + "." + name
	if i := b.find(id); i >= 0 {
		return i, nil
	}
	if renamed, ok := b.renamed[id]; ok {
		return b.find(renamed), nil
	}
	if !b.hasChildren(parent) {
		if err := b.expand(parent); err != nil {
			return 0, err
		}
		if i := b.find(id); i >= 0 {
			return i, nil
		}
	}
	return 0, fmt.Errorf("the base has no element %s", b.str(parent, "path")+"."+name)
}

// typeChoice resolves valueQuantity, a choice named by one of its types,
// among parent's children. When the differential restricts the choice to
// that type (names the type, or requires it), or the choice is within a
// slice, it is value[x] restricted to it; otherwise it is the slice valueQuantity of value[x], sliced openly by
// type, which constrains Quantity values without excluding others. It
// returns -1 when name is no such choice.
func (b *builder) typeChoice(parent int, name string, restrict bool) int {
	key := b.str(parent, "id") + "." + name
	if id, ok := b.renamed[key]; ok {
		return b.find(id)
	}
	i, typ := b.choiceOf(parent, name)
	if i < 0 {
		return -1
	}
	if restrict {
		restrictTypes(b.elems[i], typ)
		b.renamed[key] = b.str(i, "id")
		return i
	}
	if _, ok := b.elems[i]["slicing"]; !ok {
		b.elems[i]["slicing"] = map[string]any{
			"discriminator": []any{map[string]any{"type": "type", "path": "$this"}},
			"ordered":       false, "rules": "open",
		}
	}
	s := b.slice(i, name)
	restrictTypes(b.elems[s], typ)
	b.renamed[key] = b.str(s, "id")
	return s
}

// restricts reports whether a differential element that names a choice by
// one of its types restricts the choice to it: it names types, or makes
// the element required.
func restricts(d map[string]any) bool {
	if _, ok := d["type"]; ok {
		return true
	}
	min, _ := intOf(d["min"], 0)
	return min > 0
}

// choiceOf finds, among parent's children, the choice value[x] that
// valueQuantity names, and the type (Quantity) it names; -1 for none.
func (b *builder) choiceOf(parent int, name string) (int, string) {
	prefix := b.str(parent, "id") + "."
	for i := parent + 1; i < len(b.elems) && strings.HasPrefix(b.str(i, "id"), prefix); i++ {
		rest := b.str(i, "id")[len(prefix):]
		base, ok := strings.CutSuffix(rest, "[x]")
		if !ok || strings.ContainsAny(rest, ".:") || !strings.HasPrefix(name, base) || len(name) == len(base) {
			continue
		}
		typ := choiceType(name[len(base):])
		for _, t := range objects(b.elems[i]["type"]) {
			if t["code"] == typ {
				return i, typ
			}
		}
	}
	return -1, ""
}

// restrictTypes keeps only type typ of element e.
func restrictTypes(e map[string]any, typ string) {
	var kept []any
	for _, t := range objects(e["type"]) {
		if t["code"] == typ {
			kept = append(kept, t)
		}
	}
	e["type"] = kept
}

// hasChildren reports whether the snapshot spells out element i's
// children.
func (b *builder) hasChildren(i int) bool {
	return i+1 < len(b.elems) && strings.HasPrefix(b.str(i+1, "id"), b.str(i, "id")+".")
}

// subtreeEnd is the index after element i's children (not its slices).
func (b *builder) subtreeEnd(i int) int {
	prefix := b.str(i, "id") + "."
	j := i + 1
	for j < len(b.elems) && strings.HasPrefix(b.str(j, "id"), prefix) {
		j++
	}
	return j
}

// insert puts elems at index at.
func (b *builder) insert(at int, elems []map[string]any) {
	out := make([]map[string]any, 0, len(b.elems)+len(elems))
	out = append(out, b.elems[:at]...)
	out = append(out, elems...)
	b.elems = append(out, b.elems[at:]...)
}

// discriminatorsResolve checks that each discriminator of e's slicing
// names an element of e's type (url or value[x] of an Extension, not
// type), when e has one data type the schema describes.
func discriminatorsResolve(e map[string]any, id string) error {
	sl, _ := e["slicing"].(map[string]any)
	types := objects(e["type"])
	if sl == nil || len(types) != 1 {
		return nil
	}
	typ, _ := types[0]["code"].(string)
	switch typ {
	case "", "BackboneElement", "Element", "Resource":
		return nil
	}
	for _, disc := range objects(sl["discriminator"]) {
		path, _ := disc["path"].(string)
		first, _, _ := strings.Cut(path, ".")
		if path == "" || first == "$this" || strings.ContainsAny(first, "()") {
			continue
		}
		if _, _, ok := fhirschema.Element(typ, strings.TrimSuffix(first, "[x]")); !ok {
			return &DifferentialError{id, fmt.Sprintf("the discriminator path %s names no element of %s, the type of the element sliced", path, typ)}
		}
	}
	return nil
}
