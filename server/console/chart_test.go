package console_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"

	"fhirstore/server/auth"
)

// resource is a FHIR resource as decoded JSON.
type resource = map[string]any

// syntheaRecord is one Synthea patient file, its resources by type.
type syntheaRecord struct {
	file    string
	entries int
	byType  map[string][]resource
}

// richestSynthea reads the Synthea patient files and returns the one with
// the most entries.
func richestSynthea(t *testing.T) syntheaRecord {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "synthea", "*_*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Synthea patients: %v", err)
	}
	var best syntheaRecord
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var bundle struct {
			Entry []struct {
				Resource resource `json:"resource"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(b, &bundle); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(bundle.Entry) <= best.entries {
			continue
		}
		rec := syntheaRecord{file: f, entries: len(bundle.Entry), byType: map[string][]resource{}}
		for _, e := range bundle.Entry {
			typ, _ := e.Resource["resourceType"].(string)
			rec.byType[typ] = append(rec.byType[typ], e.Resource)
		}
		best = rec
	}
	return best
}

// str walks a decoded JSON value by keys and indexes and returns the
// string found there, or "".
func str(v any, path ...any) string {
	s, _ := walkJSON(v, path...).(string)
	return s
}

func walkJSON(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// codes lists the codes of a CodeableConcept's codings of a system.
func codes(cc any, system string) []string {
	var out []string
	for _, c := range asList(walkJSON(cc, "coding")) {
		if str(c, "system") == system {
			out = append(out, str(c, "code"))
		}
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

// hasCategory tells whether an Observation is of an observation-category code.
func hasCategory(o resource, code string) bool {
	for _, cat := range asList(o["category"]) {
		if slices.Contains(codes(cat, "http://terminology.hl7.org/CodeSystem/observation-category"), code) {
			return true
		}
	}
	return false
}

// millis is a FHIR dateTime as milliseconds since the epoch.
func millis(t *testing.T, s string) int64 {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("date %q: %v", s, err)
	}
	return ts.UnixMilli()
}

// fmtNumber is how the chart shows a value: at most four significant
// figures after the point, trailing zeros dropped.
func fmtNumber(v float64) string {
	a, digits := math.Abs(v), 3
	switch {
	case a >= 100:
		digits = 0
	case a >= 10:
		digits = 1
	case a >= 1:
		digits = 2
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// vitalSeries are the charts' series by their R4 vital-signs LOINC codes,
// written out here apart from the console's own table.
var vitalSeries = []struct {
	chart, series, panel, unit string
	codes                      []string
}{
	{"bp", "systolic", "85354-9", "mmHg", []string{"8480-6"}},
	{"bp", "diastolic", "85354-9", "mmHg", []string{"8462-4"}},
	{"hr", "hr", "", "/min", []string{"8867-4"}},
	{"rr", "rr", "", "/min", []string{"9279-1"}},
	{"weight", "weight", "", "kg", []string{"29463-7"}},
	{"bmi", "bmi", "", "kg/m²", []string{"39156-5"}},
	{"temp", "temp", "", "°C", []string{"8310-5"}},
	{"spo2", "spo2", "", "%", []string{"2708-6", "59408-5"}},
}

// point is one charted reading: "series t value", as the page's points
// carry it.
type point struct {
	series string
	t      int64
	value  float64
}

func (p point) String() string {
	return p.series + " " + strconv.FormatInt(p.t, 10) + " " + strconv.FormatFloat(p.value, 'g', -1, 64)
}

// expectedVitals reads the vital signs of a record the way the R4
// profiles define them: each chart's points.
func expectedVitals(t *testing.T, rec syntheaRecord) map[string][]point {
	t.Helper()
	out := map[string][]point{}
	for _, o := range rec.byType["Observation"] {
		if !hasCategory(o, "vital-signs") {
			continue
		}
		cs := codes(o["code"], "http://loinc.org")
		for _, vs := range vitalSeries {
			var q any
			switch {
			case vs.panel != "" && slices.Contains(cs, vs.panel):
				for _, c := range asList(o["component"]) {
					if slices.ContainsFunc(codes(walkJSON(c, "code"), "http://loinc.org"), func(x string) bool { return slices.Contains(vs.codes, x) }) {
						q = walkJSON(c, "valueQuantity")
					}
				}
			case slices.ContainsFunc(cs, func(x string) bool { return slices.Contains(vs.codes, x) }):
				q = o["valueQuantity"]
			}
			if v, ok := walkJSON(q, "value").(float64); ok {
				out[vs.chart] = append(out[vs.chart], point{vs.series, millis(t, str(o, "effectiveDateTime")), v})
			}
		}
	}
	return out
}

// pagePoints are the points a chart of the page draws.
func pagePoints(tb *tab, chart string) []string {
	tb.t.Helper()
	got := eval[[]string](tb, `[...document.querySelectorAll('#vital-`+chart+` a.pt')].map(a => a.dataset.series + ' ' + a.dataset.t + ' ' + a.dataset.value)`)
	slices.Sort(got)
	return got
}

func pointStrings(ps []point) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	slices.Sort(out)
	return out
}

// waitChart waits until the chart page has drawn everything.
func (tb *tab) waitChart() {
	tb.t.Helper()
	tb.wait(`main[data-view="chart"] #chart[data-state="ready"]`)
}

// center is the middle of an element on screen, scrolled into view.
func (tb *tab) center(sel string) (float64, float64) {
	tb.t.Helper()
	xy := eval[[]float64](tb, `(() => { const el = document.querySelector(`+jsString(sel)+`); el.scrollIntoView({block: 'center'});
		const r = el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`)
	return xy[0], xy[1]
}

// count is how many elements a CSS selector matches.
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	return eval[int](tb, `document.querySelectorAll(`+jsString(sel)+`).length`)
}

func TestBrowserChartOfTheRichestSyntheaPatient(t *testing.T) {
	e := newEnv(t)
	loadSynthea(t, e)
	rec := richestSynthea(t)
	p := rec.byType["Patient"][0]
	family := str(p, "name", 0, "family")
	found := e.fhir(http.MethodGet, "/Patient?family="+family, "", http.StatusOK)
	pid := str(found, "entry", 0, "resource", "id")
	tb := newTab(t, e)
	tb.signIn(e.token)

	// The chart is reached from the search results.
	tb.visit("#/search/Patient?family=" + family)
	tb.wait("#results-table a.chart-link")
	before := tb.apiRequests()
	start := time.Now()
	tb.click("#results-table a.chart-link")
	tb.waitChart()
	t.Logf("chart of %s (%d entries): drawn %v after the click, %d API request(s); the page says load %s ms, render %s ms",
		filepath.Base(rec.file), rec.entries, time.Since(start).Round(time.Millisecond), tb.apiRequests()-before,
		eval[string](tb, `document.querySelector('#chart').dataset.loadMs`), eval[string](tb, `document.querySelector('#chart').dataset.renderMs`))
	if n := tb.apiRequests() - before; n != 1 {
		t.Errorf("the chart sent %d API requests, want 1 (one batch)", n)
	}
	if got := eval[string](tb, `document.querySelector('#chart').dataset.requests`); got != "1" {
		t.Errorf("the chart counts %s requests, want 1", got)
	}

	t.Run("header", func(t *testing.T) {
		n := walkJSON(p, "name", 0)
		want := strings.Join(slices.DeleteFunc([]string{strings.Join(anyStrings(walkJSON(n, "prefix")), " "), strings.Join(anyStrings(walkJSON(n, "given")), " "), str(n, "family")}, func(s string) bool { return s == "" }), " ")
		if got := tb.text("#chart-name"); got != want {
			t.Errorf("name = %q, want %q", got, want)
		}
		if got := tb.text("#chart-phone"); !strings.Contains(got, str(p, "telecom", 0, "value")) {
			t.Errorf("phone = %q", got)
		}
		if got := tb.text("#chart-address"); !strings.Contains(got, str(p, "address", 0, "city")) {
			t.Errorf("address = %q", got)
		}
		if got := tb.text("#chart-identifiers"); !strings.Contains(got, str(p, "identifier", 1, "value")) {
			t.Errorf("identifiers = %q", got)
		}
		if got := tb.text("#chart-born"); !strings.Contains(got, "age ") {
			t.Errorf("born = %q", got)
		}
	})

	t.Run("lists", func(t *testing.T) {
		active := 0
		for _, c := range rec.byType["Condition"] {
			if slices.Contains(codes(c["clinicalStatus"], "http://terminology.hl7.org/CodeSystem/condition-clinical"), "active") {
				active++
			}
		}
		meds := 0
		for _, m := range rec.byType["MedicationRequest"] {
			if m["status"] == "active" {
				meds++
			}
		}
		lists := []struct {
			sel  string
			want int
		}{
			{"#problems li[data-id]", active},
			{"#medications li[data-id]", meds},
			{"#allergies li[data-id]", len(rec.byType["AllergyIntolerance"])},
			{"#immunizations li[data-id]", len(rec.byType["Immunization"])},
			{"#careplans li[data-id]", len(rec.byType["CarePlan"]) + len(rec.byType["Goal"])},
			{"#encounters li[data-id]", len(rec.byType["Encounter"])},
		}
		for _, l := range lists {
			if got := tb.count(l.sel); got != l.want {
				t.Errorf("%s: %d items, want %d", l.sel, got, l.want)
			}
		}
		if href := eval[string](tb, `document.querySelector('#problems li a').getAttribute('href')`); !strings.HasPrefix(href, "#/r/Condition/") {
			t.Errorf("a problem links to %q", href)
		}
		if got := tb.text("#encounters li"); !strings.Contains(got, "Dr. ") {
			t.Errorf("the latest encounter names no practitioner: %q", got)
		}
	})

	want := expectedVitals(t, rec)
	var latest int64
	for _, ps := range want {
		for _, p := range ps {
			latest = max(latest, p.t)
		}
	}
	t.Run("vital signs", func(t *testing.T) {
		for _, vs := range vitalSeries {
			if vs.series != vs.chart && vs.series != "systolic" {
				continue
			}
			got, exp := pagePoints(tb, vs.chart), pointStrings(want[vs.chart])
			if !slices.Equal(got, exp) {
				t.Errorf("%s: the chart draws %d points, the data has %d:\n got %v\nwant %v", vs.chart, len(got), len(exp), got, exp)
			}
			if len(exp) == 0 {
				continue
			}
			// The latest reading, as the caption shows it.
			var last []point
			for _, p := range want[vs.chart] {
				if len(last) == 0 || p.t > last[0].t {
					last = []point{p}
				} else if p.t == last[0].t {
					last = append(last, p)
				}
			}
			var parts []string
			for _, s := range []string{"systolic", "diastolic", vs.chart} {
				for _, p := range last {
					if p.series == s {
						parts = append(parts, fmtNumber(p.value))
					}
				}
			}
			if got, w := tb.text("#latest-"+vs.chart), strings.Join(parts, "/")+" "+vs.unit; got != w {
				t.Errorf("%s: latest %q, want %q", vs.chart, got, w)
			}
		}
	})

	t.Run("hover and click", func(t *testing.T) {
		sel := "#vital-hr a.pt:last-of-type"
		id := eval[string](tb, `document.querySelector('`+sel+`').dataset.id`)
		value := eval[string](tb, `document.querySelector('`+sel+`').dataset.value`)
		x, y := tb.center(sel + " .dot")
		tb.do("hover", chromedp.MouseEvent(chromedp.MouseMoved, x, y))
		tb.waitFor(`document.querySelector('#vital-hr .tip').getAttribute('visibility') === 'visible'`)
		v, _ := strconv.ParseFloat(value, 64)
		tip := tb.text("#vital-hr .tip text")
		if !strings.Contains(tip, fmtNumber(v)+" /min") || !regexp.MustCompile(`\d{4}`).MatchString(tip) {
			t.Errorf("the tooltip says %q; want the value %s /min and the date", tip, fmtNumber(v))
		}
		tb.do("click", chromedp.MouseClickXY(x, y))
		tb.waitFor(`location.hash === '#/r/Observation/` + id + `' && document.querySelector('#resource-id') !== null`)
		if got := tb.text(".json"); !strings.Contains(got, value) || !strings.Contains(got, "8867-4") {
			t.Errorf("the clicked point opened an Observation without its value %s", value)
		}
		tb.visit("#/chart/" + pid)
		tb.waitChart()
	})

	t.Run("time range", func(t *testing.T) {
		end := time.UnixMilli(latest).UTC()
		for _, r := range []struct {
			button string
			from   time.Time
		}{
			{"#range-1y", end.AddDate(-1, 0, 0)},
			{"#range-1m", end.AddDate(0, -1, 0)},
			{"#range-all", time.Time{}},
		} {
			tb.click(r.button)
			times := map[int64]bool{}
			for _, vs := range vitalSeries {
				if vs.series != vs.chart && vs.series != "systolic" {
					continue
				}
				var in []point
				for _, p := range want[vs.chart] {
					if p.t >= r.from.UnixMilli() {
						in = append(in, p)
						times[p.t] = true
					}
				}
				if got, exp := pagePoints(tb, vs.chart), pointStrings(in); !slices.Equal(got, exp) {
					t.Errorf("%s, %s: %d points, want %d", r.button, vs.chart, len(got), len(exp))
				}
			}
			if got := tb.count("#vitals-table tbody tr"); got != len(times) {
				t.Errorf("%s: the table has %d rows, want %d (one per time of reading)", r.button, got, len(times))
			}
		}
		tb.screenshotTop("patient-chart", 1280, 1500, func() {
			tb.do("hover a point", chromedp.MouseEvent(chromedp.MouseMoved, 1, 1))
			x, y := tb.center("#vital-bp a.pt:nth-last-of-type(4) .dot")
			tb.do("hover a point", chromedp.MouseEvent(chromedp.MouseMoved, x, y))
		})
	})

	t.Run("labs", func(t *testing.T) {
		type result struct {
			t    int64
			text string
			tie  bool
		}
		latestLab := map[string]*result{}
		for _, o := range rec.byType["Observation"] {
			if !hasCategory(o, "laboratory") {
				continue
			}
			code := "http://loinc.org|" + codes(o["code"], "http://loinc.org")[0]
			text := str(o, "valueCodeableConcept", "text")
			if text == "" {
				text = str(o, "valueCodeableConcept", "coding", 0, "display") + str(o, "valueString")
			}
			if v, ok := walkJSON(o, "valueQuantity", "value").(float64); ok {
				text = fmtNumber(v) + " " + str(o, "valueQuantity", "unit")
			}
			at := millis(t, str(o, "effectiveDateTime"))
			switch r := latestLab[code]; {
			case r == nil || at > r.t:
				latestLab[code] = &result{t: at, text: text}
			case at == r.t && text != r.text:
				r.tie = true
			}
		}
		if got := tb.count("#labs tbody tr"); got != len(latestLab) {
			t.Errorf("labs table: %d codes, want %d", got, len(latestLab))
		}
		for code, r := range latestLab {
			if r.tie {
				continue
			}
			got := eval[string](tb, `(document.querySelector('#labs tr[data-code=`+jsString(code)+`] td.value') || {}).textContent || ''`)
			if got != r.text {
				t.Errorf("lab %s: latest %q, want %q", code, got, r.text)
			}
		}
		if tb.count("#labs svg.sparkline polyline") == 0 {
			t.Error("no lab has a trend line")
		}
	})

	t.Run("timeline", func(t *testing.T) {
		marks := len(rec.byType["Encounter"]) + len(rec.byType["Procedure"]) + len(rec.byType["Immunization"])
		for _, c := range rec.byType["Condition"] {
			if str(c, "onsetDateTime") != "" || str(c, "recordedDate") != "" {
				marks++
			}
		}
		if got := tb.count("#timeline a.mark"); got != marks {
			t.Errorf("the timeline shows %d marks, want %d", got, marks)
		}
		span := func() int64 {
			return eval[int64](tb, `+document.querySelector('#timeline').dataset.t1 - +document.querySelector('#timeline').dataset.t0`)
		}
		full := span()
		tb.click("#zoom-in")
		tb.click("#zoom-in")
		if got := span(); math.Abs(float64(got)-float64(full)/4) > float64(full)/100 {
			t.Errorf("zooming in twice shows %d ms of %d", got, full)
		}
		if got := tb.count("#timeline a.mark"); got >= marks || got == 0 {
			t.Errorf("zoomed in, the timeline shows %d of %d marks", got, marks)
		}
		for range 8 {
			tb.click("#pan-later")
		}
		if got := eval[int64](tb, `+document.querySelector('#timeline').dataset.t1`); got < latest {
			t.Errorf("panned to the end, the timeline stops at %d, before the latest reading %d", got, latest)
		}
		if *screenshots {
			tb.do("mark the last encounter", chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#timeline a.mark.encounters')].pop().classList.add('last')`))
			x, y := tb.center(`#timeline a.mark.encounters.last .shape`)
			tb.do("hover a mark", chromedp.MouseEvent(chromedp.MouseMoved, x, y))
			tb.screenshotOf("#timeline-card", "patient-timeline")
		}
		tb.click("#zoom-reset")
		if got := span(); got != full {
			t.Errorf("after reset the timeline shows %d ms, want %d", got, full)
		}
		sel := `#timeline a.mark.immunizations`
		x, y := tb.center(sel + " .shape")
		tb.do("click a mark", chromedp.MouseClickXY(x, y))
		tb.waitFor(`location.hash.startsWith('#/r/') && document.querySelector('#resource-id') !== null`)
		if h := eval[string](tb, `location.hash`); !strings.HasPrefix(h, "#/r/Immunization/") && !strings.HasPrefix(h, "#/r/") {
			t.Errorf("the mark opened %q", h)
		}
		tb.visit("#/chart/" + pid)
		tb.waitChart()
	})

	t.Run("print", func(t *testing.T) {
		if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print"}); err != nil {
			t.Fatal(err)
		}
		shown := eval[[]string](tb, `['header.top', '#range-1y', '#zoom-in', '#chart-print', 'footer.foot'].filter(s => document.querySelector(s).getClientRects().length > 0)`)
		if len(shown) != 0 {
			t.Errorf("printing shows %v", shown)
		}
		if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
			t.Fatal(err)
		}
		for _, paper := range []struct {
			name string
			size chromedp.PaperSize
		}{{"A4", chromedp.PaperA4}, {"Letter", chromedp.PaperLetter}} {
			pdf, err := chromedp.Run(tb.ctx, chromedp.PrintToPDF(chromedp.PDFPaper(paper.size)))
			if err != nil {
				t.Fatal(err)
			}
			pages := len(regexp.MustCompile(`/Type\s*/Page\b[^s]`).FindAll(pdf, -1))
			t.Logf("the chart prints on %d %s page(s)", pages, paper.name)
			if pages < 1 || pages > 2 {
				t.Errorf("the chart prints on %d %s pages, want 1 or 2", pages, paper.name)
			}
		}
	})
}

// anyStrings turns a JSON array of strings into a slice.
func anyStrings(v any) []string {
	var out []string
	for _, x := range asList(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// patientToken signs a token of the env's tenant limited to a patient's compartment.
func (e *env) patientToken(scope, patient string) string {
	e.t.Helper()
	now := time.Now()
	c := auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: auth.DevIssuer, Subject: "console-test", IssuedAt: jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		},
		Tenant: e.tenant, Scope: scope, Patient: patient,
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(testKey)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// observation is an Observation of a patient's vital signs (category
// vital-signs) or laboratory results, with the JSON of its value.
func observation(pid, category, loinc, display, when, value string) string {
	return `{"resourceType":"Observation","status":"final","category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"` + category + `"}]}],` +
		`"code":{"coding":[{"system":"http://loinc.org","code":"` + loinc + `","display":"` + display + `"}]},"subject":{"reference":"Patient/` + pid + `"},` +
		`"effectiveDateTime":"` + when + `"` + value + `}`
}

func TestBrowserChartFollowsTheTokensScopes(t *testing.T) {
	e := newEnv(t)
	ids := map[string]string{}
	for _, who := range []string{"Adeyemi", "Brandt"} {
		pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"`+who+`"}],"gender":"female","birthDate":"1950-04-01"}`)
		ids[who] = pid
		e.create("Observation", observation(pid, "vital-signs", "8867-4", "Heart rate", "2024-05-01T10:00:00Z", `,"valueQuantity":{"value":71,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"}`))
		e.create("Condition", `{"resourceType":"Condition","clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"active"}]},`+
			`"code":{"text":"Problem of `+who+`"},"subject":{"reference":"Patient/`+pid+`"},"onsetDateTime":"2020-01-01"}`)
	}
	a, b := ids["Adeyemi"], ids["Brandt"]

	tb := newTab(t, e)
	tb.signIn(e.patientToken("patient/*.read", a))
	tb.click("#my-chart")
	tb.waitChart()
	if got := tb.text("#chart-name"); got != "Adeyemi" {
		t.Errorf("the token's own chart shows %q", got)
	}
	if got := tb.text("#problems li"); got != "Problem of Adeyemi · since "+eval[string](tb, `new Date(Date.UTC(2020, 0, 1)).toLocaleDateString(undefined, {year: 'numeric', month: 'short', day: 'numeric'})`) {
		t.Errorf("problems = %q", got)
	}
	if got := tb.count("#vital-hr a.pt"); got != 1 {
		t.Errorf("heart rate points = %d, want 1", got)
	}
	// Another patient's chart is refused, and shows nothing of that patient.
	tb.visit("#/chart/" + b)
	tb.wait("#chart-refused")
	if got := tb.text("main"); strings.Contains(got, "Brandt") || strings.Contains(got, "Problem of") {
		t.Errorf("the refused chart shows the other patient's data: %q", got)
	}

	// A token that may not read Conditions sees the rest, and a note.
	tb2 := newTab(t, e)
	tb2.signIn(e.patientToken("patient/Patient.read patient/Observation.read", a))
	tb2.visit("#/chart/" + a)
	tb2.waitChart()
	if got := tb2.text("#problems .refused"); !strings.Contains(got, "403") {
		t.Errorf("the problems card says %q; want the refusal", got)
	}
	if tb2.count(`#chart-notes li.refused[data-section="conditions"]`) != 1 {
		t.Errorf("the notes do not say that Conditions were left out: %q", tb2.text("#chart-notes"))
	}
	if got := tb2.count("#vital-hr a.pt"); got != 1 {
		t.Errorf("heart rate points = %d, want 1", got)
	}
	if tb2.count("#timeline-card .refused") != 1 {
		t.Error("the timeline does not say what it cannot show")
	}
}

func TestBrowserChartSaysWhatItLeavesOut(t *testing.T) {
	e := newEnv(t)
	pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Lindgren","given":["Maj"]}],"gender":"female","birthDate":"1941-09-30"}`)
	enc := e.create("Encounter", `{"resourceType":"Encounter","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HH"},`+
		`"subject":{"reference":"Patient/`+pid+`"},"period":{"start":"2024-03-01T09:00:00Z","end":"2024-03-01T10:00:00Z"}}`)
	weight := func(when, v, unit string) string {
		return e.create("Observation", observation(pid, "vital-signs", "29463-7", "Body weight", when, `,"valueQuantity":{"value":`+v+`,"unit":"`+unit+`","system":"http://unitsofmeasure.org","code":"`+unit+`"}`))
	}
	weight("2024-01-01T09:00:00Z", "70", "kg")
	weight("2024-02-01T09:00:00Z", "154", "[lb_av]")
	weight("2024-03-01T09:00:00Z", "72", "kg")
	stone := weight("2024-03-02T09:00:00Z", "11", "[stone_av]")
	noValue := e.create("Observation", observation(pid, "vital-signs", "8867-4", "Heart rate", "2024-03-01T09:05:00Z",
		`,"valueQuantity":{"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"},"encounter":{"reference":"Encounter/`+enc+`"}`))
	text := e.create("Observation", observation(pid, "vital-signs", "8867-4", "Heart rate", "2024-03-01T09:06:00Z", `,"valueString":"fast"`))
	e.create("Observation", observation(pid, "vital-signs", "8867-4", "Heart rate", "2024-03-01T09:07:00Z",
		`,"valueQuantity":{"value":88,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"},"referenceRange":[{"low":{"value":60,"unit":"/min"},"high":{"value":100,"unit":"/min"}}]`))
	e.create("Observation", observation(pid, "laboratory", "2823-3", "Potassium", "2024-03-01T09:00:00Z",
		`,"valueQuantity":{"value":6.1,"unit":"mmol/L"},"interpretation":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation","code":"H"}]}]`))
	e.create("Observation", observation(pid, "laboratory", "2951-2", "Sodium", "2024-03-01T09:00:00Z",
		`,"valueQuantity":{"value":128,"unit":"mmol/L"},"referenceRange":[{"low":{"value":135,"unit":"mmol/L"},"high":{"value":145,"unit":"mmol/L"}}]`))
	e.fhir(http.MethodDelete, "/Encounter/"+enc, "", http.StatusNoContent)

	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.visit("#/r/Patient/" + pid)
	tb.click("#open-chart")
	tb.waitChart()
	got := pagePoints(tb, "weight")
	wantWeights := []string{"70", fmt.Sprint(154 * 0.45359237), "72"}
	if len(got) != 3 {
		t.Fatalf("weight points = %v, want 3 (kg and lb)", got)
	}
	for i, w := range wantWeights {
		if v := strings.Fields(got[i])[2]; v != w && !strings.HasPrefix(v, w[:min(len(w), 8)]) {
			t.Errorf("weight %d = %s, want %s kg", i, v, w)
		}
	}
	if got := tb.text("#vital-weight .converted"); !strings.Contains(got, "1 in lb converted to kg") {
		t.Errorf("the weight chart does not say it converted: %q", got)
	}
	notes := tb.text("#chart-notes")
	for _, want := range []string{"1 reading in lb converted to kg", "Observation/" + noValue, "Observation/" + text, "Observation/" + stone, "Encounter/" + enc} {
		if !strings.Contains(notes, want) {
			t.Errorf("the notes do not mention %q: %s", want, notes)
		}
	}
	for ref, why := range map[string]string{"Observation/" + noValue: "no value", "Observation/" + text: `text ("fast")`, "Observation/" + stone: `"[stone_av]" does not convert`} {
		if got := tb.text(`#chart-left-out li[data-ref="` + ref + `"]`); !strings.Contains(got, why) {
			t.Errorf("%s is left out because %q; want %q", ref, got, why)
		}
	}
	if got := tb.text(`#chart-notes li.gone[data-id="` + enc + `"]`); !strings.Contains(got, "deleted") {
		t.Errorf("the deleted encounter's note = %q", got)
	}
	if got := eval[string](tb, `document.querySelector('#chart').dataset.requests`); got != "2" {
		t.Errorf("requests = %s, want 2 (the batch, and the look-up of the missing encounter)", got)
	}
	if tb.count("#vital-hr a.pt") != 1 || tb.count("#vital-hr rect.band") != 1 {
		t.Errorf("heart rate: %d points and %d reference bands, want 1 and 1", tb.count("#vital-hr a.pt"), tb.count("#vital-hr rect.band"))
	}
	if tb.count(`#labs tr.flag-high[data-code="http://loinc.org|2823-3"] .flag.high`) != 1 {
		t.Error("the high potassium is not flagged")
	}
	if tb.count(`#labs tr.flag-low[data-code="http://loinc.org|2951-2"] .flag.low`) != 1 {
		t.Error("the sodium under its reference range is not flagged low")
	}
	if got := tb.text("#vital-bp"); !strings.Contains(got, "No readings") {
		t.Errorf("an empty chart says %q", got)
	}

	t.Run("no vital signs", func(t *testing.T) {
		bare := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Quist"}]}`)
		tb.visit("#/chart/" + bare)
		tb.waitFor(`document.querySelector('#chart') && document.querySelector('#chart').dataset.patient === ` + jsString(bare))
		tb.wait("#vitals-none")
		if tb.count("#chart-notes li") != 0 {
			t.Errorf("an empty record has notes: %q", tb.text("#chart-notes"))
		}
		for _, sel := range []string{"#problems .empty", "#encounters .empty", "#labs-card .empty", "#timeline-card .empty"} {
			tb.wait(sel)
		}
	})

	t.Run("a thousand vital signs", func(t *testing.T) {
		many := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Tausend"}]}`)
		var entries []string
		start := time.Date(2023, 1, 1, 8, 0, 0, 0, time.UTC)
		for i := range 1000 {
			when := start.Add(time.Duration(i) * 8 * time.Hour).Format(time.RFC3339)
			entries = append(entries, `{"resource":`+observation(many, "vital-signs", "8867-4", "Heart rate", when,
				`,"valueQuantity":{"value":`+strconv.Itoa(60+i%40)+`,"unit":"/min","system":"http://unitsofmeasure.org","code":"/min"}`)+`,"request":{"method":"POST","url":"Observation"}}`)
		}
		e.fhir(http.MethodPost, "", `{"resourceType":"Bundle","type":"transaction","entry":[`+strings.Join(entries, ",")+`]}`, http.StatusOK)
		began := time.Now()
		tb.visit("#/chart/" + many)
		tb.waitFor(`document.querySelector('#chart') && document.querySelector('#chart').dataset.patient === ` + jsString(many))
		t.Logf("a chart of 1,000 heart rates drawn in %v", time.Since(began).Round(time.Millisecond))
		if got := tb.count("#vital-hr a.pt"); got != 1000 {
			t.Errorf("heart rate points = %d, want 1000", got)
		}
		if got := tb.count("#vitals-table tbody tr"); got != 1000 {
			t.Errorf("table rows = %d, want 1000", got)
		}
		tb.click("#range-1m")
		// 31 days of readings every 8 hours, the latest included.
		end := start.Add(999 * 8 * time.Hour)
		want := 0
		for i := range 1000 {
			if !start.Add(time.Duration(i) * 8 * time.Hour).Before(end.AddDate(0, -1, 0)) {
				want++
			}
		}
		if got := tb.count("#vital-hr a.pt"); got != want {
			t.Errorf("one month of readings: %d points, want %d", got, want)
		}
	})
}

func TestBrowserChartIsLinkedFromEveryPatient(t *testing.T) {
	e := newEnv(t)
	pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Okoro"}]}`)
	e.create("Observation", observation(pid, "vital-signs", "8867-4", "Heart rate", "2024-05-01T10:00:00Z", `,"valueQuantity":{"value":64,"unit":"/min"}`))
	tb := newTab(t, e)
	tb.signIn(e.token)
	for _, from := range []struct{ route, link string }{
		{"#/search/Patient?_id=" + pid, "#results-table a.chart-link"},
		{"#/r/Patient/" + pid, "#open-chart"},
		{"#/search/Observation?subject=Patient/" + pid, "#results-table a.chart-link"},
	} {
		tb.visit(from.route)
		tb.click(from.link)
		tb.waitFor(`document.querySelector('#chart[data-state="ready"]') && document.querySelector('#chart').dataset.patient === ` + jsString(pid))
		tb.visit("#/elsewhere")
		tb.wait(`main[data-view="elsewhere"]`)
	}
	// A reference in the JSON of a resource.
	oid := str(e.fhir(http.MethodGet, "/Observation?subject=Patient/"+pid, "", http.StatusOK), "entry", 0, "resource", "id")
	tb.visit("#/r/Observation/" + oid)
	tb.click(".json a.chart-link")
	tb.waitFor(`location.hash === '#/chart/` + pid + `'`)
	tb.waitChart()
	if n := tb.count("#chart-notes li"); n != 0 {
		t.Errorf("a complete record has %d notes: %s", n, tb.text("#chart-notes"))
	}
}
