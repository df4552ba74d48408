//go:build ignore

// Gensummary writes summary.json: for every resource type, the top-level
// elements marked isSummary in the official R4 StructureDefinitions (what
// _summary=true returns). Choice elements keep their [x] suffix.
//
// Usage: go run gensummary.go PATH/TO/profiles-resources.json > summary.json
// where profiles-resources.json is the official R4 (4.0.1) definitions bundle.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var bundle struct {
		Entry []struct {
			Resource struct {
				ResourceType string `json:"resourceType"`
				ID           string `json:"id"`
				Kind         string `json:"kind"`
				Derivation   string `json:"derivation"`
				Snapshot     struct {
					Element []struct {
						Path      string `json:"path"`
						IsSummary bool   `json:"isSummary"`
					} `json:"element"`
				} `json:"snapshot"`
			} `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(raw, &bundle); err != nil {
		panic(err)
	}
	out := map[string][]string{}
	for _, e := range bundle.Entry {
		r := e.Resource
		if r.ResourceType != "StructureDefinition" || r.Kind != "resource" || r.Derivation != "specialization" {
			continue
		}
		for _, el := range r.Snapshot.Element {
			name, top := strings.CutPrefix(el.Path, r.ID+".")
			if top && el.IsSummary && !strings.Contains(name, ".") {
				out[r.ID] = append(out[r.ID], name)
			}
		}
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}
