package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserPageLoadTimes loads the Synthea sample (about 3,300
// resources) and times full page loads of the console's main pages in
// Chromium: from navigation to the page's data on screen. It runs when
// FHIRSTORE_CONSOLE_PERF=1 (it takes about a minute); docs/performance.md
// records its figures.
func TestBrowserPageLoadTimes(t *testing.T) {
	if os.Getenv("FHIRSTORE_CONSOLE_PERF") != "1" {
		t.Skip("set FHIRSTORE_CONSOLE_PERF=1 to time the console's pages at 3k resources")
	}
	e := newEnv(t)
	total := loadSynthea(t, e)
	pid := e.fhir(http.MethodGet, "/Patient?_count=1", "", http.StatusOK)["entry"].([]any)[0].(map[string]any)["resource"].(map[string]any)["id"].(string)
	tb := newTab(t, e)
	tb.signIn(e.token)
	pages := []struct{ name, route, ready string }{
		{"home: counts", "#/", "#counts tbody tr"},
		{"home: counts and latest changes", "#/", "#changes tbody tr"},
		{"search Patient", "#/search/Patient?_count=20", "#results-table tbody tr"},
		{"search Observation (code, value, date, subject)", "#/search/Observation?_count=50&_sort=-date", "#results-table tbody tr"},
		{"search Encounter by patient name (chain)", "#/search/Encounter?patient.family=Jerde200&_count=20", "#results-table tbody tr"},
		{"resource page (Patient JSON)", "#/r/Patient/" + pid, ".json .ln"},
		{"history with diff", "#/r/Patient/" + pid + "?tab=history", "#history tbody tr"},
		{"referenced by (counts per reference)", "#/r/Patient/" + pid + "?tab=refs", "#refcounts tbody tr"},
		{"edit", "#/edit/Patient/" + pid, "#editor"},
	}
	var rows []string
	for _, p := range pages {
		loads, navs := timePage(tb, p.route, p.ready)
		rows = append(rows, fmt.Sprintf("| %s | %.0f | %.0f | %.0f |", p.name, ms(loads[len(loads)/2]), ms(loads[len(loads)-1]), ms(navs[len(navs)/2])))
		if med := loads[len(loads)/2]; med > 300*time.Millisecond {
			t.Errorf("%s: median page load %v, over 300 ms", p.name, med)
		}
	}
	t.Logf("%d resources\n| page | full load, median ms | full load, max ms | link inside the console, median ms |\n|---|---:|---:|---:|\n%s", total, strings.Join(rows, "\n"))
}

// timePage loads a console route seven times, coming from another page of
// the server, and follows a link to it inside the console seven times;
// each time ends when the page's data is on screen. Both lists come back
// sorted.
func timePage(tb *tab, route, ready string) (loads, navs []time.Duration) {
	tb.t.Helper()
	for range 7 {
		tb.do("leave", chromedp.Navigate(tb.e.srv.URL+"/healthz"))
		start := time.Now()
		tb.do("load "+route, chromedp.Navigate(tb.e.srv.URL+"/console/"+route), chromedp.WaitReady(chromedp.CSS(ready)))
		loads = append(loads, time.Since(start))
		tb.visit("#/elsewhere")
		tb.wait("main[data-view=elsewhere]")
		start = time.Now()
		tb.visit(route)
		tb.do("show "+route, chromedp.WaitReady(chromedp.CSS(ready)))
		navs = append(navs, time.Since(start))
	}
	slices.Sort(loads)
	slices.Sort(navs)
	return loads, navs
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadSynthea posts the Synthea sample's Bundles and returns the number of
// resources stored.
func loadSynthea(t *testing.T, e *env) int {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "synthea")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Synthea files in %s: %v", dir, err)
	}
	slices.SortFunc(files, func(a, b string) int { return infoFirst(a) - infoFirst(b) })
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if status, _, body := e.call(http.MethodPost, "/fhir/r4", string(b), nil); status != http.StatusOK {
			t.Fatalf("load %s: %d %.300s", f, status, body)
		}
	}
	status, _, body := e.call(http.MethodGet, "/console/api/overview", "", nil)
	if status != http.StatusOK {
		t.Fatalf("overview: %d", status)
	}
	var ov overview
	if err := json.Unmarshal(body, &ov); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ti := range ov.Types {
		if ti.Count != nil && ti.Type != "AuditEvent" {
			n += int(*ti.Count)
		}
	}
	return n
}

// infoFirst orders the hospital and practitioner batches before the
// patients' transactions, which refer to them.
func infoFirst(name string) int {
	if strings.Contains(name, "Information") {
		return 0
	}
	return 1
}

// TestBrowserChartRenderTime times the chart of the richest Synthea
// patient in Chromium, with the Synthea sample loaded: from the navigation
// until every section is drawn (#chart[data-state=ready]), as a full page
// load coming from another page of the server and as a link followed
// inside the console, and counts the API requests the page sends. It runs
// when FHIRSTORE_CONSOLE_PERF=1; docs/performance.md records its figures.
func TestBrowserChartRenderTime(t *testing.T) {
	if os.Getenv("FHIRSTORE_CONSOLE_PERF") != "1" {
		t.Skip("set FHIRSTORE_CONSOLE_PERF=1 to time the patient chart")
	}
	e := newEnv(t)
	total := loadSynthea(t, e)
	rec := richestSynthea(t)
	family := str(rec.byType["Patient"][0], "name", 0, "family")
	pid := str(e.fhir(http.MethodGet, "/Patient?family="+family, "", http.StatusOK), "entry", 0, "resource", "id")
	tb := newTab(t, e)
	tb.signIn(e.token)
	route := "#/chart/" + pid
	const ready = `#chart[data-state="ready"]`
	var loads, navs []time.Duration
	var requests []int
	var pageLoad, pageRender []int
	for range 7 {
		tb.do("leave", chromedp.Navigate(tb.e.srv.URL+"/healthz"))
		before := tb.apiRequests()
		start := time.Now()
		tb.do("load the chart", chromedp.Navigate(tb.e.srv.URL+"/console/"+route), chromedp.WaitReady(chromedp.CSS(ready)))
		loads = append(loads, time.Since(start))
		requests = append(requests, tb.apiRequests()-before)
		pageLoad = append(pageLoad, eval[int](tb, `+document.querySelector('#chart').dataset.loadMs`))
		pageRender = append(pageRender, eval[int](tb, `+document.querySelector('#chart').dataset.renderMs`))
		tb.visit("#/elsewhere")
		tb.wait("main[data-view=elsewhere]")
		start = time.Now()
		tb.visit(route)
		tb.do("show the chart", chromedp.WaitReady(chromedp.CSS(ready)))
		navs = append(navs, time.Since(start))
	}
	slices.Sort(loads)
	slices.Sort(navs)
	slices.Sort(pageLoad)
	slices.Sort(pageRender)
	t.Logf("%d resources; chart of %s (%d entries in its bundle)\n"+
		"| measure | median | max |\n|---|---:|---:|\n"+
		"| full page load until the chart is drawn, ms | %.0f | %.0f |\n"+
		"| link inside the console until the chart is drawn, ms | %.0f | %.0f |\n"+
		"| of which the API answer (the page's own figure), ms | %d | %d |\n"+
		"| of which building the page (the page's own figure), ms | %d | %d |\n"+
		"API requests per chart: %v",
		total, filepath.Base(rec.file), rec.entries, ms(loads[len(loads)/2]), ms(loads[len(loads)-1]),
		ms(navs[len(navs)/2]), ms(navs[len(navs)-1]), pageLoad[len(pageLoad)/2], pageLoad[len(pageLoad)-1],
		pageRender[len(pageRender)/2], pageRender[len(pageRender)-1], requests)
}
