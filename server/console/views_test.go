package console_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserViewsRunAViewAndDownloadItsRows: the Views page runs a pasted
// or a stored ViewDefinition, shows its first rows as a table and
// downloads them as CSV.
func TestBrowserViewsRunAViewAndDownloadItsRows(t *testing.T) {
	e := newEnv(t)
	for _, fam := range []string{"Ito", "Baker"} {
		e.create("Patient", `{"resourceType":"Patient","name":[{"use":"official","family":"`+fam+`"}],"birthDate":"1970-01-02"}`)
	}
	e.create("ViewDefinition", `{"resourceType":"ViewDefinition","name":"families","status":"active","resource":"Patient",
		"select":[{"column":[{"name":"family","path":"name.family.first()"}]}]}`)
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.click("#nav-views")
	tb.wait("#views-form")
	tb.click("#views-run")
	tb.wait("#views-table")
	heads := eval[[]string](tb, `[...document.querySelectorAll('#views-table th')].map(th => th.textContent)`)
	if !slices.Equal(heads, []string{"id", "family", "birth_date"}) {
		t.Errorf("columns = %q", heads)
	}
	families := eval[[]string](tb, `[...document.querySelectorAll('#views-table tbody td:nth-child(2)')].map(td => td.textContent).sort()`)
	if !slices.Equal(families, []string{"Baker", "Ito"}) {
		t.Errorf("families = %q", families)
	}
	tb.screenshot("views")
	got := eval[string](tb, `(async () => {
		const seen = new Promise((resolve) => {
			const orig = URL.createObjectURL;
			URL.createObjectURL = (blob) => { blob.text().then(resolve); return orig.call(URL, blob); };
		});
		document.querySelector('#views-csv').click();
		return await seen;
	})()`, chromedp.EvalAwaitPromise)
	if !strings.HasPrefix(got, "id,family,birth_date\n") || strings.Count(got, "\n") != 3 {
		t.Errorf("downloaded CSV = %q", got)
	}
	// The stored view, picked from the list.
	tb.waitFor(`document.querySelectorAll('#views-stored option').length === 2`)
	tb.setValue("#views-stored", eval[string](tb, `document.querySelectorAll('#views-stored option')[1].value`))
	tb.click("#views-run")
	tb.waitFor(`document.querySelector('#views-table th') && document.querySelector('#views-table th').textContent === 'family'`)
	// A bad view shows its OperationOutcome.
	tb.setValue("#views-stored", "")
	tb.setValue("#views-json", `{"resourceType":"ViewDefinition","resource":"Patient","select":[{"column":[{"name":"x","path":"name.where("}]}]}`)
	tb.click("#views-run")
	tb.wait("#views-out .msg.error")
	if got := tb.text("#views-out"); !strings.Contains(got, "does not compile") {
		t.Errorf("error shown = %q", got)
	}
}
