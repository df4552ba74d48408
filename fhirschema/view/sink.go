package view

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Output formats of a view's rows.
const (
	FormatJSON    = "json"    // one JSON array of row objects
	FormatNDJSON  = "ndjson"  // one row object per line
	FormatCSV     = "csv"     // RFC 4180, with a header row unless turned off
	FormatParquet = "parquet" // Apache Parquet, typed columns
)

// formatNames maps the names and media types a client may give to a format.
var formatNames = map[string]string{
	"json": FormatJSON, "application/json": FormatJSON, "application/fhir+json": FormatJSON,
	"ndjson": FormatNDJSON, "application/ndjson": FormatNDJSON, "application/x-ndjson": FormatNDJSON,
	"application/fhir+ndjson": FormatNDJSON, "application/jsonl": FormatNDJSON, "jsonl": FormatNDJSON,
	"csv": FormatCSV, "text/csv": FormatCSV,
	"parquet": FormatParquet, "application/parquet": FormatParquet, "application/vnd.apache.parquet": FormatParquet,
}

// ParseFormat reads a format given by name (json, ndjson, csv, parquet) or
// media type (text/csv…); ok is false for any other.
func ParseFormat(s string) (format string, ok bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if mt, _, found := strings.Cut(s, ";"); found {
		s = strings.TrimSpace(mt)
	}
	// A "+" in a query string arrives as a space.
	format, ok = formatNames[strings.ReplaceAll(s, " ", "+")]
	return format, ok
}

// ContentType is the media type of a format.
func ContentType(format string) string {
	switch format {
	case FormatNDJSON:
		return "application/x-ndjson"
	case FormatCSV:
		return "text/csv; charset=utf-8"
	case FormatParquet:
		return "application/vnd.apache.parquet"
	}
	return "application/json"
}

// Extension is the file name extension of a format.
func Extension(format string) string { return "." + format }

// Sink writes rows in one format. Close finishes the output (the closing
// bracket of a JSON array, the footer of a Parquet file) and flushes it; it
// does not close the underlying writer.
type Sink interface {
	WriteRow(row []any) error
	Close() error
}

// SinkOptions tune a sink.
type SinkOptions struct {
	// NoHeader leaves out the header row of CSV.
	NoHeader bool
	// RowGroupRows is how many rows a Parquet row group holds at most
	// (default 65,536): the rows a Parquet sink keeps in memory.
	RowGroupRows int
}

// NewSink returns a sink writing rows of cols to w in format.
func NewSink(w io.Writer, format string, cols []Column, opts SinkOptions) (Sink, error) {
	switch format {
	case FormatJSON:
		return &jsonSink{w: bufio.NewWriterSize(w, 64<<10), keys: objectKeys(cols), array: true}, nil
	case FormatNDJSON:
		return &jsonSink{w: bufio.NewWriterSize(w, 64<<10), keys: objectKeys(cols)}, nil
	case FormatCSV:
		return newCSVSink(w, cols, !opts.NoHeader)
	case FormatParquet:
		return newParquetSink(w, cols, opts.RowGroupRows)
	}
	return nil, fmt.Errorf("unknown output format %q", format)
}

// objectKeys are the JSON-encoded keys of a row object, with their colon.
func objectKeys(cols []Column) [][]byte {
	keys := make([][]byte, len(cols))
	for i, c := range cols {
		keys[i] = append(appendJSONString(nil, c.Name), ':')
	}
	return keys
}

// jsonSink writes rows as JSON objects, keys in column order: in a JSON
// array, or one per line.
type jsonSink struct {
	w     *bufio.Writer
	keys  [][]byte
	array bool
	n     int
	buf   []byte
}

func (s *jsonSink) WriteRow(row []any) error {
	b := s.buf[:0]
	switch {
	case s.array && s.n == 0:
		b = append(b, '[')
	case s.array:
		b = append(b, ',')
	}
	b = append(b, '{')
	for i, v := range row {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, s.keys[i]...)
		var err error
		if b, err = appendJSON(b, v); err != nil {
			return err
		}
	}
	b = append(b, '}')
	if !s.array {
		b = append(b, '\n')
	}
	s.buf = b
	s.n++
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("write row: %w", err)
	}
	return nil
}

func (s *jsonSink) Close() error {
	if s.array {
		end := "]"
		if s.n == 0 {
			end = "[]"
		}
		if _, err := s.w.WriteString(end); err != nil {
			return fmt.Errorf("write rows: %w", err)
		}
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("write rows: %w", err)
	}
	return nil
}

// appendJSON appends a row value as JSON.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendJSONString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case json.Number:
		return append(b, x...), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode a row value: %w", err)
	}
	return append(b, j...), nil
}

// appendJSONString appends s as a JSON string, escaping only what JSON
// requires (and invalid UTF-8 as U+FFFD).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// csvSink writes rows as CSV: values as text, collections and complex
// values as JSON, null as an empty field.
type csvSink struct {
	bw     *bufio.Writer
	w      *csv.Writer
	fields []string
}

func newCSVSink(w io.Writer, cols []Column, header bool) (*csvSink, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	s := &csvSink{bw: bw, w: csv.NewWriter(bw), fields: make([]string, len(cols))}
	if header {
		for i, c := range cols {
			s.fields[i] = c.Name
		}
		if err := s.w.Write(s.fields); err != nil {
			return nil, fmt.Errorf("write CSV header: %w", err)
		}
	}
	return s, nil
}

func (s *csvSink) WriteRow(row []any) error {
	for i, v := range row {
		f, err := csvField(v)
		if err != nil {
			return err
		}
		s.fields[i] = f
	}
	if err := s.w.Write(s.fields); err != nil {
		return fmt.Errorf("write CSV row: %w", err)
	}
	return nil
}

func csvField(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		return string(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	b, err := appendJSON(nil, v)
	return string(b), err
}

func (s *csvSink) Close() error {
	s.w.Flush()
	if err := s.w.Error(); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	if err := s.bw.Flush(); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	return nil
}
