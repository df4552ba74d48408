//go:build ignore

// genmodel writes model.json, the R4 type model FHIRPath navigates by: for
// every resource, data type and backbone element, its base type and its
// elements' types, read from the official StructureDefinitions.
//
//	go run genmodel.go ../../../shared/fhir/definitions/r4-core
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type typeRef struct {
	Code      string `json:"code"`
	Extension []struct {
		URL      string `json:"url"`
		ValueURL string `json:"valueUrl"`
	} `json:"extension"`
}

type elementDef struct {
	Path             string    `json:"path"`
	Max              string    `json:"max"`
	Type             []typeRef `json:"type"`
	ContentReference string    `json:"contentReference"`
}

type structureDef struct {
	ResourceType   string `json:"resourceType"`
	Name           string `json:"name"`
	Type           string `json:"type"`
	Kind           string `json:"kind"`
	Derivation     string `json:"derivation"`
	Abstract       bool   `json:"abstract"`
	BaseDefinition string `json:"baseDefinition"`
	Snapshot       struct {
		Element []elementDef `json:"element"`
	} `json:"snapshot"`
}

// info is one type of the model: its base and its elements, each written
// as its types joined by |, with a leading * when it repeats.
type info struct {
	Base     string            `json:"b,omitempty"`
	Elements map[string]string `json:"e,omitempty"`
}

func main() {
	dir := os.Args[1]
	model := map[string]*info{}
	for _, f := range []string{"profiles-types.json", "profiles-resources.json"} {
		if err := read(filepath.Join(dir, f), model); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	out, err := json.Marshal(model)
	if err == nil {
		err = os.WriteFile("model.json", append(out, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func read(path string, model map[string]*info) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var bundle struct {
		Entry []struct {
			Resource json.RawMessage `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(data, &bundle); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, e := range bundle.Entry {
		var sd structureDef
		if json.Unmarshal(e.Resource, &sd) != nil {
			continue
		}
		if sd.ResourceType != "StructureDefinition" || sd.Kind == "logical" {
			continue
		}
		base := sd.BaseDefinition[strings.LastIndexByte(sd.BaseDefinition, '/')+1:]
		if sd.Derivation == "constraint" {
			if sd.Type != sd.Name && sd.Kind == "complex-type" {
				model[sd.Name] = &info{Base: sd.Type}
			}
			continue
		}
		model[sd.Type] = &info{Base: base}
		if sd.Kind == "primitive-type" {
			continue
		}
		for _, el := range sd.Snapshot.Element[1:] {
			add(model, sd.Type, sd.Kind == "resource", el)
		}
	}
	return nil
}

func add(model map[string]*info, root string, resource bool, el elementDef) {
	i := strings.LastIndexByte(el.Path, '.')
	parent, name := el.Path[:i], strings.TrimSuffix(el.Path[i+1:], "[x]")
	p := model[parent]
	if p == nil {
		p = &info{Base: "BackboneElement"}
		model[parent] = p
	}
	if p.Elements == nil {
		p.Elements = map[string]string{}
	}
	var types []string
	switch {
	case el.ContentReference != "":
		types = []string{strings.TrimPrefix(el.ContentReference, "#")}
	default:
		for _, t := range el.Type {
			code := t.Code
			for _, x := range t.Extension {
				if strings.HasSuffix(x.URL, "structuredefinition-fhir-type") {
					code = x.ValueURL
				}
			}
			if el.Path == root+".id" && resource {
				code = "id" // Resource.id is an id, though its type is written System.String
			}
			if code == "BackboneElement" || (code == "Element" && el.Path != root+".extension") {
				model[el.Path] = &info{Base: code}
				code = el.Path
			}
			types = append(types, code)
		}
	}
	s := strings.Join(types, "|")
	if el.Max != "1" && el.Max != "0" {
		s = "*" + s
	}
	p.Elements[name] = s
}
