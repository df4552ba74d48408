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
// dates, booleans, markers), every entry under rowFields (the store's sort
// keys), and for the other paths holding text, that they do. A condition
// on text outside rowFields is an equality answered by x_C's key
// (f, v, rid), or, for the few documents holding text at its path, is
// checked on the document itself (a prefix, a substring); everything
// else (comparisons of numbers and dates, existence, sort values) is
// answered by k alone.
//
// k is a sequence of entries sorted by path number: the number's
// difference from the previous entry's as a uvarint, then a tag and the
// value: rowFloat and 8 bytes (IEEE 754, little endian), rowInt and a
// zigzag varint (a number without a fraction), rowText or rowBlob and a
// uvarint length and the bytes, rowSame and the uvarint distance back
// from its own tag to the tag of an earlier value of k that is the same
// (the ascending and descending sort keys of one value, a date's
// bounds), or rowHasText and nothing (the document holds text at that
// path that k does not).

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

// rowFields are the top-level fields whose entries a row keeps whole and
// x_C does not: fields of the store's documents no query finds documents
// by, only checks or sorts the documents it holds by. They are its sort
// keys ("sort.<param>.a", ".d"), a version's number ("vid"), the method
// that wrote it ("method") and its transaction ("txn"): the last three
// are asked of documents found by their _id, and were 6% of the bytes of
// the index entries at 100,000 resources.
func rowFields(top string) bool {
	switch top {
	case "sort", "vid", "method", "txn":
		return true
	}
	return false
}

// keptInRow tells whether a row keeps entry e.
func keptInRow(e entry) bool {
	if _, text := e.v.(string); !text {
		return true
	}
	return rowHolds(e.f)
}

// rowOnly tells whether the entries at path are kept in rows only, not
// in x_C: a condition on them is checked on each document a plan holds,
// a sort by them sorts the matches rather than walking an index.
func rowOnly(path string) bool { return rowHolds(path) }

// rowHolds tells whether a row keeps every entry at path.
func rowHolds(path string) bool {
	top, _, _ := strings.Cut(path, ".")
	return rowFields(top)
}

// encodeRowKeys encodes the row keys of a document's entries, their
// paths numbered, sorted by (number, value).
func encodeRowKeys(entries []codedEntry) []byte {
	var out []byte
	var kept []any
	var tags []int // where each kept value's tag is
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
		if j := slices.IndexFunc(kept, func(v any) bool { return sameValue(v, e.v) }); j >= 0 {
			out = binary.AppendUvarint(append(out, rowSame), uint64(len(out)-tags[j]))
			continue
		}
		kept, tags = append(kept, e.v), append(tags, len(out))
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

// rowReader walks the entries of a k column; an entry's value is decoded
// only when asked for.
type rowReader struct {
	k    []byte
	pos  int   // of the next entry
	at   int   // of the current entry's tag
	f    int64 // the current entry's path number
	text bool  // the current entry says f holds text that k does not
	err  error
}

// next moves to the next entry.
func (r *rowReader) next() bool {
	if r.err != nil || r.pos >= len(r.k) {
		return false
	}
	d, n := binary.Uvarint(r.k[r.pos:])
	if n <= 0 || r.pos+n >= len(r.k) { // a tag follows
		r.err = errRowKeys
		return false
	}
	r.f += int64(d)
	r.at = r.pos + n
	end, err := r.skip(r.at)
	if err != nil {
		r.err = err
		return false
	}
	r.pos, r.text = end, r.k[r.at] == rowHasText
	return true
}

// skip returns where the value whose tag is at i ends.
func (r *rowReader) skip(i int) (int, error) {
	switch r.k[i] {
	case rowHasText:
		return i + 1, nil
	case rowFloat:
		if i+9 > len(r.k) {
			return 0, errRowKeys
		}
		return i + 9, nil
	case rowInt, rowSame:
		if _, n := binary.Varint(r.k[i+1:]); n > 0 {
			return i + 1 + n, nil
		}
	case rowText, rowBlob:
		l, n := binary.Uvarint(r.k[i+1:])
		if n > 0 && uint64(i+1+n)+l <= uint64(len(r.k)) {
			return i + 1 + n + int(l), nil
		}
	}
	return 0, errRowKeys
}

// value decodes the current entry's value (not for a text flag).
func (r *rowReader) value() any {
	i := r.at
	if r.k[i] == rowSame { // a backward distance to the value's tag
		d, n := binary.Uvarint(r.k[i+1:])
		if n <= 0 || d == 0 || d > uint64(i) || r.k[i-int(d)] == rowSame {
			r.err = errRowKeys
			return nil
		}
		i -= int(d)
		if _, err := r.skip(i); err != nil {
			r.err = err
			return nil
		}
	}
	switch r.k[i] {
	case rowFloat:
		return math.Float64frombits(binary.LittleEndian.Uint64(r.k[i+1:]))
	case rowInt:
		v, _ := binary.Varint(r.k[i+1:])
		return float64(v)
	case rowText, rowBlob:
		l, n := binary.Uvarint(r.k[i+1:])
		b := r.k[i+1+n : i+1+n+int(l)]
		if r.k[i] == rowText {
			return string(b)
		}
		return b
	}
	r.err = errRowKeys
	return nil
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
