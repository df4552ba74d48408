package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"fhirstore/fhirschema"
	"fhirstore/store"
	"fhirstore/store/schemacheck"
)

func TestBrowserSearchFormIsBuiltFromTheCapabilityStatement(t *testing.T) {
	e := newEnv(t)
	tb := newTab(t, e)
	tb.signIn(e.token)
	cs := e.fhir(http.MethodGet, "/metadata", "", http.StatusOK)
	for _, typ := range []string{"Patient", "Observation"} {
		t.Run(typ, func(t *testing.T) {
			tb.visit("#/search/" + typ)
			tb.waitFor(`document.querySelector('#search-type') && document.querySelector('#search-type').value === ` + jsString(typ))
			offered := eval[[]string](tb, `[...document.querySelector('.cond-param').options].map(o => o.value).filter(Boolean)`)
			var want []string
			for _, r := range cs["rest"].([]any)[0].(map[string]any)["resource"].([]any) {
				r := r.(map[string]any)
				if r["type"] != typ {
					continue
				}
				for _, p := range r["searchParam"].([]any) {
					want = append(want, p.(map[string]any)["name"].(string))
				}
			}
			if len(want) == 0 {
				t.Fatalf("the CapabilityStatement lists no search parameters for %s", typ)
			}
			for _, name := range want {
				if !slices.Contains(offered, name) {
					t.Errorf("the form does not offer %s.%s (offers %d parameters)", typ, name, len(offered))
				}
			}
			types := eval[[]string](tb, `[...document.querySelector('#search-type').options].map(o => o.value)`)
			if !slices.Contains(types, "Patient") || !slices.Contains(types, "Observation") {
				t.Errorf("the type list lacks Patient or Observation: %d types", len(types))
			}
		})
	}
	// A date parameter offers the comparison prefixes; a string one does not.
	tb.visit("#/search/Patient")
	tb.wait(".cond-param")
	tb.setValue(".cond-param", "birthdate")
	if got := eval[[]string](tb, `[...document.querySelector('.cond-prefix').options].map(o => o.value)`); !slices.Contains(got, "ge") || !slices.Contains(got, "sa") {
		t.Errorf("birthdate prefixes = %v", got)
	}
	if eval[bool](tb, `document.querySelector('.cond-prefix').hidden`) {
		t.Error("the prefix of a date parameter is hidden")
	}
	tb.setValue(".cond-param", "family")
	if got := eval[[]string](tb, `[...document.querySelector('.cond-mod').options].map(o => o.value)`); !slices.Contains(got, "exact") || !slices.Contains(got, "contains") {
		t.Errorf("family modifiers = %v", got)
	}
	if !eval[bool](tb, `document.querySelector('.cond-prefix').hidden`) {
		t.Error("a string parameter shows comparison prefixes")
	}
}

func TestBrowserSearchShowsResultsRawQueryAndPages(t *testing.T) {
	e := newEnv(t)
	for i, fam := range []string{"Alvarez", "Alvarado", "Brown"} {
		e.create("Patient", fmt.Sprintf(`{"resourceType":"Patient","name":[{"family":%q,"given":["P%d"]}],"birthDate":"19%d0-01-01","gender":"other"}`, fam, i, 5+i))
	}
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.visit("#/search/Patient")
	tb.wait(".cond-param")
	tb.setValue(".cond-param", "family")
	tb.setValue(".cond-value", "Alva")
	tb.setValue("#search-count", "1")
	tb.setValue("#search-sort", "family")
	tb.click("#search-submit")
	tb.wait("#results-table")
	raw := tb.text("#raw-query")
	u, err := url.Parse(raw)
	if err != nil || u.Path != "/fhir/r4/Patient" || u.Query().Get("family") != "Alva" || u.Query().Get("_count") != "1" || u.Query().Get("_sort") != "family" {
		t.Fatalf("raw query = %q", raw)
	}
	// The raw query is what the server answers to a client.
	status, _, _ := e.call(http.MethodGet, u.RequestURI(), "", nil)
	if status != http.StatusOK {
		t.Errorf("the raw query does not work with curl: %d", status)
	}
	headers := eval[[]string](tb, `[...document.querySelectorAll('#results-table thead th')].map(th => th.textContent)`)
	if !slices.Equal(headers, []string{"id", "Name", "Birth date", "Gender", "Updated"}) {
		t.Errorf("Patient columns = %v", headers)
	}
	first := tb.text("#results-table tbody tr td:nth-child(2)")
	if first != "P1 Alvarado" {
		t.Errorf("first row name = %q, want P1 Alvarado (sorted by family)", first)
	}
	if got := tb.text("#result-summary"); !strings.HasPrefix(got, "2 match") {
		t.Errorf("summary = %q", got)
	}
	tb.screenshot("search")
	tb.click("#page-next")
	tb.waitFor(`document.querySelector('#results-table tbody tr td:nth-child(2)') && document.querySelector('#results-table tbody tr td:nth-child(2)').textContent === 'P0 Alvarez'`)
	if !strings.Contains(tb.text("#raw-query"), "_cursor=") {
		t.Errorf("the second page's raw query is not the server's next link: %q", tb.text("#raw-query"))
	}
	tb.click("#page-previous")
	tb.waitFor(`document.querySelector('#results-table tbody tr td:nth-child(2)') && document.querySelector('#results-table tbody tr td:nth-child(2)').textContent === 'P1 Alvarado'`)
	// A search the server refuses shows its OperationOutcome.
	tb.visit("#/search/Patient?birthdate=notadate")
	tb.wait("#results .msg.error")
}

func TestBrowserResourcePageShowsJSONXMLHistoryAndReferrers(t *testing.T) {
	e := newEnv(t)
	pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Keller"}],"gender":"female"}`)
	oid := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"Heart rate"},"subject":{"reference":"Patient/`+pid+`"},"valueQuantity":{"value":72,"unit":"/min"}}`)
	e.fhir(http.MethodPut, "/Patient/"+pid, `{"resourceType":"Patient","id":"`+pid+`","name":[{"family":"Keller-Ames"}],"gender":"female","birthDate":"1971-05-06"}`, http.StatusOK)
	tb := newTab(t, e)
	tb.signIn(e.token)

	tb.visit("#/r/Observation/" + oid)
	tb.wait(".json a.ref")
	if href := eval[string](tb, `document.querySelector('.json a.ref').getAttribute('href')`); href != "#/r/Patient/"+pid {
		t.Errorf("the subject reference links to %q", href)
	}
	tb.screenshot("resource")
	tb.click(".json a.ref")
	tb.waitFor(`document.querySelector('#resource-id') && document.querySelector('#resource-id').textContent === ` + jsString(pid))
	if got := tb.text("#resource-version"); got != "v2" {
		t.Errorf("version badge = %q", got)
	}

	// The search form's _include and _revinclude.
	tb.visit("#/search/Observation")
	tb.wait(`#search-include input[value="Observation:subject"]`)
	tb.click(`#search-include input[value="Observation:subject"]`)
	tb.click("#search-submit")
	tb.wait("#included")
	if got := tb.text("#included"); !strings.Contains(got, "Patient/"+pid) {
		t.Errorf("_include lists %q", got)
	}
	if !strings.Contains(tb.text("#raw-query"), "_include=Observation%3Asubject") {
		t.Errorf("raw query = %q", tb.text("#raw-query"))
	}
	tb.visit("#/search/Patient")
	tb.wait("#search-revinclude")
	tb.waitFor(`document.querySelectorAll('#revinclude-options option').length > 0`)
	tb.setValue("#search-revinclude", "Observation:subject")
	tb.click("#search-submit")
	tb.wait("#included")
	if got := tb.text("#included"); !strings.Contains(got, "Observation/"+oid) {
		t.Errorf("_revinclude lists %q", got)
	}
	tb.visit("#/r/Patient/" + pid)
	tb.wait("#tab-xml")

	tb.click("#tab-xml")
	tb.wait("#xml")
	xml := tb.text("#xml")
	if !strings.Contains(xml, "<Patient") || !strings.Contains(xml, `<family value="Keller-Ames"`) {
		t.Errorf("XML view = %.200q", xml)
	}

	tb.click("#tab-history")
	tb.wait("#diff table")
	if n := eval[int](tb, `document.querySelectorAll('#history tbody tr').length`); n != 2 {
		t.Errorf("history rows = %d, want 2", n)
	}
	changed := eval[[]string](tb, `[...document.querySelectorAll('#diff tr.chg td.b, #diff tr.add td.b')].map(td => td.textContent.trim())`)
	if !slices.ContainsFunc(changed, func(s string) bool { return strings.Contains(s, "Keller-Ames") }) ||
		!slices.ContainsFunc(changed, func(s string) bool { return strings.Contains(s, "1971-05-06") }) {
		t.Errorf("the diff of v1 and v2 does not show the changes: %q", changed)
	}
	tb.screenshot("history")

	tb.click("#tab-refs")
	tb.wait("#refs")
	if got := tb.text("#refs"); !strings.Contains(got, "Observation/"+oid) {
		t.Errorf("referenced by = %q", got)
	}
	counts := eval[[]string](tb, `[...document.querySelectorAll('#refcounts tbody tr')].map(tr => tr.textContent)`)
	if !slices.Equal(counts, []string{"Observationpatient1", "Observationsubject1"}) {
		t.Errorf("reference counts = %q", counts)
	}
}

func TestBrowserEditShowsEachIssueAtItsElement(t *testing.T) {
	e := newEnv(t)
	pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Ruiz","given":["Eva"]}]}`)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.visit("#/edit/Patient/" + pid)
	tb.wait("#editor")
	bad := `{"resourceType":"Patient","id":"` + pid + `","name":[{"family":"Ruiz","given":["Eva", 7]}],"birthDate":"1980-13-45","gender":"female"}`
	tb.setValue("#editor", indent(t, bad))
	tb.click("#save")
	tb.wait("#annotated .issue")
	for _, want := range []string{"Patient.birthDate", "Patient.name[0].given[1]"} {
		row := eval[string](tb, `(() => { const n = document.querySelector('#annotated .issue[data-expression="`+want+`"]');
			let p = n && n.previousElementSibling; while (p && p.classList.contains('issue')) p = p.previousElementSibling;
			return p ? p.dataset.path : ''; })()`)
		if row != want {
			t.Errorf("the issue of %s sits under row %q", want, row)
		}
	}
	if !eval[bool](tb, `[...document.querySelector('#feedback').childNodes].every(n => n.nodeType === Node.ELEMENT_NODE)`) {
		t.Errorf("stray text in the feedback: %q", tb.text("#feedback"))
	}
	tb.screenshot("edit-error")
	// Nothing was stored.
	if got := e.fhir(http.MethodGet, "/Patient/"+pid, "", http.StatusOK)["meta"].(map[string]any)["versionId"]; got != "1" {
		t.Errorf("a refused edit changed the resource: version %v", got)
	}
	// Fixed, it saves.
	tb.setValue("#editor", indent(t, strings.Replace(strings.Replace(bad, ", 7", "", 1), "1980-13-45", "1980-12-30", 1)))
	tb.click("#save")
	tb.waitFor(`document.querySelector('#resource-version') && document.querySelector('#resource-version').textContent === 'v2'`)
}

func TestBrowserEditConflictShowsTheNewerVersion(t *testing.T) {
	e := newEnv(t)
	pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Lind"}]}`)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.visit("#/edit/Patient/" + pid)
	tb.wait("#editor")
	// Someone else saves while the form is open.
	e.fhir(http.MethodPut, "/Patient/"+pid, `{"resourceType":"Patient","id":"`+pid+`","name":[{"family":"Lind"}],"gender":"male"}`, http.StatusOK)
	tb.setValue("#editor", indent(t, `{"resourceType":"Patient","id":"`+pid+`","name":[{"family":"Lindqvist"}]}`))
	tb.click("#save")
	tb.wait("#conflict")
	if got := tb.text("#conflict .msg"); !strings.Contains(got, "version 2") {
		t.Errorf("conflict message = %q", got)
	}
	if got := tb.text("#conflict .diff-table"); !strings.Contains(got, `"gender": "male"`) || !strings.Contains(got, "Lindqvist") {
		t.Errorf("the conflict does not show both versions: %q", got)
	}
	tb.screenshot("conflict")
	tb.click("#keep-mine")
	tb.waitFor(`document.querySelector('#resource-version') && document.querySelector('#resource-version').textContent === 'v3'`)
	if got := tb.text("#flash"); got != "Saved version 3." {
		t.Errorf("after saving: %q", got)
	}
	p := e.fhir(http.MethodGet, "/Patient/"+pid, "", http.StatusOK)
	if fam := p["name"].([]any)[0].(map[string]any)["family"]; fam != "Lindqvist" {
		t.Errorf("family after resolving = %v", fam)
	}
}

func TestBrowserUploadTransactionShowsEachEntry(t *testing.T) {
	e := newEnv(t)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.visit("#/upload")
	tb.wait("#bundle-text")
	bundle := `{"resourceType":"Bundle","type":"transaction","entry":[
	 {"fullUrl":"urn:uuid:6a1c4a3e-0c57-4b1e-9a0e-1b2f3c4d5e6f","resource":{"resourceType":"Patient","name":[{"family":"Haddad"}]},"request":{"method":"POST","url":"Patient"}},
	 {"resource":{"resourceType":"Observation","status":"final","code":{"text":"Weight"},"subject":{"reference":"urn:uuid:6a1c4a3e-0c57-4b1e-9a0e-1b2f3c4d5e6f"}},"request":{"method":"POST","url":"Observation"}}]}`
	tb.setValue("#bundle-text", bundle)
	tb.click("#upload-submit")
	tb.wait("#outcomes")
	statuses := eval[[]string](tb, `[...document.querySelectorAll('#outcomes td.status')].map(td => td.textContent)`)
	if len(statuses) != 2 || !strings.HasPrefix(statuses[0], "201") || !strings.HasPrefix(statuses[1], "201") {
		t.Errorf("entry statuses = %q", statuses)
	}
	if got := tb.text("#upload-summary"); got != "transaction-response: 2 of 2 entries succeeded" {
		t.Errorf("summary = %q", got)
	}
	tb.screenshot("upload")
	if got := e.fhir(http.MethodGet, "/Observation?subject.name=Haddad", "", http.StatusOK)["total"]; got != float64(1) {
		t.Errorf("the observation does not point at the new patient: total %v", got)
	}
	// A failing transaction stores nothing and says why.
	tb.setValue("#bundle-text", strings.Replace(bundle, `"status":"final"`, `"status":"final","bogus":1`, 1))
	tb.click("#upload-submit")
	tb.wait("#upload-result .msg.error")
	if got := e.fhir(http.MethodGet, "/Patient?family=Haddad", "", http.StatusOK)["total"]; got != float64(1) {
		t.Errorf("a failed transaction stored a patient: total %v", got)
	}
	// A batch runs each entry on its own: each shows its own outcome.
	tb.setValue("#bundle-text", `{"resourceType":"Bundle","type":"batch","entry":[
	 {"resource":{"resourceType":"Patient","name":[{"family":"Batchly"}]},"request":{"method":"POST","url":"Patient"}},
	 {"resource":{"resourceType":"Patient","birthDate":"not a date"},"request":{"method":"POST","url":"Patient"}}]}`)
	tb.click("#upload-submit")
	tb.waitFor(`document.querySelector('#upload-summary') && document.querySelector('#upload-summary').textContent.startsWith('batch-response')`)
	statuses = eval[[]string](tb, `[...document.querySelectorAll('#outcomes td.status')].map(td => td.textContent)`)
	if len(statuses) != 2 || !strings.HasPrefix(statuses[0], "201") || !strings.HasPrefix(statuses[1], "4") {
		t.Errorf("batch entry statuses = %q", statuses)
	}
	if got := tb.text("#outcomes tbody tr:nth-child(2) td:last-child"); !strings.Contains(got, "birthDate") {
		t.Errorf("the failed entry's outcome = %q", got)
	}
}

func TestBrowserDeleteAsksFirst(t *testing.T) {
	e := newEnv(t)
	pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Moreau"}]}`)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.visit("#/r/Patient/" + pid)
	tb.click("#delete")
	tb.click("#confirm-no")
	e.fhir(http.MethodGet, "/Patient/"+pid, "", http.StatusOK)
	tb.click("#delete")
	tb.click("#confirm-yes")
	tb.waitFor(`location.hash === '#/search/Patient'`)
	if got := tb.text("#flash"); got != "Deleted Patient/"+pid+"; its history is kept." {
		t.Errorf("after delete: %q", got)
	}
	e.fhir(http.MethodGet, "/Patient/"+pid, "", http.StatusGone)
	// The page of a deleted resource keeps its history.
	tb.visit("#/r/Patient/" + pid)
	tb.waitFor(`document.querySelector('#resource-version') && document.querySelector('#resource-version').textContent === 'deleted'`)
	if n := eval[int](tb, `document.querySelectorAll('#history tbody tr').length`); n != 2 {
		t.Errorf("history rows of the deleted patient = %d, want 2", n)
	}
	tb.click(`#history a[href$="/_history/1"]`)
	tb.waitFor(`document.querySelector('#resource-version') && document.querySelector('#resource-version').textContent === 'v1'`)
	if !strings.Contains(tb.text(".json"), "Moreau") {
		t.Error("the old version's JSON is not shown")
	}
	// An old version can be restored: it comes back as version 3.
	tb.click("#restore")
	tb.click("#confirm-yes")
	tb.waitFor(`document.querySelector('#resource-version') && document.querySelector('#resource-version').textContent === 'v3'`)
	if got := tb.text("#flash"); got != "Restored version 1 as version 3." {
		t.Errorf("after restoring: %q", got)
	}
	p := e.fhir(http.MethodGet, "/Patient/"+pid, "", http.StatusOK)
	if fam := p["name"].([]any)[0].(map[string]any)["family"]; fam != "Moreau" {
		t.Errorf("restored family = %v", fam)
	}
}

func TestBrowserScopesHideWhatTheTokenCannotDo(t *testing.T) {
	e := newEnv(t)
	pid := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Sato"}]}`)
	tb := newTab(t, e)
	tb.signIn(e.tokenFor("system/*.rs"))
	if got := tb.text("#scopes"); got != "system/*.rs" {
		t.Errorf("scopes = %q", got)
	}
	for _, sel := range []string{"#nav-new", "#nav-upload"} {
		if !eval[bool](tb, `document.querySelector('`+sel+`').hidden`) {
			t.Errorf("%s is shown to a read-only token", sel)
		}
	}
	tb.visit("#/r/Patient/" + pid)
	tb.wait("#resource-actions")
	if n := eval[int](tb, `document.querySelectorAll('#edit, #delete').length`); n != 0 {
		t.Errorf("a read-only token sees %d edit/delete buttons", n)
	}
	// A bad token is refused at sign-in.
	tb2 := newTab(t, e)
	tb2.open("#/signin")
	tb2.wait("#token")
	tb2.setValue("#token", "not-a-token")
	tb2.click("#signin-submit")
	tb2.wait("#signin-status .msg.error")
	if got := eval[string](tb2, `sessionStorage.getItem('fhirstore.console.token') || ''`); got != "" {
		t.Errorf("a refused token stays in sessionStorage")
	}
}

// xssPayloads are resource values that would run script if the console
// ever parsed them as HTML or followed them as links.
var xssPayloads = []string{
	`<script>window.__xss='family'</script>`,
	`<img src=x onerror="window.__xss='img'">`,
	`javascript:window.__xss='link'`,
}

func TestBrowserResourceContentNeverRunsScript(t *testing.T) {
	// The server refuses such a narrative now (txt-1); a database written
	// before it checked the core invariants may still hold one.
	v, err := fhirschema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvExport(t, true, func(o *store.Options) { o.Validate = schemacheck.Validator(v.WithoutInvariants()) })
	narrative := `<div xmlns="http://www.w3.org/1999/xhtml"><p id="main">Hello <b>there</b></p>` +
		`<script>window.__xss='narrative'</script>` +
		`<a id="nav" href="javascript:window.__xss='narrative-link'">click</a>` +
		`<a href="https://example.org/x">ok</a>` +
		`<img src="x" onerror="window.__xss='narrative-img'"/>` +
		`<p style="position:fixed" onclick="window.__xss='onclick'">styled</p></div>`
	res := map[string]any{
		"resourceType": "Patient",
		"text":         map[string]any{"status": "generated", "div": narrative},
		"name":         []any{map[string]any{"family": xssPayloads[0], "given": []any{xssPayloads[1]}}},
		"telecom":      []any{map[string]any{"system": "url", "value": xssPayloads[2]}},
		"link":         []any{map[string]any{"type": "seealso", "other": map[string]any{"reference": xssPayloads[2], "display": xssPayloads[0]}}},
	}
	body, _ := json.Marshal(res)
	pid := e.create("Patient", string(body))
	oid := e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":`+jsString(xssPayloads[0])+`},"subject":{"reference":"Patient/`+pid+`","display":`+jsString(xssPayloads[1])+`}}`)
	tb := newTab(t, e)
	tb.signIn(e.token)
	noScript := func(where string) {
		t.Helper()
		if v := eval[string](tb, `String(window.__xss || '')`); v != "" {
			t.Fatalf("%s: script from a resource ran (%s)", where, v)
		}
	}
	tb.visit("#/search/Patient?_count=10")
	tb.wait("#results-table")
	if got := tb.text("#results-table tbody td:nth-child(2)"); !strings.Contains(got, "<script>") {
		t.Errorf("the name is not shown as text: %q", got)
	}
	noScript("search results")
	tb.visit("#/search/Observation?_count=10")
	tb.wait("#results-table")
	noScript("observation results")
	tb.click("#results-table tbody td:last-child a, #results-table tbody td:nth-child(5) a")
	tb.wait("#resource-id")
	noScript("following a subject link")

	tb.visit("#/r/Patient/" + pid)
	tb.wait(".json")
	if n := eval[int](tb, `document.querySelectorAll('a[href^="javascript" i], [onerror], [onclick], script:not([src])').length`); n != 0 {
		t.Errorf("the JSON view holds %d live payloads", n)
	}
	if !strings.Contains(tb.text(".json"), xssPayloads[2]) {
		t.Error("the javascript: value is not shown as text")
	}
	noScript("JSON view")

	tb.visit("#/r/Patient/" + pid + "?tab=narrative")
	tb.wait("#narrative")
	if got := tb.text("#narrative p"); got != "Hello there" {
		t.Errorf("narrative text = %q", got)
	}
	checks := map[string]string{
		"scripts":              `document.querySelectorAll('#narrative script').length`,
		"event handlers":       `document.querySelectorAll('#narrative [onerror], #narrative [onclick]').length`,
		"style attributes":     `document.querySelectorAll('#narrative [style]').length`,
		"javascript: links":    `[...document.querySelectorAll('#narrative a')].filter(a => (a.getAttribute('href') || '').toLowerCase().startsWith('javascript')).length`,
		"images from the web":  `document.querySelectorAll('#narrative img[src]:not([src^="data:image/"])').length`,
		"ids (DOM clobbering)": `document.querySelectorAll('#narrative [id], #narrative [name]').length`,
	}
	for what, expr := range checks {
		if n := eval[int](tb, expr); n != 0 {
			t.Errorf("the narrative keeps %d %s", n, what)
		}
	}
	if href := eval[string](tb, `document.querySelectorAll('#narrative a')[1].getAttribute('href')`); href != "https://example.org/x" {
		t.Errorf("a safe link lost its href: %q", href)
	}
	tb.do("click the narrative's javascript link", chromedpClick("#narrative a"))
	noScript("narrative")
	tb.screenshot("narrative")

	tb.visit("#/r/Observation/" + oid + "?tab=history")
	tb.wait("#history")
	noScript("history")
	tb.visit("#/")
	tb.wait("#changes table")
	noScript("home")
}

func TestBrowserExportDownloadsTheFiles(t *testing.T) {
	e := newEnv(t)
	for _, fam := range []string{"Ito", "Baker"} {
		e.create("Patient", `{"resourceType":"Patient","name":[{"family":"`+fam+`"}]}`)
	}
	e.create("Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.click("#nav-export")
	tb.wait("#export-form")
	tb.setValue("#export-types", "Patient,Observation")
	tb.click("#export-start")
	tb.wait("#export-files")
	files := eval[[]string](tb, `[...document.querySelectorAll('#export-files li')].map(li => li.firstChild.textContent.trim())`)
	if !slices.Equal(files, []string{"Observation (1)", "Patient (2)"}) && !slices.Equal(files, []string{"Patient (2)", "Observation (1)"}) {
		t.Errorf("export files = %q", files)
	}
	tb.screenshot("export")
	// The download fetches the file with the token.
	got := eval[string](tb, `(async () => {
		const li = [...document.querySelectorAll('#export-files li')].find(li => li.textContent.startsWith('Patient'));
		const seen = new Promise((resolve) => {
			const orig = URL.createObjectURL;
			URL.createObjectURL = (blob) => { blob.text().then(resolve); return orig.call(URL, blob); };
		});
		li.querySelector('button').click();
		return await seen;
	})()`, chromedp.EvalAwaitPromise)
	if n := strings.Count(strings.TrimSpace(got), "\n") + 1; n != 2 || !strings.Contains(got, `"Ito"`) {
		t.Errorf("downloaded Patient file = %q", got)
	}
	// A token that may read nothing is not offered the export.
	tb2 := newTab(t, e)
	tb2.signIn(e.tokenFor("system/*.c"))
	if !eval[bool](tb2, `document.querySelector('#nav-export').hidden`) {
		t.Error("Export is offered to a token that reads nothing")
	}
}

func TestBrowserExportIsOfferedOnlyWhenTheServerListsIt(t *testing.T) {
	e := newEnvExport(t, false)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.visit("#/export")
	tb.wait("main .msg.info")
	if !eval[bool](tb, `document.querySelector('#nav-export').hidden`) {
		t.Error("Export is offered by a server without $export")
	}
}

func TestBrowserCreateThenSignOut(t *testing.T) {
	e := newEnv(t)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.click("#nav-new")
	tb.wait("#editor")
	tb.waitFor(`document.querySelectorAll('#new-type option').length > 100`)
	tb.setValue("#new-type", "Practitioner")
	tb.waitFor(`document.querySelector('#editor') && document.querySelector('#editor').value.includes('Practitioner')`)
	tb.setValue("#editor", indent(t, `{"resourceType":"Practitioner","name":[{"family":"Osei","given":["Ama"]}]}`))
	tb.click("#save")
	tb.waitFor(`location.hash.startsWith('#/r/Practitioner/') && document.querySelector('#resource-version') !== null`)
	id := tb.text("#resource-id")
	if got := e.fhir(http.MethodGet, "/Practitioner/"+id, "", http.StatusOK)["name"].([]any)[0].(map[string]any)["family"]; got != "Osei" {
		t.Errorf("created family = %v", got)
	}
	tb.click("#signout")
	tb.wait("#token")
	if got := eval[string](tb, `JSON.stringify(Object.keys(sessionStorage).filter(k => !k.endsWith('metadata')))`); got != "[]" {
		t.Errorf("sign-out leaves %s in sessionStorage", got)
	}
}

// indent pretty-prints JSON as a person would type it in the editor.
func indent(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
