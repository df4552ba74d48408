package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// loadVisitForm stores the sample visit assessment and its PHQ answer
// ValueSet (testdata/assessments) in the env's tenant.
func loadVisitForm(t *testing.T, e *env) {
	t.Helper()
	for _, name := range []string{"ValueSet-phq-answers.json", "Questionnaire-hh-visit-assessment.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "assessments", name))
		if err != nil {
			t.Fatal(err)
		}
		var r resource
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		e.fhir(http.MethodPut, "/"+r["resourceType"].(string)+"/"+r["id"].(string), string(b), http.StatusCreated)
	}
}

// visitPatient stores a patient with the latest vital signs a visit form
// pre-fills: weight 82 kg, height 175 cm, blood pressure 128/82 mmHg,
// heart rate 72/min, respiratory rate 16/min.
func visitPatient(t *testing.T, e *env) string {
	t.Helper()
	pid := e.create("Patient", `{"resourceType":"Patient","name":[{"use":"official","family":"Okafor","given":["Grace"]}],"gender":"female","birthDate":"1941-03-09"}`)
	vital := func(code, display, value string) string {
		return `{"resourceType":"Observation","status":"final",
			"category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs"}]}],
			"code":{"coding":[{"system":"http://loinc.org","code":"` + code + `","display":"` + display + `"}],"text":"` + display + `"},
			"subject":{"reference":"Patient/` + pid + `"},"effectiveDateTime":"2026-11-02T10:00:00Z",` + value + `}`
	}
	qty := func(v, unit string) string {
		return `"valueQuantity":{"value":` + v + `,"unit":"` + unit + `","system":"http://unitsofmeasure.org","code":"` + unit + `"}`
	}
	e.create("Observation", vital("29463-7", "Body weight", qty("82", "kg")))
	e.create("Observation", vital("8302-2", "Body height", qty("175", "cm")))
	e.create("Observation", vital("8867-4", "Heart rate", qty("72", "/min")))
	e.create("Observation", vital("9279-1", "Respiratory rate", qty("16", "/min")))
	e.create("Observation", vital("85354-9", "Blood pressure panel", `"component":[
		{"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},`+qty("128", "mm[Hg]")+`},
		{"code":{"coding":[{"system":"http://loinc.org","code":"8462-4"}]},`+qty("82", "mm[Hg]")+`}]`))
	return pid
}

// item is the CSS selector of a form item by linkId.
func item(linkID string) string { return `.qitem[data-link-id="` + linkID + `"]` }

// shown tells whether the item of a linkId is on screen (not hidden).
func (tb *tab) shown(linkID string) bool {
	tb.t.Helper()
	return eval[bool](tb, `(() => { const el = document.querySelector(`+jsString(item(linkID))+`); return !!el && !el.closest('[hidden]'); })()`)
}

// value is the value of the first input of an item.
func (tb *tab) value(linkID string) string {
	tb.t.Helper()
	return eval[string](tb, `document.querySelector(`+jsString(item(linkID)+` input`)+`).value`)
}

// choose clicks the radio button or check box of an item by its label.
func (tb *tab) choose(linkID, label string) {
	tb.t.Helper()
	tb.waitFor(`[...document.querySelectorAll(` + jsString(item(linkID)+` label`) + `)].some((l) => l.textContent === ` + jsString(label) + `)`)
	tb.do("choose "+label+" for "+linkID, chromedp.Evaluate[chromedp.Void](`(() => {
		const l = [...document.querySelectorAll(`+jsString(item(linkID)+` label`)+`)].find((l) => l.textContent === `+jsString(label)+`);
		document.getElementById(l.htmlFor).click(); })()`))
}

// settled waits until the form's expressions have come back.
func (tb *tab) settled() {
	tb.t.Helper()
	tb.waitFor(`document.querySelector('#assessment[data-state=ready]') !== null`)
}

// TestAssessmentFillSaveExtract fills the sample visit assessment for a
// patient as a clinician would: pre-filled vital signs, a question that
// appears after a fall, a BMI and a PHQ-2 score computed as answers
// change, a refused answer shown at its question, a draft, completion,
// and the extracted vital signs in the chart with a link back.
func TestAssessmentFillSaveExtract(t *testing.T) {
	e := newEnv(t)
	loadVisitForm(t, e)
	pid := visitPatient(t, e)
	tb := newTab(t, e)
	tb.signIn(e.token)

	tb.visit("#/chart/" + pid)
	tb.click("#chart-assess")
	tb.wait("#forms li a.form-link")
	tb.setValue("#form-search", "zzz")
	tb.waitFor(`document.querySelector('#forms li.empty') !== null`)
	tb.setValue("#form-search", "visit")
	tb.waitFor(`document.querySelector('#forms a.form-link') && document.querySelector('#forms a.form-link').textContent.includes('visit')`)
	tb.click("#forms a.form-link")
	tb.wait("#assessment-form")
	tb.settled()

	// Pre-filled from the chart by $populate, the BMI computed from them.
	for linkID, want := range map[string]string{"weight": "82", "height": "175", "systolic": "128", "diastolic": "82", "heart-rate": "72", "bmi": "26.8"} {
		if got := tb.value(linkID); got != want {
			t.Errorf("%s: pre-filled %q, want %q", linkID, got, want)
		}
	}
	if got := tb.value("birth-date"); got != "1941-03-09" {
		t.Errorf("date of birth %q", got)
	}
	if !eval[bool](tb, `document.querySelector(`+jsString(item("weight")+` label`)+`).htmlFor === document.querySelector(`+jsString(item("weight")+` input`)+`).id`) {
		t.Error("the weight's label is not bound to its input")
	}

	// initialExpression on demand: an emptied answer filled again from the chart.
	tb.setValue(item("respiratory-rate")+" input", "")
	tb.click("#refill")
	tb.waitFor(`document.querySelector(` + jsString(item("respiratory-rate")+" input") + `).value === '16'`)
	tb.settled()

	// enableWhen: the fall questions come with a fall and go without one.
	if tb.shown("fall-count") {
		t.Error("the number of falls is asked before any fall")
	}
	// With the keyboard: Space on Yes, then Tab (past Clear) to the new question.
	tb.do("answer Yes with the keyboard", chromedp.Focus(chromedp.CSS(item("fell")+" input[value=true]")), chromedp.KeyEvent(" "))
	tb.waitFor(`!document.querySelector(` + jsString(item("fall-count")) + `).closest('[hidden]')`)
	tb.do("tab on", chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Tab))
	if !eval[bool](tb, `document.activeElement === document.querySelector(`+jsString(item("fall-count")+" input")+`)`) {
		t.Errorf("Tab after the fall question reaches %s, not the number of falls", eval[string](tb, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	if !tb.shown("fall-injury") || !tb.shown("fall-prevention") {
		t.Error("after a fall: the injury and prevention questions are not shown")
	}
	tb.choose("fell", "No")
	tb.waitFor(`!!document.querySelector(` + jsString(item("fall-count")) + `).closest('[hidden]')`)

	// calculatedExpression: BMI live, and what depends on it
	// (enableWhenExpression: counselling at a BMI of 30 or more).
	tb.setValue(item("weight")+" input", "95")
	tb.waitFor(`document.querySelector(` + jsString(item("bmi")+" input") + `).value === '31'`)
	tb.settled()
	if got := tb.text("#form-live"); !strings.Contains(got, "Body mass index (kg/m2): 31") {
		t.Errorf("the new BMI is not announced: %q", got)
	}
	if !tb.shown("weight-counselling") {
		t.Error("a BMI of 31: the counselling question is not shown")
	}
	tb.setValue(item("weight")+" input", "85")
	tb.waitFor(`document.querySelector(` + jsString(item("bmi")+" input") + `).value === '27.8'`)
	tb.settled()
	if tb.shown("weight-counselling") {
		t.Error("a BMI of 27.8: the counselling question is still shown")
	}

	// The PHQ-2 total follows the answers, from the value set's scores.
	tb.choose("phq2-interest", "Several days")
	tb.choose("phq2-down", "More than half the days")
	tb.waitFor(`document.querySelector(` + jsString(item("phq2-score")+" input") + `).value === '3'`)
	tb.waitFor(`!document.querySelector('.qdisplay[data-link-id="phq2-positive"]').hidden`)
	tb.choose("phq2-down", "Not at all")
	tb.waitFor(`document.querySelector(` + jsString(item("phq2-score")+" input") + `).value === '1'`)
	tb.waitFor(`document.querySelector('.qdisplay[data-link-id="phq2-positive"]').hidden`)
	tb.setValue(`[data-link-id="notes"] textarea`, "Walked to the kitchen unaided. Reviewed medications with her daughter.")
	tb.settled()

	// Leaving with unsaved answers asks first; staying keeps them.
	route := eval[string](tb, `location.hash`)
	tb.click("#form-patient")
	tb.wait("#confirm")
	tb.click("#confirm-no")
	tb.waitFor(`!document.querySelector('#confirm')`)
	if got := eval[string](tb, `location.hash`); got != route {
		t.Errorf("after staying the page is %s, want %s", got, route)
	}
	if !strings.HasPrefix(eval[string](tb, `document.querySelector('[data-link-id="notes"] textarea').value`), "Walked") {
		t.Error("after staying the notes are gone")
	}
	tb.screenshotTop("assessment-form", 1024, 1366, nil)

	// A systolic pressure the form does not allow: refused by the server,
	// shown at its question, the other answers kept.
	tb.setValue(item("systolic")+" input", "400")
	tb.click("#complete")
	tb.wait(item("systolic") + " .qerror")
	msg := tb.text(item("systolic") + " .qerror")
	if !strings.Contains(msg, "400") && !strings.Contains(strings.ToLower(msg), "max") {
		t.Errorf("the systolic pressure's message %q does not say what is wrong", msg)
	}
	if !strings.Contains(tb.text("#form-errors"), "Systolic") {
		t.Errorf("the summary does not name the systolic pressure: %q", tb.text("#form-errors"))
	}
	if got := tb.value("weight"); got != "85" {
		t.Errorf("after the refusal the weight is %q, want the 85 typed", got)
	}
	if !eval[bool](tb, `document.activeElement === document.querySelector(`+jsString(item("systolic")+" input")+`)`) {
		t.Error("the focus is not on the refused answer")
	}
	tb.screenshotTop("assessment-errors", 1024, 1366, func() {
		tb.do("scroll to the error", chromedp.Evaluate[chromedp.Void](`document.querySelector('#form-errors').scrollIntoView()`))
	})

	// A draft, then completion.
	tb.setValue(item("systolic")+" input", "134")
	tb.click("#save-draft")
	tb.waitFor(`document.querySelector('#save-status').textContent.startsWith('Draft saved')`)
	if got := eval[string](tb, `location.hash`); !strings.HasPrefix(got, "#/fill/") {
		t.Fatalf("after the draft the page is %s", got)
	}
	qrID := strings.TrimPrefix(eval[string](tb, `location.hash`), "#/fill/")
	if got := e.fhir(http.MethodGet, "/QuestionnaireResponse/"+qrID, "", http.StatusOK)["status"]; got != "in-progress" {
		t.Errorf("the draft is %v", got)
	}
	tb.visit("#/chart/" + pid)
	if got := tb.text("#chart-in-progress"); got != "1 assessment in progress" {
		t.Errorf("the chart says %q of the draft", got)
	}
	tb.click("#chart-in-progress a")
	tb.wait("#assess-pick")
	if got := tb.text("#in-progress a"); got != "Continue: Home-health visit assessment" {
		t.Errorf("the draft is listed as %q", got)
	}
	tb.click(`#in-progress a`)
	tb.wait("#assessment-form")
	tb.settled()
	if got := tb.value("systolic"); got != "134" {
		t.Errorf("continued: systolic %q", got)
	}
	tb.click("#complete")
	tb.wait("#response")
	if got := tb.text("#response-status"); got != "completed" {
		t.Errorf("status %q", got)
	}
	for _, want := range []string{"Body weight (kg)", "85 kg", "Several days", "Walked to the kitchen"} {
		if !strings.Contains(tb.text("#response-items"), want) {
			t.Errorf("the response page does not show %q", want)
		}
	}
	if tb.text("#response-title") == "" || !strings.Contains(tb.text("#response-form-version"), "1.0.0") {
		t.Error("the response page does not name its form and version")
	}
	tb.screenshotTop("assessment-response", 1024, 1366, nil)

	// On paper: the answers, not the buttons.
	if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print"}); err != nil {
		t.Fatal(err)
	}
	if eval[bool](tb, `document.querySelector('#add-to-chart').getClientRects().length > 0 || document.querySelector('header.top').getClientRects().length > 0`) {
		t.Error("the buttons and the console's header are printed")
	}
	if !eval[bool](tb, `document.querySelector('#response-items').getBoundingClientRect().height > 0`) {
		t.Error("the answers are not printed")
	}
	if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
		t.Fatal(err)
	}

	// Add to the chart: what $extract makes, listed, then posted.
	tb.click("#add-to-chart")
	tb.wait("#extract-list li")
	list := tb.text("#extract-list")
	for _, want := range []string{"Body weight", "85 kg", "134 mmHg / 82 mmHg"} {
		if !strings.Contains(list, want) {
			t.Errorf("the extraction list %q does not show %q", list, want)
		}
	}
	tb.click("#confirm-extract")
	tb.wait("#extract-done")
	tb.click("#extract-chart")
	tb.wait("#latest-weight")
	if got := tb.text("#latest-weight"); !strings.HasPrefix(got, "85") {
		t.Errorf("the chart's latest weight is %q, want the 85 kg of the assessment", got)
	}
	if got := tb.text("#latest-bp"); !strings.HasPrefix(got, "134/82") {
		t.Errorf("the chart's latest blood pressure is %q, want the 134/82 of the assessment", got)
	}
	tb.click("#from-weight")
	tb.wait("#response")
	if got := eval[string](tb, `location.hash`); got != "#/response/"+qrID {
		t.Errorf("the weight links back to %s", got)
	}
}

// TestAssessmentConflictKeepsTheAnswers saves a draft while another
// version was saved meanwhile: the 412 is shown with both versions and
// the form keeps the answers.
func TestAssessmentConflictKeepsTheAnswers(t *testing.T) {
	e := newEnv(t)
	loadVisitForm(t, e)
	pid := visitPatient(t, e)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.visit("#/assess/" + pid + "/hh-visit-assessment")
	tb.wait("#assessment-form")
	tb.settled()
	tb.click("#save-draft")
	tb.waitFor(`document.querySelector('#save-status').textContent.startsWith('Draft saved')`)
	qrID := strings.TrimPrefix(eval[string](tb, `location.hash`), "#/fill/")
	saved := e.fhir(http.MethodGet, "/QuestionnaireResponse/"+qrID, "", http.StatusOK)
	b, _ := json.Marshal(saved)
	e.fhir(http.MethodPut, "/QuestionnaireResponse/"+qrID, string(b), http.StatusOK)
	tb.setValue(`[data-link-id="notes"] textarea`, "mine")
	tb.click("#save-draft")
	tb.wait("#conflict")
	if got := eval[string](tb, `document.querySelector('[data-link-id="notes"] textarea').value`); got != "mine" {
		t.Errorf("after the conflict the notes are %q", got)
	}
	tb.click("#keep-mine")
	tb.waitFor(`document.querySelector('#save-status').textContent.includes('version 3')`)
}

// bigQuestionnaire is a form of 100 items: ten groups of nine integer
// questions and a yes/no question, each group's last question shown only
// after a yes, and a total of every answer computed by the server.
func bigQuestionnaire() string {
	var groups []string
	for g := range 10 {
		var items []string
		items = append(items, fmt.Sprintf(`{"linkId":"g%d-yes","text":"Group %d applies?","type":"boolean"}`, g, g+1))
		for i := range 8 {
			id := fmt.Sprintf("g%d-q%d", g, i)
			items = append(items, fmt.Sprintf(`{"linkId":"%s","text":"Question %d.%d","type":"integer",
				"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/minValue","valueInteger":0},{"url":"http://hl7.org/fhir/StructureDefinition/maxValue","valueInteger":10}]}`, id, g+1, i+1))
		}
		items = append(items, fmt.Sprintf(`{"linkId":"g%d-more","text":"Details","type":"string","enableWhen":[{"question":"g%d-yes","operator":"=","answerBoolean":true}]}`, g, g))
		groups = append(groups, fmt.Sprintf(`{"linkId":"g%d","text":"Section %d","type":"group","item":[%s]}`, g, g+1, strings.Join(items, ",")))
	}
	total := `{"linkId":"total","text":"Total","type":"integer","readOnly":true,"extension":[{"url":"http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression",
		"valueExpression":{"language":"text/fhirpath","expression":"%resource.repeat(item).where(linkId.contains('-q')).answer.value.aggregate($this + $total, 0)"}}]}`
	// 10 groups × 10 items and the total: 111 items, 100 of them questions.
	return `{"resourceType":"Questionnaire","id":"hundred","url":"http://fhirstore.example/fhir/Questionnaire/hundred","version":"1","title":"A hundred questions","status":"active",
		"item":[` + strings.Join(groups, ",") + `,` + total + `]}`
}

// TestQuestionnaireOfAHundredItemsTimes times a form of 100 questions in
// Chromium: drawing it, an answer that shows a question (enableWhen, in
// the browser), and an answer that changes a total computed by the server
// (the reaction: from the input event to the total on screen). It logs
// the figures docs/performance.md records; it asserts only that they
// were measured.
func TestQuestionnaireOfAHundredItemsTimes(t *testing.T) {
	e := newEnv(t)
	e.fhir(http.MethodPut, "/Questionnaire/hundred", bigQuestionnaire(), http.StatusCreated)
	pid := visitPatient(t, e)
	tb := newTab(t, e)
	tb.signIn(e.token)
	var builds, paints, loads, shows, reacts, servers []float64
	for round := range 7 {
		tb.visit("#/elsewhere") // leaving the answered form asks first
		tb.waitFor(`!!document.querySelector('main[data-view=elsewhere], #confirm-yes')`)
		if eval[bool](tb, `!!document.querySelector('#confirm-yes')`) {
			tb.click("#confirm-yes")
		}
		tb.wait("main[data-view=elsewhere]")
		start := time.Now()
		tb.visit("#/assess/" + pid + "/hundred")
		tb.wait("#assessment-form")
		loads = append(loads, ms(time.Since(start)))
		tb.settled()
		builds = append(builds, num(t, eval[string](tb, `document.querySelector('#assessment').dataset.renderMs`)))
		tb.waitFor(`document.querySelector('#assessment').dataset.paintMs !== undefined`)
		paints = append(paints, num(t, eval[string](tb, `document.querySelector('#assessment').dataset.paintMs`)))
		if n := eval[int](tb, `document.querySelectorAll('#assessment-form input').length`); n < 100 {
			t.Fatalf("the form has %d inputs", n)
		}
		// enableWhen: time from the click to the question on screen.
		shows = append(shows, eval[float64](tb, `(() => {
			const t0 = performance.now();
			document.querySelector('[data-link-id="g3-yes"] input[value=true]').click();
			const shown = !document.querySelector('[data-link-id="g3-more"]').closest('[hidden]');
			return shown ? performance.now() - t0 : -1; })()`))
		// calculatedExpression: answer, then wait for the new total.
		for k := range 3 {
			v := strconv.Itoa(round + k + 1)
			tb.setValue(`[data-link-id="g5-q2"] input`, v)
			tb.waitFor(`document.querySelector('[data-link-id="total"] input').value === ` + jsString(v))
			tb.settled()
			reacts = append(reacts, num(t, eval[string](tb, `document.querySelector('#assessment').dataset.reactMs`)))
			servers = append(servers, num(t, eval[string](tb, `document.querySelector('#assessment').dataset.serverMs`)))
		}
	}
	for _, s := range shows {
		if s < 0 {
			t.Fatal("the enableWhen question did not appear at once")
		}
	}
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	top := func(v []float64) float64 { return slices.Max(v) }
	t.Logf("form of 100 questions (111 items), %d rounds:\n"+
		"| measure | median ms | max ms |\n|---|---:|---:|\n"+
		"| draw the form (build the DOM) | %.1f | %.1f |\n"+
		"| draw the form until the next frame (built, laid out, painted) | %.1f | %.1f |\n"+
		"| open the form (route to form on screen, with $populate) | %.0f | %.0f |\n"+
		"| answer shows a question (enableWhen) | %.2f | %.2f |\n"+
		"| answer updates the total (calculatedExpression, server round trip) | %.1f | %.1f |\n"+
		"| of which the server's evaluation | %.2f | %.2f |",
		len(builds), med(builds), top(builds), med(paints), top(paints), med(loads), top(loads), med(shows), top(shows), med(reacts), top(reacts), med(servers), top(servers))
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return f
}

// TestQuestionnaireExpressionsAreEvaluatedByTheConsoleAPI posts the visit
// form and answers to the console's expressions endpoint: the BMI from
// the weight and height, the counselling question enabled at a BMI of 30,
// the PHQ-2 score once the value set's search is given, the search asked
// for while it is not.
func TestQuestionnaireExpressionsAreEvaluatedByTheConsoleAPI(t *testing.T) {
	e := newEnv(t)
	form, err := os.ReadFile(filepath.Join("..", "..", "testdata", "assessments", "Questionnaire-hh-visit-assessment.json"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := os.ReadFile(filepath.Join("..", "..", "testdata", "assessments", "ValueSet-phq-answers.json"))
	if err != nil {
		t.Fatal(err)
	}
	response := `{"resourceType":"QuestionnaireResponse","status":"in-progress","item":[
		{"linkId":"vitals","item":[{"linkId":"weight","answer":[{"valueDecimal":95}]},{"linkId":"height","answer":[{"valueDecimal":175}]},{"linkId":"bmi"},{"linkId":"weight-counselling"}]},
		{"linkId":"phq2","item":[{"linkId":"phq2-interest","answer":[{"valueCoding":{"system":"http://loinc.org","code":"LA6569-3"}}]},
			{"linkId":"phq2-down","answer":[{"valueCoding":{"system":"http://loinc.org","code":"LA6570-1"}}]},{"linkId":"phq2-score"}]}]}`
	post := func(queries string) map[string]any {
		body := `{"questionnaire":` + string(form) + `,"response":` + response + `,"context":{"patient":{"resourceType":"Patient","id":"p1"}},"queries":` + queries + `}`
		status, _, b := e.call(http.MethodPost, "/console/api/expressions", body, map[string]string{"Content-Type": "application/json"})
		if status != http.StatusOK {
			t.Fatalf("expressions: %d %s", status, b)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := post(`{}`)
	if got := fmt.Sprint(walkJSON(out, "calculated", "item[0].item[2]", 0, "valueDecimal")); got != "31" {
		t.Errorf("BMI %s, want 31: %v", got, out)
	}
	if walkJSON(out, "enabled", "item[0].item[3]") != true {
		t.Errorf("counselling not enabled at a BMI of 31: %v", out["enabled"])
	}
	query := "ValueSet?url=http://fhirstore.example/fhir/ValueSet/phq-answers"
	if !slices.Contains(asList(out["queries"]), any(query)) {
		t.Errorf("queries %v, want %s", out["queries"], query)
	}
	out = post(`{"` + query + `":{"resourceType":"Bundle","type":"searchset","entry":[{"resource":` + string(vs) + `}]}}`)
	if got := fmt.Sprint(walkJSON(out, "calculated", "item[1].item[2]", 0, "valueInteger")); got != "3" {
		t.Errorf("PHQ-2 score %s, want 3: %v", got, out)
	}
	if status, _, _ := e.call(http.MethodPost, "/console/api/expressions", `{}`, map[string]string{"Authorization": ""}); status != http.StatusUnauthorized {
		t.Errorf("without a token: %d", status)
	}
	if status, _, _ := e.call(http.MethodGet, "/console/api/expressions", "", nil); status != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", status)
	}
}

// TestQuestionnaireEveryItemTypeIsAControl opens a form of every R4 item
// type and item control (server/console/testdata) and fills it with the
// keyboard and the mouse: each control has a label, the initial values
// are there, read-only stays read-only, a repeating group grows and
// shrinks, the reference picker searches, and the saved response holds
// each answer in its FHIR type.
func TestQuestionnaireEveryItemTypeIsAControl(t *testing.T) {
	e := newEnv(t)
	form, err := os.ReadFile(filepath.Join("testdata", "Questionnaire-every-type.json"))
	if err != nil {
		t.Fatal(err)
	}
	loadVisitForm(t, e) // and the PHQ answers' ValueSet, searched by $expand
	e.fhir(http.MethodPut, "/Questionnaire/every-type", string(form), http.StatusCreated)
	pid := visitPatient(t, e)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.visit("#/assess/" + pid + "/every-type")
	tb.wait("#assessment-form")

	// Every control is labelled: its own label, an aria-label, or the
	// question labelling its group of options.
	unlabelled := eval[[]string](tb, `[...document.querySelectorAll('#assessment-form input, #assessment-form select, #assessment-form textarea')]
		.filter((c) => !(c.labels && c.labels.length) && !c.getAttribute('aria-label') && !c.closest('[aria-labelledby]'))
		.map((c) => c.id || c.outerHTML)`)
	if len(unlabelled) > 0 {
		t.Errorf("controls without a label: %v", unlabelled)
	}
	controls := []struct{ linkID, selector string }{
		{"visited", `input[type=radio]`},
		{"temp", `input[type=number][step=any][min="30"][max="45"]`},
		{"steps", `input[type=number][step="1"]`},
		{"pain", `input[type=range][min="0"][max="10"]`},
		{"day", `input[type=date]`},
		{"when", `input[type=datetime-local]`},
		{"at", `input[type=time]`},
		{"who", `input[type=text][maxlength="40"]`},
		{"site", `input[type=url]`},
		{"summary", `textarea[readonly]`},
		{"mood", `input[type=radio]`},
		{"aids", `input[type=checkbox]`},
		{"living", `select`},
		{"lang", `input[role=combobox]`},
		{"diet", `input[type=radio]`},
		{"photo", `input[type=file]`},
		{"seen", `input[role=combobox]`},
		{"often", `input[role=combobox]`},
		{"dose", `select`},
	}
	for _, c := range controls {
		if !eval[bool](tb, `!!document.querySelector(`+jsString(item(c.linkID)+" "+c.selector)+`)`) {
			t.Errorf("%s: no %s", c.linkID, c.selector)
		}
	}
	// A question labels its field; its options are labelled each by its own
	// label and as a group by the question, which picks none when clicked.
	tb.waitFor(`!!document.querySelector(` + jsString(item("often")+" input[role=combobox]") + `)`)
	for _, linkID := range []string{"temp", "living", "lang", "often", "seen", "dose"} {
		if !eval[bool](tb, `document.querySelector(`+jsString(item(linkID)+" .qlabel")+`).control === document.querySelector(`+jsString(item(linkID)+" .qcontrols input, "+item(linkID)+" .qcontrols select")+`)`) {
			t.Errorf("%s: the question's label is not bound to its field", linkID)
		}
	}
	for _, linkID := range []string{"visited", "mood", "aids"} {
		if eval[bool](tb, `!!document.querySelector(`+jsString(item(linkID)+" .qlabel")+`).control`) {
			t.Errorf("%s: the question's label is bound to one of its options", linkID)
		}
	}
	if got := tb.text(item("who") + " .qhelp"); !strings.Contains(got, "full name") {
		t.Errorf("the help text of 'Seen by' is %q", got)
	}
	if !eval[bool](tb, `document.querySelector(`+jsString(item("visited")+" input[value=true]")+`).checked`) {
		t.Error("the initial Yes of 'Visit took place' is not checked")
	}
	if got := tb.text(`.qgroup[data-link-id="about"] .qgroup-title`); !strings.HasPrefix(got, "1. ") {
		t.Errorf("the group's prefix: %q", got)
	}

	tb.setValue(item("temp")+" input", "37.2")
	tb.setValue(item("steps")+" input", "1200")
	tb.setValue(item("pain")+" input", "3")
	tb.setValue(item("day")+" input", "2026-12-06")
	tb.setValue(item("when")+" input", "2026-12-06T09:30")
	tb.setValue(item("at")+" input", "14:00")
	tb.setValue(item("who")+" input", "Ana Silva")
	tb.setValue(item("site")+" input", "https://example.org/plan")
	// A repeating question: a second answer added, a third added and removed.
	tb.setValue(item("aliases")+" input", "Nana")
	tb.click(item("aliases") + " button.add")
	tb.setValue("#"+eval[string](tb, `document.querySelectorAll(`+jsString(item("aliases")+" input")+`)[1].id`), "Gran")
	tb.click(item("aliases") + " button.add")
	tb.waitFor(`document.querySelectorAll(` + jsString(item("aliases")+" input") + `).length === 3`)
	tb.do("remove the third", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll(`+jsString(item("aliases")+" button.remove")+`)[2].click()`))
	tb.waitFor(`document.querySelectorAll(` + jsString(item("aliases")+" input") + `).length === 2`)
	// A pattern: a hint while it does not match, none once it does.
	tb.setValue(item("phone")+" input", "5550142")
	if got := tb.text(item("phone") + " .qhint"); !strings.Contains(got, "555-0142") {
		t.Errorf("the phone's hint is %q", got)
	}
	tb.setValue(item("phone")+" input", "555-0142")
	if !eval[bool](tb, `document.querySelector(`+jsString(item("phone")+" .qhint")+`).hidden`) {
		t.Error("the phone's hint stays once it matches")
	}
	tb.choose("mood", "Fair")
	tb.choose("aids", "cane")
	tb.choose("aids", "walker")
	tb.setValue(item("living")+" select", "1")
	tb.choose("diet", "regular")
	tb.setValue(item("diet")+" .qother input", "low salt")
	tb.setValue(item("dose")+" input", "250")

	// The language and the patient seen, picked with the keyboard.
	tb.do("type a language", chromedp.Focus(chromedp.CSS(item("lang")+" input")), chromedp.SendKeys(chromedp.CSS(item("lang")+" input"), "pol"))
	tb.waitFor(`document.querySelector(` + jsString(item("lang")+" [role=listbox] [role=option]") + `) && document.querySelector(` + jsString(item("lang")+" [role=listbox]") + `).textContent === 'Polish'`)
	tb.do("pick it", chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter))
	tb.waitFor(`document.querySelector(` + jsString(item("lang")+" input") + `).value === 'Polish'`)
	tb.do("type in a value set", chromedp.Focus(chromedp.CSS(item("often")+" input")), chromedp.SendKeys(chromedp.CSS(item("often")+" input"), "half"))
	tb.waitFor(`document.querySelector(` + jsString(item("often")+" [role=listbox]") + `).textContent === 'More than half the days'`)
	tb.do("pick it", chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter))
	tb.waitFor(`document.querySelector(` + jsString(item("often")+" input") + `).value === 'More than half the days'`)
	tb.do("type a name", chromedp.Focus(chromedp.CSS(item("seen")+" input")), chromedp.SendKeys(chromedp.CSS(item("seen")+" input"), "Okafor"))
	tb.waitFor(`[...document.querySelectorAll(` + jsString(item("seen")+" [role=option]") + `)].some((o) => o.textContent.includes('Grace Okafor'))`)
	tb.do("pick the patient", chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter))

	// A file.
	file := filepath.Join(t.TempDir(), "wound.txt")
	if err := os.WriteFile(file, []byte("healing well"), 0o600); err != nil {
		t.Fatal(err)
	}
	tb.do("attach", chromedp.SetUploadFiles(chromedp.CSS(item("photo")+" input"), []string{file}))
	tb.waitFor(`document.querySelector(` + jsString(item("photo")) + `).textContent.includes('wound.txt')`)

	// Two contacts, a third added and removed.
	tb.setValue(`[data-link-id="contact-name"] input`, "Ruth")
	tb.click(`[data-add="contacts"]`)
	tb.waitFor(`document.querySelectorAll('.qgroup[data-link-id="contacts"]').length === 2`)
	tb.do("name the second", chromedp.Evaluate[chromedp.Void](`(() => { const el = document.querySelectorAll('[data-link-id="contact-name"] input')[1];
		el.value = 'Sam'; el.dispatchEvent(new Event('input', {bubbles: true})); })()`))
	tb.setValue(`[data-link-id="contact-phone"] input`, "555-0100")
	tb.click(`[data-add="contacts"]`)
	tb.waitFor(`document.querySelectorAll('.qgroup[data-link-id="contacts"]').length === 3`)
	tb.do("remove the third", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('.qgroup[data-link-id="contacts"] .remove')[2].click()`))
	tb.waitFor(`document.querySelectorAll('.qgroup[data-link-id="contacts"]').length === 2`)

	// On a tablet held upright nothing runs off the side.
	tb.do("a tablet", chromedp.EmulateViewport(768, 1024))
	if w := eval[int](tb, `document.querySelector('#assessment').scrollWidth`); w > 768 {
		t.Errorf("at 768 px the form is %d px wide", w)
	}
	tb.do("a desktop again", chromedp.EmulateReset())

	tb.click("#save-draft")
	tb.waitFor(`document.querySelector('#save-status').textContent.startsWith('Draft saved') || document.querySelector('#form-errors').textContent !== ''`)
	if errs := tb.text("#form-errors"); errs != "" {
		t.Fatalf("the draft was refused: %s", errs)
	}
	qrID := strings.TrimPrefix(eval[string](tb, `location.hash`), "#/fill/")
	qr := e.fhir(http.MethodGet, "/QuestionnaireResponse/"+qrID, "", http.StatusOK)
	answers := map[string][]string{}
	var walk func(items []any)
	walk = func(items []any) {
		for _, it := range items {
			id := str(it, "linkId")
			for _, a := range asList(walkJSON(it, "answer")) {
				b, _ := json.Marshal(a)
				answers[id] = append(answers[id], string(b))
				walk(asList(walkJSON(a, "item")))
			}
			walk(asList(walkJSON(it, "item")))
		}
	}
	walk(asList(qr["item"]))
	want := map[string]string{
		"visited":       `{"valueBoolean":true}`,
		"temp":          `{"valueDecimal":37.2}`,
		"steps":         `{"valueInteger":1200}`,
		"pain":          `{"valueInteger":3}`,
		"day":           `{"valueDate":"2026-12-06"}`,
		"at":            `{"valueTime":"14:00:00"}`,
		"who":           `{"valueString":"Ana Silva"}`,
		"aliases":       `{"valueString":"Nana"} {"valueString":"Gran"}`,
		"phone":         `{"valueString":"555-0142"}`,
		"site":          `{"valueUri":"https://example.org/plan"}`,
		"summary":       `{"valueString":"Stable."}`,
		"mood":          `{"valueCoding":{"code":"fair","display":"Fair","system":"http://fhirstore.example/cs/mood"}}`,
		"aids":          `{"valueString":"cane"} {"valueString":"walker"}`,
		"living":        `{"valueString":"with family"}`,
		"lang":          `{"valueString":"Polish"}`,
		"diet":          `{"valueString":"low salt"}`,
		"seen":          `{"valueReference":{"display":"Grace Okafor","reference":"Patient/` + pid + `"}}`,
		"dose":          `{"valueQuantity":{"code":"mg","system":"http://unitsofmeasure.org","unit":"mg","value":250}}`,
		"often":         `{"valueCoding":{"code":"LA6570-1","display":"More than half the days","system":"http://loinc.org"}}`,
		"contact-name":  `{"valueString":"Ruth"} {"valueString":"Sam"}`,
		"contact-phone": `{"valueString":"555-0100"}`,
	}
	for id, w := range want {
		if got := strings.Join(answers[id], " "); got != w {
			t.Errorf("%s: saved %s, want %s", id, got, w)
		}
	}
	if got := strings.Join(answers["when"], ""); !strings.Contains(got, `"valueDateTime":"2026-12-06T09:30:00`) {
		t.Errorf("when: saved %s", got)
	}
	if got := strings.Join(answers["photo"], ""); !strings.Contains(got, `"title":"wound.txt"`) || !strings.Contains(got, `"data":"aGVhbGluZyB3ZWxs"`) {
		t.Errorf("photo: saved %s", got)
	}
	if n := len(asList(walkJSON(qr, "item", 2, "item"))); n < 4 {
		t.Errorf("the group 'More' holds %d items, want the photo, patient, dose and two contacts", n)
	}
}
