package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fhirstore/server/subscription"
)

// TestBrowserSubscriptionsShowStatusEventsAndErrors: the Subscriptions
// page lists each subscription with its status and last error; a
// topic-based one shows how many events it has had and, opened, its
// latest events with their focus.
func TestBrowserSubscriptionsShowStatusEventsAndErrors(t *testing.T) {
	e := newEnvWith(t, envOptions{subscriptions: true})
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(rcv.Close)
	topic := e.create("Subscription", fmt.Sprintf(`{"resourceType":"Subscription","meta":{"profile":[%q]},"status":"requested","reason":"visits",
		"criteria":"https://fhirstore.dev/fhir/SubscriptionTopic/encounter-finished",
		"channel":{"type":"rest-hook","endpoint":%q,"payload":"application/fhir+json"}}`, subscription.ProfileSubscription, rcv.URL+"/visits"))
	broken := e.create("Subscription", fmt.Sprintf(`{"resourceType":"Subscription","status":"error","reason":"labs","error":"the endpoint answered 500",
		"criteria":"Observation?code=http://loinc.org|2345-7","channel":{"type":"rest-hook","endpoint":%q,"payload":"application/fhir+json"}}`, rcv.URL+"/labs"))
	var encounters []string
	for range 2 {
		encounters = append(encounters, e.create("Encounter", `{"resourceType":"Encounter","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"HH"}}`))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := e.fhir(http.MethodGet, "/Subscription/"+topic+"/$status", "", http.StatusOK)
		if strings.Contains(fmt.Sprint(st), "events-since-subscription-start valueString:2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the topic subscription did not count 2 events within 20s: %v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb := newTab(t, e)
	tb.signIn(e.token)
	tb.click("#nav-subscriptions")
	tb.wait("#subscriptions")
	row := func(id string) string { return `#subscriptions tr[data-id="` + id + `"]` }
	tb.waitFor(`document.querySelector('` + row(topic) + ` .sub-events').textContent === '2'`)
	if got := tb.text(row(topic) + " .sub-status"); got != "active" {
		t.Errorf("the topic subscription's status = %q, want active", got)
	}
	if got := tb.text(row(broken) + " .sub-status"); got != "error" {
		t.Errorf("the broken subscription's status = %q", got)
	}
	if got := tb.text(row(broken) + " .sub-error"); got != "the endpoint answered 500" {
		t.Errorf("the broken subscription's error = %q", got)
	}
	tb.click(row(topic) + " .sub-toggle")
	tb.wait(".sub-events-table")
	focus := eval[[]string](tb, `[...document.querySelectorAll('.sub-events-table tbody td:nth-child(3)')].map(td => td.textContent)`)
	numbers := eval[[]string](tb, `[...document.querySelectorAll('.sub-events-table tbody td:nth-child(1)')].map(td => td.textContent)`)
	if strings.Join(numbers, ",") != "2,1" || strings.Join(focus, ",") != "Encounter/"+encounters[1]+",Encounter/"+encounters[0] {
		t.Errorf("events shown: numbers %q, focus %q; want 2,1 on the two Encounters, newest first", numbers, focus)
	}
	tb.screenshot("subscriptions")
}
