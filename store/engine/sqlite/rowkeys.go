package sqlite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
)

// Row keys (format 3). A document's index entries are kept in one B-tree,
// x_C keyed (f, v, rid), which finds documents by value. What a query
// asks of one document it already holds (its other conditions, its sort
// values) is read from the document's row instead: the column k of d_C
// holds, uncompressed, every entry whose value is not text (numbers,
// dates, booleans, markers), every entry under rowField (the store's sort
// keys), and for the other paths holding text, that they do. A condition
// on text outside rowField is an equality answered by x_C's key
// (f, v, rid), or, for the few documents holding text at its path, is
// checked on the document itself (a prefix, a substring); everything
// else (comparisons of numbers and dates, existence, sort values) is
// answered by k alone.
//
// k is a sequence of entries sorted by path number: the number's
// difference from the previous entry's as a uvarint, then a tag and the
// value: rowFloat and 8 bytes (IEEE 754, little endian), rowInt and a
// zigzag varint (a number without a fraction), rowText or rowBlob and a
// uvarint length and the bytes, rowSame and the uvarint position of an
// earlier value of k that is the same (the ascending and descending sort
// keys of one value, a date's bounds), or rowHasText and nothing (the
// document holds text at that path that k does not).

// Tags of a value in k.
const (
	rowFloat = iota
	rowText
	rowBlob
	rowSame
	rowHasText
	rowInt
)

// errRowKeys is a k column that does not decode.
var errRowKeys = errors.New("row keys do not decode")

// rowField is the top-level field whose entries a row keeps whole: where
// the store keeps its sort keys ("sort.<param>.a", ".d").
const rowField = "sort"

// keptInRow tells whether a row keeps entry e.
func keptInRow(e entry) bool {
	if _, text := e.v.(string); !text {
		return true
	}
	return rowHolds(e.f)
}

// rowHolds tells whether a row keeps every entry at path.
func rowHolds(path string) bool {
	top, _, _ := strings.Cut(path, ".")
	return top == rowField
}

// encodeRowKeys encodes the row keys of a document's entries, their
// paths numbered, sorted by (number, value).
func encodeRowKeys(entries []codedEntry) []byte {
	var out []byte
	var kept []any
	prev, flagged := int64(0), int64(-1)
	path := func(f int64) {
		out = binary.AppendUvarint(out, uint64(f-prev))
		prev = f
	}
	for _, e := range entries {
		if e.text {
			if e.f != flagged {
				path(e.f)
				out = append(out, rowHasText)
				flagged = e.f
			}
			continue
		}
		path(e.f)
		j := slices.IndexFunc(kept, func(v any) bool { return sameValue(v, e.v) })
		kept = append(kept, e.v)
		if j >= 0 {
			out = append(out, rowSame)
			out = binary.AppendUvarint(out, uint64(j))
			continue
		}
		switch x := e.v.(type) {
		case float64:
			if i := int64(x); float64(i) == x && i > -1<<53 && i < 1<<53 && !(x == 0 && math.Signbit(x)) {
				out = append(out, rowInt)
				out = binary.AppendVarint(out, i)
			} else {
				out = append(out, rowFloat)
				out = binary.LittleEndian.AppendUint64(out, math.Float64bits(x))
			}
		case string:
			out = append(out, rowText)
			out = binary.AppendUvarint(out, uint64(len(x)))
			out = append(out, x...)
		case []byte:
			out = append(out, rowBlob)
			out = binary.AppendUvarint(out, uint64(len(x)))
			out = append(out, x...)
		}
	}
	return out
}

// rowReader walks the entries of a k column.
type rowReader struct {
	k    []byte
	pos  int
	vals []any // the values read so far, for rowSame
	f    int64
	v    any  // nil when text is set
	text bool // f holds text that k does not
	err  error
}

// next reads the next entry into f and v.
func (r *rowReader) next() bool {
	if r.err != nil || r.pos >= len(r.k) {
		return false
	}
	d, n := binary.Uvarint(r.k[r.pos:])
	if n <= 0 || r.pos+n >= len(r.k) { // a tag follows
		r.err = errRowKeys
		return false
	}
	r.pos += n
	f := uint64(r.f) + d
	tag := r.k[r.pos]
	r.pos++
	var v any
	switch tag {
	case rowFloat:
		if r.pos+8 > len(r.k) {
			r.err = errRowKeys
			return false
		}
		v = math.Float64frombits(binary.LittleEndian.Uint64(r.k[r.pos:]))
		r.pos += 8
	case rowInt:
		i, n := binary.Varint(r.k[r.pos:])
		if n <= 0 {
			r.err = errRowKeys
			return false
		}
		r.pos += n
		v = float64(i)
	case rowText, rowBlob:
		l, n := binary.Uvarint(r.k[r.pos:])
		if n <= 0 || uint64(r.pos+n)+l > uint64(len(r.k)) {
			r.err = errRowKeys
			return false
		}
		b := r.k[r.pos+n : r.pos+n+int(l)]
		r.pos += n + int(l)
		if tag == rowText {
			v = string(b)
		} else {
			v = b
		}
	case rowSame:
		j, n := binary.Uvarint(r.k[r.pos:])
		if n <= 0 || j >= uint64(len(r.vals)) {
			r.err = errRowKeys
			return false
		}
		r.pos += n
		v = r.vals[j]
	case rowHasText:
		r.f, r.v, r.text = int64(f), nil, true
		return true
	default:
		r.err = errRowKeys
		return false
	}
	r.vals = append(r.vals, v)
	r.f, r.v, r.text = int64(f), v, false
	return true
}

// cond is a condition on one entry's value, as valueCond writes it in SQL.
type cond struct {
	op   op
	kind kind
	vals []any
}

// holds tells whether value v satisfies c.
func (c *cond) holds(v any) bool {
	switch c.op {
	case opNull:
		b, ok := v.([]byte)
		return ok && bytes.Equal(b, markNull)
	case opScalar:
		return !isMarker(v)
	case opPrefix:
		s, ok := v.(string)
		p := c.vals[0].(string)
		return ok && strings.HasPrefix(s, p)
	case opSubstr:
		s, ok := v.(string)
		return ok && strings.Contains(s, c.vals[0].(string))
	case opEq:
		return compareValues(v, c.vals[0]) == 0
	case opIn:
		for _, x := range c.vals {
			if compareValues(v, x) == 0 {
				return true
			}
		}
		return false
	}
	if !c.kind.has(v) {
		return false
	}
	cmp := compareValues(v, c.vals[0])
	switch c.op {
	case opGt:
		return cmp > 0
	case opGte:
		return cmp >= 0
	case opLt:
		return cmp < 0
	case opLte:
		return cmp <= 0
	}
	return false
}

// has tells whether v is a value of kind k (within its range of SQLite
// values, as bounds states it).
func (k kind) has(v any) bool {
	switch x := v.(type) {
	case float64, int64:
		return k == kindNumber
	case string:
		return k == kindString
	case []byte:
		switch k {
		case kindBool:
			return len(x) > 0 && x[0] == tagBool
		case kindTime:
			return len(x) > 0 && x[0] == tagTime
		}
	}
	return false
}

// sortsBy returns the least (or, desc, the greatest) scalar of values, or
// nil when there is none.
func sortsBy(values []any, desc bool) any {
	var best any
	for _, v := range values {
		if isMarker(v) {
			continue
		}
		if best == nil || desc && compareValues(v, best) > 0 || !desc && compareValues(v, best) < 0 {
			best = v
		}
	}
	return best
}
