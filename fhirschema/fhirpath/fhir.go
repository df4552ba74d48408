package fhirpath

import (
	"encoding/xml"
	"io"
	"strings"
)

// fhirFunctions: the functions FHIR adds to FHIRPath.
var fhirFunctions = []*function{
	{name: "extension", minArgs: 1, maxArgs: 1, impl: fnExtension},
	{name: "hasValue", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) {
		return boolOut(len(in) == 1 && isPrimitiveValue(in[0])), nil
	}},
	{name: "getValue", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) {
		if len(in) != 1 || !isPrimitiveValue(in[0]) {
			return nil, nil
		}
		return []Node{{Value: in[0].Value, Type: in[0].Type}}, nil
	}},
	{name: "resolve", impl: fnResolve},
	{name: "memberOf", minArgs: 1, maxArgs: 1, impl: fnMemberOf},
	{name: "conformsTo", minArgs: 1, maxArgs: 1, impl: fnConformsTo},
	{name: "htmlChecks", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) {
		if len(in) == 0 {
			return boolOut(true), nil
		}
		for _, n := range in {
			s, ok := n.Value.(string)
			if !ok || htmlProblem(s) != "" {
				return boolOut(false), nil
			}
		}
		return boolOut(true), nil
	}},
	{name: "elementDefinition", impl: fnElementDefinition},
	{name: "slice", minArgs: 2, maxArgs: 2, impl: fnSlice},
	{name: "checkModifiers", minArgs: 1, maxArgs: 1, impl: fnCheckModifiers},
	{name: "subsumes", minArgs: 1, maxArgs: 1, impl: fnSubsumes(false)},
	{name: "subsumedBy", minArgs: 1, maxArgs: 1, impl: fnSubsumes(true)},
	{name: "comparable", minArgs: 1, maxArgs: 1, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		n, ok, err := single(call, in)
		if err != nil || !ok {
			return nil, err
		}
		other, err := c.arg(call, 0)
		if err != nil || len(other) != 1 {
			return nil, err
		}
		a, ok1 := qtyOf(n)
		b, ok2 := qtyOf(other[0])
		if !ok1 || !ok2 {
			return nil, nil
		}
		_, _, ok = comparableQuantities(a, b, false)
		return boolOut(ok), nil
	}},
}

// isPrimitiveValue reports whether n is a primitive with a value.
func isPrimitiveValue(n Node) bool {
	switch n.Value.(type) {
	case nil, map[string]any:
		return false
	}
	return true
}

func fnExtension(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	url, ok, err := c.strArg(call, 0)
	if err != nil || !ok {
		return nil, err
	}
	var out []Node
	for _, n := range in {
		var list any
		if m, ok := n.Value.(map[string]any); ok {
			list = m["extension"]
		} else if n.ext != nil {
			list = n.ext["extension"]
		}
		items, _ := list.([]any)
		for _, x := range items {
			if m, ok := x.(map[string]any); ok && m["url"] == url {
				out = append(out, Node{Value: m, Type: "Extension"})
			}
		}
	}
	return out, nil
}

func fnResolve(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	var out []Node
	for _, n := range in {
		ref := ""
		switch v := n.Value.(type) {
		case string:
			ref = v
		case map[string]any:
			ref, _ = v["reference"].(string)
		}
		if ref == "" {
			continue
		}
		r, err := c.resolve(ref, n)
		if err != nil {
			return nil, execErr(call.pos, "resolve %s: %v", ref, err)
		}
		if r != nil {
			out = append(out, ResourceNode(r))
		}
	}
	return out, nil
}

// resolve finds the resource ref names: a contained resource, a Bundle
// entry, the Resolver's answer, or (for search) a stub naming its type.
func (c *evalCtx) resolve(ref string, n Node) (map[string]any, error) {
	if strings.HasPrefix(ref, "#") {
		return c.contained(ref[1:]), nil
	}
	if r := c.bundleEntry(ref); r != nil {
		return r, nil
	}
	if c.env.Resolver != nil {
		r, err := c.env.Resolver.Resolve(c.ctx, ref)
		if err != nil || r != nil {
			return r, err
		}
	}
	if c.stubs {
		return referenceStub(ref, n), nil
	}
	return nil, nil
}

// contained returns the contained resource with id ("" names the
// container itself).
func (c *evalCtx) contained(id string) map[string]any {
	for _, list := range [][]Node{c.resource, c.root} {
		if len(list) == 0 {
			continue
		}
		r, _ := list[0].Value.(map[string]any)
		if id == "" {
			return r
		}
		items, _ := r["contained"].([]any)
		for _, x := range items {
			if m, ok := x.(map[string]any); ok && m["id"] == id {
				return m
			}
		}
	}
	return nil
}

// bundleEntry finds ref among the entries of a Bundle at %rootResource, by
// fullUrl or by type and id.
func (c *evalCtx) bundleEntry(ref string) map[string]any {
	if len(c.root) == 0 {
		return nil
	}
	b, _ := c.root[0].Value.(map[string]any)
	if b["resourceType"] != "Bundle" {
		return nil
	}
	entries, _ := b["entry"].([]any)
	for _, e := range entries {
		em, _ := e.(map[string]any)
		r, _ := em["resource"].(map[string]any)
		if r == nil {
			continue
		}
		full, _ := em["fullUrl"].(string)
		rt, _ := r["resourceType"].(string)
		id, _ := r["id"].(string)
		if full == ref || (id != "" && (ref == rt+"/"+id || strings.HasSuffix(full, "/"+ref) || strings.HasSuffix(ref, "/"+rt+"/"+id))) {
			return r
		}
	}
	return nil
}

// referenceStub is the resource a reference names, known only by its type
// and id: {"resourceType": T, "id": id}.
func referenceStub(ref string, n Node) map[string]any {
	typ, id := "", ""
	s := ref
	if i := strings.IndexAny(s, "?#|"); i >= 0 {
		s = s[:i]
	}
	segs := strings.Split(s, "/")
	if k := len(segs); k >= 4 && segs[k-2] == "_history" {
		segs = segs[:k-2]
	}
	if k := len(segs); k >= 2 && isResourceType(segs[k-2]) {
		typ, id = segs[k-2], segs[k-1]
	}
	if m, ok := n.Value.(map[string]any); ok && typ == "" {
		if t, _ := m["type"].(string); isResourceType(t[strings.LastIndexByte(t, '/')+1:]) {
			typ = t[strings.LastIndexByte(t, '/')+1:]
		}
	}
	if typ == "" {
		return nil
	}
	return map[string]any{"resourceType": typ, "id": id}
}

func fnMemberOf(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	vs, ok, err := c.strArg(call, 0)
	if err != nil || !ok || c.env.Terminology == nil {
		return nil, err
	}
	if len(in) != 1 {
		return nil, nil // as the HL7 validator: memberOf() of many items is empty
	}
	codes := codingsOf(in[0])
	if len(codes) == 0 {
		return nil, nil
	}
	for _, sc := range codes {
		member, known, err := c.env.Terminology.MemberOf(c.ctx, sc[0], sc[1], vs)
		if err != nil {
			return nil, execErr(call.pos, "memberOf %s: %v", vs, err)
		}
		if !known {
			return nil, nil
		}
		if member {
			return boolOut(true), nil
		}
	}
	return boolOut(false), nil
}

// codingsOf returns the system|code pairs of a code, Coding or
// CodeableConcept.
func codingsOf(n Node) [][2]string {
	switch v := n.Value.(type) {
	case string:
		return [][2]string{{"", v}}
	case map[string]any:
		if code, ok := v["code"].(string); ok {
			sys, _ := v["system"].(string)
			return [][2]string{{sys, code}}
		}
		var out [][2]string
		list, _ := v["coding"].([]any)
		for _, x := range list {
			if m, ok := x.(map[string]any); ok {
				out = append(out, codingsOf(Node{Value: m})...)
			}
		}
		return out
	}
	return nil
}

func fnConformsTo(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	url, ok, err := c.strArg(call, 0)
	if err != nil || !ok {
		return nil, err
	}
	n, ok, err := single(call, in)
	if err != nil || !ok {
		return nil, err
	}
	r, isRes := n.Value.(map[string]any)
	if !isRes || !isResource(n) {
		return nil, execErr(call.pos, "conformsTo() needs a resource")
	}
	if c.env.Conformance != nil {
		ok, err := c.env.Conformance.ConformsTo(c.ctx, r, url)
		if err != nil {
			return nil, execErr(call.pos, "conformsTo %s: %v", url, err)
		}
		return boolOut(ok), nil
	}
	const core = "http://hl7.org/fhir/StructureDefinition/"
	if !strings.Contains(url, "/StructureDefinition/") {
		return nil, execErr(call.pos, "conformsTo(): %s is not a StructureDefinition URL", url)
	}
	if strings.HasPrefix(url, core) && isResourceType(url[len(core):]) {
		return boolOut(isType(n, url[len(core):])), nil
	}
	return nil, nil
}

// Slicer is implemented by a Conformance that knows profiles' slices and
// element definitions, for slice() and elementDefinition().
type Slicer interface {
	// Slice returns the items of in that belong to slice name of the
	// element they are in, in profile structure.
	Slice(c Call, in []Node, structure, name string) ([]Node, error)
	// ElementDefinition returns the ElementDefinition of each item.
	ElementDefinition(c Call, in []Node) ([]Node, error)
}

// Call is what an extension function sees of the evaluation.
type Call struct {
	Env *Env
}

func fnElementDefinition(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	s, ok := c.env.Conformance.(Slicer)
	if !ok {
		return nil, nil
	}
	out, err := s.ElementDefinition(Call{Env: c.env}, in)
	if err != nil {
		return nil, execErr(call.pos, "elementDefinition(): %v", err)
	}
	return out, nil
}

func fnSlice(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	structure, ok1, err := c.strArg(call, 0)
	if err != nil {
		return nil, err
	}
	name, ok2, err := c.strArg(call, 1)
	if err != nil || !ok1 || !ok2 {
		return nil, err
	}
	s, ok := c.env.Conformance.(Slicer)
	if !ok {
		return nil, nil
	}
	out, err := s.Slice(Call{Env: c.env}, in, structure, name)
	if err != nil {
		return nil, execErr(call.pos, "slice(): %v", err)
	}
	return out, nil
}

func fnCheckModifiers(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	allowed, err := c.arg(call, 0)
	if err != nil {
		return nil, err
	}
	for _, n := range in {
		m, _ := n.Value.(map[string]any)
		list, _ := m["modifierExtension"].([]any)
		for _, x := range list {
			url, _ := x.(map[string]any)["url"].(string)
			if !containsNode(allowed, strNode(url)) {
				return nil, execErr(call.pos, "unknown modifier extension %s", url)
			}
		}
	}
	return in, nil
}

// Subsumer is implemented by a Terminology that answers subsumes().
type Subsumer interface {
	// Subsumes reports whether code a subsumes code b in system.
	Subsumes(c Call, system, a, b string) (subsumes, known bool, err error)
}

// fnSubsumes builds subsumes(code) and subsumedBy(code).
func fnSubsumes(by bool) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		n, ok, err := single(call, in)
		if err != nil || !ok {
			return nil, err
		}
		other, err := c.arg(call, 0)
		if err != nil || len(other) != 1 {
			return nil, err
		}
		t, ok := c.env.Terminology.(Subsumer)
		if !ok {
			return nil, nil
		}
		a, b := codingsOf(n), codingsOf(other[0])
		if len(a) != 1 || len(b) != 1 || a[0][0] != b[0][0] {
			return nil, nil
		}
		x, y := a[0][1], b[0][1]
		if by {
			x, y = y, x
		}
		res, known, err := t.Subsumes(Call{Env: c.env}, a[0][0], x, y)
		if err != nil || !known {
			return nil, err
		}
		return boolOut(res), nil
	}
}

// htmlAllowed are the elements a FHIR narrative may use.
var htmlAllowed = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`a abbr acronym b big blockquote br caption cite code col colgroup dd
		dfn div dl dt em h1 h2 h3 h4 h5 h6 hr i img li ol p pre q samp small span strong sub sup
		table tbody td tfoot th thead tr tt ul var`) {
		htmlAllowed[e] = true
	}
}

// htmlProblem returns what makes a narrative div unsafe, or "". Whether
// it has content is not its question: R4 writes both txt-1 and txt-2 as
// htmlChecks(), and the HL7 validator's htmlChecks() checks elements and
// attributes only.
func htmlProblem(s string) string {
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			return err.Error()
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if !htmlAllowed[el.Name.Local] {
			return "element " + el.Name.Local + " is not allowed"
		}
		for _, a := range el.Attr {
			if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
				return "event attribute " + a.Name.Local + " is not allowed"
			}
			if (a.Name.Local == "href" || a.Name.Local == "src") && strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Value)), "javascript:") {
				return "script URL is not allowed"
			}
		}
	}
}
