// Package schemacheck puts validation on the store's write path: the
// official R4 schema and invariants (package fhirschema) and the profiles a
// resource claims (package fhirschema/profile). Every create, update and
// bundle entry is checked before anything is written.
package schemacheck

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
	"fhirstore/fhirschema/questionnaire"
	"fhirstore/store"
)

// Checker runs the checks of a write in order, stopping at the first
// layer that refuses: the base structure and core invariants (package
// fhirschema), then every profile the resource claims (package
// fhirschema/profile), then a form's rules and a response's answers
// against its form (package fhirschema/questionnaire). Safe for concurrent use.
type Checker struct {
	base     *fhirschema.Validator
	profiles *profile.Validator
	forms    *questionnaire.Checker
	policy   Policy
	exts     extensionCache
}

// Option tunes a Checker.
type Option func(*Checker)

// WithPolicy sets what writes must do about profiles.
func WithPolicy(p Policy) Option { return func(c *Checker) { c.policy = p } }

// New returns a Checker validating with v.
func New(v *fhirschema.Validator, opts ...Option) *Checker {
	c := &Checker{base: v, profiles: profile.NewValidator(), forms: questionnaire.NewChecker()}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Validator adapts a Checker on v to the store's Validator: errors become
// an *store.InvalidError, everything else warnings. Profiles are looked up
// among the tenant's conformance resources, then the core ones.
// Extensions whose definition is a StructureDefinition of the tenant are
// checked against it.
func Validator(v *fhirschema.Validator, opts ...Option) store.Validator {
	c := New(v, opts...)
	core := profile.Core()
	return func(ctx context.Context, in store.Validation) ([]store.Issue, error) {
		return c.Check(ctx, in, profile.Merge(in.Definitions, core))
	}
}

// Check validates one resource as a write would, with defs for its
// profiles.
func (c *Checker) Check(ctx context.Context, in store.Validation, defs profile.Definitions) ([]store.Issue, error) {
	exts := &tenantExtensions{ctx: ctx, find: in.Find, known: map[string][]string{}, lookedUp: map[string]bool{},
		cache: &c.exts, tenant: in.Tenant, gen: &generation{read: in.Definitions.Generation}}
	vopts := fhirschema.Options{Lenient: in.Lenient, Extensions: exts.types, BestPractice: in.Check}
	var r *fhirschema.Result
	if in.Resource != nil {
		r = c.base.ValidateDecoded(in.Type, in.Resource, vopts)
	} else {
		r = c.base.Validate(in.Type, in.Body, vopts)
	}
	if exts.err != nil {
		return nil, fmt.Errorf("read extension definitions: %w", exts.err)
	}
	issues := r.Issues
	if in.Type == "Questionnaire" && !valid(issues) {
		// que-2 (unique linkIds) names only the Questionnaire: the form's
		// own rules say which item repeats a linkId.
		issues = append(issues, c.formIssues(in)...)
	}
	for _, layer := range []func(context.Context, store.Validation, profile.Definitions) ([]fhirschema.Issue, error){checkStructure, checkBundle, checkTerminology, checkVitalSigns, c.checkProfiles, c.checkForms, checkMeasureReport} {
		if !valid(issues) {
			break
		}
		more, err := layer(ctx, in, defs)
		if err != nil {
			return nil, err
		}
		issues = append(issues, more...)
	}
	return storeIssues(issues)
}

// storeIssues splits issues into the error refusing the resource (when
// any is an error) and warnings.
func storeIssues(issues []fhirschema.Issue) ([]store.Issue, error) {
	var errs, warnings []store.Issue
	for _, is := range issues {
		si := store.Issue{Severity: is.Severity, Code: is.Code, Diagnostics: is.Diagnostics, Expression: is.Expression, Key: is.Key, Source: is.Source}
		if is.Severity == "error" || is.Severity == "fatal" {
			errs = append(errs, si)
		} else {
			warnings = append(warnings, si)
		}
	}
	if len(errs) > 0 {
		return nil, &store.InvalidError{Issues: append(errs, warnings...)}
	}
	return warnings, nil
}

// tenantExtensions finds extension definitions among the tenant's
// StructureDefinitions, each URL once per validation.
type tenantExtensions struct {
	ctx  context.Context
	find func(ctx context.Context, typ, condition string) ([][]byte, error)
	// known holds what the definitions read so far say (see
	// fhirschema.ExtensionDefinitions); looked up records the URLs asked for.
	known    map[string][]string
	lookedUp map[string]bool
	err      error
	// cache keeps what was read under the tenant's generation gen.
	cache  *extensionCache
	tenant string
	gen    *generation
}

// types answers for url, or url#name for an extension nested in the one
// defined at url.
func (t *tenantExtensions) types(u string) ([]string, bool) {
	base, _, _ := strings.Cut(u, "#")
	// Only an absolute URL names a definition; the relative ones name the
	// parts of a complex extension.
	if t.find == nil || t.err != nil || !strings.Contains(base, ":") {
		return nil, false
	}
	if !t.lookedUp[base] {
		t.lookedUp[base] = true
		t.err = t.read(base)
	}
	types, ok := t.known[u]
	return types, ok
}

// read adds what the tenant's definition of the extension at url says,
// from the cache when the tenant's definitions are as they were.
func (t *tenantExtensions) read(u string) error {
	gen, err := t.gen.value(t.ctx)
	if err != nil {
		return err
	}
	key := t.tenant + " " + u
	known, ok := t.cache.get(key, gen)
	if !ok {
		if known, err = t.readDefinition(u); err != nil {
			return err
		}
		t.cache.put(key, gen, known)
	}
	for k, types := range known {
		t.known[k] = types
	}
	return nil
}

// readDefinition reads what the tenant's definitions of the extension at
// url say of it and of the extensions nested in it.
func (t *tenantExtensions) readDefinition(u string) (map[string][]string, error) {
	known := map[string][]string{}
	found, err := t.find(t.ctx, "StructureDefinition", "url="+url.QueryEscape(u))
	if err != nil {
		return nil, err
	}
	for _, sd := range found {
		defs, err := fhirschema.ExtensionDefinitions(sd)
		if err != nil {
			continue // not ours to judge here: it was validated when stored
		}
		for key, types := range defs {
			if key == u || strings.HasPrefix(key, u+"#") {
				known[key] = types
			}
		}
	}
	return known, nil
}
