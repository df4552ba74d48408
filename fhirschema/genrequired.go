//go:build ignore

// Genrequired writes required.json: the primitive elements whose minimum
// cardinality is 1 in the FHIR R4 definitions. The official JSON Schema
// cannot require them (a primitive may be present as its _element twin only),
// so the validator checks them from this table.
//
// Usage: go run genrequired.go PATH/TO/r4.d.ts > required.json
// where r4.d.ts is the R4 declaration file of the DefinitelyTyped package
// @types/fhir (MIT), in which elements with min 1 are the non-optional members.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"fhirstore/fhirschema"
)

var (
	ifaceLine = regexp.MustCompile(`^export interface (\w+)`)
	propLine  = regexp.MustCompile(`^  (\w+)(\??): ([^;]+);`)
	ifaceRef  = regexp.MustCompile(`^([A-Z]\w*)(\[\])?$`)
	generic   = regexp.MustCompile(`<[^>]*>`)
)

type prop struct {
	required bool
	iface    string // referenced interface, if any
}

func main() {
	ts := parseTS(os.Args[1])
	var schema struct {
		Definitions map[string]struct {
			Properties map[string]struct {
				Ref   string `json:"$ref"`
				Items struct {
					Ref string `json:"$ref"`
				} `json:"items"`
			} `json:"properties"`
			Required []string `json:"required"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(fhirschema.SchemaJSON, &schema); err != nil {
		panic(err)
	}
	out := map[string][]string{}
	seen := map[string]bool{}
	var walk func(iface, def string)
	walk = func(iface, def string) {
		if seen[def] {
			return
		}
		seen[def] = true
		d, ok := schema.Definitions[def]
		if !ok {
			return
		}
		inSchema := map[string]bool{}
		for _, r := range d.Required {
			inSchema[r] = true
		}
		for name, p := range ts[iface] {
			sp, ok := d.Properties[name]
			if !ok {
				continue
			}
			if p.required && !inSchema[name] {
				out[def] = append(out[def], name)
			}
			ref := sp.Ref
			if ref == "" {
				ref = sp.Items.Ref
			}
			if p.iface != "" && ref != "" {
				walk(p.iface, strings.TrimPrefix(ref, "#/definitions/"))
			}
		}
	}
	for _, t := range fhirschema.ResourceTypes() {
		walk(t, t)
	}
	for k := range out {
		sort.Strings(out[k])
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}

func parseTS(path string) map[string]map[string]prop {
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	out := map[string]map[string]prop{}
	cur := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := ifaceLine.FindStringSubmatch(line); m != nil {
			cur = m[1]
			out[cur] = map[string]prop{}
			continue
		}
		if line == "}" {
			cur = ""
			continue
		}
		m := propLine.FindStringSubmatch(line)
		if cur == "" || m == nil {
			continue
		}
		typ := generic.ReplaceAllString(strings.TrimSuffix(strings.TrimSpace(m[3]), " | undefined"), "")
		p := prop{required: m[2] == ""}
		if r := ifaceRef.FindStringSubmatch(typ); r != nil {
			p.iface = r[1]
		}
		out[cur][m[1]] = p
	}
	return out
}
