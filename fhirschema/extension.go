package fhirschema

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// coreExtensionsJSON maps the URL of core R4 extension definitions to the
// value[x] types each allows; an empty list is an extension made of nested
// extensions, which takes no value.
//
//go:embed extensions.json
var coreExtensionsJSON []byte

// ExtensionTypes tells the value[x] types the extension defined at url
// allows (none for one made of nested extensions) and whether its
// definition is known at all.
type ExtensionTypes func(url string) (types []string, known bool)

// extension applies the rules of an Extension: a url, and either one
// value[x] or nested extensions, never both; when the definition is known
// the value's type must be one it allows, and so must the values of the
// nested extensions it defines.
func (w *walker) extension(obj map[string]any, at *loc) {
	valueKey := extensionValue(w.v, obj)
	_, nested := obj["extension"]
	switch {
	case valueKey != "" && nested:
		w.errorf("invalid", at.String(), "an extension has either a value[x] or nested extensions, not both")
		return
	case valueKey == "" && !nested:
		w.errorf("required", at.String(), "an extension needs a value[x] or nested extensions")
		return
	}
	url, _ := obj["url"].(string)
	if url == "" {
		return
	}
	types, known := w.extensionTypes(url)
	if !known {
		return
	}
	w.extensionValue(obj, at, url, types, valueKey)
	children, _ := obj["extension"].([]any)
	for i, child := range children {
		c, _ := child.(map[string]any)
		name, _ := c["url"].(string)
		if name == "" || strings.Contains(name, ":") {
			continue // absolute: an extension of its own, checked as such
		}
		if types, known := w.extensionTypes(url + "#" + name); known {
			w.extensionValue(c, at.child("extension").item(i), url+"#"+name, types, extensionValue(w.v, c))
		}
	}
}

// extensionValue names the value[x] property of an extension, "" for none.
func extensionValue(v *Validator, obj map[string]any) string {
	for k := range obj {
		if el := v.elements["Extension"][k]; el != nil && el.choice == "value" {
			return strings.TrimPrefix(k, "_")
		}
	}
	return ""
}

// extensionValue checks the value (valueKey, "" for none) of the extension
// defined as url against the types its definition allows.
func (w *walker) extensionValue(obj map[string]any, at *loc, url string, types []string, valueKey string) {
	_, nested := obj["extension"]
	if valueKey == "" {
		if len(types) > 0 && nested {
			w.errorf("invalid", at.String(), "the extension %s takes a value of type %s, not nested extensions", url, strings.Join(types, ", "))
		}
		return
	}
	el := w.v.elements["Extension"][valueKey]
	switch {
	case len(types) == 0:
		w.errorf("invalid", at.child(el.path).String(), "the extension %s is made of nested extensions and takes no value", url)
	case !slices.Contains(types, el.typ):
		w.errorf("invalid", at.child(el.path).String(), "the extension %s takes a value of type %s, not %s", url, strings.Join(types, ", "), el.typ)
	}
}

// extensionTypes looks url (or url#name for an extension nested in the one
// defined at url) up among the core definitions, then among the caller's.
func (w *walker) extensionTypes(url string) ([]string, bool) {
	if types, ok := w.v.coreExtensions[url]; ok {
		return types, true
	}
	if w.opts.Extensions == nil {
		return nil, false
	}
	return w.opts.Extensions(url)
}

// ExtensionDefinitions reads what a StructureDefinition of an extension
// says of values: the value[x] types its URL allows (none when value[x] is
// prohibited: an extension of nested extensions), and for each nested
// extension it defines, under URL#name, the types that one allows. Only
// what the definition constrains is listed; a StructureDefinition that
// defines no extension yields nothing.
func ExtensionDefinitions(structureDefinition []byte) (map[string][]string, error) {
	var sd struct {
		URL      string `json:"url"`
		Type     string `json:"type"`
		Snapshot struct {
			Element []extensionElement `json:"element"`
		} `json:"snapshot"`
		Differential struct {
			Element []extensionElement `json:"element"`
		} `json:"differential"`
	}
	if err := json.Unmarshal(structureDefinition, &sd); err != nil {
		return nil, fmt.Errorf("read StructureDefinition: %w", err)
	}
	out := map[string][]string{}
	if sd.Type != "Extension" || sd.URL == "" {
		return out, nil
	}
	for _, elems := range [][]extensionElement{sd.Snapshot.Element, sd.Differential.Element} {
		readExtensionElements(sd.URL, elems, out)
	}
	return out, nil
}

// readExtensionElements adds the value types elems constrain to out, keeping
// what an earlier list (the snapshot) said.
func readExtensionElements(url string, elems []extensionElement, out map[string][]string) {
	slice, names := "", map[string]string{}
	found := map[string][]string{}
	for _, e := range elems {
		switch e.Path {
		case "Extension.extension":
			slice = e.SliceName
		case "Extension.extension.url":
			if slice != "" && e.FixedURI != "" {
				names[slice] = e.FixedURI
			}
		case "Extension.value[x]":
			if types, ok := e.valueTypes(); ok {
				found[url] = types
			}
		case "Extension.extension.value[x]":
			if types, ok := e.valueTypes(); ok && slice != "" {
				found["#"+slice] = types
			}
		}
	}
	for key, types := range found {
		if name, isSlice := strings.CutPrefix(key, "#"); isSlice {
			if fixed, ok := names[name]; ok {
				name = fixed
			}
			key = url + "#" + name
		}
		if _, known := out[key]; !known {
			out[key] = types
		}
	}
}

type extensionElement struct {
	Path      string `json:"path"`
	SliceName string `json:"sliceName"`
	Max       string `json:"max"`
	FixedURI  string `json:"fixedUri"`
	Type      []struct {
		Code string `json:"code"`
	} `json:"type"`
}

// valueTypes is what a value[x] element allows: no type when it is
// prohibited; ok is false when it does not say.
func (e extensionElement) valueTypes() ([]string, bool) {
	if e.Max == "0" {
		return []string{}, true
	}
	if len(e.Type) == 0 {
		return nil, false
	}
	types := make([]string, 0, len(e.Type))
	for _, t := range e.Type {
		types = append(types, t.Code)
	}
	return types, true
}

// extensionURLs checks that the extensions of an element that is not an
// extension name their definition by an absolute URL: only the parts of a
// complex extension are named relatively.
func (w *walker) extensionURLs(obj map[string]any, at *loc) {
	for _, key := range []string{"extension", "modifierExtension"} {
		list, _ := obj[key].([]any)
		for i, x := range list {
			e, _ := x.(map[string]any)
			url, ok := e["url"].(string)
			if ok && url != "" && !strings.Contains(url, ":") {
				w.errorf("value", at.child(key).item(i).child("url").String(), "the url %q of an extension must be an absolute URL: only the parts of a complex extension are named relatively", url)
			}
		}
	}
}
