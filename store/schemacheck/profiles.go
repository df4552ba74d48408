package schemacheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"fhirstore/fhirschema"
	"fhirstore/fhirschema/profile"
	"fhirstore/store"
)

// baseProfilePrefix starts the URL of every core resource definition: a
// resource claiming its own base definition has been checked against it.
const baseProfilePrefix = "http://hl7.org/fhir/StructureDefinition/"

// why says how a profile came to be checked.
type why int

const (
	claimed  why = iota // in meta.profile
	asked               // named by the caller ($validate's profile)
	required            // required of the type by the policy
)

// wanted is one profile a resource is checked against.
type wanted struct {
	url string
	why why
	// at is the FHIRPath of the claim (meta.profile[i]) or of where it
	// is missing (meta.profile).
	at string
}

// checkProfiles validates the resource against every profile it claims,
// every profile asked for and every profile the policy requires of its
// type, and reports a required profile that is not claimed. A reference
// to another entry of its batch or transaction is checked against the
// profiles that entry claims, or else the one it conforms to.
func (c *Checker) checkProfiles(ctx context.Context, in store.Validation, defs profile.Definitions) ([]fhirschema.Issue, error) {
	if !bytes.Contains(in.Body, []byte(`"profile"`)) && len(in.Profiles) == 0 && len(c.policy.required(in.Tenant, in.Type)) == 0 {
		return nil, nil // nothing to check: spare the decoding
	}
	claims, ok := claimedProfiles(in)
	if !ok {
		return nil, nil // the base validation has said what is wrong
	}
	want, issues := c.profilesToCheck(in, claims)
	if len(want) == 0 {
		return issues, nil
	}
	var opts []profile.Option
	if in.Bundle != nil {
		opts = append(opts, profile.WithIndexedBundle(in.Bundle.Index(indexEntries).(*profile.Bundle)))
	}
	var resource map[string]any // decoded for the first profile that can be checked
	for _, w := range want {
		err := c.profiles.Lookup(ctx, defs, w.url)
		if errors.Is(err, profile.ErrUnknownProfile) || errors.Is(err, profile.ErrInvalidProfile) {
			issues = append(issues, c.unusableProfile(in, w, err))
			continue
		}
		if err == nil && resource == nil {
			if resource, err = decodeResource(in); err != nil {
				return nil, nil // the base validation has said what is wrong
			}
		}
		var found []fhirschema.Issue
		if err == nil {
			found, err = c.profiles.Validate(ctx, defs, resource, w.url, opts...)
		}
		if err != nil {
			return nil, fmt.Errorf("validate against %s: %w", w.url, err)
		}
		issues = append(issues, found...)
	}
	return issues, nil
}

// indexEntries indexes the entries of a batch or transaction for the
// profile validator, which resolves references among them.
func indexEntries(entries []store.BundleEntry) any {
	list := make([]profile.Entry, len(entries))
	for i, e := range entries {
		list[i] = profile.Entry{FullURL: e.FullURL, Type: e.Type, ID: e.ID, Resource: e.Resource}
	}
	return profile.IndexEntries(list)
}

// claimedProfiles reads the resource's meta.profile, without decoding the
// rest when it is not decoded yet; ok is false when the body is not a
// JSON object.
func claimedProfiles(in store.Validation) (claims []string, ok bool) {
	var list []any
	if in.Resource != nil {
		meta, _ := in.Resource["meta"].(map[string]any)
		list, _ = meta["profile"].([]any)
	} else {
		var r struct {
			Meta struct {
				Profile []any `json:"profile"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(in.Body, &r); err != nil {
			var typeErr *json.UnmarshalTypeError
			if !errors.As(err, &typeErr) {
				return nil, false
			}
			// meta or meta.profile of another shape: nothing is claimed there
		}
		list = r.Meta.Profile
	}
	claims = make([]string, len(list))
	for i, p := range list {
		claims[i], _ = p.(string)
	}
	return claims, true
}

// decodeResource is the resource, the profile validator's input, with its
// numbers as written.
func decodeResource(in store.Validation) (map[string]any, error) {
	if in.Resource != nil {
		return in.Resource, nil
	}
	dec := json.NewDecoder(bytes.NewReader(in.Body))
	dec.UseNumber()
	var r map[string]any
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	return r, nil
}

// profilesToCheck lists the profiles to check, each once, and the issue of
// each required profile the resource does not claim.
func (c *Checker) profilesToCheck(in store.Validation, claims []string) ([]wanted, []fhirschema.Issue) {
	var want []wanted
	var issues []fhirschema.Issue
	seen := map[string]bool{}
	add := func(w wanted) {
		u, _, _ := strings.Cut(w.url, "|")
		if w.url == "" || seen[u] || u == baseProfilePrefix+in.Type {
			return
		}
		seen[u] = true
		want = append(want, w)
	}
	for i, u := range claims {
		add(wanted{url: u, why: claimed, at: in.Type + ".meta.profile[" + strconv.Itoa(i) + "]"})
	}
	for _, u := range in.Profiles {
		add(wanted{url: u, why: asked})
	}
	for _, u := range c.policy.required(in.Tenant, in.Type) {
		if !claimsProfile(claims, u) {
			issues = append(issues, fhirschema.Issue{Severity: "error", Code: "required", Expression: in.Type + ".meta.profile",
				Diagnostics: fmt.Sprintf("every %s must claim the profile %s in meta.profile (a setting of this server)", in.Type, u)})
		}
		add(wanted{url: u, why: required, at: in.Type + ".meta.profile"})
	}
	return want, issues
}

// unusableProfile is the issue of a profile the tenant does not hold, or
// holds in a form that cannot be used: an error when it was asked for or
// is required, or when the policy says so; a warning otherwise.
func (c *Checker) unusableProfile(in store.Validation, w wanted, err error) fhirschema.Issue {
	what := fmt.Sprintf("the profile %s is unknown to this server", w.url)
	if errors.Is(err, profile.ErrInvalidProfile) {
		what = fmt.Sprintf("the profile %s cannot be used (%v)", w.url, err)
	}
	is := fhirschema.Issue{Severity: "warning", Code: "not-supported", Expression: w.at, Diagnostics: what + ": the resource was not checked against it"}
	switch {
	case w.why != claimed:
		is.Severity, is.Diagnostics = "error", what
	case c.policy.unknownIsError(in.Tenant):
		is.Severity, is.Diagnostics = "error", what+", and this server refuses resources claiming profiles it cannot check"
	}
	return is
}

// claimsProfile reports whether claims hold url, with or without a version.
func claimsProfile(claims []string, url string) bool {
	for _, c := range claims {
		if c == url || strings.HasPrefix(c, url+"|") {
			return true
		}
	}
	return false
}
