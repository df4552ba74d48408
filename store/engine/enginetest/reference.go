package enginetest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The reference evaluator answers package engine's grammar over decoded
// documents with MongoDB's semantics, for the differential tests. It
// covers the grammar on documents without nested arrays and with one
// kind of value per path, which is what those tests generate.

// match reports whether doc satisfies filter.
func match(doc bson.D, filter bson.D) bool {
	for _, e := range filter {
		if !clause(doc, e.Key, e.Value) {
			return false
		}
	}
	return true
}

func clause(doc bson.D, key string, value any) bool {
	switch key {
	case "$and", "$or":
		hit := false
		for _, f := range value.(bson.A) {
			m := match(doc, f.(bson.D))
			if key == "$and" && !m {
				return false
			}
			hit = hit || m
		}
		return key == "$and" || hit
	}
	vals, present := lookup(doc, key)
	switch v := value.(type) {
	case bson.Regex:
		re := regexp.MustCompile(v.Pattern)
		return slices.ContainsFunc(vals, func(x any) bool { s, ok := x.(string); return ok && re.MatchString(s) })
	case bson.D:
		for _, o := range v {
			if !operator(vals, present, o.Key, o.Value) {
				return false
			}
		}
		return true
	}
	return operator(vals, present, "$eq", value)
}

func operator(vals []any, present bool, name string, arg any) bool {
	switch name {
	case "$eq":
		return equals(vals, present, arg)
	case "$ne":
		return !equals(vals, present, arg)
	case "$in", "$nin":
		in := slices.ContainsFunc(toList(arg), func(a any) bool { return equals(vals, present, a) })
		return in == (name == "$in")
	case "$exists":
		return present == arg.(bool)
	case "$not":
		re := regexp.MustCompile(arg.(bson.Regex).Pattern)
		return !slices.ContainsFunc(vals, func(x any) bool { s, ok := x.(string); return ok && re.MatchString(s) })
	case "$gt", "$gte", "$lt", "$lte":
		if arg == nil {
			return (name == "$gte" || name == "$lte") && equals(vals, present, nil)
		}
		return slices.ContainsFunc(vals, func(x any) bool {
			c, ok := compare(x, arg)
			if !ok {
				return false
			}
			switch name {
			case "$gt":
				return c > 0
			case "$gte":
				return c >= 0
			case "$lt":
				return c < 0
			}
			return c <= 0
		})
	}
	panic("reference: operator " + name)
}

func equals(vals []any, present bool, arg any) bool {
	if arg == nil {
		return !present || slices.Contains(vals, nil)
	}
	return slices.ContainsFunc(vals, func(x any) bool { c, ok := compare(x, arg); return ok && c == 0 })
}

func toList(v any) []any {
	switch x := v.(type) {
	case bson.A:
		return x
	case []any:
		return x
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	}
	panic(fmt.Sprintf("reference: not a list: %T", v))
}

// lookup lists the values at a dotted path (array elements in place of
// their array) and whether the path exists.
func lookup(doc bson.D, path string) ([]any, bool) {
	cur := []any{doc}
	for _, part := range strings.Split(path, ".") {
		var next []any
		for _, c := range cur {
			for _, d := range docsOf(c) {
				for _, e := range d {
					if e.Key == part {
						next = append(next, e.Value)
					}
				}
			}
		}
		if len(next) == 0 {
			return nil, false
		}
		cur = next
	}
	var out []any
	for _, c := range cur {
		if a, ok := c.(bson.A); ok {
			out = append(out, a...)
		} else {
			out = append(out, c)
		}
	}
	return out, true
}

func docsOf(v any) []bson.D {
	switch x := v.(type) {
	case bson.D:
		return []bson.D{x}
	case bson.A:
		var out []bson.D
		for _, e := range x {
			if d, ok := e.(bson.D); ok {
				out = append(out, d)
			}
		}
		return out
	}
	return nil
}

// compare orders two values of one kind (ok false across kinds).
func compare(a, b any) (int, bool) {
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		if !ok {
			return 0, false
		}
		return cmp3(fa < fb, fa > fb), true
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return strings.Compare(x, y), ok
	case bool:
		y, ok := b.(bool)
		return cmp3(!x && y, x && !y), ok
	}
	if ta, ok := instant(a); ok {
		tb, ok := instant(b)
		return cmp3(ta < tb, ta > tb), ok
	}
	return 0, false
}

func cmp3(less, more bool) int {
	switch {
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func instant(v any) (int64, bool) {
	switch x := v.(type) {
	case bson.DateTime:
		return int64(x), true
	case time.Time:
		return x.UnixMilli(), true
	}
	return 0, false
}

// sortValue is a document's value for a sort path (nil when missing).
func sortValue(doc bson.D, path string) any {
	vals, _ := lookup(doc, path)
	if len(vals) == 0 {
		return nil
	}
	return vals[0]
}

// compareSort orders two documents by sort (missing values first
// ascending, as MongoDB sorts them as null).
func compareSort(a, b bson.D, sort bson.D) int {
	for _, k := range sort {
		va, vb := sortValue(a, k.Key), sortValue(b, k.Key)
		var c int
		switch {
		case va == nil && vb == nil:
		case va == nil:
			c = -1
		case vb == nil:
			c = 1
		default:
			c, _ = compare(va, vb)
		}
		if d, _ := number(k.Value); d < 0 {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// query is what the reference answers for a Find.
func query(docs []bson.D, filter, sort bson.D, skip, limit int64) []string {
	var hits []bson.D
	for _, d := range docs {
		if match(d, filter) {
			hits = append(hits, d)
		}
	}
	slices.SortStableFunc(hits, func(a, b bson.D) int { return compareSort(a, b, sort) })
	ids := []string{}
	for i, d := range hits {
		if int64(i) < skip || (limit > 0 && int64(len(ids)) >= limit) {
			continue
		}
		ids = append(ids, idOf(d))
	}
	return ids
}

func idOf(d bson.D) string {
	for _, e := range d {
		if e.Key == "_id" {
			return e.Value.(string)
		}
	}
	return ""
}
