package profile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"fhirstore/fhirschema/profile"
)

// TestGeneratedSnapshotsMatchThePackages: every US Core profile whose base
// is at hand, generated from its differential, has the package's snapshot
// in everything validation reads: the elements in order, cardinality,
// types and their profiles, fixed and pattern values, bindings, slicing
// and the profile's own invariants.
func TestGeneratedSnapshotsMatchThePackages(t *testing.T) {
	for _, version := range []string{"3.1.1", "6.1.0"} {
		pkg := usCore(t, version)
		defs := profile.Merge(pkg.defs, profile.Core())
		generated := 0
		for _, sd := range structureDefinitions(pkg) {
			url, _ := sd["url"].(string)
			base, _ := sd["baseDefinition"].(string)
			if b, _ := defs.Resource(context.Background(), "StructureDefinition", base); b == nil {
				continue // vitalsigns, oxygensat, sdc: not at hand
			}
			diffOnly := map[string]any{}
			for k, v := range sd {
				if k != "snapshot" {
					diffOnly[k] = v
				}
			}
			got, err := profile.GenerateSnapshot(context.Background(), defs, diffOnly)
			if err != nil {
				t.Errorf("%s %s: %v", version, url, err)
				continue
			}
			generated++
			if why, ok := snapshotDifferences[version+" "+url]; ok {
				t.Logf("%s %s: not compared: %s", version, url, why)
				continue
			}
			compareSnapshots(t, version+" "+url, summary(sd), summary(got))
		}
		t.Logf("US Core %s: %d snapshots generated", version, generated)
	}
}

// snapshotDifferences are the profiles whose published snapshot reads a
// differential otherwise than the current IG publisher does, by version
// and URL.
var snapshotDifferences = map[string]string{
	// Goal.target.dueDate, neither typed nor required, restricts due[x] to
	// date in the 3.1.1 snapshot; since, a choice named by one of its types
	// is an open type slice unless the differential types or requires it.
	"3.1.1 " + uc + "us-core-goal": "dueDate is a restriction in the 3.1.1 snapshot, an open type slice since",
}

func structureDefinitions(pkg *igPackage) []map[string]any {
	var out []map[string]any
	for _, url := range pkg.urls("StructureDefinition") {
		r, _ := pkg.defs.Resource(context.Background(), "StructureDefinition", url)
		out = append(out, r)
	}
	return out
}

// summary renders, per element id, what validation reads of it.
func summary(sd map[string]any) []string {
	snap, _ := sd["snapshot"].(map[string]any)
	var out []string
	prohibited := ""
	for _, e := range foldTypeSlices(asList(snap["element"])) {
		id := fmt.Sprint(e["id"])
		if prohibited != "" && strings.HasPrefix(id, prohibited) {
			continue // under an element that may not appear
		}
		if strings.Contains(id, ".extension.") {
			continue // an unsliced extension's own elements, which some publishers spell out
		}
		if e["max"] == "0" {
			prohibited = id + "."
		}
		var parts []string
		parts = append(parts, fmt.Sprint(e["id"]), fmt.Sprintf("%v..%v", e["min"], e["max"]))
		for _, t := range asList(e["type"]) {
			tm := t.(map[string]any)
			parts = append(parts, fmt.Sprintf("type=%v%v%v", tm["code"], tm["profile"], tm["targetProfile"]))
		}
		keys := make([]string, 0, len(e))
		for k := range e {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "contentReference" {
				ref := fmt.Sprint(e[k])
				ref = ref[strings.IndexByte(ref, '#')+1:]
				ref, _, _ = strings.Cut(ref, ":")
				parts = append(parts, "contentReference="+ref)
			}
			if strings.HasPrefix(k, "fixed") || strings.HasPrefix(k, "pattern") || strings.HasPrefix(k, "minValue") || strings.HasPrefix(k, "maxValue") || k == "maxLength" {
				b, _ := json.Marshal(e[k])
				parts = append(parts, k+"="+string(b))
			}
		}
		if b, ok := e["binding"].(map[string]any); ok && b["valueSet"] != nil {
			parts = append(parts, fmt.Sprintf("binding=%v %v", b["strength"], b["valueSet"]))
		}
		if s, ok := e["slicing"].(map[string]any); ok {
			d, _ := json.Marshal(s["discriminator"])
			parts = append(parts, fmt.Sprintf("slicing=%s %v %v", d, s["rules"], s["ordered"]))
		}
		var keysC []string
		for _, c := range asList(e["constraint"]) {
			k := fmt.Sprint(c.(map[string]any)["key"])
			if !coreInvariant(k) {
				keysC = append(keysC, k)
			}
		}
		sort.Strings(keysC)
		if len(keysC) > 0 {
			parts = append(parts, "constraints="+strings.Join(keysC, ","))
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

// coreInvariant tells the keys of the core definitions, which the built-in
// core does not carry.
func coreInvariant(k string) bool {
	return strings.HasPrefix(k, "ele-") || strings.HasPrefix(k, "ext-") || profile.CoreInvariant(k)
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func compareSnapshots(t *testing.T, name string, want, got []string) {
	t.Helper()
	w, g := map[string]bool{}, map[string]bool{}
	for _, s := range want {
		w[s] = true
	}
	for _, s := range got {
		g[s] = true
	}
	n := 0
	for _, s := range want {
		if !g[s] && n < 6 {
			t.Errorf("%s: missing  %s", name, s)
			n++
		}
	}
	for _, s := range got {
		if !w[s] && n < 12 {
			t.Errorf("%s: unwanted %s", name, s)
			n++
		}
	}
	if n == 0 && strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Errorf("%s: the elements are out of order", name)
	}
}

// foldTypeSlices writes a choice restricted to one type by a closed type
// slicing with a single slice (value[x] with slice valueQuantity, as some
// versions of the IG publisher write it) as the choice restricted to that
// type, its other way of saying the same.
func foldTypeSlices(list []any) []map[string]any {
	var out []map[string]any
	for i := 0; i < len(list); i++ {
		e := list[i].(map[string]any)
		sl, _ := e["slicing"].(map[string]any)
		if sl == nil || sl["rules"] != "closed" || !strings.Contains(fmt.Sprint(sl["discriminator"]), "$this") || i+1 >= len(list) {
			out = append(out, e)
			continue
		}
		id := fmt.Sprint(e["id"])
		s := list[i+1].(map[string]any)
		sid := fmt.Sprint(s["id"])
		if !strings.HasPrefix(sid, id+":") || (i+2 < len(list) && strings.HasPrefix(fmt.Sprint(list[i+2].(map[string]any)["id"]), id+":") && !strings.HasPrefix(fmt.Sprint(list[i+2].(map[string]any)["id"]), sid+".")) {
			out = append(out, e)
			continue
		}
		folded := map[string]any{}
		for k, v := range s {
			folded[k] = v
		}
		folded["id"] = id
		delete(folded, "sliceName")
		out = append(out, folded)
		for i+2 < len(list) && strings.HasPrefix(fmt.Sprint(list[i+2].(map[string]any)["id"]), sid+".") {
			c := map[string]any{}
			for k, v := range list[i+2].(map[string]any) {
				c[k] = v
			}
			c["id"] = id + strings.TrimPrefix(fmt.Sprint(c["id"]), sid)
			out = append(out, c)
			i++
		}
		i++
	}
	return out
}

// TestPackageSnapshotsAgreeWithTheirBases: no US Core snapshot widens its
// base; one that does is refused at the element.
func TestPackageSnapshotsAgreeWithTheirBases(t *testing.T) {
	for _, version := range []string{"3.1.1", "6.1.0"} {
		pkg := usCore(t, version)
		defs := profile.Merge(pkg.defs, profile.Core())
		for _, sd := range structureDefinitions(pkg) {
			if !hasBase(defs, sd) {
				continue
			}
			if err := profile.CheckSnapshot(context.Background(), defs, sd); err != nil {
				t.Errorf("%s %s: %v", version, sd["url"], err)
			}
		}
	}
	pkg := usCore(t, "6.1.0")
	defs := profile.Merge(pkg.defs, profile.Core())
	sd, _ := pkg.defs.Resource(context.Background(), "StructureDefinition", uc+"us-core-patient")
	widened := clone(t, sd)
	for _, e := range asList(widened["snapshot"].(map[string]any)["element"]) {
		if m := e.(map[string]any); m["id"] == "Patient.gender" {
			m["max"] = "*"
		}
	}
	var de *profile.DifferentialError
	if err := profile.CheckSnapshot(context.Background(), defs, widened); !errors.As(err, &de) || de.Path != "Patient.gender" {
		t.Errorf("a widened gender: got %v", err)
	}
}
