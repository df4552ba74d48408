package profile

import (
	"fmt"
	"strings"
)

// codedTypes are the types a binding applies to.
var codedTypes = map[string]bool{"code": true, "Coding": true, "CodeableConcept": true, "Quantity": true, "string": true, "uri": true}

// coding is a system and code taken from a coded value.
type coding struct{ system, code string }

// checkBinding checks a coded value against the element's value set:
// outside a required binding is an error, outside an extensible or
// preferred one a warning; a value set that cannot be expanded from the
// definitions at hand is a warning saying so.
func (w *walker) checkBinding(p *compiled, el *element, n node) {
	b := el.binding
	if b == nil || !codedTypes[n.typ] && !quantityTypes[n.typ] {
		return
	}
	switch b.strength {
	case "required", "extensible", "preferred":
	default:
		return
	}
	codes, textOnly := codingsOf(n)
	if len(codes) == 0 {
		if textOnly && b.strength == "required" {
			w.errorf(p, "code-invalid", n.loc(), "%s: no code given, and a code from %s is required", elementID(el), b.valueSet)
		}
		return
	}
	x, err := w.sc.expansion(w.ctx, b.valueSet)
	if err != nil {
		w.warnf(p, "code-invalid", n.loc(), "%s: the value set %s cannot be expanded: %v", elementID(el), b.valueSet, err)
		return
	}
	member, unknown := x.any(codes)
	switch {
	case member:
	case unknown != "":
		w.warnf(p, "code-invalid", n.loc(), "%s: cannot check %s against the %s value set %s: %s", elementID(el), describe(codes), b.strength, b.valueSet, unknown)
	case b.strength == "required":
		w.errorf(p, "code-invalid", n.loc(), "%s: %s in the required value set %s", elementID(el), notIn(codes), b.valueSet)
	default:
		w.warnf(p, "code-invalid", n.loc(), "%s: %s in the %s value set %s", elementID(el), notIn(codes), b.strength, b.valueSet)
	}
}

// codingsOf takes the codes of a code, Coding, CodeableConcept, Quantity,
// string or uri value. textOnly reports a complex value with no code and
// no extension (such as a data absent reason) standing for one.
func codingsOf(n node) (codes []coding, textOnly bool) {
	switch v := n.value.(type) {
	case string:
		return []coding{{code: v}}, false
	case map[string]any:
		if n.typ == "CodeableConcept" {
			list, _ := v["coding"].([]any)
			for _, x := range list {
				m, _ := x.(map[string]any)
				if c, ok := codingOf(m); ok {
					codes = append(codes, c)
				}
			}
			_, extended := v["extension"]
			return codes, len(codes) == 0 && len(list) == 0 && !extended
		}
		if c, ok := codingOf(v); ok {
			return []coding{c}, false
		}
		_, extended := v["extension"]
		return nil, n.typ != "Quantity" && !extended
	}
	return nil, false
}

func codingOf(m map[string]any) (coding, bool) {
	code, _ := m["code"].(string)
	if code == "" {
		return coding{}, false
	}
	sys, _ := m["system"].(string)
	return coding{system: sys, code: code}, true
}

// notIn says that codes are not in a value set: "the code X is not",
// "none of the codes X, Y is".
func notIn(codes []coding) string {
	d := describe(codes)
	if len(codes) == 1 {
		return d + " is not"
	}
	return "none of " + d + " is"
}

// describe names codes for a message.
func describe(codes []coding) string {
	parts := make([]string, len(codes))
	for i, c := range codes {
		if c.system == "" {
			parts[i] = fmt.Sprintf("%q", c.code)
		} else {
			parts[i] = c.system + "|" + c.code
		}
	}
	if len(parts) == 1 {
		return "the code " + parts[0]
	}
	return "the codes " + strings.Join(parts, ", ")
}
