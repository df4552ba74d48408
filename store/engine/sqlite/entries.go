package sqlite

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// entry is one index entry of a document: a dotted path and an encoded value.
type entry struct {
	f string
	v any // string, float64, int64 or a marker []byte
}

// unindexed are the top-level fields whose subtrees have no entries: the
// id column, and the large parts the store never filters on.
var unindexed = map[string]bool{"_id": true, "resource": true, "numText": true}

// isMarker tells marker values from scalars.
func isMarker(v any) bool { b, ok := v.([]byte); return ok && b[0] >= tagMark }

// docEntries lists doc's index entries, sorted by (f, v) and without
// duplicates (values SQLite holds equal count once).
func docEntries(doc []byte) ([]entry, error) {
	var out []entry
	err := eachElement(doc, func(key string, v bsoncore.Value) error {
		if unindexed[key] {
			return nil
		}
		return appendEntries(&out, key, v, false)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, compareEntries)
	return slices.CompactFunc(out, func(a, b entry) bool { return compareEntries(a, b) == 0 }), nil
}

func compareEntries(a, b entry) int {
	if c := strings.Compare(a.f, b.f); c != 0 {
		return c
	}
	return compareValues(a.v, b.v)
}

// appendEntries adds the entries of value v at path. Elements of an array
// share its path; an array directly inside an array is not descended into
// (MongoDB does not match its elements by path either).
func appendEntries(out *[]entry, path string, v bsoncore.Value, inArray bool) error {
	add := func(val any) error { *out = append(*out, entry{f: path, v: val}); return nil }
	switch v.Type {
	case bsoncore.TypeString:
		return add(v.StringValue())
	case bsoncore.TypeBoolean:
		return add(boolValue(v.Boolean()))
	case bsoncore.TypeInt32:
		return add(float64(v.Int32()))
	case bsoncore.TypeInt64:
		return add(float64(v.Int64()))
	case bsoncore.TypeDouble:
		if f := v.Double(); !math.IsNaN(f) {
			return add(f)
		}
		return add(markOther)
	case bsoncore.TypeDateTime:
		return add(timeValue(v.DateTime()))
	case bsoncore.TypeNull:
		return add(markNull)
	case bsoncore.TypeEmbeddedDocument:
		n := 0
		err := eachElement(v.Data, func(key string, el bsoncore.Value) error {
			n++
			return appendEntries(out, path+"."+key, el, false)
		})
		if err == nil && n == 0 {
			return add(markEmpty)
		}
		return err
	case bsoncore.TypeArray:
		if inArray {
			return add(markOther)
		}
		n := 0
		err := eachElement(v.Data, func(_ string, el bsoncore.Value) error {
			n++
			return appendEntries(out, path, el, true)
		})
		if err == nil && n == 0 {
			return add(markEmpty)
		}
		return err
	}
	return add(markOther)
}

// eachElement calls fn with each element of the BSON document (or array) doc.
func eachElement(doc []byte, fn func(key string, v bsoncore.Value) error) error {
	if len(doc) < 5 {
		return fmt.Errorf("malformed BSON document (%d bytes)", len(doc))
	}
	rest := doc[4 : len(doc)-1]
	for len(rest) > 0 {
		el, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return fmt.Errorf("malformed BSON document")
		}
		rest = next
		if err := fn(el.Key(), el.Value()); err != nil {
			return err
		}
	}
	return nil
}
