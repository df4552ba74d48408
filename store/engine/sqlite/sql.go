package sqlite

import (
	"encoding/json"
	"strconv"
	"strings"
)

// names are the quoted SQL identifiers of a collection's tables.
type names struct {
	coll string // the collection's name
	d    string // "d_C": documents
	x    string // "x_C": index entries, keyed (f, v, rid)
	r    string // "r_C": the index of x_C on (rid, f, v)
	w    string // "w_C": the words at word paths (see wordPaths)
}

func namesOf(coll string) names {
	return names{coll: coll, d: quote("d_" + coll), x: quote("x_" + coll), r: quote("r_" + coll), w: quote("w_" + coll)}
}

// quote makes an SQL identifier of s.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// builder accumulates SQL text and its arguments in step.
type builder struct {
	strings.Builder
	args []any
}

// arg writes a parameter holding v.
func (b *builder) arg(v any) {
	b.WriteByte('?')
	b.args = append(b.args, v)
}

// list writes a parenthesised list of parameters.
func (b *builder) list(vals []any) {
	b.WriteByte('(')
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(',')
		}
		b.arg(v)
	}
	b.WriteByte(')')
}

// jsonListMin is the length from which a list of strings is passed as one
// JSON array (json_each) rather than as one parameter per value: the
// driver binds parameters in quadratic time, and one statement serves
// every length.
const jsonListMin = 32

// inList writes "col IN (...)" for vals.
func (b *builder) inList(col string, vals []any) {
	b.WriteString(col)
	b.WriteString(" IN ")
	if len(vals) >= jsonListMin {
		strs := make([]string, 0, len(vals))
		for _, v := range vals {
			s, ok := v.(string)
			if !ok || strings.IndexByte(s, 0) >= 0 {
				strs = nil
				break
			}
			strs = append(strs, s)
		}
		if strs != nil {
			js, _ := json.Marshal(strs)
			b.WriteString("(SELECT value FROM json_each(")
			b.arg(string(js))
			b.WriteString("))")
			return
		}
	}
	b.list(vals)
}

// entryCond writes the condition on an entry's columns f and v (qualified
// by alias when not empty) under which the entry satisfies fe.
func (b *builder) entryCond(alias string, fe *fieldExpr) {
	f, v := "f", "v"
	if alias != "" {
		f, v = alias+".f", alias+".v"
	}
	if fe.op == opExists {
		// entries at the path, or below it: path + "." + ...
		b.WriteString(f + " IN (SELECT id FROM " + fieldsTable + " WHERE path >= ")
		b.arg(fe.path)
		b.WriteString(" AND path < ")
		b.arg(fe.path + "/")
		b.WriteString(" AND (path = ")
		b.arg(fe.path)
		b.WriteString(" OR path >= ")
		b.arg(fe.path + ".")
		b.WriteString("))")
		return
	}
	b.WriteString(f + " = ")
	b.field(fe.path)
	b.WriteString(" AND ")
	b.valueCond(v, fe.op, fe.kind, fe.vals)
}

// valueCond writes the condition on a value column; values compare within
// their kind only, so ranges are bounded to it.
func (b *builder) valueCond(v string, o op, k kind, vals []any) {
	switch o {
	case opNull:
		b.WriteString(v + " = x'F0'")
		return
	case opScalar:
		b.WriteString(v + " < " + minMark)
		return
	case opPrefix:
		b.WriteString(v + " >= ")
		b.arg(vals[0])
		if hi := successor(vals[0].(string)); hi != "" {
			b.WriteString(" AND " + v + " < ")
			b.arg(hi)
		} else {
			b.WriteString(" AND " + v + " < " + minBlobs)
		}
		return
	case opSubstr:
		b.WriteString(v + " >= " + minText + " AND " + v + " < " + minBlobs + " AND instr(" + v + ", ")
		b.arg(vals[0])
		b.WriteString(") > 0")
		return
	case opEq:
		b.WriteString(v + " = ")
		b.arg(vals[0])
	case opIn:
		b.inList(v, vals)
	default:
		lo, hi := k.bounds()
		b.WriteString(v + map[op]string{opGt: " > ", opGte: " >= ", opLt: " < ", opLte: " <= "}[o])
		b.arg(vals[0])
		switch {
		case o == opGt || o == opGte:
			b.WriteString(" AND " + v + " < " + hi)
		case lo != "":
			b.WriteString(" AND " + v + " >= " + lo)
		}
	}
}

// idCond writes the condition on the id column col under which ie holds.
func (b *builder) idCond(col string, ie *idExpr) {
	switch ie.op {
	case opSubstr:
		b.WriteString("instr(" + col + ", ")
		b.arg(ie.vals[0])
		b.WriteString(") > 0")
	case opPrefix:
		b.WriteString(col + " >= ")
		b.arg(ie.vals[0])
		if hi := successor(ie.vals[0].(string)); hi != "" {
			b.WriteString(" AND " + col + " < ")
			b.arg(hi)
		}
	default:
		b.valueCond(col, ie.op, kindString, ie.vals)
	}
}

// sqlString is s as an SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// itoa formats an int for SQL text.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// append writes o's text and arguments.
func (b *builder) append(o *builder) {
	b.WriteString(o.String())
	b.args = append(b.args, o.args...)
}
