// Package terminology checks what a resource says about codes against the
// code systems and value sets the definitions hold: a code of a known code
// system must be one of its codes (SNOMED CT codes must at least be
// concept identifiers), its display one of the code's (a warning
// otherwise), a supplement is not a system of codes, and the required and
// extensible bindings of the core definitions hold (a code outside a
// required value set is an error, outside an extensible one a warning; a
// code element with a required binding needs a code even when an
// extension stands beside it). Identifiers that say they are URIs must be.
//
// CodeSystem and ValueSet resources are checked as terminology: a code
// system's content mode against its concepts, a supplement against its
// base, property definitions against the standard ones and concept
// properties against their definitions; a value set's listed codes and
// filters against the code systems they name (filter properties,
// operations and values, SNOMED CT's ECL constraints, FHIRPath filter
// parameters).
package terminology

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
)

// maxScopes bounds the definitions sets whose code systems a Checker
// keeps; past it, it starts afresh.
const maxScopes = 256

// maxSystems bounds the code systems, known or not, one scope remembers.
const maxSystems = 4096

// Checker checks terminology, caching what it reads of code systems per
// Definitions value and generation and value set expansions in the
// profile validator it is given. Safe for concurrent use.
type Checker struct {
	profiles *profile.Validator

	mu     sync.Mutex
	scopes map[any]*systems
}

// systems holds the code systems one Definitions value has at one
// generation; nil for a system it does not hold.
type systems struct {
	gen uint64
	mu  sync.Mutex
	cs  map[string]*codeSystem
}

// NewChecker returns a Checker that asks v for value set membership.
func NewChecker(v *profile.Validator) *Checker {
	return &Checker{profiles: v}
}

// Check checks the terminology of resource (decoded with UseNumber) as
// defs define it. It returns the issues found, with FHIRPath expressions
// at the elements.
func (c *Checker) Check(ctx context.Context, defs profile.Definitions, resource map[string]any) ([]fhirschema.Issue, error) {
	r := &run{ctx: ctx, c: c, defs: defs}
	typ, _ := resource["resourceType"].(string)
	r.resource(typ, &loc{name: typ, index: -1}, resource, 0)
	if r.err == nil {
		switch typ {
		case "CodeSystem":
			r.codeSystemRules(resource)
		case "ValueSet":
			r.valueSetRules(resource)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	// the walk follows JSON objects in no order
	sort.SliceStable(r.issues, func(i, j int) bool { return r.issues[i].Expression < r.issues[j].Expression })
	return r.issues, nil
}

// run is one check.
type run struct {
	ctx    context.Context
	c      *Checker
	defs   profile.Definitions
	sys    *systems
	issues []fhirschema.Issue
	// unknown holds the code systems already reported as not known.
	unknown map[string]bool
	err     error
}

func (r *run) errorf(at, format string, args ...any) {
	r.issues = append(r.issues, fhirschema.Issue{Severity: "error", Code: "code-invalid", Expression: at, Diagnostics: fmt.Sprintf(format, args...)})
}

func (r *run) warnf(at, format string, args ...any) {
	r.issues = append(r.issues, fhirschema.Issue{Severity: "warning", Code: "code-invalid", Expression: at, Diagnostics: fmt.Sprintf(format, args...)})
}

// system returns the code system at url as the definitions hold it, nil
// when they do not.
func (r *run) system(url string) *codeSystem {
	if r.err != nil || url == "" {
		return nil
	}
	if r.sys == nil {
		s, err := r.c.scope(r.ctx, r.defs)
		if err != nil {
			r.err = err
			return nil
		}
		r.sys = s
	}
	r.sys.mu.Lock()
	cs, ok := r.sys.cs[url]
	r.sys.mu.Unlock()
	if ok {
		return cs
	}
	res, err := r.defs.Resource(r.ctx, "CodeSystem", url)
	if err != nil {
		r.err = fmt.Errorf("look up CodeSystem %s: %w", url, err)
		return nil
	}
	if res == nil {
		if base, version, ok := strings.Cut(url, "|"); ok && version != "" {
			return r.system(base)
		}
	} else {
		cs = readCodeSystem(res)
	}
	r.sys.mu.Lock()
	if len(r.sys.cs) >= maxSystems {
		// the systems written in resources are anyone's: keep the cache bounded
		r.sys.cs = map[string]*codeSystem{}
	}
	r.sys.cs[url] = cs
	r.sys.mu.Unlock()
	return cs
}

// scope returns the code system cache of defs at its current generation.
func (c *Checker) scope(ctx context.Context, defs profile.Definitions) (*systems, error) {
	gen, err := defs.Generation(ctx)
	if err != nil {
		return nil, fmt.Errorf("definitions generation: %w", err)
	}
	if defs == nil || !reflect.ValueOf(defs).Comparable() {
		return &systems{gen: gen, cs: map[string]*codeSystem{}}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.scopes[defs]; s != nil && s.gen == gen {
		return s, nil
	}
	if c.scopes == nil || len(c.scopes) >= maxScopes {
		c.scopes = map[any]*systems{}
	}
	s := &systems{gen: gen, cs: map[string]*codeSystem{}}
	c.scopes[defs] = s
	return s, nil
}

// memberOf reports whether system|code is in the value set at url;
// unknown says why that cannot be known.
func (r *run) memberOf(url, system, code string) (member bool, unknown string) {
	if r.err != nil {
		return false, "an error"
	}
	m, why, err := r.c.profiles.MemberOf(r.ctx, r.defs, url, system, code)
	if err != nil {
		r.err = fmt.Errorf("value set %s: %w", url, err)
		return false, "an error"
	}
	return m, why
}
