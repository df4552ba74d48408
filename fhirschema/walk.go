package fhirschema

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// loc is a position inside a resource, rendered as FHIRPath only when an
// issue needs it: most values are fine, and building every path costs more
// than checking it.
type loc struct {
	parent *loc
	step   string // FHIRPath step of an element, or "" for an array index
	index  int
	root   string // set on the outermost loc only
}

func (l *loc) String() string {
	if l.parent == nil {
		return l.root
	}
	if l.step == "" {
		return l.parent.String() + "[" + strconv.Itoa(l.index) + "]"
	}
	return l.parent.String() + "." + l.step
}

func (l *loc) child(step string) *loc { return &loc{parent: l, step: step} }
func (l *loc) item(i int) *loc        { return &loc{parent: l, index: i} }

// object walks a JSON object of definition def along the R4 JSON rules the
// schema cannot state: no empty objects, arrays or strings, null only as
// the placeholder of a repeated primitive whose _name twin has an entry at
// its index, _name only as an object (or an array of the primitive's
// length) of a primitive, primitive values within their type's domain,
// required primitives present as value or _name, one type per choice
// element, and the extension rules. Nested resources are validated against
// their own type. Unknown and missing properties, enumerations and
// patterns are left to the schema, which runs when the walk meets one
// broken (schemaWould).
func (w *walker) object(obj map[string]any, at *loc, def string) {
	if len(obj) == 0 {
		w.errorf("structure", at.String(), "empty objects are not allowed in FHIR JSON; leave the element out")
		return
	}
	elems := w.v.elements[def]
	for _, name := range w.v.present[def] {
		if _, ok := obj[name]; !ok {
			w.schemaWould = true
		}
	}
	for _, name := range w.v.required[def] {
		_, value := obj[name]
		_, twin := obj["_"+name]
		if !value && !twin {
			w.errorf("required", at.String()+"."+name, "missing required element %q", name)
		}
	}
	w.invariantsOf(obj, at, def)
	var invs map[string][]*invariant
	if w.v.invariants != nil {
		invs = w.v.invariants.elements[def]
	}
	var choices map[string]string
	for k, child := range obj {
		el := elems[k]
		if el == nil {
			if k != "resourceType" || w.v.schemas[def] == nil {
				w.schemaWould = true // an unknown property
			}
			continue
		}
		if el.choice != "" && !el.shadow {
			if choices == nil {
				choices = map[string]string{}
			}
			if other, dup := choices[el.choice]; dup {
				w.errorf("structure", at.child(el.choice).String(), "%s[x] has one type only, but both %s and %s are present", el.choice, other, k)
			}
			choices[el.choice] = k
		}
		here := at.child(el.path)
		switch {
		case el.shadow:
			w.twin(obj, k, child, here, el)
		case el.array:
			w.array(obj, k, child, here, el)
		default:
			w.value(child, here, el, k)
		}
		if invs != nil && !el.shadow {
			if inv := invs[elementName(el, k)]; inv != nil {
				w.elementInvariants(inv, child, here, el)
			}
		}
	}
	switch def {
	case "Extension":
		w.extension(obj, at)
	case "Attachment":
		w.attachmentSize(obj, at)
	default:
		w.extensionURLs(obj, at)
	}
}

// value checks one value of element el.
func (w *walker) value(v any, at *loc, el *element, name string) {
	switch {
	case v == nil:
		w.errorf("structure", at.String(), "null is not a value in FHIR JSON; leave %q out", name)
	case el.primitive:
		if problem, code := primitiveChecks[el.typ](v); problem != "" {
			w.errorf(code, at.String(), "%s (FHIR %s)", problem, el.typ)
		}
		if s, ok := v.(string); ok && (el.enum != nil && !el.enum[s] || el.pattern != nil && !el.pattern(s)) {
			w.schemaWould = true
		}
	case el.typ == "ResourceList":
		w.resource("", v, at.String(), name == "contained")
	default:
		obj, ok := v.(map[string]any)
		if !ok {
			w.errorf("structure", at.String(), "%q must be a JSON object (FHIR %s)", name, el.typ)
			return
		}
		if onlyID(obj) {
			w.ele1(at)
		}
		w.object(obj, at, el.typ)
	}
}

// array checks the values of a repeated element.
func (w *walker) array(obj map[string]any, name string, v any, at *loc, el *element) {
	items, ok := v.([]any)
	switch {
	case v == nil:
		w.errorf("structure", at.String(), "null is not a value in FHIR JSON; leave %q out", name)
		return
	case !ok:
		w.errorf("structure", at.String(), "%q repeats, so it must be a JSON array", name)
		return
	case len(items) == 0:
		w.errorf("structure", at.String(), "empty arrays are not allowed in FHIR JSON; leave %q out", name)
		return
	}
	twins, _ := obj["_"+name].([]any)
	for i, item := range items {
		if item == nil && el.primitive {
			if i >= len(twins) || !nonEmptyObject(twins[i]) {
				w.errorf("structure", at.item(i).String(), "null in %q stands only for a value whose _%s entry at the same index has content", name, name)
			}
			continue
		}
		w.value(item, at.item(i), el, name)
	}
}

// twin checks _name, the id and extensions of primitive name: an object for
// a single primitive, an array as long as the values for a repeated one.
// Its issues are located at the primitive.
func (w *walker) twin(obj map[string]any, key string, v any, at *loc, el *element) {
	name := key[1:]
	if !el.array {
		tw, ok := v.(map[string]any)
		if !ok {
			w.errorf("structure", at.String(), "%q must be a JSON object holding the id and extensions of %q", key, name)
			return
		}
		if _, value := obj[name]; !value && onlyID(tw) {
			w.ele1(at)
		}
		w.object(tw, at, "Element")
		return
	}
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		w.errorf("structure", at.String(), "%q must be a non-empty JSON array, one entry per value of %q", key, name)
		return
	}
	values, hasValues := obj[name].([]any)
	if hasValues && len(values) != len(items) {
		w.errorf("structure", at.String(), "%q has %d entries but %q has %d values; they must be as long", key, len(items), name, len(values))
		return
	}
	for i, item := range items {
		switch tw := item.(type) {
		case nil:
			if !hasValues {
				w.errorf("structure", at.item(i).String(), "the value at this index has neither a value nor an extension")
			}
		case map[string]any:
			if (!hasValues || values[i] == nil) && onlyID(tw) {
				w.ele1(at.item(i))
			}
			w.object(tw, at.item(i), "Element")
		default:
			w.errorf("structure", at.item(i).String(), "each entry of %q must be a JSON object or null", key)
		}
	}
}

func nonEmptyObject(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) > 0
}

// attachmentSize checks an Attachment's size against its data: the size
// is the number of bytes the base64 data decodes to.
func (w *walker) attachmentSize(obj map[string]any, at *loc) {
	data, _ := obj["data"].(string)
	size, ok := obj["size"].(json.Number)
	if data == "" || !ok {
		return
	}
	n, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return // the base64 rule says what is wrong
	}
	if stated, err := size.Int64(); err == nil && stated != int64(len(n)) {
		w.errorf("value", at.child("size").String(), "the stated size %d is not the size of the data, %d bytes", stated, len(n))
	}
}
