package auth

import (
	"strings"
)

// Interaction is one of the five SMART v2 permissions a FHIR interaction needs.
type Interaction byte

// The SMART v2 permissions: create (type create), read (read, vread,
// instance history), update (update, patch), delete, search (type and
// system search and history).
const (
	Create Interaction = 'c'
	Read   Interaction = 'r'
	Update Interaction = 'u'
	Delete Interaction = 'd'
	Search Interaction = 's'
)

// String names the permission.
func (i Interaction) String() string {
	switch i {
	case Create:
		return "create"
	case Read:
		return "read"
	case Update:
		return "update"
	case Delete:
		return "delete"
	case Search:
		return "search"
	}
	return "unknown"
}

// Context is the SMART scope context: whose data a scope reaches.
type Context string

// The scope contexts. A patient scope reaches the compartment of the
// token's patient only; user and system scopes reach the whole tenant.
const (
	PatientContext Context = "patient"
	UserContext    Context = "user"
	SystemContext  Context = "system"
)

// Scope is one parsed SMART resource scope, v1 (patient/Observation.read)
// or v2 (user/*.rs).
type Scope struct {
	Context Context
	// Type is a resource type or "*".
	Type string
	// Perms holds the granted permissions in cruds order.
	Perms string
}

// ParseScope parses a SMART resource scope; false for anything else
// (openid, launch/patient, malformed scopes, v2 scopes with a ?query
// restriction, which this server does not honour and so never grants).
func ParseScope(s string) (Scope, bool) {
	ctx, rest, ok := strings.Cut(s, "/")
	if !ok {
		return Scope{}, false
	}
	switch Context(ctx) {
	case PatientContext, UserContext, SystemContext:
	default:
		return Scope{}, false
	}
	typ, perm, ok := strings.Cut(rest, ".")
	if !ok || typ == "" || strings.Contains(perm, "?") {
		return Scope{}, false
	}
	if typ != "*" && !isTypeName(typ) {
		return Scope{}, false
	}
	perms, ok := permissions(perm)
	if !ok {
		return Scope{}, false
	}
	return Scope{Context: Context(ctx), Type: typ, Perms: perms}, true
}

// permissions maps a v1 (read, write, *) or v2 (ordered subset of cruds)
// permission to the v2 letters.
func permissions(p string) (string, bool) {
	switch p {
	case "read":
		return "rs", true
	case "write":
		return "cud", true
	case "*":
		return "cruds", true
	case "":
		return "", false
	}
	const order = "cruds"
	last := -1
	for _, r := range p {
		i := strings.IndexRune(order, r)
		if i <= last { // unknown letter, repeated or out of order
			return "", false
		}
		last = i
	}
	return p, true
}

func isTypeName(s string) bool {
	if s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// Allows tells whether the scope grants interaction i on resourceType.
func (s Scope) Allows(resourceType string, i Interaction) bool {
	return (s.Type == "*" || s.Type == resourceType) && strings.IndexByte(s.Perms, byte(i)) >= 0
}

// Reach is what a principal may do with one resource type and permission.
type Reach int

// The reaches, from none to all: Denied, PatientOnly (the compartment of the
// token's patient), Full (the whole tenant).
const (
	Denied Reach = iota
	PatientOnly
	Full
)

// Decide is the reach of scopes for interaction i on resourceType: Full
// when a user or system scope allows it, PatientOnly when only a patient
// scope does and patient (the token's patient claim) is set, else Denied.
func Decide(scopes []Scope, patient, resourceType string, i Interaction) Reach {
	g := Denied
	for _, s := range scopes {
		if !s.Allows(resourceType, i) {
			continue
		}
		if s.Context != PatientContext {
			return Full
		}
		if patient != "" {
			g = PatientOnly
		}
	}
	return g
}

// ParseScopes keeps the SMART resource scopes of a token's scope list, in order.
func ParseScopes(scopes []string) []Scope {
	var out []Scope
	for _, f := range scopes {
		if s, ok := ParseScope(f); ok {
			out = append(out, s)
		}
	}
	return out
}
