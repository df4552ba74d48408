package profile

import (
	"context"
	"fmt"

	"fhirstore/fhirschema"
)

// maxValueSetDepth bounds value sets that include value sets.
const maxValueSetDepth = 16

// expansion is what a value set holds, as far as the definitions tell:
// its codes, and the systems (or, under "", the whole set) whose codes
// cannot all be known.
type expansion struct {
	codes   map[coding]bool
	byCode  map[string]bool
	partial map[string]string // system → why its codes are not all known
}

func newExpansion() *expansion {
	return &expansion{codes: map[coding]bool{}, byCode: map[string]bool{}, partial: map[string]string{}}
}

func (x *expansion) add(c coding) {
	x.codes[c] = true
	x.byCode[c.code] = true
}

// contains reports whether c is in the value set; unknown says why the
// answer cannot be known when it is not found.
func (x *expansion) contains(c coding) (member bool, unknown string) {
	if c.system == "" {
		if x.byCode[c.code] {
			return true, ""
		}
		for _, why := range x.partial {
			return false, why
		}
		return false, ""
	}
	if x.codes[c] {
		return true, ""
	}
	if why, ok := x.partial[c.system]; ok {
		return false, why
	}
	return false, x.partial[""]
}

// any reports whether one of codes is in the value set; unknown says why
// that cannot be known when none is found.
func (x *expansion) any(codes []coding) (member bool, unknown string) {
	for _, c := range codes {
		m, why := x.contains(c)
		if m {
			return true, ""
		}
		if unknown == "" {
			unknown = why
		}
	}
	return false, unknown
}

// merge adds y's codes and unknowns to x.
func (x *expansion) merge(y *expansion) {
	for c := range y.codes {
		x.add(c)
	}
	for s, why := range y.partial {
		if _, ok := x.partial[s]; !ok {
			x.partial[s] = why
		}
	}
}

// expander expands value sets from the definitions.
type expander struct {
	ctx      context.Context
	defs     Definitions
	visiting map[string]bool
}

// expand computes the expansion of the value set at url.
func expand(ctx context.Context, defs Definitions, url string) (*expansion, error) {
	e := &expander{ctx: ctx, defs: defs, visiting: map[string]bool{}}
	return e.valueSet(url, 0)
}

func (e *expander) valueSet(url string, depth int) (*expansion, error) {
	x := newExpansion()
	if depth > maxValueSetDepth || e.visiting[url] {
		x.partial[""] = "the value set " + url + " includes itself"
		return x, nil
	}
	e.visiting[url] = true
	defer delete(e.visiting, url)
	vs, err := lookup(e.ctx, e.defs, "ValueSet", url)
	if err != nil {
		return nil, err
	}
	if vs == nil {
		x.partial[""] = "the value set " + url + " is not available"
		return x, nil
	}
	if exp, ok := vs["expansion"].(map[string]any); ok {
		readContains(x, exp["contains"])
		return x, nil
	}
	compose, _ := vs["compose"].(map[string]any)
	if compose == nil {
		x.partial[""] = "the value set " + url + " has neither a compose nor an expansion"
		return x, nil
	}
	for _, inc := range objects(compose["include"]) {
		part, err := e.include(inc, depth)
		if err != nil {
			return nil, fmt.Errorf("value set %s: %w", url, err)
		}
		x.merge(part)
	}
	for _, exc := range objects(compose["exclude"]) {
		part, err := e.include(exc, depth)
		if err != nil {
			return nil, fmt.Errorf("value set %s: %w", url, err)
		}
		exclude(x, part)
	}
	return x, nil
}

// exclude removes part's codes from x; what part cannot tell makes x
// uncertain for those systems.
func exclude(x, part *expansion) {
	for c := range part.codes {
		delete(x.codes, c)
	}
	x.byCode = map[string]bool{}
	for c := range x.codes {
		x.byCode[c.code] = true
	}
	for s, why := range part.partial {
		x.partial[s] = "an exclusion cannot be computed: " + why
	}
}

func readContains(x *expansion, v any) {
	for _, m := range objects(v) {
		sys, _ := m["system"].(string)
		if code, _ := m["code"].(string); code != "" {
			x.add(coding{sys, code})
		}
		readContains(x, m["contains"])
	}
}

// include expands one compose.include (or exclude): the codes of a system
// (listed, filtered or all) intersected with the value sets it names.
func (e *expander) include(inc map[string]any, depth int) (*expansion, error) {
	var parts []*expansion
	if sys, _ := inc["system"].(string); sys != "" {
		part, err := e.system(sys, inc)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	for _, url := range strings1(inc["valueSet"]) {
		part, err := e.valueSet(url, depth+1)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return newExpansion(), nil
	}
	return intersect(parts), nil
}

func intersect(parts []*expansion) *expansion {
	x := newExpansion()
	for c := range parts[0].codes {
		in := true
		for _, p := range parts[1:] {
			in = in && p.codes[c]
		}
		if in {
			x.add(c)
		}
	}
	for _, p := range parts {
		for s, why := range p.partial {
			x.partial[s] = why
		}
	}
	return x
}

// system expands the codes of one system an include names.
func (e *expander) system(sys string, inc map[string]any) (*expansion, error) {
	x := newExpansion()
	if listed := objects(inc["concept"]); len(listed) > 0 {
		for _, c := range listed {
			if code, _ := c["code"].(string); code != "" {
				x.add(coding{sys, code})
			}
		}
		return x, nil
	}
	cs, err := lookup(e.ctx, e.defs, "CodeSystem", sys)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		x.partial[sys] = "the code system " + sys + " is not available"
		return x, nil
	}
	tree := newConceptTree(cs)
	codes, why := tree.filter(objects(inc["filter"]))
	for _, code := range codes {
		x.add(coding{sys, code})
	}
	if content, _ := cs["content"].(string); content != "complete" && content != "" {
		why = "the code system " + sys + " is held only in part (content " + content + ")"
	}
	if why != "" {
		x.partial[sys] = why
	}
	return x, nil
}

// objects returns the objects of a JSON array.
func objects(v any) []map[string]any { return fhirschema.Objects(v) }

// MemberOf reports whether system|code is in the value set at url as defs
// define it, with the expansion cached per definitions generation; unknown
// says why that cannot be known (the value set, or the code system it
// draws on, is not available) when member is false.
func (v *Validator) MemberOf(ctx context.Context, defs Definitions, url, system, code string) (member bool, unknown string, err error) {
	s, err := v.scope(ctx, defs)
	if err != nil {
		return false, "", err
	}
	x, err := s.expansion(ctx, url)
	if err != nil {
		return false, "", err
	}
	member, unknown = x.contains(coding{system: system, code: code})
	return member, unknown, nil
}
