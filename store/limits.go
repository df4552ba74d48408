package store

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// docOverhead bounds the bytes of a current row besides its resource,
// number texts, search index and sort keys: _id, vid, lastUpdated,
// deleted, method and the element headers.
const docOverhead = 256

// checkLimits refuses a version the engine would refuse (Engine.Limits):
// a current row over the document size, or an index key over the key
// size. It runs before anything of the write is stored, so such a write
// fails whole, with a 422 naming the resource and the limit.
func (s *Store) checkLimits(v *version) error {
	l := s.limits
	ref := v.hist.Type + "/" + v.hist.ID
	if l.MaxDocumentBytes > 0 {
		size := docSize(&v.doc)
		if size > l.MaxDocumentBytes {
			return tooLong(v.hist.Type, fmt.Sprintf("%s would be stored as %s with its search index; %s", ref, engine.SizeText(size), l.DocumentLimit()))
		}
	}
	if l.MaxIndexKeyBytes <= 0 || len(v.doc.Idx) == 0 || s.opts.Registry == nil {
		return nil
	}
	for _, field := range s.indexFields(v.hist.Type) {
		path := strings.Split(strings.TrimPrefix(field, "idx."), ".")
		for _, size := range keySizes(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: v.doc.Idx}, path, l.WholeArrayKeys) {
			if size > l.MaxIndexKeyBytes {
				param, _, _ := strings.Cut(path[0], ":")
				return tooLong(v.hist.Type, fmt.Sprintf("%s has %s of values for search parameter %s; %s", ref, engine.SizeText(size), param, l.IndexKeyLimit()))
			}
		}
	}
	return nil
}

// docSize is the BSON size of a current row, within docOverhead.
func docSize(d *storedDoc) int {
	n := docOverhead + len(d.ID) + len(d.Method) + len(d.Resource) + len(d.Idx) + len(d.Sort)
	for _, t := range d.NumText {
		n += 16 + len(t.Path) + len(t.Text)
	}
	return n
}

// keySizes lists the sizes of the index keys of the value at path in v:
// one per value, or with whole the value at the path as one key (arrays
// whole; a path through an array then reaches nothing).
func keySizes(v bson.RawValue, path []string, whole bool) []int {
	if len(path) == 0 {
		if v.Type != bson.TypeArray || whole {
			return []int{len(v.Value)}
		}
		return eachElement(v, func(e bson.RawValue) []int { return []int{len(e.Value)} })
	}
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		next, err := bson.Raw(v.Value).LookupErr(path[0])
		if err != nil {
			return nil
		}
		return keySizes(next, path[1:], whole)
	case bson.TypeArray:
		if whole {
			return nil
		}
		return eachElement(v, func(e bson.RawValue) []int { return keySizes(e, path, whole) })
	}
	return nil
}

// eachElement concatenates f over the elements of array v.
func eachElement(v bson.RawValue, f func(bson.RawValue) []int) []int {
	vals, err := bson.Raw(v.Value).Values()
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range vals {
		out = append(out, f(e)...)
	}
	return out
}

// tooLong is the 422 of a resource over an engine limit.
func tooLong(typ, msg string) *InvalidError {
	return &InvalidError{Issues: []Issue{{Severity: "error", Code: "too-long", Diagnostics: msg, Expression: typ}}}
}
