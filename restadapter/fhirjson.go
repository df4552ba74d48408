package restadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"fhirstore/store"
)

// decodeExact decodes a JSON object with numbers as json.Number, so writing
// it back changes no decimal.
func decodeExact(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// keyOrder is the order of the keys of a JSON document, object by object.
type keyOrder struct {
	keys  []string
	sub   map[string]*keyOrder
	items []*keyOrder
}

// orderOf reads the key order of a JSON value.
func keyOrderOf(v any) *keyOrder {
	switch x := v.(type) {
	case orderedObject:
		o := &keyOrder{sub: map[string]*keyOrder{}}
		for _, kv := range x {
			o.keys = append(o.keys, kv.key)
			o.sub[kv.key] = keyOrderOf(kv.value)
		}
		return o
	case []any:
		o := &keyOrder{}
		for _, it := range x {
			o.items = append(o.items, keyOrderOf(it))
		}
		return o
	}
	return nil
}

// orderedObject is a JSON object read with its key order.
type orderedObject []struct {
	key   string
	value any
}

// readOrdered decodes JSON keeping the key order of objects.
func readOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		var obj orderedObject
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := readOrdered(dec)
			if err != nil {
				return nil, err
			}
			obj = append(obj, struct {
				key   string
				value any
			}{k.(string), v})
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		var arr []any
		for dec.More() {
			v, err := readOrdered(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	}
	return tok, nil
}

// encodeLike renders m as JSON with the key order of original wherever m
// still has those keys (new keys follow, sorted; resourceType leads), so a
// change made through a map keeps the stored resource's layout.
func encodeLike(original []byte, m map[string]any) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(original))
	dec.UseNumber()
	var order *keyOrder
	if tree, err := readOrdered(dec); err == nil {
		order = keyOrderOf(tree)
	}
	var buf bytes.Buffer
	if err := writeOrdered(&buf, m, order, true); err != nil {
		return nil, fmt.Errorf("encode resource: %w", err)
	}
	return buf.Bytes(), nil
}

// writeOrdered writes v, ordering object keys by order.
func writeOrdered(buf *bytes.Buffer, v any, order *keyOrder, top bool) error {
	switch x := v.(type) {
	case map[string]any:
		return writeObject(buf, x, order, top)
	case fhirNode:
		return writeObject(buf, x, order, top)
	case []any:
		buf.WriteByte('[')
		for i, it := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			var sub *keyOrder
			if order != nil && i < len(order.items) {
				sub = order.items[i]
			}
			if err := writeOrdered(buf, it, sub, false); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	}
	b, err := marshalNoEscape(v)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// writeObject writes an object: known keys in their old order, then the
// new ones sorted.
func writeObject(buf *bytes.Buffer, m map[string]any, order *keyOrder, top bool) error {
	var keys []string
	if top {
		if _, ok := m["resourceType"]; ok {
			keys = append(keys, "resourceType")
		}
	}
	if order != nil {
		for _, k := range order.keys {
			if _, ok := m[k]; ok && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	var added []string
	for k := range m {
		if !slices.Contains(keys, k) {
			added = append(added, k)
		}
	}
	sort.Strings(added)
	keys = append(keys, added...)
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := marshalNoEscape(k)
		buf.Write(kb)
		buf.WriteByte(':')
		var sub *keyOrder
		if order != nil {
			sub = order.sub[k]
		}
		if err := writeOrdered(buf, m[k], sub, false); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// marshalNoEscape is json.Marshal without HTML escaping.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// fhirNode is a FHIR JSON object decoded with json.Number (so decimals
// survive a rewrite verbatim), read leniently: a missing or mistyped
// element reads as its zero value. Its nodes share the underlying maps, so
// changes through them change the resource.
type fhirNode map[string]any

// readNode reads the current version of typ/id as a fhirNode.
func (h *Handler) readNode(ctx context.Context, tenant, typ, id string) (*store.Resource, fhirNode, error) {
	res, err := h.cfg.Store.Read(ctx, tenant, typ, id)
	if err != nil {
		return nil, nil, err
	}
	n, err := decodeNode(res)
	return res, n, err
}

// decodeNode decodes a stored resource.
func decodeNode(res *store.Resource) (fhirNode, error) {
	dec := json.NewDecoder(bytes.NewReader(res.JSON))
	dec.UseNumber()
	var n fhirNode
	if err := dec.Decode(&n); err != nil {
		return nil, fmt.Errorf("decode %s/%s: %w", res.Type, res.ID, err)
	}
	return n, nil
}

// encodeNode renders n as JSON with sorted keys, so equal resources give
// equal bytes.
func encodeNode(n fhirNode) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("encode resource: %w", err)
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

// asNode is v when it is a JSON object, else nil.
func asNode(v any) fhirNode {
	switch m := v.(type) {
	case map[string]any:
		return m
	case fhirNode:
		return m
	}
	return nil
}

// str is the string element key.
func (n fhirNode) str(key string) string { s, _ := n[key].(string); return s }

// node is the object element key.
func (n fhirNode) node(key string) fhirNode { return asNode(n[key]) }

// nodes is the array key as objects, index for index (a non-object is nil).
func (n fhirNode) nodes(key string) []fhirNode {
	list, _ := n[key].([]any)
	out := make([]fhirNode, len(list))
	for i, v := range list {
		out[i] = asNode(v)
	}
	return out
}

// strs is the array key as strings (a non-string is "").
func (n fhirNode) strs(key string) []string {
	list, _ := n[key].([]any)
	out := make([]string, len(list))
	for i, v := range list {
		out[i], _ = v.(string)
	}
	return out
}

// first is the first string of the array key.
func (n fhirNode) first(key string) string { return nth(n.strs(key), 0) }

// int is the integer element key.
func (n fhirNode) int(key string) (int, bool) {
	switch v := n[key].(type) {
	case json.Number:
		i, err := v.Int64()
		return int(i), err == nil
	case float64:
		return int(v), true
	}
	return 0, false
}

// refID is the id a Reference points to when it is a reference to typ,
// else "".
func (n fhirNode) refID(typ string) string {
	if t, id := n.refTarget(); t == typ {
		return id
	}
	return ""
}

// refTarget is the type and id of a relative, absolute or versioned
// reference ("" when it is none of these).
func (n fhirNode) refTarget() (typ, id string) {
	ref := n.str("reference")
	if i := strings.Index(ref, "/_history/"); i >= 0 {
		ref = ref[:i]
	}
	parts := strings.Split(ref, "/")
	if len(parts) < 2 {
		return "", ""
	}
	return parts[len(parts)-2], parts[len(parts)-1]
}

// appendNode appends v to the array key and returns it.
func (n fhirNode) appendNode(key string, v fhirNode) fhirNode {
	list, _ := n[key].([]any)
	n[key] = append(list, map[string]any(v))
	return v
}

// listSet sets item i of the string array key, appending when i is its
// length, and keeps the parallel primitive-extension array _key aligned.
func listSet(n fhirNode, key string, i int, v string) {
	list, _ := n[key].([]any)
	if i < len(list) {
		list[i] = v
		return
	}
	n[key] = append(list, v)
	if ext, ok := n["_"+key].([]any); ok {
		n["_"+key] = append(ext, nil)
	}
}

// listDelete removes item i of the array key (and of _key), dropping an
// array left empty.
func listDelete(n fhirNode, key string, i int) {
	for _, k := range []string{key, "_" + key} {
		list, ok := n[k].([]any)
		if !ok || i >= len(list) {
			continue
		}
		if list = slices.Delete(list, i, i+1); len(list) == 0 {
			delete(n, k)
		} else {
			n[k] = list
		}
	}
}

// firstNode is the first of nodes, or nil.
func firstNode(nodes []fhirNode) fhirNode {
	if len(nodes) == 0 {
		return nil
	}
	return nodes[0]
}

// nth is list[i], or "" past its end.
func nth(list []string, i int) string {
	if i < len(list) {
		return list[i]
	}
	return ""
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, sep)
}

// The functions below read FHIR JSON held as plain maps (as decoded by
// decodeExact); fhirNode above is the same over a named type.

// jsonStr is the string at key of a JSON object, or v itself when key is "".
func jsonStr(v any, key string) string {
	if key == "" {
		s, _ := v.(string)
		return s
	}
	m, _ := v.(map[string]any)
	s, _ := m[key].(string)
	return s
}

// jsonGet is the value at key of a JSON object (nil if v is not one).
func jsonGet(v any, key string) any {
	m, _ := v.(map[string]any)
	return m[key]
}

// jsonFirst is the first item of a JSON array (nil if none).
func jsonFirst(v any) any { return jsonAt(v, 0) }

// jsonAt is item i of a JSON array (nil if none).
func jsonAt(v any, i int) any {
	a, _ := v.([]any)
	if i < len(a) {
		return a[i]
	}
	return nil
}

// jsonNumber reads a JSON number decoded as json.Number or float64.
func jsonNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

// referencedID is the id of a reference to typ ("typ/id", absolute or versioned),
// "" when ref points elsewhere.
func referencedID(ref, typ string) string {
	ref, _, _ = strings.Cut(ref, "/_history/")
	segs := strings.Split(ref, "/")
	if n := len(segs); n >= 2 && segs[n-2] == typ {
		return segs[n-1]
	}
	return ""
}

// extensionValue is the string value (e.g. valueCode) of the first
// extension of elem with url.
func extensionValue(elem any, url, valueKey string) string {
	exts, _ := jsonGet(elem, "extension").([]any)
	for _, x := range exts {
		if jsonStr(x, "url") == url {
			return jsonStr(x, valueKey)
		}
	}
	return ""
}

// setExtension sets the extension of elem with url to one holding value,
// replacing any it had.
func setExtension(elem map[string]any, url, valueKey string, value any) {
	exts, _ := elem["extension"].([]any)
	kept := exts[:0:0]
	for _, x := range exts {
		if jsonStr(x, "url") != url {
			kept = append(kept, x)
		}
	}
	elem["extension"] = append(kept, map[string]any{"url": url, valueKey: value})
}
