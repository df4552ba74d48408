package sdc

import (
	"context"
	"slices"

	"fhirstore/fhirschema"
)

// DefaultMaxAssembleDepth bounds how deeply sub-questionnaires nest.
const DefaultMaxAssembleDepth = 10

// DefaultMaxModules bounds how many sub-questionnaires one assembly
// inlines: modules used more than once are inlined each time, so nesting
// alone does not bound the work.
const DefaultMaxModules = 500

// AssembleRequest is the input of Assemble.
type AssembleRequest struct {
	// Questionnaire is the root form.
	Questionnaire map[string]any
	// MaxDepth bounds the nesting of sub-questionnaires (default
	// DefaultMaxAssembleDepth).
	MaxDepth int
	// MaxModules bounds the sub-questionnaires inlined (default
	// DefaultMaxModules).
	MaxModules int
}

// Assemble inlines a modular form: each display item carrying
// sdc-questionnaire-subQuestionnaire is replaced by the items of the
// Questionnaire it names (found through d, assembled in turn), their
// linkIds prefixed by the item's sdc-questionnaire-linkIdPrefix; the
// modules' variables and launch contexts move to the root, one per name.
// The result carries no subQuestionnaire and no assemble-expectation, and
// names the root it came from with sdc-questionnaire-assembledFrom. Issues
// say what could not be assembled; when one is an error the result is nil.
// An error is a failure of d or ctx.
func Assemble(ctx context.Context, d Data, req AssembleRequest) (map[string]any, []fhirschema.Issue, error) {
	root := req.Questionnaire
	if root == nil || root["resourceType"] != "Questionnaire" {
		return nil, []fhirschema.Issue{issue("error", "required", "Questionnaire", "no Questionnaire to assemble")}, nil
	}
	a := &assembler{data: d, maxDepth: req.MaxDepth, maxModules: req.MaxModules, modules: map[string]map[string]any{}}
	if a.maxDepth <= 0 {
		a.maxDepth = DefaultMaxAssembleDepth
	}
	if a.maxModules <= 0 {
		a.maxModules = DefaultMaxModules
	}
	out := fhirschema.CopyJSON(root).(map[string]any)
	for k, ext := range objects(out["extension"]) {
		if ext["url"] == ExtAssembleExpectation && ext["valueCode"] == "assemble-child" && len(extensions(out, ExtAssembleExpectation)) == 1 {
			a.add(issue("error", "business-rule", index("Questionnaire.extension", k), "the Questionnaire is a module (assemble-child): it is assembled into other forms, not on its own"))
		}
	}
	a.out = out
	items, err := a.items(ctx, objects(out["item"]), "Questionnaire", []string{canonicalOf(root)}, 0)
	if err != nil {
		return nil, a.issues, err
	}
	if items != nil {
		out["item"] = items
	}
	exts := slices.DeleteFunc(anyList(out["extension"]), func(e any) bool {
		m, _ := e.(map[string]any)
		return m["url"] == ExtAssembleExpectation
	})
	if a.assembled {
		if c := canonicalOf(root); c != "" {
			exts = append(exts, map[string]any{"url": ExtAssembledFrom, "valueCanonical": c})
		}
	}
	if len(exts) > 0 {
		out["extension"] = exts
	} else {
		delete(out, "extension")
	}
	a.checkLinkIDs(objects(out["item"]), "Questionnaire", map[string]bool{})
	if Failed(a.issues) {
		return nil, a.issues, nil
	}
	return out, a.issues, nil
}

// assembler assembles one form.
type assembler struct {
	data       Data
	maxDepth   int
	maxModules int
	inlined    int
	modules    map[string]map[string]any // by canonical, each found once
	out        map[string]any
	issues     []fhirschema.Issue
	assembled  bool
}

func (a *assembler) add(is fhirschema.Issue) { a.issues = append(a.issues, is) }

// items returns items (at at) with their sub-questionnaires inlined;
// chain are the canonicals of the forms being assembled, outermost first.
func (a *assembler) items(ctx context.Context, items []map[string]any, at string, chain []string, depth int) ([]any, error) {
	var out []any
	for i, it := range items {
		iat := index(at+".item", i)
		ext := extension(it, ExtSubQuestionnaire)
		if ext == nil {
			if children := objects(it["item"]); len(children) > 0 {
				list, err := a.items(ctx, children, iat, chain, depth)
				if err != nil {
					return nil, err
				}
				it["item"] = list
			}
			out = append(out, it)
			continue
		}
		list, err := a.module(ctx, it, ext, iat, chain, depth)
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

// module returns the items that replace the display item it of
// sub-questionnaire ext; the item itself, without the extension, when the
// module cannot be had (an error issue says why).
func (a *assembler) module(ctx context.Context, it, ext map[string]any, at string, chain []string, depth int) ([]any, error) {
	linkID := str(it["linkId"])
	canonical := str(ext["valueCanonical"])
	keep := func() []any {
		it["extension"] = slices.DeleteFunc(anyList(it["extension"]), func(e any) bool {
			m, _ := e.(map[string]any)
			return m["url"] == ExtSubQuestionnaire
		})
		if len(anyList(it["extension"])) == 0 {
			delete(it, "extension")
		}
		return []any{it}
	}
	switch {
	case canonical == "":
		a.add(issue("error", "invalid", at, "item %s: subQuestionnaire needs a valueCanonical", linkID))
		return keep(), nil
	case it["type"] != "display":
		a.add(issue("error", "invalid", at, "item %s: only display items are replaced by a sub-questionnaire", linkID))
		return keep(), nil
	case slices.Contains(chain, canonical):
		a.add(issue("error", "business-rule", at, "item %s: sub-questionnaire %s includes itself", linkID, canonical))
		return keep(), nil
	case depth >= a.maxDepth:
		a.add(issue("error", "too-costly", at, "item %s: sub-questionnaires nest more than %d deep", linkID, a.maxDepth))
		return keep(), nil
	case a.inlined >= a.maxModules:
		a.add(issue("error", "too-costly", at, "item %s: the form inlines more than %d sub-questionnaires", linkID, a.maxModules))
		return keep(), nil
	}
	a.inlined++
	sub, found := a.modules[canonical]
	if !found && a.data != nil {
		q, err := a.data.Questionnaire(ctx, canonical)
		if err != nil {
			return nil, &DataError{Op: "find Questionnaire " + canonical, Err: err}
		}
		sub, a.modules[canonical] = q, q
	}
	if sub == nil {
		a.add(issue("error", "not-found", at, "item %s: the sub-questionnaire %s is not known", linkID, canonical))
		return keep(), nil
	}
	if expect := extensions(sub, ExtAssembleExpectation); len(expect) == 1 && expect[0]["valueCode"] == "assemble-root" {
		a.add(issue("error", "business-rule", at, "item %s: %s is a root form (assemble-root), not a module", linkID, canonical))
		return keep(), nil
	}
	sub = fhirschema.CopyJSON(sub).(map[string]any)
	list, err := a.items(ctx, objects(sub["item"]), at, append(slices.Clip(chain), canonical), depth+1)
	if err != nil {
		return nil, err
	}
	if prefix := str(extension(it, ExtLinkIDPrefix)["valueString"]); prefix != "" {
		ids := map[string]bool{}
		collectLinkIDs(list, ids)
		prefixLinkIDs(list, prefix, ids)
	}
	a.carry(sub, at, linkID)
	a.assembled = true
	return list, nil
}

// carry moves a module's variables and launch contexts to the root, one
// per name; a name the root already defines otherwise is an error.
func (a *assembler) carry(sub map[string]any, at, linkID string) {
	for _, ext := range objects(sub["extension"]) {
		var name string
		switch ext["url"] {
		case ExtVariable:
			x, _ := expressionOf(ext)
			name = x.name
		case ExtLaunchContext:
			name = launchContextName(ext)
		default:
			continue
		}
		dup := false
		for _, have := range extensions(a.out, str(ext["url"])) {
			other := launchContextName(have)
			if ext["url"] == ExtVariable {
				x, _ := expressionOf(have)
				other = x.name
			}
			if other != name {
				continue
			}
			dup = true
			if !sameJSON([]any{have}, []any{ext}) {
				a.add(issue("error", "business-rule", at, "item %s: the sub-questionnaire's %s %q differs from the one already defined", linkID, kindOf(ext), name))
			}
		}
		if !dup {
			a.out["extension"] = append(anyList(a.out["extension"]), ext)
		}
	}
}

// kindOf names a carried extension in an issue.
func kindOf(ext map[string]any) string {
	if ext["url"] == ExtVariable {
		return "variable"
	}
	return "launch context"
}

// collectLinkIDs records the linkIds of items and their descendants.
func collectLinkIDs(items []any, ids map[string]bool) {
	for _, x := range items {
		it, _ := x.(map[string]any)
		ids[str(it["linkId"])] = true
		collectLinkIDs(anyList(it["item"]), ids)
	}
}

// prefixLinkIDs prefixes the linkIds of items and the enableWhen
// questions that name them.
func prefixLinkIDs(items []any, prefix string, ids map[string]bool) {
	for _, x := range items {
		it, _ := x.(map[string]any)
		it["linkId"] = prefix + str(it["linkId"])
		for _, ew := range objects(it["enableWhen"]) {
			if q := str(ew["question"]); ids[q] {
				ew["question"] = prefix + q
			}
		}
		prefixLinkIDs(anyList(it["item"]), prefix, ids)
	}
}

// checkLinkIDs reports linkIds the assembled form (items at at) has more than once.
func (a *assembler) checkLinkIDs(items []map[string]any, at string, seen map[string]bool) {
	for i, it := range items {
		iat := index(at+".item", i)
		id := str(it["linkId"])
		if seen[id] {
			a.add(issue("error", "duplicate", iat, "linkId %s appears more than once in the assembled form: give the modules a linkIdPrefix", id))
		}
		seen[id] = true
		a.checkLinkIDs(objects(it["item"]), iat, seen)
	}
}
