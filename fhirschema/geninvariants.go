//go:build ignore

// Geninvariants writes invariants.json: the invariants (constraint
// expressions) of the R4 StructureDefinitions of resources and data types,
// by the element that carries them, and the elements whose content is
// defined elsewhere (contentReference) where invariants apply too.
//
// Usage: go run geninvariants.go PATH/TO/r4-core > invariants.json
// where r4-core holds the official R4 (4.0.1) profiles-resources.json and
// profiles-types.json.
//
// What is left out: ele-1 and ext-1, which the validator checks natively;
// constraints without an expression; definitions the R4 JSON Schema does
// not know (logical models, and resources of later releases); and the
// invariants a definition inherits, kept once under the definition that
// defines them (DomainResource, Quantity): a data type names the type it
// specializes (Age: Quantity), and an element typed with the SimpleQuantity
// or MoneyQuantity profile names that profile.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type constraint struct {
	Key        string `json:"key"`
	Severity   string `json:"severity"`
	Human      string `json:"human"`
	Expression string `json:"expression"`
	Source     string `json:"source"`
}

type elementDef struct {
	Path             string       `json:"path"`
	ContentReference string       `json:"contentReference"`
	Constraint       []constraint `json:"constraint"`
	Type             []struct {
		Code    string   `json:"code"`
		Profile []string `json:"profile"`
	} `json:"type"`
}

type structureDef struct {
	ResourceType   string `json:"resourceType"`
	ID             string `json:"id"`
	URL            string `json:"url"`
	Kind           string `json:"kind"`
	Derivation     string `json:"derivation"`
	BaseDefinition string `json:"baseDefinition"`
	Snapshot       struct {
		Element []elementDef `json:"element"`
	} `json:"snapshot"`
}

// corrections replace R4 expressions that are wrong under the FHIRPath
// specification by the expression a later release gives the same rule;
// docs/validation.md lists them with the reason.
var corrections = map[string]string{
	// An empty reference makes the R4 expression empty, not true, so
	// every Reference with only an identifier or a display broke it; and
	// "#" (a contained resource's reference to its container) found no
	// contained resource of that id. R5's ref-1 says both.
	"Reference ref-1": "reference.exists() implies (reference.startsWith('#').not() or (reference.substring(1).trace('url') in %rootResource.contained.id.trace('ids')) or (reference='#' and %rootResource!=%resource))",
	// as() takes one item, and %resource.descendants() are many: R4's
	// expression is an error under the FHIRPath specification (a lenient
	// evaluator filters), which R5 mends with ofType(). Both look at every
	// descendant of the resource again for each contained resource, which
	// took a million steps on the official List-prognosis example; this
	// equivalent looks once, and not at all when nothing is contained
	// (fhirschema's TestDom3AgreesWithR5 compares it with R5's on every
	// example).
	"DomainResource dom-3": "contained.empty() or contained.where(descendants().where(reference = '#' or ofType(canonical) = '#').exists().not()).select('#' + id).subsetOf(%resource.descendants().select(reference | ofType(canonical) | ofType(uri) | ofType(url)))",
	// Boolean is System.Boolean, which no FHIR element is; R5 says boolean.
	"Questionnaire.item.enableWhen que-7": "operator = 'exists' implies (answer is boolean)",
	// start <= end is empty for values of different precision (1990 and
	// 1990-06), which broke a period that ends after it starts; R5
	// compares the boundaries.
	"Period per-1": "start.hasValue().not() or end.hasValue().not() or (start.lowBoundary() <= end.highBoundary())",
	// The rule's text says "more than one enableWhen"; R4's expression
	// counts more than two. R4B and R5 say "> 1".
	"Questionnaire.item que-12": "enableWhen.count() > 1 implies enableBehavior.exists()",
}

// nameRule is the best practice of every conformance resource (vsd-0,
// lib-0, …) as R4 writes it: empty, so broken, when there is no name, which
// the rule does not ask for. R5 adds "name.exists() implies".
const nameRule = "name.matches('[A-Z]([A-Za-z0-9_]){0,254}')"

// native are the invariants the validator checks without FHIRPath.
var native = map[string]bool{"ele-1": true, "ext-1": true}

// profiled are the profiles on Quantity whose invariants apply where an
// element's type names them.
var profiled = map[string]bool{
	"http://hl7.org/fhir/StructureDefinition/SimpleQuantity": true,
	"http://hl7.org/fhir/StructureDefinition/MoneyQuantity":  true,
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run geninvariants.go PATH/TO/r4-core > invariants.json")
		os.Exit(2)
	}
	sds, err := read(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	known, err := readSchema("fhir.schema.json")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := table(sds, known)
	if err := write(os.Stdout, out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// output is invariants.json.
type output struct {
	// Invariants are [key, severity, human, expression] by the path of the
	// element (or the name of the type) that carries them.
	Invariants map[string][][4]string
	// Bases map a data type to the type it specializes (Age: Quantity),
	// whose invariants it has too.
	Bases map[string]string
	// Profiles map an element to the profile on Quantity its type names
	// (SimpleQuantity, MoneyQuantity), whose own invariants it carries.
	Profiles map[string]string
	// ContentReferences map an element whose content is defined at
	// another path to that path, where the referenced path has invariants.
	ContentReferences map[string]string
	// NotDomain lists the resource types that are not DomainResources.
	NotDomain []string
}

func read(dir string) (map[string]*structureDef, error) {
	out := map[string]*structureDef{}
	for _, f := range []string{"profiles-types.json", "profiles-resources.json"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("read definitions: %w", err)
		}
		var bundle struct {
			Entry []struct {
				Resource structureDef `json:"resource"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(raw, &bundle); err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		for i := range bundle.Entry {
			sd := &bundle.Entry[i].Resource
			if sd.ResourceType == "StructureDefinition" {
				out[sd.URL] = sd
			}
		}
	}
	return out, nil
}

// schema is what the generator reads of the R4 JSON Schema: the
// definitions, each property with the definition its value refers to.
type schema map[string]map[string]string

// readSchema reads the definitions of the R4 JSON Schema.
func readSchema(path string) (schema, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	type ref struct {
		Ref string `json:"$ref"`
	}
	var s struct {
		Definitions map[string]struct {
			Properties map[string]struct {
				ref
				Items ref `json:"items"`
			} `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	out := schema{}
	for name, d := range s.Definitions {
		props := map[string]string{}
		for p, v := range d.Properties {
			props[p] = strings.TrimPrefix(v.Ref+v.Items.Ref, "#/definitions/")
		}
		out[name] = props
	}
	return out, nil
}

// has reports whether the schema knows the element at an R4 path.
func (s schema) has(path string) bool {
	steps := strings.Split(path, ".")
	def := steps[0]
	if def == "DomainResource" || def == "Resource" {
		return len(steps) == 1
	}
	for _, step := range steps[1:] {
		props, ok := s[def]
		if !ok {
			return false
		}
		if stem, choice := strings.CutSuffix(step, "[x]"); choice {
			found := false
			for p := range props {
				found = found || strings.HasPrefix(p, stem) && len(p) > len(stem) && p[len(stem)] >= 'A' && p[len(stem)] <= 'Z'
			}
			return found
		}
		next, ok := props[step]
		if !ok {
			return false
		}
		def = next
	}
	if len(steps) == 1 {
		_, ok := s[def]
		return ok
	}
	return true
}

func table(sds map[string]*structureDef, known schema) *output {
	out := &output{Invariants: map[string][][4]string{}, Bases: map[string]string{}, Profiles: map[string]string{}, ContentReferences: map[string]string{}}
	var refs [][2]string
	for _, sd := range sds {
		if sd.Derivation != "specialization" || sd.Kind == "logical" || !known.has(sd.ID) {
			continue
		}
		if sd.Kind == "resource" && sd.BaseDefinition == resourceURL && sd.ID != "DomainResource" {
			out.NotDomain = append(out.NotDomain, sd.ID)
		}
		if base := strings.TrimPrefix(sd.BaseDefinition, sdPrefix); sd.Kind == "complex-type" && base != "Element" && base != "BackboneElement" {
			out.Bases[sd.ID] = base
		}
		for _, el := range sd.Snapshot.Element {
			if !known.has(el.Path) {
				if kept(el.Constraint) {
					fmt.Fprintf(os.Stderr, "left out: %s is not an R4 element\n", el.Path)
				}
				continue
			}
			for _, c := range el.Constraint {
				// What a definition inherits (Age: qty-3 of Quantity, a
				// resource: dom-2 of DomainResource) is kept once, under
				// the definition that defines it.
				own := c.Source == "" || c.Source == sd.URL
				if own && !native[c.Key] && c.Expression != "" {
					add(out, el.Path, c)
				}
			}
			for _, t := range el.Type {
				for _, p := range t.Profile {
					if profiled[p] {
						out.Profiles[el.Path] = sds[p].ID
					}
				}
			}
			if el.ContentReference != "" {
				refs = append(refs, [2]string{el.Path, strings.TrimPrefix(el.ContentReference, "#")})
			}
		}
	}
	for _, id := range out.Profiles {
		sd := sds[sdPrefix+id]
		for _, c := range sd.Snapshot.Element[0].Constraint {
			if (c.Source == "" || c.Source == sd.URL) && c.Expression != "" && !native[c.Key] {
				add(out, id, c)
			}
		}
	}
	for _, r := range refs {
		if _, ok := out.Invariants[r[1]]; ok || out.Invariants[r[0]] != nil {
			out.ContentReferences[r[0]] = r[1]
		}
	}
	sort.Strings(out.NotDomain)
	return out
}

const (
	sdPrefix    = "http://hl7.org/fhir/StructureDefinition/"
	resourceURL = sdPrefix + "Resource"
)

// kept reports whether any of cs would go into the table.
func kept(cs []constraint) bool {
	for _, c := range cs {
		if !native[c.Key] && c.Expression != "" {
			return true
		}
	}
	return false
}

func add(out *output, path string, c constraint) {
	for _, have := range out.Invariants[path] {
		if have[0] == c.Key {
			return
		}
	}
	if fixed, ok := corrections[path+" "+c.Key]; ok {
		c.Expression = fixed
	}
	if c.Expression == nameRule {
		c.Expression = "name.exists() implies " + nameRule
	}
	sev := c.Severity
	if sev != "error" {
		sev = "warning"
	}
	out.Invariants[path] = append(out.Invariants[path], [4]string{c.Key, sev, c.Human, c.Expression})
}

// write prints out with one element per line, in a stable order.
func write(f *os.File, out *output) error {
	var b strings.Builder
	b.WriteString("{\n\"invariants\": {\n")
	paths := make([]string, 0, len(out.Invariants))
	for p := range out.Invariants {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for i, p := range paths {
		list := out.Invariants[p]
		sort.Slice(list, func(a, b int) bool { return list[a][0] < list[b][0] })
		line, err := json.Marshal(map[string]any{p: list})
		if err != nil {
			return err
		}
		b.Write(line[1 : len(line)-1])
		if i < len(paths)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	refs, err := json.Marshal(out.ContentReferences)
	if err != nil {
		return err
	}
	bases, err := json.Marshal(out.Bases)
	if err != nil {
		return err
	}
	profiles, err := json.Marshal(out.Profiles)
	if err != nil {
		return err
	}
	notDomain, err := json.Marshal(out.NotDomain)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "},\n\"bases\": %s,\n\"profiles\": %s,\n\"contentReferences\": %s,\n\"notDomain\": %s\n}\n", bases, profiles, refs, notDomain)
	_, err = f.WriteString(b.String())
	return err
}
