package terminology

import (
	"context"
	"encoding/json"
	"fmt"
)

// CodeSystem is a stored CodeSystem with its concept hierarchy
// (concept.concept) indexed by code.
type CodeSystem struct {
	ID      string         `json:"id"`
	URL     string         `json:"url"`
	Version string         `json:"version"`
	Name    string         `json:"name"`
	Title   string         `json:"title"`
	Content string         `json:"content"`
	Concept []*CodeConcept `json:"concept"`

	byCode        map[string]*CodeConcept
	parent, child map[string][]string
}

// CodeConcept is one concept of a CodeSystem, with its children.
type CodeConcept struct {
	Code        string            `json:"code"`
	Display     string            `json:"display"`
	Definition  string            `json:"definition"`
	Designation []json.RawMessage `json:"designation"`
	Property    []json.RawMessage `json:"property"`
	Concept     []*CodeConcept    `json:"concept"`
}

// ParseCodeSystem reads a CodeSystem resource.
func ParseCodeSystem(b []byte) (*CodeSystem, error) {
	cs := &CodeSystem{}
	if err := json.Unmarshal(b, cs); err != nil {
		return nil, fmt.Errorf("read code system: %w", err)
	}
	cs.byCode = map[string]*CodeConcept{}
	cs.parent, cs.child = map[string][]string{}, map[string][]string{}
	var walk func(parent string, list []*CodeConcept)
	walk = func(parent string, list []*CodeConcept) {
		for _, c := range list {
			if _, seen := cs.byCode[c.Code]; !seen {
				cs.byCode[c.Code] = c
			}
			if parent != "" {
				cs.parent[c.Code] = append(cs.parent[c.Code], parent)
				cs.child[parent] = append(cs.child[parent], c.Code)
			}
			walk(c.Code, c.Concept)
		}
	}
	walk("", cs.Concept)
	return cs, nil
}

// Lookup returns the concept of code, or an error wrapping ErrUnknownCode.
func (cs *CodeSystem) Lookup(code string) (*CodeConcept, error) {
	c, ok := cs.byCode[code]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not in code system %s", ErrUnknownCode, code, cs.URL)
	}
	return c, nil
}

// Parents lists the codes directly above code.
func (cs *CodeSystem) Parents(code string) []string { return cs.parent[code] }

// Children lists the codes directly below code.
func (cs *CodeSystem) Children(code string) []string { return cs.child[code] }

// checkComplete refuses a code system that does not list its codes.
func (cs *CodeSystem) checkComplete() error {
	if cs.Content == "not-present" {
		return failf("code system %s is stored without its concepts (content not-present)", cs.URL)
	}
	return nil
}

// All lists every concept of the code system, parents before children.
func (cs *CodeSystem) All() []Concept {
	var out []Concept
	seen := map[string]bool{}
	var walk func(list []*CodeConcept)
	walk = func(list []*CodeConcept) {
		for _, c := range list {
			if !seen[c.Code] {
				seen[c.Code] = true
				out = append(out, cs.concept(c))
			}
			walk(c.Concept)
		}
	}
	walk(cs.Concept)
	return out
}

func (cs *CodeSystem) concept(c *CodeConcept) Concept {
	return Concept{System: cs.URL, Version: cs.Version, Code: c.Code, Display: c.Display}
}

// Below lists code and every code under it (transitively).
func (cs *CodeSystem) Below(code string) ([]Concept, error) {
	return cs.walk(code, cs.child)
}

// Above lists code and every code over it (transitively).
func (cs *CodeSystem) Above(code string) ([]Concept, error) {
	return cs.walk(code, cs.parent)
}

// walk lists code and every code reachable from it through next.
func (cs *CodeSystem) walk(code string, next map[string][]string) ([]Concept, error) {
	if _, err := cs.Lookup(code); err != nil {
		return nil, err
	}
	var out []Concept
	seen := map[string]bool{}
	var visit func(c string)
	visit = func(c string) {
		if seen[c] {
			return
		}
		seen[c] = true
		out = append(out, cs.concept(cs.byCode[c]))
		for _, n := range next[c] {
			visit(n)
		}
	}
	visit(code)
	return out, nil
}

// Hierarchy lists the codes at or below (relation "below") or at or above
// ("above") code in the stored CodeSystem system.
func (s *Service) Hierarchy(ctx context.Context, relation, system, code string) ([]Concept, error) {
	cs, err := s.CodeSystem(ctx, system, "")
	if err != nil {
		return nil, err
	}
	if err := cs.checkComplete(); err != nil {
		return nil, err
	}
	if relation == "above" {
		return cs.Above(code)
	}
	return cs.Below(code)
}
