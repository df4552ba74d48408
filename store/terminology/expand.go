package terminology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// valueSet is what expansion reads of a ValueSet.
type valueSet struct {
	ID      string `json:"id"`
	URL     string `json:"url"`
	Version string `json:"version"`
	Compose *struct {
		Include []component `json:"include"`
		Exclude []component `json:"exclude"`
	} `json:"compose"`
	Expansion *struct {
		Total    *int       `json:"total"`
		Offset   int        `json:"offset"`
		Contains []contains `json:"contains"`
	} `json:"expansion"`
}

// component is one compose.include or compose.exclude.
type component struct {
	System  string `json:"system"`
	Version string `json:"version"`
	Concept []struct {
		Code    string `json:"code"`
		Display string `json:"display"`
	} `json:"concept"`
	Filter []struct {
		Property string `json:"property"`
		Op       string `json:"op"`
		Value    string `json:"value"`
	} `json:"filter"`
	ValueSet []string `json:"valueSet"`
}

// contains is one entry of a stored expansion (entries nest).
type contains struct {
	System   string     `json:"system"`
	Version  string     `json:"version"`
	Code     string     `json:"code"`
	Display  string     `json:"display"`
	Abstract bool       `json:"abstract"`
	Contains []contains `json:"contains"`
}

// Expand lists the codes of the ValueSet vs (its JSON): a stored
// expansion as it is, else its compose — the union of the includes minus
// the union of the excludes. Codes come in the order the value set
// names them, each once.
func (s *Service) Expand(ctx context.Context, vs []byte) ([]Concept, error) {
	x := &expansion{s: s, visiting: map[string]bool{}, systems: map[string]*CodeSystem{}}
	return x.valueSet(ctx, vs, 0)
}

// expansion is one Expand: the value sets being expanded (to stop cycles)
// and the code systems read so far.
type expansion struct {
	s        *Service
	visiting map[string]bool
	systems  map[string]*CodeSystem
}

func (x *expansion) valueSet(ctx context.Context, b []byte, depth int) ([]Concept, error) {
	var vs valueSet
	if err := json.Unmarshal(b, &vs); err != nil {
		return nil, failf("the value set is not valid JSON: %v", err)
	}
	name := vs.URL
	if name == "" {
		name = "ValueSet/" + vs.ID
	}
	if x.visiting[name] {
		return nil, failf("value set %s includes itself", name)
	}
	if depth > MaxDepth {
		return nil, failf("value set %s nests value sets more than %d levels deep", name, MaxDepth)
	}
	x.visiting[name] = true
	defer delete(x.visiting, name)
	if vs.Expansion != nil && (vs.Compose == nil || len(vs.Expansion.Contains) > 0) {
		return storedExpansion(name, &vs)
	}
	if vs.Compose == nil || len(vs.Compose.Include) == 0 {
		return nil, failf("value set %s has neither compose.include nor an expansion", name)
	}
	var in []Concept
	for i, inc := range vs.Compose.Include {
		codes, err := x.component(ctx, inc, depth)
		if err != nil {
			return nil, wrapPart(err, name, fmt.Sprintf("compose.include[%d]", i))
		}
		in = union(in, codes)
	}
	for i, exc := range vs.Compose.Exclude {
		codes, err := x.component(ctx, exc, depth)
		if err != nil {
			return nil, wrapPart(err, name, fmt.Sprintf("compose.exclude[%d]", i))
		}
		in = minus(in, codes)
	}
	return in, nil
}

// wrapPart says where in which value set an expansion failed.
func wrapPart(err error, name, part string) error {
	var te *Error
	if errors.As(err, &te) {
		return failf("value set %s, %s: %s", name, part, te.Msg)
	}
	if errors.Is(err, ErrNotFound) {
		return failf("value set %s, %s: %v is not stored", name, part, strings.TrimSuffix(err.Error(), ": "+ErrNotFound.Error()))
	}
	return err
}

// storedExpansion flattens a stored expansion; a partial one (a page of a
// larger expansion) cannot stand for the value set.
func storedExpansion(name string, vs *valueSet) ([]Concept, error) {
	var out []Concept
	var walk func(list []contains)
	walk = func(list []contains) {
		for _, c := range list {
			if c.Code != "" && !c.Abstract {
				out = append(out, Concept{System: c.System, Version: c.Version, Code: c.Code, Display: c.Display})
			}
			walk(c.Contains)
		}
	}
	walk(vs.Expansion.Contains)
	if t := vs.Expansion.Total; vs.Expansion.Offset > 0 || t != nil && *t > len(out) {
		return nil, failf("value set %s has a stored expansion of only part of its codes", name)
	}
	return union(nil, out), nil
}

// component expands one include or exclude: the codes its system part
// names, intersected with each value set it names.
func (x *expansion) component(ctx context.Context, c component, depth int) ([]Concept, error) {
	var parts [][]Concept
	if c.System != "" {
		codes, err := x.systemPart(ctx, c)
		if err != nil {
			return nil, err
		}
		parts = append(parts, codes)
	} else if len(c.Concept) > 0 || len(c.Filter) > 0 {
		return nil, failf("concepts and filters need a system")
	}
	for _, ref := range c.ValueSet {
		b, err := x.s.ValueSet(ctx, ref)
		if err != nil {
			return nil, err
		}
		codes, err := x.valueSet(ctx, b, depth+1)
		if err != nil {
			return nil, err
		}
		parts = append(parts, codes)
	}
	if len(parts) == 0 {
		return nil, failf("names neither a system nor a value set")
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out = intersect(out, p)
	}
	return out, nil
}

// systemPart lists the codes of a system: those enumerated, those the
// filters select in the stored CodeSystem, or all its codes.
func (x *expansion) systemPart(ctx context.Context, c component) ([]Concept, error) {
	if len(c.Concept) > 0 {
		out := make([]Concept, 0, len(c.Concept))
		for _, k := range c.Concept {
			out = append(out, Concept{System: c.System, Version: c.Version, Code: k.Code, Display: k.Display})
		}
		x.fillDisplays(ctx, c.System, c.Version, out)
		return out, nil
	}
	cs, err := x.codeSystem(ctx, c.System, c.Version)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, failf("the codes of system %s cannot be listed: no CodeSystem with that url is stored", c.System)
		}
		return nil, err
	}
	if err := cs.checkComplete(); err != nil {
		return nil, err
	}
	out := cs.All()
	for _, f := range c.Filter {
		sel, err := cs.filter(f.Property, f.Op, f.Value)
		if err != nil {
			return nil, err
		}
		out = intersect(out, sel)
	}
	return out, nil
}

// fillDisplays takes missing displays from the stored code system, if any.
func (x *expansion) fillDisplays(ctx context.Context, system, version string, codes []Concept) {
	cs, err := x.codeSystem(ctx, system, version)
	if err != nil {
		return
	}
	for i := range codes {
		if c := cs.byCode[codes[i].Code]; c != nil && codes[i].Display == "" {
			codes[i].Display = c.Display
		}
	}
}

func (x *expansion) codeSystem(ctx context.Context, url, version string) (*CodeSystem, error) {
	key := url + "|" + version
	if cs, ok := x.systems[key]; ok {
		return cs, nil
	}
	cs, err := x.s.CodeSystem(ctx, url, version)
	if err != nil {
		return nil, err
	}
	x.systems[key] = cs
	return cs, nil
}

// filter selects codes of the hierarchy: is-a (the code and below),
// descendent-of (below only), is-not-a (all but the code and below),
// generalizes (the code and above), in (a comma-separated list), = (one code).
func (cs *CodeSystem) filter(property, op, value string) ([]Concept, error) {
	if property != "concept" && property != "code" {
		return nil, failf("filter on property %q is not supported (only concept and code)", property)
	}
	switch op {
	case "is-a", "descendent-of", "is-not-a":
		below, err := cs.Below(value)
		if err != nil {
			return nil, notStoredCode(err)
		}
		switch op {
		case "descendent-of":
			return below[1:], nil
		case "is-not-a":
			return minus(cs.All(), below), nil
		}
		return below, nil
	case "generalizes":
		above, err := cs.Above(value)
		return above, notStoredCode(err)
	case "=", "in":
		var out []Concept
		for _, code := range strings.Split(value, ",") {
			c, err := cs.Lookup(strings.TrimSpace(code))
			if err != nil {
				return nil, notStoredCode(err)
			}
			out = append(out, cs.concept(c))
		}
		return out, nil
	}
	return nil, failf("filter operator %q is not supported", op)
}

// notStoredCode turns an unknown code of a filter into an expansion error.
func notStoredCode(err error) error {
	if errors.Is(err, ErrUnknownCode) {
		return failf("%s", err.Error())
	}
	return err
}

func keys(cs []Concept) map[string]bool {
	m := make(map[string]bool, len(cs))
	for _, c := range cs {
		m[c.Key()] = true
	}
	return m
}

// union appends the codes of b not in a.
func union(a, b []Concept) []Concept {
	seen := keys(a)
	for _, c := range b {
		if !seen[c.Key()] {
			seen[c.Key()] = true
			a = append(a, c)
		}
	}
	return a
}

// intersect keeps the codes of a also in b.
func intersect(a, b []Concept) []Concept {
	in := keys(b)
	out := []Concept{}
	for _, c := range a {
		if in[c.Key()] {
			out = append(out, c)
		}
	}
	return out
}

// minus keeps the codes of a not in b.
func minus(a, b []Concept) []Concept {
	out := keys(b)
	kept := []Concept{}
	for _, c := range a {
		if !out[c.Key()] {
			kept = append(kept, c)
		}
	}
	return kept
}
