package questionnaire

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"fhirstore/fhirschema/fhirpath"
)

// answerTypes are the value[x] types each item type takes. A choice takes
// the types answerOption may have (R4: integer, date, time, string, Coding,
// Reference).
var answerTypes = map[string][]string{
	"boolean":     {"Boolean"},
	"decimal":     {"Decimal"},
	"integer":     {"Integer"},
	"date":        {"Date"},
	"dateTime":    {"DateTime"},
	"time":        {"Time"},
	"string":      {"String"},
	"text":        {"String"},
	"url":         {"Uri"},
	"choice":      {"Coding", "String", "Integer", "Date", "Time", "Reference"},
	"open-choice": {"Coding", "String", "Integer", "Date", "Time", "Reference"},
	"attachment":  {"Attachment"},
	"reference":   {"Reference"},
	"quantity":    {"Quantity"},
}

// answer checks one answer a, at path at, of the form item w.
func (r *responseCheck) answer(w, a map[string]any, at string) {
	typ, v, ok := answerOf(a, "value")
	if !ok {
		return // an answer holding only items
	}
	id := linkID(w)
	itemType, _ := w["type"].(string)
	allowed, known := answerTypes[itemType]
	if !known {
		return // the structure rules refuse an unknown item type
	}
	if !contains(allowed, typ) {
		r.errorf(at+".value"+typ, "value", "item %q is of type %s: its answer must be value%s, not value%s", id, itemType, strings.Join(allowed, " or value"), typ)
		return
	}
	vat := at + ".value" + typ
	r.options(w, a, typ, v, at)
	switch typ {
	case "String", "Uri":
		s, _ := v.(string)
		r.text(w, s, vat)
	case "Integer", "Decimal", "Date", "DateTime", "Time":
		r.bounds(w, typ, v, vat)
		if typ == "Decimal" {
			r.decimalPlaces(w, v, vat)
		}
	case "Quantity":
		q, _ := v.(map[string]any)
		r.quantity(w, q, vat)
	case "Attachment":
		att, _ := v.(map[string]any)
		r.attachment(w, att, vat)
	case "Reference":
		ref, _ := v.(map[string]any)
		r.reference(w, ref, vat)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// options checks an answer against the item's answerOption list or its
// answerValueSet. An open-choice item takes free text besides its options.
func (r *responseCheck) options(w, a map[string]any, typ string, v any, at string) {
	id := linkID(w)
	open := w["type"] == "open-choice"
	if opts := objects(w["answerOption"]); len(opts) > 0 {
		if open && typ == "String" {
			return
		}
		for _, o := range opts {
			if ot, ov, ok := answerOf(o, "value"); ok && ot == typ && sameValue(typ, v, ov) {
				return
			}
		}
		r.errorf(at, "code-invalid", "the answer %s to item %q is not one of its answer options", describe(typ, v), id)
		return
	}
	vs, _ := w["answerValueSet"].(string)
	if vs == "" || typ != "Coding" {
		return
	}
	c, _ := v.(map[string]any)
	system, _ := c["system"].(string)
	code, _ := c["code"].(string)
	r.inValueSet(vs, system, code, at, fmt.Sprintf("the answer %s to item %q", describe(typ, v), id))
	r.display(c, at+".valueCoding.display")
}

// display checks a coding's display against its code system's, when the
// terminology knows it.
func (r *responseCheck) display(c map[string]any, at string) {
	display, _ := c["display"].(string)
	system, _ := c["system"].(string)
	code, _ := c["code"].(string)
	lookup, ok := r.opts.Terminology.(DisplayLookup)
	if display == "" || system == "" || !ok {
		return
	}
	displays, known, err := lookup.Displays(r.ctx, system, code)
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("look up %s|%s: %w", system, code, err)
		}
		return
	}
	if !known || len(displays) == 0 {
		return
	}
	for _, d := range displays {
		if strings.EqualFold(strings.TrimSpace(d), strings.TrimSpace(display)) {
			return
		}
	}
	r.errorf(at, "invalid", "the display %q is not the display of %s|%s, which is %q", display, system, code, displays[0])
}

// inValueSet checks that system|code is in the value set at url; what is
// the thing checked, for the message.
func (r *responseCheck) inValueSet(url, system, code, at, what string) {
	if strings.HasPrefix(url, "#") {
		if vs := r.contained(url[1:]); vs != nil {
			if u, _ := vs["url"].(string); u != "" {
				url = u
			}
		}
	}
	if r.opts.Terminology == nil {
		r.warnf(at, "not-found", "%s could not be checked against the value set %s: no terminology", what, url)
		return
	}
	member, unknown, err := r.opts.Terminology.MemberOf(r.ctx, url, system, code)
	switch {
	case err != nil:
		if r.err == nil {
			r.err = fmt.Errorf("check %s against %s: %w", what, url, err)
		}
	case member:
	case unknown != "":
		r.warnf(at, "not-found", "%s could not be checked against the value set %s: %s", what, url, unknown)
	default:
		r.errorf(at, "code-invalid", "%s is not in the value set %s", what, url)
	}
}

// contained returns the form's contained resource with id, nil when none.
func (r *responseCheck) contained(id string) map[string]any {
	for _, c := range objects(r.q["contained"]) {
		if c["id"] == id {
			return c
		}
	}
	return nil
}

// describe renders an answer's value for messages.
func describe(typ string, v any) string {
	switch typ {
	case "Coding":
		c, _ := v.(map[string]any)
		s, _ := c["system"].(string)
		code, _ := c["code"].(string)
		if s == "" {
			return strconv.Quote(code)
		}
		return s + "|" + code
	case "Quantity":
		q, _ := v.(map[string]any)
		unit := q["code"]
		if unit == nil {
			unit = q["unit"]
		}
		return fmt.Sprintf("%v %v", q["value"], unit)
	case "Reference":
		ref, _ := v.(map[string]any)
		return fmt.Sprint(ref["reference"])
	case "String", "Uri":
		return strconv.Quote(fmt.Sprint(v))
	}
	return fmt.Sprint(v)
}

// text checks a string answer's length and pattern.
func (r *responseCheck) text(w map[string]any, s, at string) {
	id := linkID(w)
	n := utf8.RuneCountInString(s)
	if max, ok := intValue(w["maxLength"]); ok && n > max {
		r.errorf(at, "too-long", "the answer to item %q is %d characters long; at most %d are allowed", id, n, max)
	}
	if _, v, ok := extValue(w, extMinLength); ok {
		if min, ok := intValue(v); ok && n < min {
			r.errorf(at, "value", "the answer to item %q is %d characters long; at least %d are required", id, n, min)
		}
	}
	if _, v, ok := extValue(w, extRegex); ok {
		pattern, _ := v.(string)
		re, err := r.c.regexp(pattern)
		if err != nil {
			r.warnf(at, "not-supported", "the regex %q of item %q cannot be checked: %v", pattern, id, err)
		} else if !re.MatchString(s) {
			r.errorf(at, "value", "the answer %q to item %q does not match the pattern %s", s, id, pattern)
		}
	}
}

// bounds checks a number, date or time answer against minValue and
// maxValue.
func (r *responseCheck) bounds(w map[string]any, typ string, v any, at string) {
	id := linkID(w)
	for _, b := range []struct {
		url, word string
		bad       func(int) bool
	}{{extMinValue, "minimum", func(c int) bool { return c < 0 }}, {extMaxValue, "maximum", func(c int) bool { return c > 0 }}} {
		bt, bv, ok := extValue(w, b.url)
		if !ok {
			continue
		}
		c, ok := compareValues(bt, typ, v, bv)
		if !ok {
			r.warnf(at, "not-supported", "the %s of item %q (value%s) cannot be compared with a value%s answer", b.word, id, bt, typ)
			continue
		}
		if b.bad(c) {
			r.errorf(at, "value", "the answer %v to item %q is beyond the allowed %s of %v", v, id, b.word, bv)
		}
	}
}

// decimalPlaces checks a decimal answer against maxDecimalPlaces.
func (r *responseCheck) decimalPlaces(w map[string]any, v any, at string) {
	_, mv, ok := extValue(w, extMaxDecimalPlaces)
	if !ok {
		return
	}
	max, ok := intValue(mv)
	if !ok {
		return
	}
	s := fmt.Sprint(v)
	if strings.ContainsAny(s, "eE") {
		return
	}
	if _, frac, found := strings.Cut(s, "."); found && len(frac) > max {
		r.errorf(at, "value", "the answer %s to item %q has %d decimal places; at most %d are allowed", s, linkID(w), len(frac), max)
	}
}

// ucum is the system of UCUM units.
const ucum = "http://unitsofmeasure.org"

// quantity checks a quantity answer's unit against questionnaire-unit,
// unitOption and unitValueSet, and its value against the SDC minQuantity
// and maxQuantity.
func (r *responseCheck) quantity(w, q map[string]any, at string) {
	id := linkID(w)
	var units []map[string]any
	if _, v, ok := extValue(w, extUnit); ok {
		if c, ok := v.(map[string]any); ok {
			units = append(units, c)
		}
	}
	for _, e := range extensions(w, extUnitOption) {
		if c, ok := e["valueCoding"].(map[string]any); ok {
			units = append(units, c)
		}
	}
	if len(units) > 0 && !unitIn(q, units) {
		names := make([]string, len(units))
		for i, u := range units {
			names[i] = fmt.Sprint(u["code"])
		}
		r.errorf(at, "code-invalid", "the unit of the answer %s to item %q is not one of the allowed units (%s)", describe("Quantity", q), id, strings.Join(names, ", "))
	}
	if _, v, ok := extValue(w, extUnitValueSet); ok {
		vs, _ := v.(string)
		system, _ := q["system"].(string)
		code, _ := q["code"].(string)
		if code == "" {
			r.errorf(at, "code-invalid", "the answer %s to item %q has no unit code from the unit value set %s", describe("Quantity", q), id, vs)
		} else {
			r.inValueSet(vs, system, code, at, fmt.Sprintf("the unit of the answer %s to item %q", describe("Quantity", q), id))
		}
	}
	for _, b := range []struct {
		url, word string
		bad       func(int) bool
	}{{extMinQuantity, "minimum", func(c int) bool { return c < 0 }}, {extMaxQuantity, "maximum", func(c int) bool { return c > 0 }}} {
		_, bv, ok := extValue(w, b.url)
		bound, _ := bv.(map[string]any)
		if !ok || bound == nil {
			continue
		}
		c, why := compareQuantities(q, bound)
		switch {
		case why != "":
			r.errorf(at, "value", "the answer %s to item %q cannot be compared with the allowed %s of %s: %s", describe("Quantity", q), id, b.word, describe("Quantity", bound), why)
		case b.bad(c):
			r.errorf(at, "value", "the answer %s to item %q is beyond the allowed %s of %s", describe("Quantity", q), id, b.word, describe("Quantity", bound))
		}
	}
}

// unitIn reports whether q's unit is one of units (codings).
func unitIn(q map[string]any, units []map[string]any) bool {
	for _, u := range units {
		if q["code"] != nil && q["code"] == u["code"] && (q["system"] == nil || q["system"] == u["system"]) {
			return true
		}
		if q["code"] == nil && q["unit"] != nil && (q["unit"] == u["display"] || q["unit"] == u["code"]) {
			return true
		}
	}
	return false
}

// compareQuantities orders two quantities with UCUM codes, converting
// between units of the same dimension; why says why they cannot be
// compared.
func compareQuantities(a, b map[string]any) (int, string) {
	ac, _ := a["code"].(string)
	bc, _ := b["code"].(string)
	if ac == "" || bc == "" || a["system"] != ucum || b["system"] != ucum {
		return 0, "no UCUM unit codes are given"
	}
	if ac == bc {
		c, ok := compareNumbers(a["value"], b["value"])
		if !ok {
			return 0, "a value is missing"
		}
		return c, ""
	}
	x, ok1 := number(a["value"])
	y, ok2 := number(b["value"])
	if !ok1 || !ok2 {
		return 0, "a value is missing"
	}
	xf, _ := x.Float64()
	yf, _ := y.Float64()
	conv, ok := fhirpath.ConvertUnit(xf, ac, bc)
	if !ok {
		return 0, fmt.Sprintf("the units %s and %s measure different things", ac, bc)
	}
	switch {
	case conv < yf:
		return -1, ""
	case conv > yf:
		return 1, ""
	}
	return 0, ""
}

// attachment checks an attachment answer's type and size.
func (r *responseCheck) attachment(w, att map[string]any, at string) {
	id := linkID(w)
	if types := extensions(w, extMimeType); len(types) > 0 {
		ct, _ := att["contentType"].(string)
		ok := false
		for _, e := range types {
			if want, _ := e["valueCode"].(string); want != "" && mimeMatches(want, ct) {
				ok = true
			}
		}
		if !ok {
			r.errorf(at+".contentType", "value", "the attachment's content type %q is not one item %q allows", ct, id)
		}
	}
	size, stated := number(att["size"])
	var actual int64 = -1
	if data, _ := att["data"].(string); data != "" {
		if b, err := base64.StdEncoding.DecodeString(data); err == nil {
			actual = int64(len(b))
		}
	}
	if stated && actual >= 0 && (!size.IsInt() || size.Num().Int64() != actual) {
		r.errorf(at+".size", "value", "the attachment's stated size %s does not match its data (%d bytes)", size.RatString(), actual)
	}
	n := actual
	if n < 0 && stated && size.IsInt() {
		n = size.Num().Int64()
	}
	if _, mv, ok := extValue(w, extMaxSize); ok && n >= 0 {
		if max, ok := number(mv); ok && max.Cmp(bigInt(n)) < 0 {
			r.errorf(at, "too-long", "the attachment to item %q is %d bytes; at most %s are allowed", id, n, max.RatString())
		}
	}
}

// mimeMatches reports whether content type ct is the type want (type/*
// allowed), ignoring parameters.
func mimeMatches(want, ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	ct = strings.TrimSpace(strings.ToLower(ct))
	want = strings.ToLower(want)
	if strings.HasSuffix(want, "/*") {
		return strings.HasPrefix(ct, strings.TrimSuffix(want, "*"))
	}
	return ct == want
}

// reference checks a reference answer names a resource type, and one the
// item allows (questionnaire-referenceResource).
func (r *responseCheck) reference(w, ref map[string]any, at string) {
	s, _ := ref["reference"].(string)
	if s == "" || strings.HasPrefix(s, "#") || strings.HasPrefix(s, "urn:") {
		return
	}
	typ := referenceType(s)
	if !isResourceType(typ) {
		r.errorf(at+".reference", "value", "the reference %q to item %q does not name a resource type (%s)", s, linkID(w), typ)
		return
	}
	exts := extensions(w, extReferenceType)
	if len(exts) == 0 {
		return
	}
	var allowed []string
	for _, e := range exts {
		t, _ := e["valueCode"].(string)
		if t == typ || t == "Resource" {
			return
		}
		allowed = append(allowed, t)
	}
	r.errorf(at+".reference", "value", "the reference %q to item %q is to a %s; the item allows %s", s, linkID(w), typ, strings.Join(allowed, ", "))
}

// regexp compiles an item's pattern, anchored: the whole answer must match.
func (c *Checker) regexp(pattern string) (*regexp.Regexp, error) {
	return c.patterns.compile(pattern)
}
