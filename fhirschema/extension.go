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
// the value's type must be one it allows.
func (w *walker) extension(obj map[string]any, at *loc) {
	valueKey := ""
	for k := range obj {
		if el := w.v.elements["Extension"][k]; el != nil && el.choice == "value" {
			valueKey = strings.TrimPrefix(k, "_")
		}
	}
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
	types, known := w.extensionTypes(url)
	if url == "" || !known {
		return
	}
	if valueKey == "" {
		if len(types) > 0 {
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

// extensionTypes looks url up among the core definitions, then among the
// caller's.
func (w *walker) extensionTypes(url string) ([]string, bool) {
	if types, ok := w.v.coreExtensions[url]; ok {
		return types, true
	}
	if w.opts.Extensions == nil || url == "" {
		return nil, false
	}
	return w.opts.Extensions(url)
}

// ExtensionDefinition reads the URL of the extension a StructureDefinition
// defines and the value[x] types it allows (none when its value[x] is
// prohibited: an extension of nested extensions). ok is false when the
// StructureDefinition defines no extension.
func ExtensionDefinition(structureDefinition []byte) (url string, types []string, ok bool, err error) {
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
		return "", nil, false, fmt.Errorf("read StructureDefinition: %w", err)
	}
	if sd.Type != "Extension" || sd.URL == "" {
		return "", nil, false, nil
	}
	for _, elems := range [][]extensionElement{sd.Snapshot.Element, sd.Differential.Element} {
		for _, e := range elems {
			if e.Path != "Extension.value[x]" {
				continue
			}
			if e.Max == "0" {
				return sd.URL, []string{}, true, nil
			}
			if len(e.Type) == 0 {
				continue
			}
			types = make([]string, 0, len(e.Type))
			for _, t := range e.Type {
				types = append(types, t.Code)
			}
			return sd.URL, types, true, nil
		}
	}
	return sd.URL, nil, false, nil
}

type extensionElement struct {
	Path string `json:"path"`
	Max  string `json:"max"`
	Type []struct {
		Code string `json:"code"`
	} `json:"type"`
}
