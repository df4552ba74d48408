package view

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// leafKind is how a column's values are stored in Parquet.
type leafKind int

const (
	leafString leafKind = iota
	leafBool
	leafInt32
	leafInt64
	leafDouble
	leafTimestamp
)

// leafKinds maps column types to their Parquet storage. Dates, dateTimes
// and times may be partial (1970-06) and stay strings; an instant is
// always complete and becomes a UTC timestamp.
var leafKinds = map[string]leafKind{
	"boolean": leafBool, "integer": leafInt32, "positiveInt": leafInt32, "unsignedInt": leafInt32,
	"integer64": leafInt64, "decimal": leafDouble, "instant": leafTimestamp,
}

func (k leafKind) node() parquet.Node {
	switch k {
	case leafBool:
		return parquet.Leaf(parquet.BooleanType)
	case leafInt32:
		return parquet.Int(32)
	case leafInt64:
		return parquet.Int(64)
	case leafDouble:
		return parquet.Leaf(parquet.DoubleType)
	case leafTimestamp:
		return parquet.Timestamp(parquet.Millisecond)
	}
	return parquet.String()
}

// parquetSink writes rows into one Parquet file: a column per view
// column, in the view's order, optional, or repeated for a collection.
type parquetSink struct {
	w     *parquet.GenericWriter[any]
	kinds []leafKind
	multi []bool
	batch []parquet.Row
}

// parquetBatch is how many rows are handed to the writer at once.
const parquetBatch = 256

func newParquetSink(w io.Writer, cols []Column, rowGroup int) (*parquetSink, error) {
	if rowGroup <= 0 {
		rowGroup = 64 << 10
	}
	s := &parquetSink{kinds: make([]leafKind, len(cols)), multi: make([]bool, len(cols))}
	fields := make(orderedGroup, len(cols))
	for i, c := range cols {
		s.kinds[i], s.multi[i] = leafKinds[c.Type], c.Collection
		n := s.kinds[i].node()
		if c.Collection {
			n = parquet.Repeated(n)
		} else {
			n = parquet.Optional(n)
		}
		fields[i] = &parquetField{Node: n, name: c.Name}
	}
	schema := parquet.NewSchema("view", fields)
	s.w = parquet.NewGenericWriter[any](w, schema, parquet.MaxRowsPerRowGroup(int64(rowGroup)), parquet.Compression(&parquet.Snappy))
	return s, nil
}

func (s *parquetSink) WriteRow(row []any) error {
	var pr parquet.Row
	if n := len(s.batch); n < cap(s.batch) {
		pr = s.batch[:n+1][n][:0]
	}
	for i, v := range row {
		var err error
		if pr, err = s.appendColumn(pr, i, v); err != nil {
			return err
		}
	}
	s.batch = append(s.batch, pr)
	if len(s.batch) >= parquetBatch {
		return s.flush()
	}
	return nil
}

// appendColumn appends the values of column i to the row.
func (s *parquetSink) appendColumn(pr parquet.Row, i int, v any) (parquet.Row, error) {
	if !s.multi[i] {
		if v == nil {
			return append(pr, parquet.NullValue().Level(0, 0, i)), nil
		}
		pv, err := s.kinds[i].value(v)
		if err != nil {
			return nil, fmt.Errorf("parquet column %d: %w", i, err)
		}
		return append(pr, pv.Level(0, 1, i)), nil
	}
	arr, _ := v.([]any)
	n := 0
	for _, e := range arr {
		if e == nil {
			continue
		}
		pv, err := s.kinds[i].value(e)
		if err != nil {
			return nil, fmt.Errorf("parquet column %d: %w", i, err)
		}
		pr = append(pr, pv.Level(min(n, 1), 1, i))
		n++
	}
	if n == 0 {
		pr = append(pr, parquet.NullValue().Level(0, 0, i))
	}
	return pr, nil
}

// value converts one row value to the column's Parquet type.
func (k leafKind) value(v any) (parquet.Value, error) {
	switch k {
	case leafBool:
		if b, ok := v.(bool); ok {
			return parquet.BooleanValue(b), nil
		}
	case leafInt32, leafInt64:
		if n, ok := integerOf(v); ok {
			if k == leafInt32 && (n < math.MinInt32 || n > math.MaxInt32) {
				return parquet.Value{}, fmt.Errorf("%d does not fit an integer column", n)
			}
			if k == leafInt32 {
				return parquet.Int32Value(int32(n)), nil
			}
			return parquet.Int64Value(n), nil
		}
	case leafDouble:
		if f, ok := floatOf(v); ok {
			return parquet.DoubleValue(f), nil
		}
	case leafTimestamp:
		if str, ok := v.(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, str); err == nil {
				return parquet.Int64Value(t.UnixMilli()), nil
			}
		}
	default:
		str, err := csvField(v)
		return parquet.ByteArrayValue([]byte(str)), err
	}
	return parquet.Value{}, fmt.Errorf("value %v does not fit a %s column", v, k.name())
}

func (k leafKind) name() string {
	return [...]string{"string", "boolean", "integer", "integer64", "decimal", "instant"}[k]
}

func integerOf(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, true
		}
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return int64(f), true
		}
	}
	return 0, false
}

func floatOf(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	}
	return 0, false
}

func (s *parquetSink) flush() error {
	if len(s.batch) == 0 {
		return nil
	}
	if _, err := s.w.WriteRows(s.batch); err != nil {
		return fmt.Errorf("write parquet rows: %w", err)
	}
	s.batch = s.batch[:0]
	return nil
}

func (s *parquetSink) Close() error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.w.Close(); err != nil {
		return fmt.Errorf("finish parquet file: %w", err)
	}
	return nil
}

// orderedGroup is the root of a view's Parquet schema: its columns in the
// view's order (parquet.Group orders fields by name).
type orderedGroup []parquet.Field

// parquetField is one column of an orderedGroup.
type parquetField struct {
	parquet.Node
	name string
}

func (f *parquetField) Name() string { return f.name }

func (f *parquetField) Value(base reflect.Value) reflect.Value {
	if base.Kind() == reflect.Map {
		return base.MapIndex(reflect.ValueOf(f.name))
	}
	return reflect.Value{}
}

func (g orderedGroup) ID() int { return 0 }

func (g orderedGroup) String() string {
	var b strings.Builder
	_ = parquet.PrintSchema(&b, "view", g)
	return b.String()
}

func (g orderedGroup) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g orderedGroup) Optional() bool              { return false }
func (g orderedGroup) Repeated() bool              { return false }
func (g orderedGroup) Required() bool              { return true }
func (g orderedGroup) Leaf() bool                  { return false }
func (g orderedGroup) Fields() []parquet.Field     { return g }
func (g orderedGroup) Encoding() encoding.Encoding { return nil }
func (g orderedGroup) Compression() compress.Codec { return nil }
func (g orderedGroup) GoType() reflect.Type        { return reflect.TypeOf(map[string]any(nil)) }
