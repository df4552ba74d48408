package fhirschema

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// summaryJSON lists, per resource type, the top-level elements the official
// R4 definitions mark isSummary (see gensummary.go).
//
//go:embed summary.json
var summaryJSON []byte

type summarySet struct {
	names   map[string]bool
	choices []string // choice elements without their [x]
}

var summaries = sync.OnceValue(func() map[string]summarySet {
	var raw map[string][]string
	if err := json.Unmarshal(summaryJSON, &raw); err != nil {
		panic(fmt.Sprintf("embedded summary table is not JSON: %v", err))
	}
	out := make(map[string]summarySet, len(raw))
	for typ, names := range raw {
		s := summarySet{names: map[string]bool{}}
		for _, n := range names {
			if base, ok := strings.CutSuffix(n, "[x]"); ok {
				s.choices = append(s.choices, base)
				continue
			}
			s.names[n] = true
		}
		out[typ] = s
	}
	return out
})

// IsSummaryElement reports whether a top-level JSON property of a resource
// type belongs to its summary (_summary=true): a summary element, a choice
// element's variant (deceasedBoolean for deceased[x]), or the _element
// holding a summary primitive's extensions.
func IsSummaryElement(resourceType, property string) bool {
	s, ok := summaries()[resourceType]
	if !ok {
		return false
	}
	name := strings.TrimPrefix(property, "_")
	if s.names[name] {
		return true
	}
	for _, base := range s.choices {
		if rest, ok := strings.CutPrefix(name, base); ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
			return true
		}
	}
	return false
}
