package fhirpath

import (
	"errors"
	"sort"
)

// functions lists every function by name.
var functions = map[string]*function{}

func init() {
	for _, list := range [][]*function{existenceFunctions, subsetFunctions, conversionFunctions,
		stringFunctions, mathFunctions, utilityFunctions, fhirFunctions} {
		for _, f := range list {
			functions[f.name] = f
		}
	}
	addConvertsTo()
}

// existenceFunctions: existence, filtering and projection.
var existenceFunctions = []*function{
	{name: "empty", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) { return boolOut(len(in) == 0), nil }},
	{name: "exists", maxArgs: 1, impl: fnExists},
	{name: "all", minArgs: 1, maxArgs: 1, impl: fnAll},
	{name: "allTrue", impl: boolsAre(true, true)},
	{name: "anyTrue", impl: boolsAre(false, true)},
	{name: "allFalse", impl: boolsAre(true, false)},
	{name: "anyFalse", impl: boolsAre(false, false)},
	{name: "subsetOf", minArgs: 1, maxArgs: 1, impl: fnSubsetOf},
	{name: "supersetOf", minArgs: 1, maxArgs: 1, impl: fnSupersetOf},
	{name: "count", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) { return []Node{intNode(int64(len(in)))}, nil }},
	{name: "distinct", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) { return union(in, nil), nil }},
	{name: "isDistinct", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) {
		return boolOut(len(union(in, nil)) == len(in)), nil
	}},
	{name: "where", minArgs: 1, maxArgs: 1, impl: fnWhere},
	{name: "select", minArgs: 1, maxArgs: 1, impl: fnSelect},
	{name: "repeat", minArgs: 1, maxArgs: 1, impl: fnRepeat},
	{name: "ofType", minArgs: 1, maxArgs: 1, typeArg: true, impl: func(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		if !validTypeName(call.typeName) {
			return nil, execErr(call.pos, "unknown type %s", call.typeName)
		}
		return ofType(in, call.typeName), nil
	}},
	{name: "is", minArgs: 1, maxArgs: 1, typeArg: true, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		return typeOp(c, in, call.typeName, true, call.pos)
	}},
	{name: "as", minArgs: 1, maxArgs: 1, typeArg: true, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		return typeOp(c, in, call.typeName, false, call.pos)
	}},
	{name: "type", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) {
		out := make([]Node, len(in))
		for i, n := range in {
			out[i] = typeInfoOf(n)
		}
		return out, nil
	}},
	{name: "not", impl: fnNot},
	{name: "iif", minArgs: 2, maxArgs: 3, impl: fnIif},
	{name: "aggregate", minArgs: 1, maxArgs: 2, impl: fnAggregate},
	{name: "sort", maxArgs: 10, impl: fnSort},
}

func fnExists(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	if len(call.args) == 0 {
		return boolOut(len(in) > 0), nil
	}
	out, err := fnWhere(c, call, in)
	return boolOut(len(out) > 0), err
}

func fnAll(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	all := true
	err := c.each(call, 0, in, func(_ int, _ Node, res []Node) (bool, error) {
		b, known, err := truth(res, call.pos)
		if err != nil {
			return false, err
		}
		if !known || !b {
			all = false
		}
		return all, nil
	})
	return boolOut(all), err
}

// boolsAre builds allTrue, anyTrue, allFalse and anyFalse.
func boolsAre(every, want bool) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return func(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		for _, n := range in {
			b, ok := n.Value.(bool)
			if !ok {
				return nil, execErr(call.pos, "%s() needs Booleans", call.fn.name)
			}
			if every && b != want {
				return boolOut(false), nil
			}
			if !every && b == want {
				return boolOut(true), nil
			}
		}
		return boolOut(every), nil
	}
}

func fnSubsetOf(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	other, err := c.arg(call, 0)
	if err != nil {
		return nil, err
	}
	return boolOut(subset(in, other)), nil
}

func fnSupersetOf(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	other, err := c.arg(call, 0)
	if err != nil {
		return nil, err
	}
	return boolOut(subset(other, in)), nil
}

func subset(a, b []Node) bool {
	for _, n := range a {
		if !containsNode(b, n) {
			return false
		}
	}
	return true
}

func fnWhere(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	var out []Node
	err := c.each(call, 0, in, func(_ int, n Node, res []Node) (bool, error) {
		b, known, err := truth(res, call.pos)
		if err == nil && known && b {
			out = append(out, n)
		}
		return true, err
	})
	return out, err
}

func fnSelect(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	var out []Node
	err := c.each(call, 0, in, func(_ int, _ Node, res []Node) (bool, error) {
		out = append(out, res...)
		return true, c.tick(len(res), call.pos)
	})
	return out, err
}

// fnRepeat applies the projection to the input, then to each new item,
// until no new items appear.
func fnRepeat(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	var out []Node
	var seen nodeSet
	for work := in; len(work) > 0; {
		var next []Node
		err := c.each(call, 0, work, func(_ int, _ Node, res []Node) (bool, error) {
			for _, r := range res {
				if seen.add(r) {
					out = append(out, r)
					next = append(next, r)
				}
			}
			return true, c.tick(len(res)+1, call.pos)
		})
		if err != nil {
			return nil, err
		}
		work = next
	}
	return out, nil
}

func fnNot(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	b, known, err := truth(in, call.pos)
	if err != nil || !known {
		return nil, err
	}
	return boolOut(!b), nil
}

func fnIif(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	if len(in) > 1 && call.recv != nil {
		return nil, execErr(call.pos, "iif() needs at most one input item")
	}
	if call.recv != nil {
		saved := c.scope
		defer func() { c.scope = saved }()
		c.scope = scope{this: in, total: saved.total, hasTotal: saved.hasTotal}
	}
	cond, err := c.arg(call, 0)
	if err != nil {
		return nil, err
	}
	if len(cond) > 1 {
		return nil, semanticErr(call.pos, "the criterion of iif() must be a single Boolean")
	}
	if len(cond) == 1 {
		if _, ok := cond[0].Value.(bool); !ok {
			return nil, semanticErr(call.pos, "the criterion of iif() must be a Boolean")
		}
	}
	b, known, _ := truth(cond, call.pos)
	if known && b {
		return c.arg(call, 1)
	}
	return c.arg(call, 2)
}

func fnAggregate(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	total, err := c.arg(call, 1)
	if err != nil {
		return nil, err
	}
	saved := c.scope
	defer func() { c.scope = saved }()
	for idx, n := range in {
		c.scope = scope{this: []Node{n}, index: idx, hasIndex: true, total: total, hasTotal: true}
		if total, err = call.args[0].eval(c, c.scope.this); err != nil {
			return nil, err
		}
	}
	return total, nil
}

// subsetFunctions: subsetting and combining.
var subsetFunctions = []*function{
	{name: "single", impl: func(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		if len(in) > 1 {
			return nil, execErr(call.pos, "single() got %d items", len(in))
		}
		return in, nil
	}},
	{name: "first", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) { return head(in, 1), nil }},
	{name: "last", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) {
		if len(in) == 0 {
			return nil, nil
		}
		return in[len(in)-1:], nil
	}},
	{name: "tail", impl: func(_ *evalCtx, _ *callExpr, in []Node) ([]Node, error) { return skip(in, 1), nil }},
	{name: "skip", minArgs: 1, maxArgs: 1, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		n, ok, err := c.intArg(call, 0)
		if err != nil || !ok {
			return nil, err
		}
		return skip(in, n), nil
	}},
	{name: "take", minArgs: 1, maxArgs: 1, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		n, ok, err := c.intArg(call, 0)
		if err != nil || !ok {
			return nil, err
		}
		return head(in, n), nil
	}},
	{name: "intersect", minArgs: 1, maxArgs: 1, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		other, err := c.arg(call, 0)
		var out []Node
		for _, n := range in {
			if containsNode(other, n) && !containsNode(out, n) {
				out = append(out, n)
			}
		}
		return out, err
	}},
	{name: "exclude", minArgs: 1, maxArgs: 1, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		other, err := c.arg(call, 0)
		var out []Node
		for _, n := range in {
			if !containsNode(other, n) {
				out = append(out, n)
			}
		}
		return out, err
	}},
	{name: "union", minArgs: 1, maxArgs: 1, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		other, err := c.arg(call, 0)
		return union(in, other), err
	}},
	{name: "combine", minArgs: 1, maxArgs: 1, impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		other, err := c.arg(call, 0)
		return append(append([]Node{}, in...), other...), err
	}},
	{name: "children", impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		return c.allChildren(in, call.pos)
	}},
	{name: "descendants", impl: func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		var out []Node
		for work := in; len(work) > 0; {
			next, err := c.allChildren(work, call.pos)
			if err != nil {
				return nil, err
			}
			out = append(out, next...)
			work = next
		}
		return out, nil
	}},
}

func head(in []Node, n int64) []Node {
	if n <= 0 {
		return nil
	}
	if n >= int64(len(in)) {
		return in
	}
	return in[:n]
}

func skip(in []Node, n int64) []Node {
	if n <= 0 {
		return in
	}
	if n >= int64(len(in)) {
		return nil
	}
	return in[n:]
}

// allChildren returns every child element of every item, in element name
// order (by the model when the type is known, else by JSON key).
func (c *evalCtx) allChildren(in []Node, pos int) ([]Node, error) {
	var out []Node
	for _, n := range in {
		m, ok := n.Value.(map[string]any)
		if !ok {
			if n.ext != nil { // a primitive's id and extensions
				out = appendJSON(out, n.ext["id"], "string", nil)
				out = appendJSON(out, n.ext["extension"], "Extension", nil)
			}
			continue
		}
		if ti := lookupType(n.Type); ti != nil && hasElements(n.Type) && len(ti.names) > 0 {
			for _, name := range ti.names {
				el := ti.elems[name]
				for i, key := range el.keys {
					out = appendJSON(out, m[key], el.types[i], m["_"+key])
				}
			}
		} else {
			keys := make([]string, 0, len(m))
			for k := range m {
				if k != "resourceType" && (k == "" || k[0] != '_') {
					keys = append(keys, k)
				}
			}
			sort.Strings(keys)
			for _, k := range keys {
				out = appendJSON(out, m[k], "", m["_"+k])
			}
		}
		if err := c.tick(len(out)+1, pos); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fnSort orders the input by its arguments' values (a leading - sorts that
// key descending), or by the items themselves.
func fnSort(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	keys := make([][][]Node, len(in))
	desc := make([]bool, len(call.args))
	exprs := make([]evaluator, len(call.args))
	for i, a := range call.args {
		exprs[i] = a
		if neg, ok := a.(*negateExpr); ok {
			desc[i], exprs[i] = true, neg.operand
		}
	}
	saved := c.scope
	defer func() { c.scope = saved }()
	for i, n := range in {
		c.scope = scope{this: []Node{n}, index: i, hasIndex: true}
		for _, e := range exprs {
			k, err := e.eval(c, c.scope.this)
			if err != nil {
				return nil, err
			}
			keys[i] = append(keys[i], k)
		}
	}
	idx := make([]int, len(in))
	for i := range idx {
		idx[i] = i
	}
	var sortErr error
	sort.SliceStable(idx, func(a, b int) bool {
		if len(exprs) == 0 {
			cmp, _, err := compareItems(in[idx[a]], in[idx[b]], call.pos)
			sortErr = errors.Join(sortErr, err)
			return cmp < 0
		}
		for k := range exprs {
			ka, kb := keys[idx[a]][k], keys[idx[b]][k]
			cmp := compareKeys(ka, kb, call.pos, &sortErr)
			if desc[k] && len(ka) > 0 && len(kb) > 0 {
				cmp = -cmp
			}
			if cmp != 0 {
				return cmp < 0
			}
		}
		return false
	})
	out := make([]Node, len(in))
	for i, j := range idx {
		out[i] = in[j]
	}
	return out, sortErr
}

// compareKeys orders two sort keys; an empty key comes first.
func compareKeys(a, b []Node, pos int, errp *error) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return -1
	case len(b) == 0:
		return 1
	}
	cmp, _, err := compareItems(a[0], b[0], pos)
	if err != nil && *errp == nil {
		*errp = err
	}
	return cmp
}
