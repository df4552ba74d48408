package profile

import (
	"slices"
	"strings"

	"fhirstore/fhirschema"
)

// complexTypes are the R4 complex data types.
var complexTypes = map[string]bool{}

// resourceTypes are the R4 resource types.
var resourceTypes = map[string]bool{}

func init() {
	for _, t := range fhirschema.ResourceTypes() {
		resourceTypes[t] = true
	}
	for _, t := range strings.Fields(`Address Age Annotation Attachment BackboneElement CodeableConcept Coding
		ContactDetail ContactPoint Contributor Count DataRequirement Distance Dosage Duration Element
		ElementDefinition Expression Extension HumanName Identifier MarketingStatus Meta Money MoneyQuantity
		Narrative ParameterDefinition Period Population ProdCharacteristic ProductShelfLife Quantity Range
		Ratio Reference RelatedArtifact SampledData Signature SimpleQuantity SubstanceAmount Timing
		TriggerDefinition UsageContext`) {
		complexTypes[t] = true
	}
}

// quantityTypes are the types a Quantity may be constrained to.
var quantityTypes = map[string]bool{"Age": true, "Count": true, "Distance": true, "Duration": true, "SimpleQuantity": true, "MoneyQuantity": true}

// checkType checks the value's type against the element's types: a
// choice's type must be one the element allows, a resource one of the
// resource types it allows. It reports false when the value should not be
// checked further.
func (w *walker) checkType(p *compiled, el *element, n node) bool {
	if len(el.types) == 0 || n.typ == "" {
		return true
	}
	codes := el.typeCodes()
	if allowsType(codes, n.typ) {
		return true
	}
	if el.choice() {
		w.errorf(p, "structure", n.loc(), "%s: type %s is not allowed, only %s", elementID(el), n.typ, strings.Join(codes, ", "))
		return false
	}
	if m, ok := n.value.(map[string]any); ok && m["resourceType"] != nil {
		w.errorf(p, "structure", n.loc(), "%s: a %s is not allowed, only %s", elementID(el), n.typ, strings.Join(codes, ", "))
		return false
	}
	return true
}

// allowsType reports whether a value of type typ fits one of codes.
func allowsType(codes []string, typ string) bool {
	for _, c := range codes {
		switch {
		case c == typ, c == "Resource", c == "DomainResource" && typ != "Bundle" && typ != "Binary" && typ != "Parameters":
			return true
		case c == "Quantity" && quantityTypes[typ], c == "BackboneElement" || c == "Element":
			return true
		}
	}
	return false
}

// typeProfiles validates the value against the profiles its type names
// (an extension's definition, SimpleQuantity, a contained resource's
// profile): it must conform to at least one of them. It reports whether
// there was one, which then stands for the value's children.
func (w *walker) typeProfiles(p *compiled, el *element, n node) bool {
	var urls []string
	for _, t := range el.types {
		if len(el.types) == 1 || t.code == n.typ {
			urls = append(urls, t.profiles...)
		}
	}
	if len(urls) == 0 {
		return false
	}
	if len(urls) == 1 {
		w.conformTo(p, urls[0], n)
		return true
	}
	var first []fhirschema.Issue
	for i, url := range urls {
		found := w.trial(func() { w.conformTo(p, url, n) })
		if !hasError(found) {
			w.issues = append(w.issues, found...)
			return true
		}
		if i == 0 {
			first = found
		}
	}
	w.errorf(p, "structure", n.loc(), "%s: the value conforms to none of the profiles %s", elementID(el), strings.Join(urls, ", "))
	w.issues = append(w.issues, first...)
	return true
}

// conformTo validates n against the profile at url, which element el of p
// names.
func (w *walker) conformTo(p *compiled, url string, n node) {
	tp, err := w.sc.profile(w.ctx, url)
	switch {
	case err != nil:
		w.errorf(p, "invalid", n.loc(), "the profile %s cannot be used: %v", url, err)
		return
	case tp == nil:
		if strings.HasPrefix(url, coreBase) {
			return // a core type's own definition: the base validator's part
		}
		w.warnf(p, "not-supported", n.loc(), "the profile %s is not known; the value is not checked against it", url)
		return
	}
	if tp.kind == "resource" {
		if m, ok := n.value.(map[string]any); ok {
			if slices.Contains(claimedProfiles(m), url) {
				return // validated as the resource's claimed profile
			}
			prev := w.resource
			w.resource = m
			defer func() { w.resource = prev }()
		}
	}
	w.element(tp, tp.root, n)
}
