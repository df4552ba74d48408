package sqlite

import (
	"bytes"
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

// sqlType is the SQLite typeof() of the kind's encoding.
func (k kind) sqlType() string {
	switch k {
	case kindString:
		return "text"
	case kindNumber:
		return "real"
	}
	return "integer"
}

// Markers are the entry values of what is not an indexed scalar. Blobs
// sort after every other SQLite value and no filter value encodes to one.
var (
	markNull  = []byte{0} // null
	markEmpty = []byte{1} // an empty array or document
	markOther = []byte{2} // any other BSON type (binary, ObjectID, decimal...)
)

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
		return x.UnixMilli(), kindTime, nil
	case bson.DateTime:
		return int64(x), kindTime, nil
	}
	return nil, kindNull, fmt.Errorf("filter value %v (%T): %w", v, v, engine.ErrUnsupported)
}

func numberValue(f float64) (any, kind, error) {
	if math.IsNaN(f) {
		return nil, kindNull, fmt.Errorf("filter value NaN: %w", engine.ErrUnsupported)
	}
	return f, kindNumber, nil
}

func boolValue(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// compareValues orders two encoded values as SQLite does: numbers (REAL
// and INTEGER together) before text (byte order) before blobs.
func compareValues(a, b any) int {
	ra, rb := rank(a), rank(b)
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

func rank(v any) int {
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
