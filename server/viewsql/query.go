package viewsql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"fhirstore/fhirschema/view"
)

// Result is the answer of a query: its columns (typed from the values)
// and rows.
type Result struct {
	Columns []view.Column
	Rows    [][]any
}

// CheckQuery tells whether query is one SELECT (or WITH … SELECT, or
// VALUES): a second statement or any other kind is an ErrBadQuery.
func CheckQuery(query string) error {
	stmts := statements(query)
	switch {
	case len(stmts) == 0:
		return fmt.Errorf("%w: the query is empty", ErrBadQuery)
	case len(stmts) > 1:
		return fmt.Errorf("%w: the query must be a single SELECT, not %d statements", ErrBadQuery, len(stmts))
	}
	word := strings.ToUpper(firstWord(stmts[0]))
	if word != "SELECT" && word != "WITH" && word != "VALUES" {
		return fmt.Errorf("%w: the query must be a SELECT, not %s", ErrBadQuery, word)
	}
	return nil
}

// statements splits SQL text at the semicolons outside strings, quoted
// identifiers and comments, leaving out empty statements and comments.
func statements(q string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(q); {
		switch c := q[i]; {
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end := closing(q, i)
			cur.WriteString(q[i:end])
			i = end
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			if k := strings.IndexByte(q[i:], '\n'); k >= 0 {
				i += k
			} else {
				i = len(q)
			}
			cur.WriteByte(' ')
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			if k := strings.Index(q[i+2:], "*/"); k >= 0 {
				i += k + 4
			} else {
				i = len(q)
			}
			cur.WriteByte(' ')
		case c == ';':
			flush()
			i++
		default:
			cur.WriteByte(c)
			i++
		}
	}
	flush()
	return out
}

// closing is the end of the quoted text at i; a doubled quote escapes it.
func closing(q string, i int) int {
	end := q[i]
	if end == '[' {
		end = ']'
	}
	for j := i + 1; j < len(q); j++ {
		if q[j] != end {
			continue
		}
		if end != ']' && j+1 < len(q) && q[j+1] == end {
			j++
			continue
		}
		return j + 1
	}
	return len(q)
}

func firstWord(s string) string {
	s = strings.TrimLeft(s, " \t\r\n(")
	end := strings.IndexFunc(s, func(r rune) bool { return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') })
	if end < 0 {
		return s
	}
	return s[:end]
}

// noSuchTable is SQLite's error for a table the database does not have.
var noSuchTable = regexp.MustCompile(`no such table: (\S+)`)

// Query runs one SELECT over the views' tables, args bound to its named
// parameters (:name), and returns its answer. From then on the database
// allows nothing but reading its tables: call Query once.
func (d *DB) Query(ctx context.Context, query string, args map[string]any) (*Result, error) {
	if err := CheckQuery(query); err != nil {
		return nil, err
	}
	if d.guard == nil {
		d.guard = newPolicy(d.tables)
		if err := install(d.conn, d.guard); err != nil {
			return nil, err
		}
	}
	named := make([]any, 0, len(args))
	for k, v := range args {
		named = append(named, sql.Named(k, v))
	}
	rows, err := d.conn.QueryContext(ctx, query, named...)
	if err != nil {
		return nil, d.queryError(ctx, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, d.queryError(ctx, err)
	}
	res := &Result{}
	for rows.Next() {
		if len(res.Rows) >= d.limits.MaxRows {
			return nil, fmt.Errorf("%w: the answer has more than %d rows", ErrLimit, d.limits.MaxRows)
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, d.queryError(ctx, err)
		}
		for i, v := range vals {
			vals[i] = rowValue(v)
		}
		res.Rows = append(res.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, d.queryError(ctx, err)
	}
	res.Columns = typedColumns(cols, res.Rows)
	return res, nil
}

// queryError says why a query failed, in the package's error kinds.
func (d *DB) queryError(ctx context.Context, err error) error {
	if why := d.guard.refusal(); why != "" {
		return fmt.Errorf("%w: %s", ErrNotAllowed, why)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: the query ran longer than allowed (%s)", ErrLimit, d.limits.Timeout)
	}
	if m := noSuchTable.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%w: the query names the table %s, which is not one of its views (%s)", ErrBadQuery, m[1], strings.Join(d.names, ", "))
	}
	if isFull(err) {
		return fmt.Errorf("%w: the query's temporary data grows past %d bytes", ErrLimit, d.limits.MaxBytes)
	}
	return fmt.Errorf("%w: %v", ErrBadQuery, err)
}

// rowValue is an answer's value as a view row holds it.
func rowValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return json.Number(s)
	case bool:
		return x
	}
	return v
}

// typedColumns types the answer's columns from their values: integers,
// decimals (any non-integer number), else strings.
func typedColumns(names []string, rows [][]any) []view.Column {
	cols := make([]view.Column, len(names))
	for i, n := range names {
		kinds := map[string]bool{}
		for _, r := range rows {
			switch r[i].(type) {
			case int64:
				kinds["integer64"] = true
			case json.Number:
				kinds["decimal"] = true
			case string:
				kinds["string"] = true
			}
		}
		typ := "string"
		switch {
		case kinds["string"] || len(kinds) == 0:
		case kinds["decimal"]:
			typ = "decimal"
		default:
			typ = "integer64"
		}
		cols[i] = view.Column{Name: n, Type: typ}
	}
	return cols
}

// TableNames lists the tables created, in order.
func (d *DB) TableNames() []string { return slices.Clone(d.names) }
