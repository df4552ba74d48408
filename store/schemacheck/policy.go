package schemacheck

import (
	"fmt"
	"regexp"
	"strings"

	"fhirstore/fhirschema"
)

// allTenants keys the settings of every tenant not named on its own.
const allTenants = "*"

// Policy says what writes must do about profiles, per tenant. The zero
// value: a profile the tenant does not know is a warning, and no profile
// is required.
type Policy struct {
	// UnknownIsError holds the tenants ("*": every tenant not listed) whose
	// writes claiming an unknown profile are refused.
	UnknownIsError map[string]bool
	// Required holds, per tenant ("*": every tenant) and resource type, the
	// profiles every resource of that type must claim.
	Required map[string]map[string][]string
}

func (p Policy) unknownIsError(tenant string) bool {
	if v, ok := p.UnknownIsError[tenant]; ok {
		return v
	}
	return p.UnknownIsError[allTenants]
}

func (p Policy) required(tenant, typ string) []string {
	out := p.Required[allTenants][typ]
	if own := p.Required[tenant][typ]; len(own) > 0 {
		out = append(out[:len(out):len(out)], own...)
	}
	return out
}

// tenantPattern is the syntax of a tenant name (store.ValidateTenantName).
var tenantPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$`)

// ParsePolicy reads the two settings of the policy. unknown is a
// comma-separated list of "warning" or "error" (every tenant) and
// "TENANT=warning|error"; required a comma- or space-separated list of
// "Type=URL" (every tenant) and "TENANT/Type=URL".
func ParsePolicy(unknown, required string) (Policy, error) {
	p := Policy{UnknownIsError: map[string]bool{}, Required: map[string]map[string][]string{}}
	for _, item := range splitList(unknown) {
		tenant, sev, found := strings.Cut(item, "=")
		if !found {
			tenant, sev = allTenants, item
		}
		if tenant != allTenants && !tenantPattern.MatchString(tenant) {
			return Policy{}, fmt.Errorf("unknown profiles %q: %q is not a tenant name", item, tenant)
		}
		switch sev {
		case "error", "warning":
			p.UnknownIsError[tenant] = sev == "error"
		default:
			return Policy{}, fmt.Errorf("unknown profiles %q: say warning or error", item)
		}
	}
	for _, item := range splitList(required) {
		if err := p.addRequired(item); err != nil {
			return Policy{}, err
		}
	}
	return p, nil
}

// addRequired reads one "[TENANT/]Type=URL".
func (p Policy) addRequired(item string) error {
	key, url, _ := strings.Cut(item, "=")
	tenant, typ, found := strings.Cut(key, "/")
	if !found {
		tenant, typ = allTenants, key
	}
	switch {
	case tenant != allTenants && !tenantPattern.MatchString(tenant):
		return fmt.Errorf("required profile %q: %q is not a tenant name", item, tenant)
	case !fhirschema.IsResourceType(typ):
		return fmt.Errorf("required profile %q: %q is not a resource type", item, typ)
	case !strings.Contains(url, ":"):
		return fmt.Errorf("required profile %q: want Type=URL with the profile's canonical URL", item)
	}
	if p.Required[tenant] == nil {
		p.Required[tenant] = map[string][]string{}
	}
	p.Required[tenant][typ] = append(p.Required[tenant][typ], url)
	return nil
}

func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}
