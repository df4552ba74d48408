// Package terminology answers terminology questions from the ValueSet and
// CodeSystem resources stored in a tenant: value set expansion (compose
// include and exclude with enumerated concepts, whole code systems,
// hierarchy filters and nested value sets, or a stored expansion), code
// hierarchies (is-a, for :below and :above) and code look-up. It knows no
// external terminology server: what is not stored cannot be expanded, and
// the error says which part is missing.
package terminology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is a value set or code system that is not stored.
var ErrNotFound = errors.New("not found")

// ErrUnknownCode is a code its stored code system does not define.
var ErrUnknownCode = errors.New("unknown code")

// Error is a value set or code system that cannot be used as asked.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func failf(format string, args ...any) *Error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Source reads the stored terminology resources of one tenant.
type Source interface {
	// ByURL returns the JSON of every current resource of typ whose
	// canonical url is url.
	ByURL(ctx context.Context, typ, url string) ([][]byte, error)
	// ByID returns the JSON of typ/id, or an error wrapping ErrNotFound.
	ByID(ctx context.Context, typ, id string) ([]byte, error)
}

// Concept is one code of a code system.
type Concept struct {
	System  string `json:"system,omitempty"`
	Version string `json:"version,omitempty"`
	Code    string `json:"code"`
	Display string `json:"display,omitempty"`
}

// Key is the concept's token index value: "system|code".
func (c Concept) Key() string { return c.System + "|" + c.Code }

// Service answers terminology questions from one Source.
type Service struct{ src Source }

// New is a Service reading from src.
func New(src Source) *Service { return &Service{src: src} }

// MaxDepth bounds nested value sets (a value set including itself fails
// sooner, as a cycle).
const MaxDepth = 8

// ValueSet returns the stored ValueSet that ref names: "ValueSet/id", or a
// canonical URL, optionally "url|version" (without a version the most
// recent version stored), or else a literal URL ending in ValueSet/id.
func (s *Service) ValueSet(ctx context.Context, ref string) ([]byte, error) {
	if id, ok := strings.CutPrefix(ref, "ValueSet/"); ok && !strings.Contains(id, "/") {
		b, err := s.src.ByID(ctx, "ValueSet", id)
		if err != nil {
			return nil, fmt.Errorf("value set %s: %w", ref, err)
		}
		return b, nil
	}
	url, version, _ := strings.Cut(ref, "|")
	b, err := s.canonical(ctx, "ValueSet", url, version)
	if errors.Is(err, ErrNotFound) && version == "" {
		// A literal reference to this server's ValueSet/id, absolute or not.
		if i := strings.LastIndex(url, "/ValueSet/"); i >= 0 && !strings.Contains(url[i+len("/ValueSet/"):], "/") {
			if lit, litErr := s.src.ByID(ctx, "ValueSet", url[i+len("/ValueSet/"):]); litErr == nil {
				return lit, nil
			}
		}
	}
	return b, err
}

// canonical finds the stored resource of typ with that url and version
// ("" for the last one written).
func (s *Service) canonical(ctx context.Context, typ, url, version string) ([]byte, error) {
	all, err := s.src.ByURL(ctx, typ, url)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", typ, url, err)
	}
	for i := len(all) - 1; i >= 0; i-- {
		var head struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(all[i], &head) == nil && (version == "" || head.Version == version) {
			return all[i], nil
		}
	}
	if version != "" {
		return nil, fmt.Errorf("%s %s version %s: %w", typ, url, version, ErrNotFound)
	}
	return nil, fmt.Errorf("%s %s: %w", typ, url, ErrNotFound)
}

// CodeSystem returns the stored CodeSystem of that canonical url (and
// version, "" for the last one written).
func (s *Service) CodeSystem(ctx context.Context, url, version string) (*CodeSystem, error) {
	b, err := s.canonical(ctx, "CodeSystem", url, version)
	if err != nil {
		return nil, err
	}
	return ParseCodeSystem(b)
}
