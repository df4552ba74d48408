package search

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Open ends of date ranges (Period without start or end).
var (
	MinTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// Open ends of number and quantity ranges (comparators, Range without low or high).
const (
	MinNumber = -math.MaxFloat64
	MaxNumber = math.MaxFloat64
)

// Fold is the form string values are indexed and searched in: lower case,
// accents removed, white space collapsed to single spaces and trimmed.
func Fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
		if out, _, err := transform.String(t, s); err == nil {
			s = out
		}
	}
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// nameStrings are the string values of a HumanName: family, given, prefix,
// suffix and text.
func nameStrings(m map[string]any) []string {
	return collectStrings(m, "family", "given", "prefix", "suffix", "text")
}

// addressStrings are the string values of an Address.
func addressStrings(m map[string]any) []string {
	return collectStrings(m, "line", "city", "district", "state", "postalCode", "country", "text")
}

func collectStrings(m map[string]any, keys ...string) []string {
	var out []string
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// tokens are the token index values of one element.
type tokens struct {
	forms, text, ofType []string
	codes               []string // the bare codes or values, for sorting
}

// codeForms are the token forms of a code in a system ("" when none): a
// search of the system alone (system|) matches system|code by prefix.
func codeForms(system, code string) []string {
	switch {
	case code == "" && system == "":
		return nil
	case code == "":
		return []string{system + "|"}
	case system == "":
		return []string{code, "|" + code}
	}
	return []string{system + "|" + code, code}
}

// codingTokens indexes a Coding: its code in its system and its display.
func codingTokens(m map[string]any) tokens {
	t := tokens{forms: codeForms(str(m, "system"), str(m, "code")), codes: nonEmpty(str(m, "code"))}
	if d := str(m, "display"); d != "" {
		t.text = []string{Fold(d)}
	}
	return t
}

// conceptTokens indexes a CodeableConcept: its codings and its text.
func conceptTokens(m map[string]any) tokens {
	var t tokens
	if s := str(m, "text"); s != "" {
		t.text = append(t.text, Fold(s))
	}
	for _, c := range maps(m["coding"]) {
		ct := codingTokens(c)
		t.forms = append(t.forms, ct.forms...)
		t.text = append(t.text, ct.text...)
		t.codes = append(t.codes, ct.codes...)
	}
	return t
}

// identifierTokens indexes an Identifier: system/value, type text and
// "typeSystem|typeCode|value" for :of-type.
func identifierTokens(m map[string]any) tokens {
	value := str(m, "value")
	t := tokens{forms: codeForms(str(m, "system"), value), codes: nonEmpty(value)}
	if typ, ok := m["type"].(map[string]any); ok {
		if s := str(typ, "text"); s != "" {
			t.text = []string{Fold(s)}
		}
		for _, c := range maps(typ["coding"]) {
			if code := str(c, "code"); code != "" && value != "" {
				t.ofType = append(t.ofType, str(c, "system")+"|"+code+"|"+value)
			}
		}
	}
	return t
}

// contactPointTokens indexes a ContactPoint by its value alone.
func contactPointTokens(m map[string]any) tokens {
	v := str(m, "value")
	return tokens{forms: codeForms("", v), codes: nonEmpty(v)}
}

// primitiveToken is the text of a code, string, id, uri, boolean or number.
func primitiveToken(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		if v {
			return "true"
		}
		return "false"
	case json.Number:
		return v.String()
	}
	return ""
}

// contactPointSystems are the codes of ContactPoint.system, which tell a
// ContactPoint from an Identifier.
var contactPointSystems = map[string]bool{"phone": true, "fax": true, "email": true, "pager": true, "url": true, "sms": true, "other": true}

// elementTokens indexes a complex value of a token parameter, of FHIR type
// typ or, when typ is "", of the type its elements reveal.
func elementTokens(m map[string]any, typ string) tokens {
	switch typ {
	case "CodeableConcept":
		return conceptTokens(m)
	case "Coding":
		return codingTokens(m)
	case "Identifier":
		return identifierTokens(m)
	case "ContactPoint":
		return contactPointTokens(m)
	}
	switch {
	case m["coding"] != nil || (m["text"] != nil && m["value"] == nil):
		return conceptTokens(m)
	case m["code"] != nil || m["display"] != nil:
		return codingTokens(m)
	case m["rank"] != nil || (m["value"] != nil && contactPointSystems[str(m, "system")] && m["type"] == nil):
		return contactPointTokens(m)
	case m["value"] != nil || m["type"] != nil:
		return identifierTokens(m)
	}
	return codingTokens(m)
}

// referenceForms are the index values of a Reference.reference: "Type/id"
// and "id" for relative references, the URL plus its "Type/id" and "id" for
// absolute ones; none for contained ("#id") references.
func referenceForms(ref string, isType func(string) bool) []string {
	if ref == "" || ref[0] == '#' {
		return nil
	}
	absolute := strings.Contains(ref, ":")
	segs := strings.Split(ref, "/")
	if n := len(segs); n >= 4 && segs[n-2] == "_history" {
		segs = segs[:n-2]
	}
	n := len(segs)
	typed := n >= 2 && isType(segs[n-2]) && segs[n-1] != ""
	switch {
	case absolute:
		// another server's Patient/1 is not this server's Patient/1
		return []string{ref}
	case !absolute && typed && n == 2:
		return []string{segs[0] + "/" + segs[1], segs[1]}
	}
	return []string{ref}
}

// canonicalForms are "url|version" as written and "url".
func canonicalForms(s string) []string {
	if s == "" {
		return nil
	}
	if url, _, ok := strings.Cut(s, "|"); ok {
		return []string{s, url}
	}
	return []string{s}
}

// periodRange is start.lo .. end.hi; a missing or malformed end is open.
func periodRange(m map[string]any) (DateRange, bool) {
	r := DateRange{Lo: MinTime, Hi: MaxTime}
	start, errStart := ParseDateRange(str(m, "start"))
	end, errEnd := ParseDateRange(str(m, "end"))
	if errStart != nil && errEnd != nil {
		return r, false
	}
	if errStart == nil {
		r.Lo = start.Lo
	}
	if errEnd == nil {
		r.Hi = end.Hi
	}
	return r, true
}

// timingRange is the range of a Timing: as FHIR search says, its schedule
// is ignored and only its outer limits matter, from the first of its events
// and repeat.boundsPeriod to the last.
func timingRange(m map[string]any) (DateRange, bool) {
	rs := timingRanges(m)
	if len(rs) == 0 {
		return DateRange{}, false
	}
	out := rs[0]
	for _, r := range rs[1:] {
		if r.Lo.Before(out.Lo) {
			out.Lo = r.Lo
		}
		if r.Hi.After(out.Hi) {
			out.Hi = r.Hi
		}
	}
	return out, true
}

// timingRanges are the ranges of Timing.event and Timing.repeat.boundsPeriod.
func timingRanges(m map[string]any) []DateRange {
	var out []DateRange
	if events, ok := m["event"].([]any); ok {
		for _, e := range events {
			if s, ok := e.(string); ok {
				if r, err := ParseDateRange(s); err == nil {
					out = append(out, r)
				}
			}
		}
	}
	if repeat, ok := m["repeat"].(map[string]any); ok {
		if p, ok := repeat["boundsPeriod"].(map[string]any); ok {
			if r, ok := periodRange(p); ok {
				out = append(out, r)
			}
		}
	}
	return out
}

// decimalRE matches a JSON number and captures its fraction and exponent.
var decimalRE = regexp.MustCompile(`^-?\d+(?:\.(\d+))?(?:[eE]([+-]?\d+))?$`)

// ParseNumberRange returns the half-open range [lo, hi) a decimal stands for
// at its precision: "1.5" is [1.45, 1.55), "100" is [99.5, 100.5).
func ParseNumberRange(s string) (lo, hi float64, err error) {
	m := decimalRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, fmt.Errorf("%q is not a decimal", s)
	}
	v, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, 0, fmt.Errorf("%q is not a decimal", s)
	}
	digits := len(m[1])
	if m[2] != "" {
		var exp int
		if _, err := fmt.Sscan(m[2], &exp); err != nil || exp > 400 || exp < -400 {
			return 0, 0, fmt.Errorf("%q: exponent out of range", s)
		}
		digits -= exp
	}
	half := big.NewRat(1, 2)
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(digits))), nil)
	if digits > 0 {
		half.Quo(half, new(big.Rat).SetInt(scale))
	} else {
		half.Mul(half, new(big.Rat).SetInt(scale))
	}
	l, _ := new(big.Rat).Sub(v, half).Float64()
	h, _ := new(big.Rat).Add(v, half).Float64()
	return l, h, nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// numRange is a number or quantity index value.
type numRange struct {
	Lo, Hi float64
	S, U   string // quantity only
}

// numberValue is the range of a decimal or integer value.
func numberValue(v any) (numRange, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return numRange{}, false
	}
	lo, hi, err := ParseNumberRange(n.String())
	return numRange{Lo: lo, Hi: hi}, err == nil
}

// quantityRange indexes a Quantity (Age, Duration, Count, Distance,
// SimpleQuantity), Money or Range; s is "system|code" and u the unit.
func quantityRange(m map[string]any, typ string) (numRange, bool) {
	switch {
	case typ == "Range" || (typ == "" && (m["low"] != nil || m["high"] != nil)):
		return rangeRange(m)
	case typ == "Money" || (typ == "" && m["currency"] != nil):
		r, ok := numberValue(m["value"])
		if c := str(m, "currency"); c != "" {
			r.S, r.U = "urn:iso:std:iso:4217|"+c, c
		}
		return r, ok
	case typ == "SampledData":
		return numRange{}, false
	}
	r, ok := numberValue(m["value"])
	if !ok {
		return r, false
	}
	if n, ok := m["value"].(json.Number); ok {
		if v, err := n.Float64(); err == nil {
			switch str(m, "comparator") {
			case "<", "<=":
				r.Lo, r.Hi = MinNumber, v
			case ">", ">=":
				r.Lo, r.Hi = v, MaxNumber
			}
		}
	}
	if s, c := str(m, "system"), str(m, "code"); s != "" || c != "" {
		r.S = s + "|" + c
	}
	r.U = str(m, "unit")
	return r, true
}

// rangeRange is low.lo .. high.hi of a Range, open where a side is absent.
func rangeRange(m map[string]any) (numRange, bool) {
	r := numRange{Lo: MinNumber, Hi: MaxNumber}
	low, okLow := m["low"].(map[string]any)
	high, okHigh := m["high"].(map[string]any)
	var found bool
	for _, side := range []map[string]any{high, low} {
		if q, ok := quantityRange(side, "Quantity"); ok {
			if q.S != "" || q.U != "" {
				r.S, r.U = q.S, q.U
			}
			found = true
		}
	}
	if okLow {
		if q, ok := numberValue(low["value"]); ok {
			r.Lo = q.Lo
		}
	}
	if okHigh {
		if q, ok := numberValue(high["value"]); ok {
			r.Hi = q.Hi
		}
	}
	return r, found
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func maps(v any) []map[string]any {
	switch v := v.(type) {
	case map[string]any:
		return []map[string]any{v}
	case []any:
		out := make([]map[string]any, 0, len(v))
		for _, e := range v {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}
