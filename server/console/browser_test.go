package console_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// screenshots, when set, makes the browser tests save the main pages to
// docs/console (the pictures the README shows).
var screenshots = flag.Bool("screenshots", false, "save screenshots of the console's pages to docs/console")

// chromeNames are the executables tried, in order, when CHROME is unset.
var chromeNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"}

// findChrome locates a Chromium: $CHROME, or the first of chromeNames on PATH.
func findChrome() string {
	if p := os.Getenv("CHROME"); p != "" {
		return p
	}
	for _, n := range chromeNames {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserCancel context.CancelFunc
	browserErr    error
)

// browser is one headless Chromium shared by the tests of this binary;
// each test opens its own tab (its own sessionStorage).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := findChrome()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium found (CI=true): install it with apt-get install -y chromium, or set CHROME")
		}
		t.Skip("no Chromium found: install it (apt-get install -y chromium) or set CHROME to run the console's browser tests")
	}
	browserOnce.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.DisableGPU,
			chromedp.WindowSize(1280, 900),
			chromedp.Flag("no-proxy-server", true),
		)
		if os.Geteuid() == 0 {
			opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		browserErr = chromedp.Do(ctx) // start the browser
		browserCtx = ctx
		browserCancel = func() { cancel(); cancelAlloc() }
	})
	if browserErr != nil {
		t.Fatalf("start Chromium %s: %v", path, browserErr)
	}
	return browserCtx
}

// tab is one browser tab on an env's server. It fails the test on any
// uncaught JavaScript exception and on any dialog (alert, confirm...).
type tab struct {
	t      *testing.T
	ctx    context.Context
	e      *env
	mu     sync.Mutex
	errors []string
	// requests counts the requests the page sent to the server's APIs
	// (FHIR, and the console's own).
	requests int
}

func newTab(t *testing.T, e *env) *tab {
	t.Helper()
	tb := &tab{t: t, e: e}
	ctx, cancel := chromedp.NewContext(browser(t), chromedp.WithListener(tb.listen))
	ctx, cancelTimeout := context.WithTimeout(ctx, 45*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for _, msg := range tb.errors {
			t.Error(msg)
		}
	})
	tb.ctx = ctx
	return tb
}

func (tb *tab) listen(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = "uncaught JavaScript exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			msg += " " + ev.ExceptionDetails.Exception.Description
		}
	case *network.EventRequestWillBeSent:
		if strings.Contains(ev.Request.URL, "/fhir/r4") || strings.Contains(ev.Request.URL, "/console/api/") {
			tb.mu.Lock()
			tb.requests++
			tb.mu.Unlock()
		}
		return
	case *page.EventJavascriptDialogOpening:
		msg = "a JavaScript dialog opened: " + ev.Message
		go func() {
			_, _ = chromedp.Call(tb.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}()
	default:
		return
	}
	tb.mu.Lock()
	tb.errors = append(tb.errors, msg)
	tb.mu.Unlock()
}

// do runs actions, failing the test on error.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](tb *tab, expr string, opts ...chromedp.EvaluateOption) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the text content of the first element matching a CSS selector.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	tb.do("wait for "+sel, chromedp.WaitReady(chromedp.CSS(sel)))
	v, err := chromedp.Run(tb.ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		tb.t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}

// open loads a console route (a fresh page load).
func (tb *tab) open(route string) {
	tb.t.Helper()
	tb.do("open "+route, chromedp.Navigate(tb.e.srv.URL+"/console/"+route))
}

// visit changes the route of the loaded console, as a link does.
func (tb *tab) visit(route string) {
	tb.t.Helper()
	tb.do("visit "+route, chromedp.Evaluate[chromedp.Void]("location.hash = "+jsString(route)))
}

// wait waits until a CSS selector matches a visible element.
func (tb *tab) wait(sel string) {
	tb.t.Helper()
	tb.do("wait for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// waitFor waits until a JavaScript predicate is true.
func (tb *tab) waitFor(pred string) {
	tb.t.Helper()
	tb.do("wait until "+pred, chromedp.Poll[chromedp.Void](pred, chromedp.WithPollingTimeout(20*time.Second)))
}

// signIn pastes a token into the sign-in form and waits for the home page.
func (tb *tab) signIn(token string) {
	tb.t.Helper()
	tb.open("#/signin")
	tb.wait("#token")
	tb.do("sign in",
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#facts")))
}

// setValue sets a form field's value as typing would (with input events).
func (tb *tab) setValue(sel, value string) {
	tb.t.Helper()
	tb.do("set "+sel, chromedp.Evaluate[chromedp.Void](`(() => { const el = document.querySelector(`+jsString(sel)+`);
		el.value = `+jsString(value)+`; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); })()`))
}

func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.do("click "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// screenshot saves the page to docs/console/name.png when -screenshots is set.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	if !*screenshots {
		return
	}
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// apiRequests is how many requests the page has sent to the FHIR API and
// the console's API so far.
func (tb *tab) apiRequests() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.requests
}

// screenshotOf saves the element a CSS selector matches to
// docs/console/name.png when -screenshots is set.
func (tb *tab) screenshotOf(sel, name string) {
	tb.t.Helper()
	if !*screenshots {
		return
	}
	png, err := chromedp.Run(tb.ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "console", name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// screenshotTop saves the top of the page, width by height pixels, to
// docs/console/name.png when -screenshots is set; prepare, when not nil,
// runs once the window has that size (to hover something, say).
func (tb *tab) screenshotTop(name string, width, height int64, prepare func()) {
	tb.t.Helper()
	if !*screenshots {
		return
	}
	tb.do("resize for "+name, chromedp.EmulateViewport(width, height), chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	if prepare != nil {
		prepare()
		tb.do("scroll up", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	}
	png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	tb.do("restore the window", chromedp.EmulateReset())
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "console", name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// jsString quotes s as a JavaScript string literal (JSON escapes <, > and
// the line separators too).
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// closeBrowser ends the shared Chromium, if one was started.
func closeBrowser() {
	if browserCancel != nil {
		browserCancel()
	}
}

// chromedpClick clicks the first element a CSS selector matches.
func chromedpClick(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel))
}
