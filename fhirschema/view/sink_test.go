package view_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"fhirstore/fhirschema/view"
)

// sinkColumns and sinkRows are the rows every sink test writes: each
// kind of value, nulls and an empty collection.
var (
	sinkColumns = []view.Column{
		{Name: "id", Type: "id"}, {Name: "n", Type: "integer"}, {Name: "d", Type: "decimal"},
		{Name: "ok", Type: "boolean"}, {Name: "at", Type: "instant"}, {Name: "given", Type: "string", Collection: true},
		{Name: "note", Type: "string"},
	}
	sinkRows = [][]any{
		{"p1", json.Number("42"), json.Number("1.50"), true, "2024-01-02T03:04:05.678Z", []any{"Ann", "Bo"}, "say \"hi\", \u00e9\n"},
		{"p2", nil, nil, false, nil, []any{}, nil},
	}
)

func writeRows(t *testing.T, format string, opts view.SinkOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	s, err := view.NewSink(&buf, format, sinkColumns, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sinkRows {
		if err := s.WriteRow(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestJSONSinkWritesAnArrayOfObjectsInColumnOrder(t *testing.T) {
	out := string(writeRows(t, view.FormatJSON, view.SinkOptions{}))
	want := `[{"id":"p1","n":42,"d":1.50,"ok":true,"at":"2024-01-02T03:04:05.678Z","given":["Ann","Bo"],"note":"say \"hi\", é\n"},` +
		`{"id":"p2","n":null,"d":null,"ok":false,"at":null,"given":[],"note":null}]`
	if out != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Errorf("not a JSON array of 2 rows: %v", err)
	}
}

func TestJSONSinkWithNoRowsIsAnEmptyArray(t *testing.T) {
	var buf bytes.Buffer
	s, _ := view.NewSink(&buf, view.FormatJSON, sinkColumns, view.SinkOptions{})
	if err := s.Close(); err != nil || buf.String() != "[]" {
		t.Errorf("got %q, %v", buf.String(), err)
	}
}

func TestNDJSONSinkWritesOneObjectPerLine(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(string(writeRows(t, view.FormatNDJSON, view.SinkOptions{})), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || len(m) != len(sinkColumns) {
			t.Errorf("line %q: %v", l, err)
		}
	}
}

func TestCSVSinkHasAHeaderUnlessTurnedOff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   view.SinkOptions
		header bool
	}{{"with header", view.SinkOptions{}, true}, {"header=false", view.SinkOptions{NoHeader: true}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := csv.NewReader(bytes.NewReader(writeRows(t, view.FormatCSV, tc.opts))).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if tc.header {
				if strings.Join(recs[0], ",") != "id,n,d,ok,at,given,note" {
					t.Errorf("header %v", recs[0])
				}
				recs = recs[1:]
			}
			want := [][]string{
				{"p1", "42", "1.50", "true", "2024-01-02T03:04:05.678Z", `["Ann","Bo"]`, "say \"hi\", é\n"},
				{"p2", "", "", "false", "", "[]", ""},
			}
			if !reflect.DeepEqual(recs, want) {
				t.Errorf("got %q\nwant %q", recs, want)
			}
		})
	}
}

func TestParquetSinkWritesTypedColumnsInOrder(t *testing.T) {
	data := writeRows(t, view.FormatParquet, view.SinkOptions{})
	if !bytes.HasPrefix(data, []byte("PAR1")) {
		t.Fatalf("no Parquet magic")
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, field := range f.Schema().Fields() {
		names = append(names, field.Name())
	}
	if strings.Join(names, ",") != "id,n,d,ok,at,given,note" {
		t.Errorf("columns %v", names)
	}
	kinds := map[string]parquet.Kind{"id": parquet.ByteArray, "n": parquet.Int32, "d": parquet.Double, "ok": parquet.Boolean, "at": parquet.Int64}
	for _, field := range f.Schema().Fields() {
		if k, ok := kinds[field.Name()]; ok && field.Type().Kind() != k {
			t.Errorf("column %s is %v, want %v", field.Name(), field.Type().Kind(), k)
		}
	}
	r := parquet.NewReader(f)
	rows := make([]parquet.Row, 4)
	n, err := r.ReadRows(rows)
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	got := map[int][]string{}
	for _, v := range rows[0] {
		got[v.Column()] = append(got[v.Column()], v.String())
	}
	at := time.Date(2024, 1, 2, 3, 4, 5, 678e6, time.UTC).UnixMilli()
	want := map[int][]string{0: {"p1"}, 1: {"42"}, 2: {"1.5"}, 3: {"true"}, 4: {parquet.Int64Value(at).String()}, 5: {"Ann", "Bo"}, 6: {"say \"hi\", é\n"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("row 1: got %q\nwant %q", got, want)
	}
	for _, v := range rows[1] {
		if c := v.Column(); c != 0 && c != 3 && !v.IsNull() {
			t.Errorf("row 2 column %d is %v, want null", c, v)
		}
	}
}

func TestParseFormatTakesNamesAndMediaTypes(t *testing.T) {
	for in, want := range map[string]string{
		"json": view.FormatJSON, "application/json": view.FormatJSON, "NDJSON": view.FormatNDJSON,
		"application/x-ndjson": view.FormatNDJSON, "application/fhir ndjson": view.FormatNDJSON,
		"text/csv": view.FormatCSV, "csv": view.FormatCSV, "parquet": view.FormatParquet,
		"application/vnd.apache.parquet": view.FormatParquet,
	} {
		if got, ok := view.ParseFormat(in); !ok || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := view.ParseFormat("xml"); ok {
		t.Error("xml is not a view format")
	}
}
