package sqlite

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// kind is what a value compares with: values compare within their kind only.
type kind uint8

const (
	kindNull kind = iota
	kindString
	kindNumber
	kindBool
	kindTime
)

// Each kind of value is encoded into a range of SQLite values of its own,
// so that plain comparisons (index ranges) never mix kinds, in the order
// MongoDB sorts them: numbers (REAL) < strings (TEXT) < booleans (BLOB
// 0x10 b) < datetimes (BLOB 0x20 + big-endian milliseconds, sign bit
// flipped) < markers (BLOB 0xF0...), which stand for what is not an
// indexed scalar and never equal a filter value.
const (
	tagBool  = 0x10
	tagTime  = 0x20
	tagMark  = 0xF0 // scalars sort below x'F0'
	maxBool  = "x'11'"
	minBool  = "x'10'"
	maxTime  = "x'21'"
	minTime  = "x'20'"
	minMark  = "x'F0'"
	minText  = "''"
	minBlobs = "x''"
)

// bounds are the SQL literals bounding the kind's values: [lo, hi) (lo
// empty for numbers, the least values stored).
func (k kind) bounds() (lo, hi string) {
	switch k {
	case kindNumber:
		return "", minText
	case kindString:
		return minText, minBlobs
	case kindBool:
		return minBool, maxBool
	}
	return minTime, maxTime
}

var (
	markNull  = []byte{tagMark}     // null
	markEmpty = []byte{tagMark + 1} // an empty array or document
	markOther = []byte{tagMark + 2} // any other BSON type (binary, ObjectID, decimal...)
)

// timeValue encodes milliseconds since the epoch.
func timeValue(ms int64) []byte {
	b := make([]byte, 9)
	b[0] = tagTime
	binary.BigEndian.PutUint64(b[1:], uint64(ms)^(1<<63))
	return b
}

// filterValue encodes a filter operand like an entry value, with its kind.
func filterValue(v any) (any, kind, error) {
	switch x := v.(type) {
	case nil:
		return nil, kindNull, nil
	case bson.Null:
		return nil, kindNull, nil
	case string:
		return x, kindString, nil
	case bool:
		return boolValue(x), kindBool, nil
	case int:
		return float64(x), kindNumber, nil
	case int8:
		return float64(x), kindNumber, nil
	case int16:
		return float64(x), kindNumber, nil
	case int32:
		return float64(x), kindNumber, nil
	case int64:
		return float64(x), kindNumber, nil
	case uint8:
		return float64(x), kindNumber, nil
	case uint16:
		return float64(x), kindNumber, nil
	case uint32:
		return float64(x), kindNumber, nil
	case float32:
		return numberValue(float64(x))
	case float64:
		return numberValue(x)
	case time.Time:
		return timeValue(x.UnixMilli()), kindTime, nil
	case bson.DateTime:
		return timeValue(int64(x)), kindTime, nil
	}
	return nil, kindNull, fmt.Errorf("filter value %v (%T): %w", v, v, engine.ErrUnsupported)
}

func numberValue(f float64) (any, kind, error) {
	if math.IsNaN(f) {
		return nil, kindNull, fmt.Errorf("filter value NaN: %w", engine.ErrUnsupported)
	}
	return f, kindNumber, nil
}

// boolValue encodes a boolean.
func boolValue(b bool) []byte {
	if b {
		return []byte{tagBool, 1}
	}
	return []byte{tagBool, 0}
}

// compareValues orders two encoded values as SQLite does: numbers (REAL
// and INTEGER together) before text (byte order) before blobs.
func compareValues(a, b any) int {
	ra, rb := storageClass(a), storageClass(b)
	if ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case string:
		y := b.(string)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case []byte:
		return bytes.Compare(x, b.([]byte))
	}
	fa, fb := asFloat(a), asFloat(b)
	switch {
	case fa < fb:
		return -1
	case fa > fb:
		return 1
	}
	return 0
}

func storageClass(v any) int {
	switch v.(type) {
	case int64, float64:
		return 1
	case string:
		return 2
	case []byte:
		return 3
	}
	return 0
}

func asFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// successor is the least string greater than every string starting with
// s ("" when there is none: s is empty or all 0xFF bytes).
func successor(s string) string {
	b := []byte(s)
	for len(b) > 0 && b[len(b)-1] == 0xFF {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return ""
	}
	b[len(b)-1]++
	return string(b)
}
