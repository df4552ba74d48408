package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

func TestBrowserSignInShowsTenantScopesAndHome(t *testing.T) {
	e := newEnv(t)
	e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Ng","given":["Ana"]}],"birthDate":"1960-02-03","gender":"female"}`)
	e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Okafor"}]}`)
	tb := newTab(t, e)
	tb.signIn(e.token)
	if got := tb.text("#tenant"); got != e.tenant {
		t.Errorf("tenant shown = %q, want %q", got, e.tenant)
	}
	if got := tb.text("#scopes"); got != "system/*.*" {
		t.Errorf("scopes shown = %q", got)
	}
	if got := tb.text("#counts tr[data-type=Patient] td.num"); got != "2" {
		t.Errorf("Patient count = %q, want 2", got)
	}
	if got := tb.text("#fact-engine"); got != e.store.Engine() {
		t.Errorf("engine = %q, want %q", got, e.store.Engine())
	}
	if got := tb.text("#fact-version"); got != "test-version" {
		t.Errorf("version = %q", got)
	}
	tb.wait("#changes table")
	if got := tb.text("#changes"); !strings.Contains(got, "Patient/") {
		t.Errorf("latest changes do not list the patients: %q", got)
	}
	if tok := eval[string](tb, `sessionStorage.getItem('fhirstore.console.token')`); tok != e.token {
		t.Errorf("the token is not in sessionStorage")
	}
	if c := eval[string](tb, `document.cookie`); c != "" {
		t.Errorf("the console set cookies: %q", c)
	}
	tb.screenshot("home")
}

func TestBrowserSignInWithClientCredentials(t *testing.T) {
	e := newEnv(t)
	id, secret := e.client("system/*.rs")
	tb := newTab(t, e)
	tb.open("#/signin")
	tb.wait("#signin-client")
	tb.setValue("#client-id", id)
	tb.setValue("#client-secret", "wrong")
	tb.click("#signin-client button[type=submit]")
	tb.wait("#signin-status .msg.error")
	tb.setValue("#client-secret", secret)
	tb.click("#signin-client button[type=submit]")
	tb.wait("#facts")
	if got := tb.text("#scopes"); got != "system/*.rs" {
		t.Errorf("scopes = %q", got)
	}
	if got := tb.text("#tenant"); got != e.tenant {
		t.Errorf("tenant = %q", got)
	}
	if tok := eval[string](tb, `sessionStorage.getItem('fhirstore.console.token') || ''`); strings.Count(tok, ".") != 2 {
		t.Errorf("no token kept after signing in with a client: %q", tok)
	}
}

func TestBrowserOpeningTheServerShowsTheConsole(t *testing.T) {
	e := newEnv(t)
	tb := newTab(t, e)
	tb.do("open the server's root", chromedp.Navigate(e.srv.URL+"/"))
	tb.wait("#token")
	if loc := eval[string](tb, `location.pathname + location.hash`); loc != "/console/#/signin" {
		t.Errorf("the browser is at %q", loc)
	}
}
