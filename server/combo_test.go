package server_test

import (
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"fhirstore/search"
)

// TestSyntheaComboSearch searches the Synthea Observations by the combo
// token and quantity parameters, which are stored as the parameters they
// unite (code and component-code, value-quantity and
// component-value-quantity...), with every modifier that applies, and
// compares each result with the Observations the data says match.
func TestSyntheaComboSearch(t *testing.T) {
	d := synLoad(t)
	obs := d.res["Observation"]
	const loinc, ucum = "http://loinc.org|", "http://unitsofmeasure.org"
	anyEl := func(pred func(el map[string]any) bool) func(synRes) bool {
		return func(r synRes) bool { return slices.ContainsFunc(synElements(r, "both"), pred) }
	}
	hasCode := func(key, token string) func(el map[string]any) bool {
		return func(el map[string]any) bool {
			if strings.Contains(token, "|") {
				return synHasCoding(el, key, token)
			}
			return slices.ContainsFunc(synAt(el, key, "coding"), func(c any) bool { return synStr(c, "code") == token })
		}
	}
	textStarts := func(key, prefix string) func(el map[string]any) bool {
		return func(el map[string]any) bool {
			texts := []string{synStr(el[key], "text")}
			for _, c := range synAt(el, key, "coding") {
				texts = append(texts, synStr(c, "display"))
			}
			return slices.ContainsFunc(texts, func(s string) bool { return s != "" && strings.HasPrefix(search.Fold(s), prefix) })
		}
	}
	quantity := func(keep func(v float64, unit string) bool) func(el map[string]any) bool {
		return func(el map[string]any) bool {
			q, ok := el["valueQuantity"].(map[string]any)
			if !ok {
				return false
			}
			v, ok := synNumber(t, q["value"])
			return ok && keep(v, synStr(q, "system")+"|"+synStr(q, "code"))
		}
	}
	hasQuantity := quantity(func(float64, string) bool { return true })
	not := func(f func(synRes) bool) func(synRes) bool { return func(r synRes) bool { return !f(r) } }
	or := func(fs ...func(el map[string]any) bool) func(el map[string]any) bool {
		return func(el map[string]any) bool {
			return slices.ContainsFunc(fs, func(f func(map[string]any) bool) bool { return f(el) })
		}
	}
	smoking := ""
	for _, r := range obs {
		if synHasCoding(r, "code", loinc+"72166-2") {
			c := synAt(r, "valueCodeableConcept", "coding")[0]
			smoking = synStr(c, "system") + "|" + synStr(c, "code")
		}
	}
	point := math.NaN() // a value that occurs in the data, to the unit
	for _, r := range obs {
		for _, el := range synElements(r, "both") {
			q, _ := el["valueQuantity"].(map[string]any)
			if v, ok := synNumber(t, q["value"]); ok && math.IsNaN(point) {
				point = math.Round(v)
			}
		}
	}
	vs := d.e.create("ValueSet", `{"resourceType":"ValueSet","status":"active","url":"http://example.org/fhir/ValueSet/bp-parts",
		"compose":{"include":[{"system":"http://loinc.org","concept":[{"code":"8480-6"},{"code":"29463-7"}]}]}}`)
	inSet := or(hasCode("code", loinc+"8480-6"), hasCode("code", loinc+"29463-7"))

	rows := []struct {
		name, query string
		match       func(synRes) bool
		none        bool
	}{
		{"a component's code", "combo-code=" + loinc + "8480-6", anyEl(hasCode("code", loinc+"8480-6")), false},
		{"the observation's code", "combo-code=" + loinc + "85354-9", anyEl(hasCode("code", loinc+"85354-9")), false},
		{"codes in any system", "combo-code=8480-6,29463-7", anyEl(or(hasCode("code", "8480-6"), hasCode("code", "29463-7"))), false},
		{"system only", "combo-code=" + loinc, anyEl(func(el map[string]any) bool {
			return slices.ContainsFunc(synAt(el, "code", "coding"), func(c any) bool { return synStr(c, "system") == "http://loinc.org" })
		}), false},
		{":not holds on neither", "combo-code:not=" + loinc + "8480-6", not(anyEl(hasCode("code", loinc+"8480-6"))), false},
		{":text", "combo-code:text=systolic", anyEl(textStarts("code", "systolic")), false},
		{":missing=false", "combo-code:missing=false", func(synRes) bool { return true }, false},
		{":missing=true", "combo-code:missing=true", func(synRes) bool { return false }, true},
		{":in", "combo-code:in=ValueSet/" + vs, anyEl(inSet), false},
		{":in by url", "combo-code:in=" + url.QueryEscape("http://example.org/fhir/ValueSet/bp-parts"), anyEl(inSet), false},
		{":not-in holds on neither", "combo-code:not-in=ValueSet/" + vs, not(anyEl(inSet)), false},
		{"_filter eq", "_filter=" + url.QueryEscape("combo-code eq "+loinc+"8480-6"), anyEl(hasCode("code", loinc+"8480-6")), false},
		{"_filter ne", "_filter=" + url.QueryEscape("combo-code ne "+loinc+"8480-6"), not(anyEl(hasCode("code", loinc+"8480-6"))), false},
		{"_filter or", "_filter=" + url.QueryEscape("combo-code eq "+loinc+"8480-6 or combo-value-quantity gt 150"),
			anyEl(or(hasCode("code", loinc+"8480-6"), quantity(func(v float64, _ string) bool { return v > 150 }))), false},
		{"values over 100", "combo-value-quantity=gt100", anyEl(quantity(func(v float64, _ string) bool { return v > 100 })), false},
		{"a value at its precision", "combo-value-quantity=" + strconv.FormatFloat(point, 'f', -1, 64), anyEl(quantity(func(v float64, _ string) bool { return v >= point-0.5 && v < point+0.5 })), false},
		{"kilograms under 60", "combo-value-quantity=lt60|" + ucum + "|kg", anyEl(quantity(func(v float64, u string) bool { return v < 60 && u == ucum+"|kg" })), false},
		{"several values", "combo-value-quantity=gt180,lt1", anyEl(quantity(func(v float64, _ string) bool { return v > 180 || v < 1 })), false},
		{"no quantity anywhere", "combo-value-quantity:missing=true", not(anyEl(hasQuantity)), false},
		{"a quantity somewhere", "combo-value-quantity:missing=false", anyEl(hasQuantity), false},
		{"a concept value", "combo-value-concept=" + smoking, anyEl(hasCode("valueCodeableConcept", smoking)), false},
		{"a concept value's text", "combo-value-concept:text=never", anyEl(textStarts("valueCodeableConcept", "never")), false},
		{"a data absent reason", "combo-data-absent-reason:missing=false", anyEl(func(el map[string]any) bool { return el["dataAbsentReason"] != nil }), false},
		{"with another parameter", "combo-code=" + loinc + "8480-6&date=ge2023", func(r synRes) bool {
			return anyEl(hasCode("code", loinc+"8480-6"))(r) && synStr(r, "effectiveDateTime") >= "2023"
		}, false},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) { synSearchAgrees(t, d.e, "Observation", row.query, obs, row.match, row.none) })
	}
}

// synSearchAgrees runs typ?query through every page and compares the
// matches with the resources of res that match keeps, first checking that
// the data has matches, or none when the row expects none.
func synSearchAgrees(t *testing.T, e *env, typ, query string, res []synRes, match func(synRes) bool, none bool) {
	t.Helper()
	var want []string
	for _, r := range res {
		if match(r) {
			want = append(want, typ+"/"+r["id"].(string))
		}
	}
	if (len(want) == 0) != none {
		t.Fatalf("%s: the data has %d matches; the row expects %s", query, len(want), map[bool]string{true: "none", false: "some"}[none])
	}
	got, _ := followPages(t, e, "/"+typ+"?"+query+"&_count=100")
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %d %v, want %d %v (of %d)", query, len(got), got, len(want), want, len(res))
	}
}

// TestComboSortsByEveryValue sorts Observations by combo-code and
// combo-value-quantity, whose values are those of the observation and of
// its components together.
func TestComboSortsByEveryValue(t *testing.T) {
	e := newEnv(t)
	obs := func(code string, value float64, comps ...string) string {
		body := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"` + code + `"}]}`
		if !math.IsNaN(value) {
			body += `,"valueQuantity":{"value":` + strconv.FormatFloat(value, 'f', -1, 64) + `}`
		}
		if len(comps) > 0 {
			body += `,"component":[`
			for i, c := range comps {
				if i > 0 {
					body += ","
				}
				body += `{"code":{"coding":[{"system":"http://loinc.org","code":"` + c + `"}]},"valueQuantity":{"value":` + c[:1] + `}}`
			}
			body += "]"
		}
		return e.create("Observation", body+"}")
	}
	b := obs("5", 50)
	a := obs("7", math.NaN(), "2", "9") // least code 2, greatest 9; values 2 and 9
	c := obs("3", 30)
	for _, tc := range []struct {
		sort string
		want []string
	}{
		{"combo-code", []string{a, c, b}},
		{"-combo-code", []string{a, b, c}},
		{"combo-value-quantity", []string{a, c, b}},
		{"-combo-value-quantity", []string{b, c, a}},
	} {
		got := matchIDs(t, e.get("/Observation?_sort="+tc.sort))
		if !slices.Equal(got, tc.want) {
			t.Errorf("_sort=%s: %v, want %v", tc.sort, got, tc.want)
		}
	}
}
