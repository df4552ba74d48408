package document

import (
	"bytes"
	"math"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Marshal encodes doc as bson.Marshal does, without reflection, when
// every value in it is of a type a parsed document, search values or a
// stored row hold: bson.D, bson.A, []any, []string, []NumText, string,
// bool, int, int32, int64, float64, nil, bson.Raw and time.Time. A
// document holding anything else is left to bson.Marshal.
func Marshal(doc bson.D) ([]byte, error) {
	buf := marshalBuffers.Get().(*[]byte)
	out, ok := appendD((*buf)[:0], doc)
	var raw []byte
	if ok {
		raw = bytes.Clone(out)
	}
	if cap(out) <= maxPooledBuffer {
		*buf = out[:0]
		marshalBuffers.Put(buf)
	}
	if !ok {
		return bson.Marshal(doc)
	}
	return raw, nil
}

// maxPooledBuffer is the largest buffer kept for the next Marshal: the
// rare large resource does not hold its memory afterwards.
const maxPooledBuffer = 1 << 20

// marshalBuffers hold what Marshal encodes before it is copied out at its
// size.
var marshalBuffers = sync.Pool{New: func() any { return new([]byte) }}

// MarshalAppend is Marshal appending to dst (whose capacity can spare the
// encoder growing it).
func MarshalAppend(dst []byte, doc bson.D) ([]byte, error) {
	if out, ok := appendD(dst, doc); ok {
		return out, nil
	}
	raw, err := bson.Marshal(doc)
	return append(dst, raw...), err
}

// AppendElement appends the element key: v to dst as Marshal encodes it;
// ok is false for a value of a type Marshal leaves to bson.Marshal.
func AppendElement(dst []byte, key string, v any) ([]byte, bool) {
	switch x := v.(type) {
	case string:
		return bsoncore.AppendStringElement(dst, key, x), true
	case bool:
		return bsoncore.AppendBooleanElement(dst, key, x), true
	case float64:
		return bsoncore.AppendDoubleElement(dst, key, x), true
	case int32:
		return bsoncore.AppendInt32Element(dst, key, x), true
	case int64:
		return bsoncore.AppendInt64Element(dst, key, x), true
	case int:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return bsoncore.AppendInt32Element(dst, key, int32(x)), true
		}
		return bsoncore.AppendInt64Element(dst, key, int64(x)), true
	case nil:
		return bsoncore.AppendNullElement(dst, key), true
	case time.Time:
		return bsoncore.AppendDateTimeElement(dst, key, int64(bson.NewDateTimeFromTime(x))), true
	case bson.Raw:
		if len(x) == 0 {
			return dst, false // bson.Marshal's error
		}
		return bsoncore.AppendDocumentElement(dst, key, x), true
	case bson.D:
		if x == nil {
			return bsoncore.AppendNullElement(dst, key), true
		}
		return appendD(bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, key), x)
	case bson.A:
		if x == nil {
			return bsoncore.AppendNullElement(dst, key), true
		}
		return appendArray(bsoncore.AppendHeader(dst, bsoncore.TypeArray, key), []any(x))
	case []any:
		if x == nil {
			return bsoncore.AppendNullElement(dst, key), true
		}
		return appendArray(bsoncore.AppendHeader(dst, bsoncore.TypeArray, key), x)
	case []string:
		if x == nil {
			return bsoncore.AppendNullElement(dst, key), true
		}
		idx, out := bsoncore.AppendArrayElementStart(dst, key)
		for i, s := range x {
			out = bsoncore.AppendStringElement(out, arrayKey(i), s)
		}
		out, _ = bsoncore.AppendArrayEnd(out, idx)
		return out, true
	case []NumText:
		if x == nil {
			return bsoncore.AppendNullElement(dst, key), true
		}
		idx, out := bsoncore.AppendArrayElementStart(dst, key)
		for i, t := range x {
			var doc int32
			doc, out = bsoncore.AppendDocumentElementStart(out, arrayKey(i))
			out = bsoncore.AppendStringElement(out, "path", t.Path)
			out = bsoncore.AppendStringElement(out, "text", t.Text)
			out, _ = bsoncore.AppendDocumentEnd(out, doc)
		}
		out, _ = bsoncore.AppendArrayEnd(out, idx)
		return out, true
	}
	return dst, false
}

func appendD(dst []byte, doc bson.D) ([]byte, bool) {
	idx, out := bsoncore.AppendDocumentStart(dst)
	for _, e := range doc {
		var ok bool
		if out, ok = AppendElement(out, e.Key, e.Value); !ok {
			return dst, false
		}
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out, true
}

func appendArray(dst []byte, list []any) ([]byte, bool) {
	idx, out := bsoncore.AppendArrayStart(dst)
	for i, v := range list {
		var ok bool
		if out, ok = AppendElement(out, arrayKey(i), v); !ok {
			return dst, false
		}
	}
	out, _ = bsoncore.AppendArrayEnd(out, idx)
	return out, true
}

// arrayKeys are the keys of the first elements of an array.
var arrayKeys = func() []string {
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	return keys
}()

func arrayKey(i int) string {
	if i < len(arrayKeys) {
		return arrayKeys[i]
	}
	return strconv.Itoa(i)
}
