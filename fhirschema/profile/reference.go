package profile

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"fhirstore/fhirschema"
)

// checkReference checks a Reference against the element's target
// profiles: the type it points to must be one they constrain, and a
// target at hand (contained, or an entry of the same Bundle) must claim
// or conform to one of them.
func (w *walker) checkReference(p *compiled, el *element, n node) {
	w.checkAggregation(p, el, n)
	var targets []string
	for _, t := range el.types {
		if t.code == "Reference" {
			targets = append(targets, t.targets...)
		}
	}
	if len(targets) == 0 || slices.Contains(targets, coreBase+"Resource") {
		return
	}
	m, _ := n.value.(map[string]any)
	target, typ := w.target(m)
	if typ == "" {
		return
	}
	var allowed []string
	var ofType []*compiled
	for _, url := range targets {
		tp := w.targetProfile(url)
		if tp == nil {
			return // a target profile is not known: the type cannot be decided
		}
		if !slices.Contains(allowed, tp.typ) {
			allowed = append(allowed, tp.typ)
		}
		if tp.typ == typ {
			ofType = append(ofType, tp)
		}
	}
	if len(ofType) == 0 {
		w.errorf(p, "structure", n.loc(), "%s: the reference points to a %s, but only %s may be referenced (targetProfile %s)",
			elementID(el), typ, strings.Join(allowed, ", "), strings.Join(targets, ", "))
		return
	}
	if target != nil {
		w.checkTarget(p, el, n, target, ofType)
	}
}

// checkAggregation checks a Reference against the ways the element lets
// it hold its target (ElementDefinition.type.aggregation): contained, a
// reference to a contained resource (#id); referenced, one to a resource
// outside the one holding it; bundled, one found in the same Bundle.
// Whether a reference is bundled cannot be told outside a Bundle.
func (w *walker) checkAggregation(p *compiled, el *element, n node) {
	var modes []string
	for _, t := range el.types {
		if t.code == "Reference" {
			modes = append(modes, t.aggregation...)
		}
	}
	if len(modes) == 0 {
		return
	}
	m, _ := n.value.(map[string]any)
	ref, _ := m["reference"].(string)
	var is string
	switch {
	case ref == "" || slices.Contains(modes, "referenced") && !strings.HasPrefix(ref, "#"):
		return
	case strings.HasPrefix(ref, "#"):
		is = "contained"
	case !slices.Contains(modes, "bundled"):
		is = "referenced"
	case !w.inBundle() || w.resolve(ref) != nil:
		return
	default:
		is = "not in the Bundle"
	}
	if !slices.Contains(modes, is) {
		w.errorf(p, "structure", n.loc(), "%s: the reference %s is %s, but the profile lets it only be %s (aggregation)",
			elementID(el), ref, is, strings.Join(modes, ", "))
	}
}

// inBundle reports whether the resource is validated as an entry of a
// Bundle.
func (w *walker) inBundle() bool {
	return w.opts.index != nil || w.opts.bundle != nil || w.root["resourceType"] == "Bundle"
}

// targetProfile is the compiled profile a targetProfile names; a core
// resource type's definition is known without compiling it.
func (w *walker) targetProfile(url string) *compiled {
	if name, ok := strings.CutPrefix(url, coreBase); ok && isResourceName(name) && !strings.Contains(name, "/") {
		if w.baseDefinition(name) != nil {
			return &compiled{url: url, typ: name, kind: "resource"}
		}
	}
	tp, err := w.sc.profile(w.ctx, url)
	if err != nil {
		return nil
	}
	return tp
}

// checkTarget checks a referenced resource at hand against the target
// profiles of its type: claiming one of them is enough; otherwise it must
// conform to one.
func (w *walker) checkTarget(p *compiled, el *element, n node, target map[string]any, ofType []*compiled) {
	claimed := claimedProfiles(target)
	var urls []string
	for _, tp := range ofType {
		if tp.root == nil || slices.Contains(claimed, tp.url) {
			return
		}
		urls = append(urls, tp.url)
	}
	var first []fhirschema.Issue
	for i, tp := range ofType {
		found := w.trial(func() { w.validateResource(tp, target, n.loc()+".resolve()") })
		if !hasError(found) {
			return
		}
		if i == 0 {
			first = found
		}
	}
	w.errorf(p, "structure", n.loc(), "%s: the referenced %s conforms to none of %s", elementID(el), target["resourceType"], strings.Join(urls, ", "))
	w.issues = append(w.issues, first...)
}

// target finds what a Reference points to: the resource itself when it is
// contained or an entry of the Bundle at hand, and its type.
func (w *walker) target(ref map[string]any) (map[string]any, string) {
	s, _ := ref["reference"].(string)
	typ, _ := ref["type"].(string)
	if r := w.resolve(s); r != nil {
		rt, _ := r["resourceType"].(string)
		return r, rt
	}
	if t := referenceType(s); t != "" {
		return nil, t
	}
	return nil, typ
}

// resolve finds a reference among the contained resources and the Bundle's
// entries.
func (w *walker) resolve(ref string) map[string]any {
	if ref == "" {
		return nil
	}
	if id, ok := strings.CutPrefix(ref, "#"); ok {
		for _, r := range []map[string]any{w.resource, w.root} {
			for _, c := range objects(r["contained"]) {
				if c["id"] == id {
					return c
				}
			}
		}
		return nil
	}
	if w.opts.index == nil {
		b := w.opts.bundle
		if b == nil && w.root["resourceType"] == "Bundle" {
			b = w.root
		}
		if b == nil {
			return nil
		}
		w.opts.index = IndexBundle(b)
	}
	return w.opts.index.find(ref)
}

// Bundle is a Bundle's entries indexed by fullUrl and by type and id, for
// validating many entries of one Bundle (WithIndexedBundle).
type Bundle struct {
	bundle  map[string]any
	entries map[string]*bundleEntry
}

// bundleEntry is one resource of a Bundle; one given as JSON
// (IndexEntries) is decoded when a reference first names it.
type bundleEntry struct {
	resource map[string]any
	raw      []byte
	once     sync.Once
}

func (e *bundleEntry) get() map[string]any {
	if e.raw != nil {
		e.once.Do(func() {
			dec := json.NewDecoder(bytes.NewReader(e.raw))
			dec.UseNumber()
			if dec.Decode(&e.resource) != nil {
				e.resource = nil
			}
		})
	}
	return e.resource
}

// Entry is one entry of a Bundle given as JSON: its fullUrl, the type and
// id a relative reference names it by (Patient/1; empty when none does),
// and its resource.
type Entry struct {
	FullURL  string
	Type, ID string
	Resource []byte
}

// IndexBundle indexes the entries of bundle.
func IndexBundle(bundle map[string]any) *Bundle {
	entries := objects(bundle["entry"])
	b := &Bundle{bundle: bundle, entries: make(map[string]*bundleEntry, 2*len(entries))}
	for _, e := range entries {
		r, _ := e["resource"].(map[string]any)
		if r == nil {
			continue
		}
		rt, _ := r["resourceType"].(string)
		id, _ := r["id"].(string)
		full, _ := e["fullUrl"].(string)
		b.add(&bundleEntry{resource: r}, full, rt, id)
	}
	return b
}

// IndexEntries indexes the entries of a Bundle given as JSON (a
// transaction the server has not decoded whole), each decoded the first
// time a reference names it; a resource that is not a JSON object names
// nothing.
func IndexEntries(entries []Entry) *Bundle {
	b := &Bundle{entries: make(map[string]*bundleEntry, 2*len(entries))}
	for _, e := range entries {
		b.add(&bundleEntry{raw: e.Resource}, e.FullURL, e.Type, e.ID)
	}
	return b
}

// add indexes an entry by its fullUrl and by its type and id.
func (b *Bundle) add(e *bundleEntry, fullURL, typ, id string) {
	if fullURL != "" {
		b.entries[fullURL] = e
	}
	if id != "" && typ != "" {
		b.entries[typ+"/"+id] = e
	}
}

// find returns the entry ref names: by fullUrl, by type and id, or by the
// type and id an absolute reference ends with.
func (b *Bundle) find(ref string) map[string]any {
	if e := b.entries[ref]; e != nil {
		return e.get()
	}
	segs := strings.Split(ref, "/")
	if k := len(segs); k >= 4 && segs[k-2] == "_history" {
		segs = segs[:k-2]
	}
	if k := len(segs); k >= 2 {
		if e := b.entries[segs[k-2]+"/"+segs[k-1]]; e != nil {
			return e.get()
		}
	}
	return nil
}

// referenceType reads the resource type from a relative or absolute
// reference (Patient/1, http://x/fhir/Patient/1/_history/2).
func referenceType(ref string) string {
	if typ, _, ok := strings.Cut(ref, "?"); ok && !strings.Contains(typ, "/") && isResourceName(typ) {
		return typ // a conditional reference: Patient?identifier=…
	}
	if i := strings.IndexAny(ref, "?#"); i >= 0 {
		ref = ref[:i]
	}
	segs := strings.Split(ref, "/")
	if k := len(segs); k >= 4 && segs[k-2] == "_history" {
		segs = segs[:k-2]
	}
	if k := len(segs); k >= 2 && isResourceName(segs[k-2]) && segs[k-1] != "" {
		return segs[k-2]
	}
	return ""
}
