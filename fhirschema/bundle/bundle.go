// Package bundle checks the rules of R4 that hold a Bundle's entries
// together, beyond what its schema and invariants say: each entry's
// fullUrl is an absolute URL that agrees with the type and id of its
// resource; a document's Composition and a message's MessageHeader find
// what they point to inside the Bundle; the entries of a search result are
// what their search mode says; a reference that finds its target in the
// Bundle agrees with the target's type, and a narrative link points to a
// portion of narrative its target has.
package bundle

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"fhirstore/fhirschema"
)

// fullURLOptional are the Bundle types whose entries may go without a
// fullUrl: a create in a transaction or batch has no identity yet, and
// the results of operations may be unidentified (Bundle.entry.fullUrl).
// So may an OperationOutcome about a search.
var fullURLOptional = map[string]bool{"transaction": true, "batch": true, "transaction-response": true, "batch-response": true}

// restfulURL is the regex of references.html for a RESTful URL:
// [base]/[type]/[id], optionally with /_history/[version]. The type is
// checked against the resource types apart.
var restfulURL = regexp.MustCompile(`^(https?://(?:[A-Za-z0-9\-\\.:%$]*/)+)([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})(?:/_history/([A-Za-z0-9\-.]{1,64}))?$`)

// scheme starts an absolute URI (RFC 3986: scheme ":").
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*:.`)

// entry is one entry of the Bundle at hand.
type entry struct {
	index    int
	fullURL  string
	resource map[string]any
	typ, id  string
	version  string // meta.versionId
	create   bool   // a POST in a transaction or batch
	// outcome marks an OperationOutcome about a search (search.mode
	// outcome): a result of the operation, not a resource with an identity.
	outcome bool
}

// checker holds a Bundle's entries indexed by fullUrl, and what was found.
type checker struct {
	typ     string
	entries []*entry
	byURL   map[string][]*entry
	issues  []fhirschema.Issue
}

// Check returns the problems of the Bundle b, decoded from JSON: errors
// refuse it.
func Check(b map[string]any) []fhirschema.Issue {
	c := &checker{byURL: map[string][]*entry{}}
	c.typ, _ = b["type"].(string)
	for i, e := range objects(b["entry"]) {
		en := &entry{index: i}
		en.fullURL, _ = e["fullUrl"].(string)
		en.resource, _ = e["resource"].(map[string]any)
		if en.resource != nil {
			en.typ, _ = en.resource["resourceType"].(string)
			en.id, _ = en.resource["id"].(string)
			meta, _ := en.resource["meta"].(map[string]any)
			en.version, _ = meta["versionId"].(string)
		}
		req, _ := e["request"].(map[string]any)
		en.create = req["method"] == "POST"
		search, _ := e["search"].(map[string]any)
		en.outcome = search["mode"] == "outcome"
		c.entries = append(c.entries, en)
		if en.fullURL != "" {
			c.byURL[en.fullURL] = append(c.byURL[en.fullURL], en)
		}
	}
	for _, en := range c.entries {
		c.checkFullURL(en)
	}
	switch c.typ {
	case "document":
		c.checkDocument()
	case "message":
		c.checkMessage()
	case "searchset":
		c.checkSearchResults(b)
	}
	for _, en := range c.entries {
		if en.resource != nil {
			c.checkReferences(en, en.resource, fmt.Sprintf("Bundle.entry[%d].resource", en.index))
		}
	}
	return c.issues
}

func (c *checker) errorf(code, at, format string, args ...any) {
	c.issues = append(c.issues, fhirschema.Issue{Severity: "error", Code: code, Expression: at, Diagnostics: fmt.Sprintf(format, args...)})
}

func (c *checker) warnf(code, at, format string, args ...any) {
	c.issues = append(c.issues, fhirschema.Issue{Severity: "warning", Code: code, Expression: at, Diagnostics: fmt.Sprintf(format, args...)})
}

// checkFullURL checks that an entry's fullUrl is there where the Bundle's
// type needs it, is absolute, and, when it looks like a RESTful URL, ends
// with the type and id of the resource: the fullUrl SHALL NOT disagree
// with the resource's id (Bundle.entry.fullUrl).
func (c *checker) checkFullURL(en *entry) {
	at := fmt.Sprintf("Bundle.entry[%d]", en.index)
	switch {
	case en.fullURL == "":
		if en.resource != nil && !fullURLOptional[c.typ] && !en.outcome {
			c.errorf("required", at, "an entry of a %s Bundle must have a fullUrl, the identity of its resource (only transactions, batches and the outcome of a search may leave it out)", c.typ)
		}
		return
	case !scheme.MatchString(en.fullURL):
		c.errorf("value", at+".fullUrl", "the fullUrl %q is not an absolute URL", en.fullURL)
		return
	}
	if en.resource == nil {
		return
	}
	_, typ, id, _, ok := restful(en.fullURL)
	switch {
	case !ok:
	case en.id == "" && !en.create:
		c.errorf("invalid", at+".fullUrl", "the fullUrl %s is a RESTful URL, which names the resource by its id, but the %s has no id", en.fullURL, en.typ)
	case en.id != "" && (typ != en.typ || id != en.id):
		// A warning: published examples (US Core's among them) name
		// resources so, and a reference that relies on the fullUrl still
		// finds its entry.
		c.warnf("invalid", at+".fullUrl", "the fullUrl %s is a RESTful URL, so it should end with the type and id of its resource: /%s/%s", en.fullURL, en.typ, en.id)
	}
}

// restful splits a RESTful URL into its base (ending with "/"), type, id
// and version; ok is false for any other URL.
func restful(u string) (base, typ, id, version string, ok bool) {
	m := restfulURL.FindStringSubmatch(u)
	if m == nil || !fhirschema.IsResourceType(m[2]) {
		return "", "", "", "", false
	}
	return m[1], m[2], m[3], m[4], true
}

// resolve finds the entries a reference from entry from names, as
// bundle.html resolves references in a Bundle: an absolute reference by
// fullUrl; a relative one ([type]/[id]) against the base of from's
// fullUrl when that is a RESTful URL, and else not at all; a version
// (/_history/[version]) by meta.versionId too. found is false when the
// reference is not one to resolve in the Bundle (a contained resource).
func (c *checker) resolve(from *entry, ref string) (matches []*entry, found bool) {
	if i := strings.IndexByte(ref, '#'); i >= 0 {
		if i == 0 {
			return nil, false
		}
		ref = ref[:i]
	}
	key := ref
	if !scheme.MatchString(ref) {
		base, _, _, _, ok := restful(from.fullURL)
		if !ok {
			return nil, true
		}
		key = base + ref
	}
	var version string
	if i := strings.Index(key, "/_history/"); i >= 0 {
		key, version = key[:i], key[i+len("/_history/"):]
	}
	for _, en := range c.byURL[key] {
		if version == "" || en.version == version {
			matches = append(matches, en)
		}
	}
	return matches, true
}

// mustResolve checks that the Reference ref, at at in entry from, names
// exactly one entry of the Bundle; what stands for names it.
func (c *checker) mustResolve(from *entry, ref map[string]any, at, what string) {
	s, _ := ref["reference"].(string)
	if s == "" {
		return
	}
	matches, ok := c.resolve(from, s)
	if !ok {
		return
	}
	switch len(matches) {
	case 0:
		c.errorf("not-found", at, "%s %s is not in the Bundle: %s", what, s, c.notFoundReason(from, s))
	case 1:
	default:
		c.errorf("invalid", at, "%s %s names %d entries of the Bundle (versions of one resource): which one is meant cannot be told; name the version", what, s, len(matches))
	}
}

// notFoundReason says why a reference finds no entry.
func (c *checker) notFoundReason(from *entry, ref string) string {
	if !scheme.MatchString(ref) {
		if _, _, _, _, ok := restful(from.fullURL); !ok {
			return fmt.Sprintf("a relative reference is resolved against the base of its entry's fullUrl, and %q is not a RESTful URL", from.fullURL)
		}
	}
	if strings.Contains(ref, "/_history/") {
		return "no entry has that fullUrl and version"
	}
	return "no entry has that fullUrl"
}

// checkDocument checks that what a document's Composition points to is
// in the document: its subject, authors, encounter, custodian, attesters,
// event details and the authors, focus and entries of its sections
// (documents.html).
func (c *checker) checkDocument() {
	if len(c.entries) == 0 || c.entries[0].typ != "Composition" {
		return // bdl-11 says what is wrong
	}
	from := c.entries[0]
	comp := from.resource
	at := "Bundle.entry[0].resource"
	for _, name := range []string{"subject", "encounter", "custodian"} {
		if ref, ok := comp[name].(map[string]any); ok {
			c.mustResolve(from, ref, at+"."+name, "the Composition's "+name)
		}
	}
	c.mustResolveAll(from, comp["author"], at+".author", "the Composition's author")
	for i, a := range objects(comp["attester"]) {
		if ref, ok := a["party"].(map[string]any); ok {
			c.mustResolve(from, ref, fmt.Sprintf("%s.attester[%d].party", at, i), "the attester")
		}
	}
	for i, ev := range objects(comp["event"]) {
		c.mustResolveAll(from, ev["detail"], fmt.Sprintf("%s.event[%d].detail", at, i), "the event detail")
	}
	c.checkSections(from, comp, at)
}

// checkSections checks the references of the sections below parent.
func (c *checker) checkSections(from *entry, parent map[string]any, at string) {
	for i, s := range objects(parent["section"]) {
		sat := fmt.Sprintf("%s.section[%d]", at, i)
		c.mustResolveAll(from, s["author"], sat+".author", "the section's author")
		if ref, ok := s["focus"].(map[string]any); ok {
			c.mustResolve(from, ref, sat+".focus", "the section's focus")
		}
		c.mustResolveAll(from, s["entry"], sat+".entry", "the section entry")
		c.checkSections(from, s, sat)
	}
}

// mustResolveAll checks each Reference of a repeating element.
func (c *checker) mustResolveAll(from *entry, list any, at, what string) {
	for i, ref := range objects(list) {
		c.mustResolve(from, ref, fmt.Sprintf("%s[%d]", at, i), what)
	}
}

// checkMessage checks that the focus of a message, what it is about, is
// in the message (messaging.html).
func (c *checker) checkMessage() {
	if len(c.entries) == 0 || c.entries[0].typ != "MessageHeader" {
		return // bdl-12 says what is wrong
	}
	from := c.entries[0]
	c.mustResolveAll(from, from.resource["focus"], "Bundle.entry[0].resource.focus", "the message's focus")
}

// checkSearchResults checks each entry of a search result against its
// search mode: an outcome is an OperationOutcome; a match or an include is
// a resource of the server, with an id; a match is of a type the search
// (the self link) is for.
func (c *checker) checkSearchResults(b map[string]any) {
	types := searchedTypes(b)
	for i, e := range objects(b["entry"]) {
		en := c.entries[i]
		search, _ := e["search"].(map[string]any)
		mode, _ := search["mode"].(string)
		if en.resource == nil || mode == "" {
			continue
		}
		at := fmt.Sprintf("Bundle.entry[%d].resource", i)
		switch mode {
		case "outcome":
			if en.typ != "OperationOutcome" {
				c.errorf("invalid", at, "an entry of search mode outcome is an OperationOutcome about the search, not a %s", en.typ)
			}
		case "match", "include":
			if en.id == "" {
				c.errorf("required", at, "a search result of mode %s is a resource of the server and must have an id", mode)
			}
			if mode == "match" && len(types) > 0 && !slices.Contains(types, en.typ) {
				c.errorf("invalid", at, "a %s is not a match of a search for %s (the self link)", en.typ, strings.Join(types, ", "))
			}
		}
	}
}

// searchedTypes reads the resource types a search is for from its self
// link: [base]/[type]?…, [base]/[type]/_search, or _type=… of a search
// across types; none when the link does not say.
func searchedTypes(b map[string]any) []string {
	var self string
	for _, l := range objects(b["link"]) {
		if l["relation"] == "self" {
			self, _ = l["url"].(string)
			break
		}
	}
	if self == "" {
		return nil
	}
	path, query, _ := strings.Cut(self, "?")
	segs := strings.Split(strings.TrimSuffix(path, "/"), "/")
	if k := len(segs); k >= 2 && segs[k-1] == "_search" {
		segs = segs[:k-1]
	}
	if last := segs[len(segs)-1]; fhirschema.IsResourceType(last) {
		return []string{last}
	}
	for _, p := range strings.Split(query, "&") {
		if v, ok := strings.CutPrefix(p, "_type="); ok {
			var types []string
			for _, t := range strings.Split(v, ",") {
				if !fhirschema.IsResourceType(t) {
					return nil
				}
				types = append(types, t)
			}
			return types
		}
	}
	return nil
}

// checkReferences checks each Reference below v, in entry from, that
// finds one entry of the Bundle: the type it names (in the reference, or
// in Reference.type) must be the target's, as Reference.type says both
// SHALL be consistent. A Bundle inside an entry is not looked into: its
// references resolve among its own entries.
func (c *checker) checkReferences(from *entry, v any, at string) {
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x["reference"].(string); ok {
			c.checkTargetType(from, x, s, at)
		}
		if x["url"] == narrativeLinkURL {
			c.checkNarrativeLink(from, x, at)
		}
		if x["resourceType"] == "Bundle" {
			return
		}
		for k, child := range x {
			c.checkReferences(from, child, at+"."+k)
		}
	case []any:
		for i, item := range x {
			c.checkReferences(from, item, fmt.Sprintf("%s[%d]", at, i))
		}
	}
}

// checkTargetType checks one Reference against the entry it finds.
func (c *checker) checkTargetType(from *entry, ref map[string]any, s, at string) {
	matches, ok := c.resolve(from, s)
	if !ok || len(matches) != 1 || matches[0].typ == "" {
		return
	}
	target := matches[0]
	if named := referenceType(s); named != "" && named != target.typ {
		c.errorf("invalid", at, "the reference %s names a %s, but the entry it finds (%s) is a %s", s, named, target.fullURL, target.typ)
		return
	}
	if named, _ := ref["type"].(string); named != "" && fhirschema.IsResourceType(named) && named != target.typ {
		c.errorf("invalid", at+".type", "the reference's type is %s, but the entry it finds (%s) is a %s", named, target.fullURL, target.typ)
	}
}

// narrativeLinkURL is the core extension that links an element to the
// portion of a narrative that shows it.
const narrativeLinkURL = "http://hl7.org/fhir/StructureDefinition/narrativeLink"

// checkNarrativeLink checks a narrativeLink extension whose URL names an
// entry of the Bundle: the portion of the narrative it points to (#id)
// must be in that entry's resource. In a document, the entry must be
// there too, as everything a document shows is inside it.
func (c *checker) checkNarrativeLink(from *entry, ext map[string]any, at string) {
	link, _ := ext["valueUrl"].(string)
	if link == "" {
		link, _ = ext["valueUri"].(string)
	}
	base, fragment, ok := strings.Cut(link, "#")
	if !ok || base == "" || fragment == "" {
		return
	}
	matches, _ := c.resolve(from, base)
	switch {
	case len(matches) == 0 && c.typ == "document":
		c.errorf("not-found", at, "the narrative link %s names %s, which is not in the document", link, base)
	case len(matches) == 1 && !holdsID(matches[0].resource, fragment):
		c.errorf("not-found", at, "the narrative link %s points to #%s, which the narrative of %s does not have", link, fragment, base)
	}
}

// holdsID reports whether id is the id of an element of v or of an
// element of its narrative XHTML.
func holdsID(v any, id string) bool {
	switch x := v.(type) {
	case map[string]any:
		if x["id"] == id {
			return true
		}
		if div, ok := x["div"].(string); ok && (strings.Contains(div, `id="`+id+`"`) || strings.Contains(div, `id='`+id+`'`)) {
			return true
		}
		for _, child := range x {
			if holdsID(child, id) {
				return true
			}
		}
	case []any:
		for _, item := range x {
			if holdsID(item, id) {
				return true
			}
		}
	}
	return false
}

// referenceType is the resource type a relative or RESTful reference
// names (Patient/1, http://x/fhir/Patient/1/_history/2); "" for others.
func referenceType(ref string) string {
	if i := strings.IndexByte(ref, '#'); i >= 0 {
		ref = ref[:i]
	}
	if scheme.MatchString(ref) {
		_, typ, _, _, _ := restful(ref)
		return typ
	}
	segs := strings.Split(ref, "/")
	if len(segs) == 2 || len(segs) == 4 && segs[2] == "_history" {
		if fhirschema.IsResourceType(segs[0]) {
			return segs[0]
		}
	}
	return ""
}

// objects lists the objects of a JSON array.
func objects(v any) []map[string]any { return fhirschema.Objects(v) }
