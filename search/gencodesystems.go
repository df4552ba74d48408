//go:build ignore

// Gencodesystems writes code-systems.json: for each token search parameter
// of each resource type whose expression is a plain path to a code element
// bound (required) to a value set drawn from one code system, that system.
// Codes in such elements carry no system in the JSON, yet FHIR clients
// search them as system|code (Patient?gender=http://hl7.org/fhir/administrative-gender|male).
//
// Usage: go run gencodesystems.go search-parameters.json profiles-resources.json valuesets.json > code-systems.json
// (the official R4 4.0.1 definitions).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
)

var plainPath = regexp.MustCompile(`^[A-Z][A-Za-z]+(\.[a-z][A-Za-z]*)+$`)

func load(path string, v any) {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		panic(err)
	}
}

type bundle[T any] struct {
	Entry []struct {
		Resource T `json:"resource"`
	} `json:"entry"`
}

func main() {
	var params bundle[struct {
		Code, Type, Expression string
		Base                   []string
	}]
	load(os.Args[1], &params)
	var profiles bundle[struct {
		ResourceType string `json:"resourceType"`
		Snapshot     struct {
			Element []struct {
				Path string `json:"path"`
				Type []struct {
					Code string `json:"code"`
				} `json:"type"`
				Binding struct {
					Strength string `json:"strength"`
					ValueSet string `json:"valueSet"`
				} `json:"binding"`
			} `json:"element"`
		} `json:"snapshot"`
	}]
	load(os.Args[2], &profiles)
	var valueSets bundle[struct {
		URL     string `json:"url"`
		Compose struct {
			Include []struct {
				System string `json:"system"`
			} `json:"include"`
		} `json:"compose"`
	}]
	load(os.Args[3], &valueSets)

	systemOf := map[string]string{} // value set URL → its single code system
	for _, e := range valueSets.Entry {
		inc := e.Resource.Compose.Include
		if len(inc) == 1 && inc[0].System != "" {
			systemOf[e.Resource.URL] = inc[0].System
		}
	}
	bound := map[string]string{} // element path → code system
	for _, e := range profiles.Entry {
		for _, el := range e.Resource.Snapshot.Element {
			if len(el.Type) == 1 && el.Type[0].Code == "code" && el.Binding.Strength == "required" {
				vs, _, _ := strings.Cut(el.Binding.ValueSet, "|")
				if sys := systemOf[vs]; sys != "" {
					bound[el.Path] = sys
				}
			}
		}
	}
	out := map[string]string{} // "Type.param" → system
	for _, e := range params.Entry {
		p := e.Resource
		if p.Type != "token" {
			continue
		}
		for _, branch := range strings.Split(p.Expression, "|") {
			branch = strings.TrimSpace(branch)
			if !plainPath.MatchString(branch) {
				continue
			}
			if sys := bound[branch]; sys != "" {
				typ, _, _ := strings.Cut(branch, ".")
				out[typ+"."+p.Code] = sys
			}
		}
	}
	b, _ := json.MarshalIndent(out, "", " ")
	fmt.Println(string(b))
	fmt.Fprintf(os.Stderr, "%d parameters\n", len(out))
}
