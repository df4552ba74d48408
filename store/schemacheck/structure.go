package schemacheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
	"fhirstore/store"
)

// maxSnapshotDepth bounds the data types a snapshot path is followed
// through (Patient.contact.name.period.start is four).
const maxSnapshotDepth = 16

// CheckSnapshot compares the snapshot of a constraining
// StructureDefinition with its base definition, as defs know it: every
// element must be one the base has (or one of its data types has), with a
// cardinality inside the base's and types among the base's. A profile
// that contradicts its base would refuse what its base allows, or accept
// what it refuses. An unknown base is a warning: nothing can be compared.
func CheckSnapshot(ctx context.Context, defs profile.Definitions, sd map[string]any) ([]fhirschema.Issue, error) {
	if sd["derivation"] != "constraint" {
		return nil, nil
	}
	elements := snapshotElements(sd)
	baseURL, _ := sd["baseDefinition"].(string)
	if len(elements) == 0 || baseURL == "" {
		return nil, nil
	}
	base, err := defs.Resource(ctx, "StructureDefinition", baseURL)
	if err != nil {
		return nil, fmt.Errorf("look up the base definition %s: %w", baseURL, err)
	}
	if base == nil {
		return []fhirschema.Issue{{Severity: "warning", Code: "not-found", Expression: "StructureDefinition.baseDefinition",
			Diagnostics: fmt.Sprintf("the base definition %s is unknown: the snapshot is not checked against it", baseURL)}}, nil
	}
	r := &baseResolver{ctx: ctx, defs: defs, types: map[string]map[string]map[string]any{}}
	r.root = r.index(base)
	var issues []fhirschema.Issue
	for i, e := range elements {
		path, _ := e["path"].(string)
		b, found, err := r.resolve(path, 0)
		if err != nil {
			return nil, err
		}
		at := "StructureDefinition.snapshot.element[" + strconv.Itoa(i) + "]"
		switch {
		case found && b == nil:
			issues = append(issues, snapshotIssue(at, "%s is not an element of the base definition %s", path, baseURL))
		case b != nil:
			issues = append(issues, compareElement(at, path, e, b.e)...)
		}
	}
	return issues, nil
}

func snapshotIssue(at, format string, args ...any) fhirschema.Issue {
	return fhirschema.Issue{Severity: "error", Code: "invalid", Expression: at, Diagnostics: "the snapshot contradicts its base: " + fmt.Sprintf(format, args...)}
}

// snapshotElements lists snapshot.element.
func snapshotElements(sd map[string]any) []map[string]any {
	snap, _ := sd["snapshot"].(map[string]any)
	list, _ := snap["element"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// compareElement checks one element against the base's: cardinality
// within, types among.
func compareElement(at, path string, e, b map[string]any) []fhirschema.Issue {
	var issues []fhirschema.Issue
	// A slice need not have the minimum of the element it slices.
	if min, ok := cardinality(e["min"]); ok && e["sliceName"] == nil {
		if bmin, ok := cardinality(b["min"]); ok && min < bmin {
			issues = append(issues, snapshotIssue(at, "%s has min %d, the base %d", path, min, bmin))
		}
	}
	if max, ok := cardinality(e["max"]); ok {
		if bmax, ok := cardinality(b["max"]); ok && max > bmax {
			issues = append(issues, snapshotIssue(at, "%s has max %v, the base %v", path, e["max"], b["max"]))
		}
	}
	baseTypes := typeCodes(b)
	if len(baseTypes) == 0 {
		return issues
	}
	for t := range typeCodes(e) {
		if !typeAllowed(t, baseTypes) {
			issues = append(issues, snapshotIssue(at, "%s has type %s, which the base does not allow", path, t))
		}
	}
	return issues
}

// systemTypes starts the FHIRPath system types core snapshots give the
// primitive values of id, url and value elements.
const systemTypes = "http://hl7.org/fhirpath/System."

// typeAllowed reports whether type code t is among the base's types: the
// same code, any resource for Resource, and any primitive (or system type)
// for a system type.
func typeAllowed(t string, base map[string]bool) bool {
	if base[t] || base["Resource"] && fhirschema.IsResourceType(t) {
		return true
	}
	primitive := strings.HasPrefix(t, systemTypes) || t != "" && unicode.IsLower(rune(t[0]))
	for b := range base {
		if primitive && strings.HasPrefix(b, systemTypes) || strings.HasPrefix(t, systemTypes) && b != "" && unicode.IsLower(rune(b[0])) {
			return true
		}
	}
	return false
}

// cardinality reads a min (a number) or max ("n" or "*", as a large number).
func cardinality(v any) (int, bool) {
	switch x := v.(type) {
	case string:
		if x == "*" {
			return 1 << 30, true
		}
		n, err := strconv.Atoi(x)
		return n, err == nil
	case fmt.Stringer: // json.Number
		n, err := strconv.Atoi(x.String())
		return n, err == nil
	case float64:
		return int(x), true
	}
	return 0, false
}

// typeCodes lists an element's type codes.
func typeCodes(e map[string]any) map[string]bool {
	list, _ := e["type"].([]any)
	out := map[string]bool{}
	for _, t := range list {
		if code, _ := t.(map[string]any)["code"].(string); code != "" {
			out[code] = true
		}
	}
	return out
}

// baseResolver finds the base element of a snapshot path: in the base
// definition's snapshot, or in the definition of a data type an element
// of it has.
type baseResolver struct {
	ctx   context.Context
	defs  profile.Definitions
	root  map[string]map[string]any
	types map[string]map[string]map[string]any // data type → its elements by path
}

// index maps a definition's snapshot elements by path, the first of each
// (the element itself rather than its slices).
func (r *baseResolver) index(sd map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, e := range snapshotElements(sd) {
		if p, _ := e["path"].(string); p != "" && out[p] == nil {
			out[p] = e
		}
	}
	return out
}

// located is a base element and where it was found: the elements of the
// definition holding it (the base's, or a data type's) and its path there.
type located struct {
	e     map[string]any
	frame map[string]map[string]any
	path  string
}

// resolve returns the base element of path. found reports whether the
// answer is sure: found with nil means the base has no such element; not
// found means it could not be told (an unknown data type).
func (r *baseResolver) resolve(path string, depth int) (*located, bool, error) {
	if e := lookupElement(r.root, path); e != nil {
		p, _ := e["path"].(string)
		return &located{e: e, frame: r.root, path: p}, true, nil
	}
	dot := strings.LastIndexByte(path, '.')
	if dot < 0 || depth > maxSnapshotDepth {
		return nil, false, nil
	}
	parent, _, err := r.resolve(path[:dot], depth+1)
	if err != nil || parent == nil {
		return nil, false, err // an absent parent is reported for itself
	}
	return r.child(parent, path[dot+1:], depth)
}

// child finds the element name under the base element parent: beside it
// for a backbone element, through its content reference, or in the
// definition of its one data type.
func (r *baseResolver) child(parent *located, name string, depth int) (*located, bool, error) {
	if ref, _ := parent.e["contentReference"].(string); strings.HasPrefix(ref, "#") {
		target := lookupElement(parent.frame, ref[1:])
		if target == nil || depth > maxSnapshotDepth {
			return nil, false, nil
		}
		return r.child(&located{e: target, frame: parent.frame, path: ref[1:]}, name, depth+1)
	}
	types := typeCodes(parent.e)
	if len(types) != 1 {
		return nil, false, nil
	}
	var typ string
	for t := range types {
		typ = t
	}
	if typ == "BackboneElement" || typ == "Element" && parent.path != "Element" {
		return r.in(parent.frame, parent.path+"."+name), true, nil
	}
	if !unicode.IsUpper(rune(typ[0])) {
		typ = "Element" // a primitive's children are its id and extensions
	}
	elems, err := r.typeElements(typ)
	if err != nil || elems == nil {
		return nil, false, err
	}
	found := r.in(elems, typ+"."+name)
	if found == nil && typ == "Resource" {
		// An element typed Resource holds any resource: a profile may
		// constrain the elements of the type it narrows it to, which the
		// base's path does not tell.
		return nil, false, nil
	}
	return found, true, nil
}

// in looks path up among elems.
func (r *baseResolver) in(elems map[string]map[string]any, path string) *located {
	e := lookupElement(elems, path)
	if e == nil {
		return nil
	}
	p, _ := e["path"].(string)
	return &located{e: e, frame: elems, path: p}
}

// typeElements indexes the core definition of a data type.
func (r *baseResolver) typeElements(typ string) (map[string]map[string]any, error) {
	if elems, ok := r.types[typ]; ok {
		return elems, nil
	}
	sd, err := r.defs.Resource(r.ctx, "StructureDefinition", "http://hl7.org/fhir/StructureDefinition/"+typ)
	if err != nil {
		return nil, fmt.Errorf("look up the data type %s: %w", typ, err)
	}
	var elems map[string]map[string]any
	if sd != nil {
		elems = r.index(sd)
	}
	r.types[typ] = elems
	return elems, nil
}

// lookupElement finds path, or the choice element it names a type of
// (valueQuantity → value[x]).
func lookupElement(elems map[string]map[string]any, path string) map[string]any {
	if e := elems[path]; e != nil {
		return e
	}
	dot := strings.LastIndexByte(path, '.')
	name := path[dot+1:]
	for i := len(name) - 1; i > 0; i-- {
		if unicode.IsUpper(rune(name[i])) {
			if e := elems[path[:dot+1]+name[:i]+"[x]"]; e != nil {
				return e
			}
		}
	}
	return nil
}

// checkStructure checks the snapshot of a StructureDefinition written
// against its base (CheckSnapshot).
func checkStructure(ctx context.Context, in store.Validation, defs profile.Definitions) ([]fhirschema.Issue, error) {
	if in.Type != "StructureDefinition" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(in.Body))
	dec.UseNumber()
	var sd map[string]any
	if err := dec.Decode(&sd); err != nil {
		return nil, nil // the base validation has said what is wrong
	}
	if len(snapshotElements(sd)) == 0 {
		return checkDifferential(ctx, defs, sd)
	}
	return CheckSnapshot(ctx, defs, sd)
}

// checkDifferential generates the snapshot of a profile that has only a
// differential: one whose differential cannot be applied to its base is
// refused at the element; one whose base is unknown is a warning, to be
// checked when the base is there.
func checkDifferential(ctx context.Context, defs profile.Definitions, sd map[string]any) ([]fhirschema.Issue, error) {
	baseURL, _ := sd["baseDefinition"].(string)
	if sd["derivation"] != "constraint" || baseURL == "" {
		return nil, nil
	}
	if u, _, _ := strings.Cut(baseURL, "|"); u == sd["url"] {
		return []fhirschema.Issue{{Severity: "error", Code: "invalid", Expression: "StructureDefinition.baseDefinition",
			Diagnostics: fmt.Sprintf("the profile %s derives from itself", u)}}, nil
	}
	base, err := defs.Resource(ctx, "StructureDefinition", baseURL)
	if err != nil {
		return nil, fmt.Errorf("look up the base definition %s: %w", baseURL, err)
	}
	if base == nil {
		return []fhirschema.Issue{{Severity: "warning", Code: "not-found", Expression: "StructureDefinition.baseDefinition",
			Diagnostics: fmt.Sprintf("the base definition %s is unknown: the differential cannot be applied yet", baseURL)}}, nil
	}
	_, err = profile.GenerateSnapshot(ctx, defs, sd)
	var de *profile.DifferentialError
	switch {
	case errors.As(err, &de):
		return []fhirschema.Issue{{Severity: "error", Code: "invalid", Expression: differentialAt(sd, de.Path),
			Diagnostics: fmt.Sprintf("the differential cannot be applied to %s: %s: %s", baseURL, de.Path, de.Reason)}}, nil
	case err != nil && ctx.Err() == nil:
		return []fhirschema.Issue{{Severity: "error", Code: "invalid", Expression: "StructureDefinition.differential",
			Diagnostics: fmt.Sprintf("no snapshot can be generated from the differential: %v", err)}}, nil
	}
	return nil, ctx.Err()
}

// differentialAt is the FHIRPath of the differential element whose id (or
// path) is id.
func differentialAt(sd map[string]any, id string) string {
	diff, _ := sd["differential"].(map[string]any)
	list, _ := diff["element"].([]any)
	for i, e := range list {
		m, _ := e.(map[string]any)
		if m["id"] == id || m["path"] == id {
			return "StructureDefinition.differential.element[" + strconv.Itoa(i) + "]"
		}
	}
	return "StructureDefinition.differential"
}

// valid reports whether no issue is an error.
func valid(issues []fhirschema.Issue) bool {
	for _, is := range issues {
		if is.Severity == "error" || is.Severity == "fatal" {
			return false
		}
	}
	return true
}
