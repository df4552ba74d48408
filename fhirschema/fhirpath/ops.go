package fhirpath

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// binaryExpr applies an operator to the collections of its two operands.
type binaryExpr struct {
	op          string
	left, right evaluator
	pos         int
}

// newBinary builds the node of a binary operator.
func newBinary(op string, left, right evaluator, pos int) evaluator {
	return &binaryExpr{op: op, left: left, right: right, pos: pos}
}

// negateExpr is unary minus.
type negateExpr struct {
	operand evaluator
	pos     int
}

// negate builds unary minus; a literal number is negated at once.
func negate(e evaluator, pos int) evaluator {
	if l, ok := e.(literalExpr); ok && len(l.nodes) == 1 {
		if out, err := negateNode(l.nodes[0], pos); err == nil {
			return literal(out)
		}
	}
	return &negateExpr{operand: e, pos: pos}
}

func (e *negateExpr) eval(c *evalCtx, focus []Node) ([]Node, error) {
	in, err := e.operand.eval(c, focus)
	if err != nil || len(in) == 0 {
		return nil, err
	}
	if len(in) > 1 {
		return nil, execErr(e.pos, "unary minus needs a single item")
	}
	n, err := negateNode(in[0], e.pos)
	if err != nil {
		return nil, err
	}
	return []Node{n}, nil
}

func negateNode(n Node, pos int) (Node, error) {
	switch kindOf(n) {
	case kInt:
		i, _ := intOf(n)
		return Node{Value: -i, Type: integerType(n)}, nil
	case kDec:
		s := string(n.Value.(json.Number))
		if strings.HasPrefix(s, "-") {
			return Node{Value: json.Number(s[1:]), Type: sysDecimal}, nil
		}
		return Node{Value: json.Number("-" + s), Type: sysDecimal}, nil
	case kQty:
		q, _ := qtyOf(n)
		q.Value = -q.Value
		return qtyNode(q), nil
	}
	return Node{}, execErr(pos, "cannot negate a %s", kindOf(n))
}

// integerType keeps Long as Long.
func integerType(n Node) string {
	if n.Type == sysLong {
		return sysLong
	}
	return sysInteger
}

func (e *binaryExpr) eval(c *evalCtx, focus []Node) ([]Node, error) {
	if err := c.enter(e.pos); err != nil {
		return nil, err
	}
	defer c.leave()
	switch e.op {
	case "and", "or", "xor", "implies":
		return e.logic(c, focus)
	}
	l, err := e.left.eval(c, focus)
	if err != nil {
		return nil, err
	}
	r, err := e.right.eval(c, focus)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "|":
		return union(l, r), nil
	case "=", "!=":
		eq, known := equalCollections(l, r)
		if !known {
			return nil, nil
		}
		return boolOut(eq == (e.op == "=")), nil
	case "~", "!~":
		return boolOut(equivalentCollections(l, r) == (e.op == "~")), nil
	case "<", ">", "<=", ">=":
		return compareOp(e.op, l, r, e.pos)
	case "in":
		return membership(l, r, e.pos)
	case "contains":
		return membership(r, l, e.pos)
	case "&":
		out, err := concat(l, r, e.pos)
		if err != nil {
			return nil, err
		}
		return out, c.account(out, e.pos)
	}
	out, err := arithmetic(e.op, l, r, e.pos)
	if err != nil {
		return nil, err
	}
	return out, c.account(out, e.pos)
}

// logic implements and, or, xor and implies with three-valued logic.
func (e *binaryExpr) logic(c *evalCtx, focus []Node) ([]Node, error) {
	l, err := e.left.eval(c, focus)
	if err != nil {
		return nil, err
	}
	a, aok, err := truth(l, e.pos)
	if err != nil {
		return nil, err
	}
	if aok && ((e.op == "and" && !a) || (e.op == "or" && a) || (e.op == "implies" && !a)) {
		return boolOut(e.op != "and"), nil
	}
	r, err := e.right.eval(c, focus)
	if err != nil {
		return nil, err
	}
	b, bok, err := truth(r, e.pos)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "and":
		if bok && !b {
			return boolOut(false), nil
		}
		if aok && bok {
			return boolOut(true), nil
		}
	case "or":
		if bok && b {
			return boolOut(true), nil
		}
		if aok && bok {
			return boolOut(false), nil
		}
	case "xor":
		if aok && bok {
			return boolOut(a != b), nil
		}
	case "implies":
		if bok && b {
			return boolOut(true), nil
		}
		if aok && bok {
			return boolOut(false), nil
		}
	}
	return nil, nil
}

// truth reads a collection as a boolean: empty is unknown, one Boolean is
// itself, any other single item is true, more items are an error.
func truth(in []Node, pos int) (val, known bool, err error) {
	switch len(in) {
	case 0:
		return false, false, nil
	case 1:
		if b, ok := in[0].Value.(bool); ok {
			return b, true, nil
		}
		return true, true, nil
	}
	return false, false, execErr(pos, "a boolean was expected, not a collection of %d items", len(in))
}

// union merges two collections, removing duplicates.
func union(l, r []Node) []Node {
	var set nodeSet
	out := make([]Node, 0, len(l)+len(r))
	for _, list := range [][]Node{l, r} {
		for _, n := range list {
			if set.add(n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// nodeSet tells distinct items apart by =: Strings, numbers and Booleans
// by a hash, other items by comparing them with those of their kind.
type nodeSet struct {
	keys   map[string]bool
	others []Node
}

// add adds n and reports whether it was new.
func (s *nodeSet) add(n Node) bool {
	if key, ok := hashKey(n); ok {
		if s.keys == nil {
			s.keys = map[string]bool{}
		}
		if s.keys[key] {
			return false
		}
		s.keys[key] = true
		return true
	}
	if containsNode(s.others, n) {
		return false
	}
	s.others = append(s.others, n)
	return true
}

// hashKey is a key equal items share, for the kinds that have one.
func hashKey(n Node) (string, bool) {
	switch kindOf(n) {
	case kStr:
		return "s" + n.Value.(string), true
	case kBool:
		return "b" + strconv.FormatBool(n.Value.(bool)), true
	case kInt, kDec:
		f, _ := decOf(n)
		return "n" + strconv.FormatFloat(f, 'g', -1, 64), true
	}
	return "", false
}

// containsNode reports whether list holds an item equal to n.
func containsNode(list []Node, n Node) bool {
	for _, x := range list {
		if eq, known := equalItems(x, n); known && eq {
			return true
		}
	}
	return false
}

// equalCollections implements =: known is false when the answer is empty.
func equalCollections(l, r []Node) (eq, known bool) {
	if len(l) == 0 || len(r) == 0 {
		return false, false
	}
	if len(l) != len(r) {
		return false, true
	}
	for i := range l {
		eq, known := equalItems(l[i], r[i])
		if !known || !eq {
			return eq, known
		}
	}
	return true, true
}

// equalItems compares two items for =.
func equalItems(a, b Node) (eq, known bool) {
	ka, kb := kindOf(a), kindOf(b)
	switch {
	case isNumber(ka) && isNumber(kb):
		x, _ := decOf(a)
		y, _ := decOf(b)
		return x == y, true
	case isMoment(ka) && isMoment(kb):
		if (ka == kTime) != (kb == kTime) {
			return false, true
		}
		ma, ok1 := momentOf(a)
		mb, ok2 := momentOf(b)
		if !ok1 || !ok2 {
			return false, true
		}
		cmp, ok := compareMoments(ma, mb)
		return cmp == 0, ok
	case ka == kQty && kb == kQty:
		qa, _ := qtyOf(a)
		qb, _ := qtyOf(b)
		x, y, ok := comparableQuantities(qa, qb, true)
		if !ok {
			return false, false
		}
		return math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y)), true
	case ka != kb:
		if ka == kStr && isMoment(kb) || kb == kStr && isMoment(ka) {
			return a.Value == b.Value, true
		}
		return false, true
	case ka == kObj:
		return jsonEqual(a.Value, b.Value), true
	case ka == kNone:
		return jsonEqual(a.ext, b.ext) && a.Value == nil && b.Value == nil, true
	}
	return a.Value == b.Value, true
}

func isNumber(k kind) bool { return k == kInt || k == kDec }
func isMoment(k kind) bool { return k == kDate || k == kDateTime || k == kTime }

// jsonEqual compares JSON values, numbers by value.
func jsonEqual(a, b any) bool { return sameJSON(a, b, equalLeaf) }

// sameJSON compares two JSON values of the same shape, their leaves with
// leaf.
func sameJSON(a, b any, leaf func(a, b any) bool) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameJSON(v, w, leaf) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i], leaf) {
				return false
			}
		}
		return true
	}
	return leaf(a, b)
}

// equalLeaf compares two JSON primitives, numbers by value.
func equalLeaf(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, _ := x.Float64()
		fy, _ := y.Float64()
		return fx == fy
	}
	return reflect.DeepEqual(a, b)
}

// equivalentCollections implements ~: order does not matter, empty is
// equivalent to empty.
func equivalentCollections(l, r []Node) bool {
	if len(l) != len(r) {
		return false
	}
	used := make([]bool, len(r))
	for _, a := range l {
		found := false
		for j, b := range r {
			if !used[j] && equivalentItems(a, b) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// equivalentItems compares two items for ~.
func equivalentItems(a, b Node) bool {
	ka, kb := kindOf(a), kindOf(b)
	switch {
	case ka == kStr && kb == kStr:
		return normalizeSpace(a.Value.(string)) == normalizeSpace(b.Value.(string))
	case isNumber(ka) && isNumber(kb):
		x, _ := decOf(a)
		y, _ := decOf(b)
		p := min(numScale(a), numScale(b))
		return roundTo(x, p) == roundTo(y, p)
	case isMoment(ka) && isMoment(kb):
		ma, ok1 := momentOf(a)
		mb, ok2 := momentOf(b)
		if !ok1 || !ok2 || ma.prec != mb.prec {
			return false
		}
		cmp, ok := compareMoments(ma, mb)
		return ok && cmp == 0
	case ka == kQty && kb == kQty:
		qa, _ := qtyOf(a)
		qb, _ := qtyOf(b)
		x, y, ok := comparableQuantities(qa, qb, false)
		if !ok {
			return false
		}
		p := min(max(qa.scale, 0), max(qb.scale, 0))
		return roundTo(x, p) == roundTo(y, p) || math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y))
	case ka == kObj && kb == kObj:
		return jsonEquivalent(a.Value, b.Value)
	}
	eq, known := equalItems(a, b)
	return known && eq
}

// jsonEquivalent compares complex values element-wise with ~ on strings.
func jsonEquivalent(a, b any) bool { return sameJSON(a, b, equivalentLeaf) }

// equivalentLeaf compares two JSON primitives, strings with ~.
func equivalentLeaf(a, b any) bool {
	if x, ok := a.(string); ok {
		y, ok := b.(string)
		return ok && normalizeSpace(x) == normalizeSpace(y)
	}
	return equalLeaf(a, b)
}

// normalizeSpace lower-cases s and collapses its white space.
func normalizeSpace(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// numScale is the number of fraction digits a number was written with.
func numScale(n Node) int {
	if v, ok := n.Value.(json.Number); ok {
		return scaleOf(string(v))
	}
	return 0
}

// roundTo rounds f to p fraction digits.
func roundTo(f float64, p int) float64 {
	m := math.Pow(10, float64(p))
	return math.Round(f*m) / m
}

// compareOp implements <, >, <= and >=.
func compareOp(op string, l, r []Node, pos int) ([]Node, error) {
	if len(l) == 0 || len(r) == 0 {
		return nil, nil
	}
	if len(l) > 1 || len(r) > 1 {
		return nil, execErr(pos, "'%s' needs single items", op)
	}
	cmp, known, err := compareItems(l[0], r[0], pos)
	if err != nil || !known {
		return nil, err
	}
	switch op {
	case "<":
		return boolOut(cmp < 0), nil
	case ">":
		return boolOut(cmp > 0), nil
	case "<=":
		return boolOut(cmp <= 0), nil
	}
	return boolOut(cmp >= 0), nil
}

// compareItems orders two items of comparable types.
func compareItems(a, b Node, pos int) (cmp int, known bool, err error) {
	ka, kb := kindOf(a), kindOf(b)
	switch {
	case isNumber(ka) && isNumber(kb):
		x, _ := decOf(a)
		y, _ := decOf(b)
		return cmpFloat(x, y), true, nil
	case ka == kStr && kb == kStr:
		return strings.Compare(a.Value.(string), b.Value.(string)), true, nil
	case isMoment(ka) && isMoment(kb) && (ka == kTime) == (kb == kTime):
		ma, ok1 := momentOf(a)
		mb, ok2 := momentOf(b)
		if !ok1 || !ok2 {
			return 0, false, execErr(pos, "cannot compare %v with %v", a.Value, b.Value)
		}
		cmp, ok := compareMoments(ma, mb)
		return cmp, ok, nil
	case ka == kQty && kb == kQty:
		qa, _ := qtyOf(a)
		qb, _ := qtyOf(b)
		x, y, ok := comparableQuantities(qa, qb, true)
		if !ok {
			return 0, false, nil
		}
		return cmpFloat(x, y), true, nil
	case (ka == kStr && isMoment(kb)) || (kb == kStr && isMoment(ka)):
		return compareItems(asMomentLike(a, b), asMomentLike(b, a), pos)
	}
	return 0, false, execErr(pos, "cannot compare a %s with a %s", ka, kb)
}

// asMomentLike reads a string as the date kind of other, for comparing a
// string literal with a date element.
func asMomentLike(n, other Node) Node {
	if kindOf(n) == kStr {
		return Node{Value: n.Value, Type: "System." + kindOf(other).String()}
	}
	return n
}

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// membership implements in: whether the single item of l is in r.
func membership(l, r []Node, pos int) ([]Node, error) {
	if len(l) == 0 {
		return nil, nil
	}
	if len(l) > 1 {
		return nil, execErr(pos, "'in' and 'contains' need a single item")
	}
	return boolOut(containsNode(r, l[0])), nil
}

// concat implements &: strings joined, empty as ”.
func concat(l, r []Node, pos int) ([]Node, error) {
	a, err := optString(l, pos)
	if err != nil {
		return nil, err
	}
	b, err := optString(r, pos)
	if err != nil {
		return nil, err
	}
	return []Node{strNode(a + b)}, nil
}

// optString reads an empty or single string collection.
func optString(in []Node, pos int) (string, error) {
	switch len(in) {
	case 0:
		return "", nil
	case 1:
		if s, ok := in[0].Value.(string); ok {
			return s, nil
		}
	}
	return "", execErr(pos, "a single string was expected")
}

// arithmetic implements + - * / div mod.
func arithmetic(op string, l, r []Node, pos int) ([]Node, error) {
	if len(l) == 0 || len(r) == 0 {
		return nil, nil
	}
	if len(l) > 1 || len(r) > 1 {
		return nil, execErr(pos, "'%s' needs single items", op)
	}
	a, b := l[0], r[0]
	ka, kb := kindOf(a), kindOf(b)
	switch {
	case isNumber(ka) && isNumber(kb):
		return numeric(op, a, b, ka == kInt && kb == kInt, pos)
	case ka == kStr && kb == kStr && op == "+":
		return []Node{strNode(a.Value.(string) + b.Value.(string))}, nil
	case isMoment(ka) && kb == kQty && (op == "+" || op == "-"):
		return momentArithmetic(op, a, b, pos)
	case ka == kQty && (kb == kQty || isNumber(kb)):
		return quantityArithmetic(op, a, b, pos)
	case isNumber(ka) && kb == kQty && op == "*":
		return quantityArithmetic(op, b, a, pos)
	}
	if ka == kb {
		return nil, execErr(pos, "cannot apply '%s' to a %s and a %s", op, ka, kb)
	}
	return nil, semanticErr(pos, "cannot apply '%s' to a %s and a %s", op, ka, kb)
}

// numeric computes with Integers (when both are) or Decimals.
func numeric(op string, a, b Node, ints bool, pos int) ([]Node, error) {
	if ints && op != "/" {
		x, _ := intOf(a)
		y, _ := intOf(b)
		var v int64
		switch op {
		case "+":
			v = x + y
		case "-":
			v = x - y
		case "*":
			v = x * y
		case "div", "mod":
			if y == 0 {
				return nil, nil
			}
			if v = x / y; op == "mod" {
				v = x % y
			}
		}
		if (v > math.MaxInt32 || v < math.MinInt32) && a.Type != sysLong && b.Type != sysLong {
			return nil, nil // an Integer overflow is empty
		}
		return []Node{{Value: v, Type: integerType(a)}}, nil
	}
	x, _ := decOf(a)
	y, _ := decOf(b)
	var v float64
	switch op {
	case "+":
		v = x + y
	case "-":
		v = x - y
	case "*":
		v = x * y
	case "/", "div", "mod":
		if y == 0 {
			return nil, nil
		}
		switch op {
		case "/":
			v = x / y
		case "div":
			return []Node{intNode(int64(math.Trunc(x / y)))}, nil
		default:
			v = math.Mod(x, y)
		}
	}
	n := decimalNode(v)
	if op == "+" || op == "-" {
		n = decimalNode(roundTo(v, max(numScale(a), numScale(b))))
		n.Value = json.Number(padScale(string(n.Value.(json.Number)), max(numScale(a), numScale(b))))
	}
	return []Node{n}, nil
}

// padScale writes s with at least p fraction digits.
func padScale(s string, p int) string {
	have := scaleOf(s)
	if have >= p || strings.ContainsAny(s, "eE") {
		return s
	}
	if have == 0 {
		s += "."
	}
	return s + strings.Repeat("0", p-have)
}

// momentArithmetic adds a duration to a date, date-time or time.
func momentArithmetic(op string, a, b Node, pos int) ([]Node, error) {
	m, ok := momentOf(a)
	q, _ := qtyOf(b)
	if !ok {
		return nil, execErr(pos, "bad date %v", a.Value)
	}
	sign := 1
	if op == "-" {
		sign = -1
	}
	out, ok := addDuration(m, q, sign)
	if !ok {
		return nil, execErr(pos, "cannot add %v '%s' to a date", q.Value, q.Unit)
	}
	return []Node{momentNode(out, a)}, nil
}

// quantityArithmetic computes with Quantities (and numbers as factors).
func quantityArithmetic(op string, a, b Node, pos int) ([]Node, error) {
	qa, _ := qtyOf(a)
	if isNumber(kindOf(b)) {
		f, _ := decOf(b)
		switch op {
		case "*":
			return []Node{qtyNode(Quantity{Value: qa.Value * f, Unit: qa.Unit})}, nil
		case "/":
			if f == 0 {
				return nil, nil
			}
			return []Node{qtyNode(Quantity{Value: qa.Value / f, Unit: qa.Unit})}, nil
		}
		return nil, execErr(pos, "cannot apply '%s' to a Quantity and a number", op)
	}
	qb, _ := qtyOf(b)
	switch op {
	case "+", "-":
		_, y, ok := comparableQuantities(qa, qb, false)
		if !ok {
			return nil, nil
		}
		if op == "-" {
			y = -y
		}
		return []Node{qtyNode(Quantity{Value: qa.Value + y, Unit: qa.Unit})}, nil
	case "*":
		return []Node{qtyNode(Quantity{Value: qa.Value * qb.Value, Unit: joinUnits(qa.Unit, ".", qb.Unit)})}, nil
	case "/":
		if qb.Value == 0 {
			return nil, nil
		}
		if qa.Unit == qb.Unit {
			return []Node{qtyNode(Quantity{Value: qa.Value / qb.Value, Unit: "1"})}, nil
		}
		return []Node{qtyNode(Quantity{Value: qa.Value / qb.Value, Unit: joinUnits(qa.Unit, "/", qb.Unit)})}, nil
	}
	return nil, execErr(pos, "cannot apply '%s' to Quantities", op)
}

// joinUnits combines two unit codes with . or /.
func joinUnits(a, sep, b string) string {
	if b == "1" || b == "" {
		return a
	}
	if a == "1" || a == "" {
		a = ""
		if sep == "." {
			return b
		}
	}
	if a == b && sep == "." {
		return a + "2"
	}
	return a + sep + b
}
