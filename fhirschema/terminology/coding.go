package terminology

import (
	"strings"
)

// coding checks a Coding against its code system: a system that is a
// supplement is not one to take codes from; a code of a system the
// definitions hold in full must be one of its codes, and its display one
// of the code's (a warning otherwise); a SNOMED CT code must be a concept
// identifier or an expression.
func (r *run) coding(l *loc, m map[string]any) {
	sys, _ := m["system"].(string)
	code, _ := m["code"].(string)
	if sys == "" {
		return
	}
	if sys == SNOMED {
		if why := snomedCode(code); code != "" && why != "" {
			r.errorf(l.at("code"), "unknown code %q in the code system %s: %s", code, sys, why)
		}
		return
	}
	cs := r.system(sys)
	if cs == nil {
		if !external(sys) && !r.unknown[sys] {
			// once per resource: a claim lists the same system on every line
			if r.unknown == nil {
				r.unknown = map[string]bool{}
			}
			r.unknown[sys] = true
			r.warnf(l.at("system"), "the code system %s is not known to the server, so its codes (the first here) are not checked", sys)
		}
		return
	}
	if cs.supplements != "" {
		r.errorf(l.at("system"), "the code system %s is a supplement (of %s), so it cannot be the system of a code", sys, cs.supplements)
		return
	}
	if code == "" || !cs.complete() {
		return
	}
	if v, _ := m["version"].(string); v != "" && cs.version != "" && v != cs.version {
		return // another version's codes are not known here
	}
	spelt, ok := cs.lookup(code)
	if !ok {
		r.errorf(l.at("code"), "unknown code %q in the code system %s", code, sys)
		return
	}
	display, _ := m["display"].(string)
	names := cs.displays[spelt]
	if display == "" || len(names) == 0 {
		return
	}
	for _, n := range names {
		if sameDisplay(n, display) {
			return
		}
	}
	r.warnf(l.at("display"), "the display %q is not a display of %s|%s: it is %q", display, sys, spelt, names[0])
}

// externalSystems start the URLs of the terminologies R4 names but does
// not define (terminologies-systems.html): the server cannot hold them,
// and a code of one is not reported as unchecked.
var externalSystems = []string{
	"http://loinc.org", "http://www.nlm.nih.gov/research/umls/rxnorm", "http://hl7.org/fhir/sid/",
	"http://unitsofmeasure.org", "urn:ietf:bcp:", "urn:iso:std:iso:", "urn:oid:", "urn:uuid:",
	"http://dicom.nema.org/", "http://www.ama-assn.org/go/cpt", "http://nucc.org/", "http://www.whocc.no/atc",
	"http://hl7.org/fhir/ndfrt", "http://fdasis.nlm.nih.gov", "http://www.radlex.org", "http://www.genenames.org",
	"http://www.ensembl.org", "http://www.ncbi.nlm.nih.gov/", "http://varnomen.hgvs.org", "http://id.who.int/icd/",
	"http://www.cms.gov/Medicare/Coding/", "http://ncimeta.nci.nih.gov", "http://www.ebi.ac.uk/",
	"http://sequenceontology.org", "http://www.pharmgkb.org", "http://www.nubc.org/", "https://www.usps.com/",
	"http://www.cdc.gov/", "https://www.cdc.gov/", "http://snomed.info/",
}

// external reports whether sys is one of the external terminologies.
func external(sys string) bool {
	for _, p := range externalSystems {
		if strings.HasPrefix(sys, p) {
			return true
		}
	}
	return false
}

// sameDisplay compares displays as terminology servers do: without regard
// to case or runs of white space.
func sameDisplay(a, b string) bool {
	return strings.EqualFold(strings.Join(strings.Fields(a), " "), strings.Join(strings.Fields(b), " "))
}

// binding checks a coded value against the required or extensible value
// set of its core element: a code outside a required value set is an
// error, outside an extensible one a warning; a value set that cannot be
// expanded from the definitions (one drawing on SNOMED CT) leaves the
// code unchecked. Codes are the schema's to check (its enumerations).
func (r *run) binding(info *node, typ string, l *loc, m map[string]any) {
	var codes [][2]string
	switch typ {
	case "Coding":
		if c, ok := codeOf(m); ok {
			codes = append(codes, c)
		}
	case "CodeableConcept":
		for _, cm := range objects(m["coding"]) {
			if c, ok := codeOf(cm); ok {
				codes = append(codes, c)
			}
		}
	default:
		return
	}
	if len(codes) == 0 {
		return
	}
	for _, c := range codes {
		member, unknown := r.memberOf(info.valueSet, c[0], c[1])
		if member || unknown != "" {
			return
		}
	}
	what := "the code " + codes[0][0] + "|" + codes[0][1] + " is"
	if len(codes) > 1 {
		what = "none of the codes is"
	}
	if info.strength == "required" {
		r.errorf(l.String(), "%s not in the value set %s, and a code from it is required", what, info.valueSet)
	} else {
		r.warnf(l.String(), "%s not in the value set %s, and a code from it should be used (the binding is extensible)", what, info.valueSet)
	}
}

// codeOf takes the system and code of a Coding.
func codeOf(m map[string]any) ([2]string, bool) {
	code, _ := m["code"].(string)
	sys, _ := m["system"].(string)
	return [2]string{sys, code}, code != ""
}
