//go:build ignore

// Gencore writes core.bin: the R4 core conformance resources profile
// validation reads (the StructureDefinitions of resources, data types and
// extensions, the ValueSets and CodeSystems of valuesets.json,
// v3-codesystems.json and v2-tables.json), stripped of what validation never
// reads (narratives, mappings, prose, examples; a concept keeps its display,
// which coded answers are checked against) and compressed one by one so
// that a lookup inflates only the resource it needs.
//
// Usage: go run gencore.go DIR > core.bin
// where DIR holds the official R4 definitions (profiles-resources.json,
// profiles-types.json, extension-definitions.json, valuesets.json,
// v3-codesystems.json, v2-tables.json).
package main

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

var bundles = []string{
	"profiles-types.json", "profiles-resources.json", "extension-definitions.json",
	"valuesets.json", "v3-codesystems.json", "v2-tables.json",
}

// entry is one resource of the index: type, url, version, offset, length.
type entry struct {
	typ, url, version string
	body              []byte
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run gencore.go DIR > core.bin")
		os.Exit(2)
	}
	resources, err := readAll(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	keys := coreKeys(resources)
	var kept []map[string]any
	seen := map[string]map[string]any{}
	for _, r := range resources {
		strip(r, keys)
		typ, _ := r["resourceType"].(string)
		url, _ := r["url"].(string)
		if url == "" {
			continue
		}
		if first := seen[typ+" "+url]; first != nil {
			if typ == "CodeSystem" {
				mergeConcepts(first, r)
			}
			continue
		}
		seen[typ+" "+url] = r
		kept = append(kept, r)
	}
	var entries []entry
	for _, r := range kept {
		typ, _ := r["resourceType"].(string)
		url, _ := r["url"].(string)
		version, _ := r["version"].(string)
		body, err := json.Marshal(r)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		entries = append(entries, entry{typ, url, version, body})
	}
	if err := write(os.Stdout, entries, keys); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// mergeConcepts adds to a CodeSystem the top-level concepts of another
// version of it that it lacks: the v2 tables come in two versions
// (v2-0360 2.3.1 and 2.7), and a code of either is a code of the system
// when a Coding names no version.
func mergeConcepts(into, other map[string]any) {
	list, _ := into["concept"].([]any)
	have := map[any]bool{}
	for _, c := range list {
		have[c.(map[string]any)["code"]] = true
	}
	more, _ := other["concept"].([]any)
	for _, c := range more {
		if m, ok := c.(map[string]any); ok && !have[m["code"]] {
			list = append(list, m)
			have[m["code"]] = true
		}
	}
	into["concept"] = list
}

// readAll reads the conformance resources of every bundle.
func readAll(dir string) ([]map[string]any, error) {
	var out []map[string]any
	for _, name := range bundles {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		var b struct {
			Entry []struct {
				Resource map[string]any `json:"resource"`
			} `json:"entry"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&b); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, e := range b.Entry {
			switch e.Resource["resourceType"] {
			case "StructureDefinition", "ValueSet", "CodeSystem":
				out = append(out, e.Resource)
			}
		}
	}
	return out, nil
}

// coreKeys lists the constraint keys of the core resource and data type
// definitions: the invariants the base validator checks.
func coreKeys(resources []map[string]any) map[string]bool {
	keys := map[string]bool{"ele-1": true, "ext-1": true}
	for _, r := range resources {
		if r["resourceType"] != "StructureDefinition" || r["type"] == "Extension" {
			continue
		}
		for _, e := range elements(r, "snapshot") {
			cs, _ := e["constraint"].([]any)
			for _, c := range cs {
				if k, _ := c.(map[string]any)["key"].(string); k != "" {
					keys[k] = true
				}
			}
		}
	}
	return keys
}

func elements(sd map[string]any, part string) []map[string]any {
	p, _ := sd[part].(map[string]any)
	list, _ := p["element"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// keep lists, per resource type, the top-level properties validation reads.
var keep = map[string][]string{
	"StructureDefinition": {"resourceType", "id", "url", "version", "name", "kind", "abstract", "type", "baseDefinition", "derivation", "context", "contextInvariant", "snapshot"},
	"ValueSet":            {"resourceType", "id", "url", "version", "name", "compose", "expansion"},
	"CodeSystem":          {"resourceType", "id", "url", "version", "name", "content", "caseSensitive", "hierarchyMeaning", "valueSet", "concept", "property"},
}

// elementKeep lists the ElementDefinition properties validation and
// snapshot generation read, beyond fixed[x], pattern[x], minValue[x] and
// maxValue[x].
var elementKeep = map[string]bool{
	"id": true, "path": true, "sliceName": true, "sliceIsConstraining": true, "min": true, "max": true,
	"base": true, "contentReference": true, "type": true, "maxLength": true, "constraint": true,
	"isModifier": true, "binding": true, "slicing": true,
}

// typeCorrections are the types R4's text gives elements that 4.0.1's
// published definitions narrow: Bundle.entry.response.outcome is a
// Resource on R4's Bundle page (and in R4B's definitions), an
// OperationOutcome in profiles-resources.json; profiles built from the
// text say Resource.
var typeCorrections = map[string]string{"Bundle.entry.response.outcome": "Resource"}

func strip(r map[string]any, keys map[string]bool) {
	typ, _ := r["resourceType"].(string)
	keepOnly(r, keep[typ])
	switch typ {
	case "StructureDefinition":
		for _, e := range elements(r, "snapshot") {
			stripElement(e, keys)
			if t, ok := typeCorrections[e["path"].(string)]; ok {
				e["type"] = []any{map[string]any{"code": t}}
			}
		}
	case "ValueSet":
		stripCompose(r)
	case "CodeSystem":
		stripConcepts(r)
	}
}

func keepOnly(m map[string]any, names []string) {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	for k := range m {
		if !set[k] {
			delete(m, k)
		}
	}
}

func stripElement(e map[string]any, keys map[string]bool) {
	for k := range e {
		if elementKeep[k] || strings.HasPrefix(k, "fixed") || strings.HasPrefix(k, "pattern") ||
			strings.HasPrefix(k, "minValue") || strings.HasPrefix(k, "maxValue") {
			continue
		}
		delete(e, k)
	}
	if b, ok := e["binding"].(map[string]any); ok {
		keepOnly(b, []string{"strength", "valueSet"})
	}
	if types, ok := e["type"].([]any); ok {
		for _, t := range types {
			if m, ok := t.(map[string]any); ok {
				keepOnly(m, []string{"code", "profile", "targetProfile"})
			}
		}
	}
	var cs []any
	list, _ := e["constraint"].([]any)
	for _, c := range list {
		m, _ := c.(map[string]any)
		if k, _ := m["key"].(string); keys[k] {
			continue
		}
		keepOnly(m, []string{"key", "severity", "human", "expression", "source"})
		cs = append(cs, m)
	}
	if len(cs) == 0 {
		delete(e, "constraint")
	} else {
		e["constraint"] = cs
	}
}

func stripCompose(vs map[string]any) {
	c, _ := vs["compose"].(map[string]any)
	if c == nil {
		return
	}
	keepOnly(c, []string{"include", "exclude", "inactive"})
	for _, part := range []string{"include", "exclude"} {
		list, _ := c[part].([]any)
		for _, inc := range list {
			m, _ := inc.(map[string]any)
			keepOnly(m, []string{"system", "version", "concept", "filter", "valueSet"})
			concepts, _ := m["concept"].([]any)
			for _, x := range concepts {
				keepOnly(x.(map[string]any), []string{"code"})
			}
		}
	}
}

func stripConcepts(cs map[string]any) {
	var walk func(list []any)
	walk = func(list []any) {
		for _, x := range list {
			m, _ := x.(map[string]any)
			keepOnly(m, []string{"code", "display", "concept", "property"})
			if props, ok := m["property"].([]any); ok {
				for _, p := range props {
					pm, _ := p.(map[string]any)
					keepOnly(pm, []string{"code", "valueCode", "valueString", "valueBoolean", "valueInteger", "valueCoding"})
				}
			}
			sub, _ := m["concept"].([]any)
			walk(sub)
		}
	}
	list, _ := cs["concept"].([]any)
	walk(list)
	if props, ok := cs["property"].([]any); ok {
		for _, p := range props {
			keepOnly(p.(map[string]any), []string{"code", "uri", "type"})
		}
	}
}

// write writes the magic, the length and the deflated JSON index, then
// each resource's deflated JSON at the offset the index gives.
func write(f *os.File, entries []entry, keys map[string]bool) error {
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].typ != entries[j].typ {
			return entries[i].typ < entries[j].typ
		}
		return entries[i].url < entries[j].url
	})
	var blobs bytes.Buffer
	var index struct {
		Keys    []string `json:"keys"`
		Entries [][5]any `json:"entries"`
	}
	for k := range keys {
		index.Keys = append(index.Keys, k)
	}
	sort.Strings(index.Keys)
	for _, e := range entries {
		start := blobs.Len()
		if err := deflate(&blobs, e.body); err != nil {
			return err
		}
		index.Entries = append(index.Entries, [5]any{e.typ, e.url, e.version, start, blobs.Len() - start})
	}
	raw, err := json.Marshal(index)
	if err != nil {
		return err
	}
	var head bytes.Buffer
	if err := deflate(&head, raw); err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	w.WriteString("FSC1")
	binary.Write(w, binary.BigEndian, uint32(head.Len()))
	w.Write(head.Bytes())
	w.Write(blobs.Bytes())
	return w.Flush()
}

func deflate(buf *bytes.Buffer, data []byte) error {
	zw, err := flate.NewWriter(buf, flate.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	return zw.Close()
}
