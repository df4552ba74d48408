package subscription_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"fhirstore/server/subscription"
	"fhirstore/store"
)

func obs(code string, extra string) string {
	return `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"` + code + `"}]}` + extra + `}`
}

func TestNotificationsFollowEachParameterType(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	chained := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Chainfamily"}]}`)
	other := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Otherfamily"}]}`)
	tests := []struct {
		name, criteria, typ, match, miss string
	}{
		{"token", "Observation?code=http://loinc.org|8867-4", "Observation", obs("8867-4", ""), obs("1234-5", "")},
		{"string prefix", "Patient?family=smi", "Patient",
			`{"resourceType":"Patient","name":[{"family":"Smithson"}]}`, `{"resourceType":"Patient","name":[{"family":"Jones"}]}`},
		{"string exact", "Patient?family:exact=Smith", "Patient",
			`{"resourceType":"Patient","name":[{"family":"Smith"}]}`, `{"resourceType":"Patient","name":[{"family":"Smithers"}]}`},
		{"reference", "Observation?subject=Patient/p1", "Observation",
			obs("1-1", `,"subject":{"reference":"Patient/p1"}`), obs("1-1", `,"subject":{"reference":"Patient/p2"}`)},
		{"date", "Patient?birthdate=ge2000-01-01", "Patient",
			`{"resourceType":"Patient","birthDate":"2005-03-04"}`, `{"resourceType":"Patient","birthDate":"1990-01-01"}`},
		{"quantity", "Observation?value-quantity=gt100", "Observation",
			obs("2-2", `,"valueQuantity":{"value":120,"unit":"mg"}`), obs("2-2", `,"valueQuantity":{"value":80,"unit":"mg"}`)},
		{"missing", "Observation?value-quantity:missing=true&code=3-3", "Observation",
			obs("3-3", ""), obs("3-3", `,"valueQuantity":{"value":1}`)},
		{"token not", "Patient?gender:not=male&family=Notted", "Patient",
			`{"resourceType":"Patient","gender":"female","name":[{"family":"Notted"}]}`, `{"resourceType":"Patient","gender":"male","name":[{"family":"Notted"}]}`},
		{"chain", "Observation?subject.family=Chainfamily", "Observation",
			obs("4-4", `,"subject":{"reference":"Patient/`+chained+`"}`), obs("4-4", `,"subject":{"reference":"Patient/`+other+`"}`)},
	}
	path := func(name string) string { return "/" + strings.ReplaceAll(name, " ", "-") + "/" }
	for _, tt := range tests {
		e.subscribe(tt.criteria, rcv.url(path(tt.name)), subscription.PayloadJSON)
	}
	matches, misses := map[string]string{}, map[string]string{}
	for _, tt := range tests { // the miss first: had it matched, it would arrive first
		misses[tt.name] = e.create(tt.typ, tt.miss)
		matches[tt.name] = e.create(tt.typ, tt.match)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rcv.wait(t, tt.name+" match", func(d []delivery) bool { return mentions(onPath(d, path(tt.name)), matches[tt.name]) })
			if mine := onPath(got, path(tt.name)); mentions(mine, misses[tt.name]) {
				t.Errorf("%s: the non-matching %s was delivered: %+v", tt.criteria, misses[tt.name], mine)
			}
		})
	}
}

func TestPayloadAndHeaderOptionsShapeTheRequest(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	tests := []struct {
		name, payload, method, contentType, bodyStart string
		typed                                         bool // PUT to [endpoint]/Observation/id
	}{
		{"notify-only", "", http.MethodPost, "", "", false},
		{"json", subscription.PayloadJSON, http.MethodPut, subscription.PayloadJSON, `{"resourceType":"Observation"`, true},
		{"xml", subscription.PayloadXML, http.MethodPut, subscription.PayloadXML, `<Observation`, true},
	}
	for _, tt := range tests {
		e.subscribe("Observation?code=5-5", rcv.url("/"+tt.name), tt.payload, "X-Test: "+tt.name, "Authorization: Bearer secret-"+tt.name)
	}
	id := e.create("Observation", obs("5-5", ""))
	got := rcv.wait(t, "three deliveries", func(d []delivery) bool { return len(d) == 3 })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mine := onPath(got, "/"+tt.name)
			if len(mine) != 1 {
				t.Fatalf("deliveries: %+v", mine)
			}
			d := mine[0]
			wantPath := "/" + tt.name
			if tt.typed {
				wantPath += "/Observation/" + id
			}
			if d.Method != tt.method || d.Path != wantPath || d.ContentType != tt.contentType {
				t.Errorf("got %s %s (%s), want %s %s (%s)", d.Method, d.Path, d.ContentType, tt.method, wantPath, tt.contentType)
			}
			if !strings.HasPrefix(strings.TrimPrefix(d.Body, `<?xml version="1.0" encoding="UTF-8"?>`), tt.bodyStart) || (tt.bodyStart == "") != (d.Body == "") {
				t.Errorf("body %q, want one starting %q", d.Body, tt.bodyStart)
			}
			if d.Header.Get("X-Test") != tt.name || d.Header.Get("Authorization") != "Bearer secret-"+tt.name {
				t.Errorf("headers %v", d.Header)
			}
		})
	}
}

func TestDeleteNotifiesWhenTheDeletedVersionMatched(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	e.subscribe("Observation?code=6-6", rcv.url("/hook"), subscription.PayloadJSON)
	a := e.create("Observation", obs("6-6", ""))
	b := e.create("Observation", obs("7-7", ""))
	for _, id := range []string{a, b} {
		if r := e.do(http.MethodDelete, "/Observation/"+id, ""); r.Status != http.StatusNoContent && r.Status != http.StatusOK {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
	}
	c := e.create("Observation", obs("6-6", ""))
	got := rcv.wait(t, "the last create", func(d []delivery) bool { return mentions(d, c) })
	want := []string{"PUT /hook/Observation/" + a, "DELETE /hook/Observation/" + a, "PUT /hook/Observation/" + c}
	var have []string
	for _, d := range got {
		have = append(have, d.Method+" "+d.Path)
	}
	if strings.Join(have, ",") != strings.Join(want, ",") {
		t.Errorf("deliveries %v, want %v (nothing for %s)", have, want, b)
	}
}

func TestBundlesAndTheRESTAdapterNotify(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	e.subscribe("Observation?code=8-8", rcv.url("/obs"), subscription.PayloadJSON)
	e.subscribe("Patient?family=Restname", rcv.url("/pat"), subscription.PayloadJSON)
	entry := func(full, body string) string {
		return `{"fullUrl":"` + full + `","resource":` + body + `,"request":{"method":"POST","url":"Observation"}}`
	}
	bundle := func(typ string, entries ...string) string {
		return `{"resourceType":"Bundle","type":"` + typ + `","entry":[` + strings.Join(entries, ",") + `]}`
	}
	tx := e.do(http.MethodPost, "", bundle("transaction", entry("urn:uuid:1", obs("8-8", "")), entry("urn:uuid:2", obs("9-9", "")), entry("urn:uuid:3", obs("8-8", ""))))
	if tx.Status != http.StatusOK {
		t.Fatalf("transaction: %d %s", tx.Status, tx.Body)
	}
	batch := e.do(http.MethodPost, "", bundle("batch", entry("urn:uuid:4", obs("8-8", ""))))
	if batch.Status != http.StatusOK {
		t.Fatalf("batch: %d %s", batch.Status, batch.Body)
	}
	ids := func(r *response) []string {
		var b struct {
			Entry []struct {
				Response struct{ Location string } `json:"response"`
			} `json:"entry"`
		}
		_ = json.Unmarshal(r.Body, &b)
		var out []string
		for _, en := range b.Entry {
			_, rest, _ := strings.Cut(en.Response.Location, "Observation/")
			id, _, _ := strings.Cut(rest, "/")
			out = append(out, id)
		}
		return out
	}
	txIDs, batchIDs := ids(tx), ids(batch)
	if len(txIDs) != 3 || len(batchIDs) != 1 {
		t.Fatalf("bundle answers: %s %s", tx.Body, batch.Body)
	}
	p := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Before"}]}`)
	if r := e.do(http.MethodPut, "/api/v1/patients/"+p, `{"lastName":"Restname"}`); r.Status != http.StatusOK {
		t.Fatalf("REST update: %d %s", r.Status, r.Body)
	}
	got := rcv.wait(t, "bundle and REST deliveries", func(d []delivery) bool {
		return mentions(d, txIDs[0]) && mentions(d, txIDs[2]) && mentions(d, batchIDs[0]) && mentions(d, p)
	})
	if mentions(got, txIDs[1]) {
		t.Errorf("the non-matching transaction entry %s was delivered", txIDs[1])
	}
	if n := len(onPath(got, "/obs/")); n != 3 {
		t.Errorf("%d Observation deliveries, want 3", n)
	}
}

func TestFailingEndpointIsRetriedThenErrorAndResumesInOrder(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	rcv.fail.Store(true)
	sub := e.subscribe("Observation?code=10-10", rcv.url("/hook"), subscription.PayloadJSON)
	id := e.create("Observation", obs("10-10", ""))
	if r := e.do(http.MethodPut, "/Observation/"+id, strings.Replace(obs("10-10", `,"valueQuantity":{"value":2}`), `{`, `{"id":"`+id+`",`, 1)); r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	other := e.create("Observation", obs("10-10", ""))
	failed := e.waitStatus(sub, subscription.StatusError)
	if msg, _ := failed["error"].(string); !strings.Contains(msg, "500") || !strings.Contains(msg, "3 times") {
		t.Errorf("error %q should name the last failure and the attempts", msg)
	}
	if c := e.eng.Counts(e.tenant); c.Failed < 3 || c.Sent != 0 {
		t.Errorf("counts %+v: want 3 failed attempts or more, none sent", c)
	}
	rcv.fail.Store(false)
	failed["status"] = subscription.StatusRequested
	body, _ := json.Marshal(failed)
	if r := e.do(http.MethodPut, "/Subscription/"+sub, string(body)); r.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.Status, r.Body)
	}
	active := e.waitStatus(sub, subscription.StatusActive)
	if _, ok := active["error"]; ok {
		t.Errorf("an active subscription keeps its error: %v", active)
	}
	got := rcv.wait(t, "the pending notifications", func(d []delivery) bool { return len(d) >= 3 })
	wantOrder := []string{id + "/1", id + "/2", other + "/1"}
	if order := versions(t, got); strings.Join(order, ",") != strings.Join(wantOrder, ",") {
		t.Errorf("delivered %v, want %v", order, wantOrder)
	}
}

// versions lists id/versionId of the resources delivered, in order.
func versions(t *testing.T, got []delivery) []string {
	t.Helper()
	var out []string
	for _, d := range got {
		var r struct {
			ID   string `json:"id"`
			Meta struct {
				VersionID string `json:"versionId"`
			} `json:"meta"`
		}
		if err := json.Unmarshal([]byte(d.Body), &r); err != nil {
			t.Fatalf("delivery body: %v: %q", err, d.Body)
		}
		out = append(out, r.ID+"/"+r.Meta.VersionID)
	}
	return out
}

func TestRestartDeliversEveryPendingNotificationInOrder(t *testing.T) {
	e := newEnv(t, func(c *subscription.Config) { c.Attempts = 1000 })
	rcv := newReceiver(t)
	rcv.fail.Store(true)
	e.subscribe("Observation?code=11-11", rcv.url("/hook"), subscription.PayloadJSON)
	a := e.create("Observation", obs("11-11", ""))
	b := e.create("Observation", obs("11-11", ""))
	var want []string
	want = append(want, a+"/1", b+"/1")
	for v := 2; v <= 6; v++ {
		body := strings.Replace(obs("11-11", fmt.Sprintf(`,"valueQuantity":{"value":%d}`, v)), `{`, `{"id":"`+a+`",`, 1)
		if r := e.do(http.MethodPut, "/Observation/"+a, body); r.Status != http.StatusOK {
			t.Fatalf("update: %d %s", r.Status, r.Body)
		}
		want = append(want, fmt.Sprintf("%s/%d", a, v))
	}
	e.eng.Close() // the server stops with notifications queued or still in the outbox
	rcv.fail.Store(false)
	e.start()
	got := rcv.wait(t, "every notification", func(d []delivery) bool {
		seen := map[string]bool{}
		for _, v := range versions(t, d) {
			seen[v] = true
		}
		return len(seen) >= len(want)
	})
	// Notifications are at least once: as the guide tells receivers, a
	// version not newer than the last one seen of its resource is a repeat.
	perResource := map[string][]string{}
	last := map[string]int{}
	for _, v := range versions(t, got) {
		id, vid, _ := strings.Cut(v, "/")
		n, err := strconv.Atoi(vid)
		if err != nil {
			t.Fatalf("delivered version %q", v)
		}
		if n <= last[id] {
			continue
		}
		last[id] = n
		perResource[id] = append(perResource[id], v)
	}
	if strings.Join(perResource[a], ",") != strings.Join(want[:1], ",")+","+strings.Join(want[2:], ",") || len(perResource[b]) != 1 {
		t.Errorf("delivered %v, want every version of %s in order and %s once", versions(t, got), a, b)
	}
}

// TestNotificationOfAVersionNoLongerThereIsDropped: a queued notification
// whose version was undone after it was queued (an operator abandoned its
// transaction) cannot be delivered; it is dropped rather than holding up
// the subscription's queue, and the changes after it go out.
func TestNotificationOfAVersionNoLongerThereIsDropped(t *testing.T) {
	e := newEnv(t, func(c *subscription.Config) { c.Attempts = 1000 })
	rcv := newReceiver(t)
	sub := e.subscribe("Observation?code=13-13", rcv.url("/hook"), subscription.PayloadJSON)
	e.eng.Close()
	gone := &store.Notification{Key: sub + "|Observation/undone/1", Subscription: sub, Type: "Observation", ID: "undone", VID: 1,
		Method: "POST", At: time.Now().Add(-time.Minute).UTC()}
	if err := e.store.QueueNotifications(context.Background(), e.tenant, []*store.Notification{gone}, nil); err != nil {
		t.Fatal(err)
	}
	e.start()
	a := e.create("Observation", obs("13-13", ""))
	got := rcv.wait(t, "the change after the undone version", func(d []delivery) bool { return len(d) >= 1 })
	if v := versions(t, got); len(v) != 1 || v[0] != a+"/1" {
		t.Fatalf("delivered %v, want only %s/1", v, a)
	}
	awaitDrained(t, e.store, e.tenant, 10*time.Second)
}

func TestCommittedTransactionInterruptedByACrashIsStillAnnounced(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	e.subscribe("Observation?code=12-12", rcv.url("/hook"), subscription.PayloadJSON)
	var crash atomicString
	e.faults(func(point string) error {
		if point == crash.load() {
			return fmt.Errorf("simulated crash at %s", point)
		}
		return nil
	})
	crash.store("txn.current") // after the commit point, before the current rows
	entry := `{"resource":` + obs("12-12", "") + `,"request":{"method":"POST","url":"Observation"}}`
	r := e.do(http.MethodPost, "", `{"resourceType":"Bundle","type":"transaction","entry":[`+entry+`,`+entry+`]}`)
	if r.Status < 500 {
		t.Fatalf("the crash should fail the request: %d %s", r.Status, r.Body)
	}
	crash.store("")
	if _, err := e.store.RecoverTenant(context.Background(), e.tenant, 0); err != nil {
		t.Fatal(err)
	}
	page := e.do(http.MethodGet, "/Observation?code=12-12", "").JSON(t)
	entries, _ := page["entry"].([]any)
	if len(entries) != 2 {
		t.Fatalf("recovery should roll the transaction forward: %v", page)
	}
	rcv.wait(t, "both resources of the recovered transaction", func(d []delivery) bool { return len(d) == 2 })
}

func TestSubscriptionsOnlyHearTheirOwnTenant(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	other := db.Tenant(t, e.store)
	otherToken := e.sign(other, "system/*.*")
	e.subscribe("Observation?code=13-13", rcv.url("/mine"), subscription.PayloadJSON)
	r := e.call(other, otherToken, http.MethodPost, "/Subscription", subscriptionJSON("Observation?code=13-13", rcv.url("/theirs"), subscription.PayloadJSON))
	if r.Status != http.StatusCreated {
		t.Fatalf("subscribe in the other tenant: %d %s", r.Status, r.Body)
	}
	theirSub := r.JSON(t)["id"].(string)
	for i := 0; i < 500 && !strings.Contains(string(e.call(other, otherToken, http.MethodGet, "/Subscription/"+theirSub, "").Body), `"active"`); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	r = e.call(other, otherToken, http.MethodPost, "/Observation", obs("13-13", ""))
	theirs := r.JSON(t)["id"].(string)
	mine := e.create("Observation", obs("13-13", ""))
	got := rcv.wait(t, "one delivery per tenant", func(d []delivery) bool { return mentions(d, mine) && mentions(d, theirs) })
	if m, o := onPath(got, "/mine/"), onPath(got, "/theirs/"); len(m) != 1 || len(o) != 1 || !mentions(m, mine) || !mentions(o, theirs) {
		t.Errorf("mine %+v, theirs %+v", m, o)
	}
}

func TestEndpointAllowList(t *testing.T) {
	tests := []struct {
		setting, endpoint string
		ok                bool
	}{
		{"", "http://127.0.0.1:9000/hook", true},
		{"", "https://localhost/hook", true},
		{"", "http://[::1]:8080/x", true},
		{"", "http://10.0.0.1/hook", false},
		{"", "http://example.com/hook", false},
		{"", "http://127.0.0.1.example.com/hook", false},
		{"", "ftp://127.0.0.1/hook", false},
		{"", "/relative/hook", false},
		{"", "http://user:pw@127.0.0.1/hook", false},
		{"https://hooks.example.org/fhir/", "https://hooks.example.org/fhir/a", true},
		{"https://hooks.example.org/fhir/", "https://hooks.example.org/other", false},
		{"https://hooks.example.org/fhir/", "http://hooks.example.org/fhir/a", false},
		{"https://hooks.example.org/fhir/", "https://hooks.example.org.evil.net/fhir/a", false},
		{"https://hooks.example.org/fhir/", "http://127.0.0.1/hook", false},
		{"https://a.example/, http://127.0.0.1:9/", "http://127.0.0.1:9/x", true},
	}
	for _, tt := range tests {
		a, err := subscription.ParseAllowList(tt.setting)
		if err != nil {
			t.Fatal(err)
		}
		err = a.Check(tt.endpoint)
		if (err == nil) != tt.ok {
			t.Errorf("setting %q, endpoint %s: allowed %v, want %v (%v)", tt.setting, tt.endpoint, err == nil, tt.ok, err)
		}
		if err != nil && tt.ok == false && strings.HasPrefix(tt.endpoint, "http") && !strings.Contains(tt.endpoint, "@") && !strings.Contains(err.Error(), "subscription-endpoints") {
			t.Errorf("refusal %q does not name the setting", err)
		}
	}
	if _, err := subscription.ParseAllowList("not a url"); err == nil {
		t.Error("a setting that is no URL should be refused")
	}
}

func TestRefusedEndpointIsA400NamingTheSetting(t *testing.T) {
	rcv := newReceiver(t)
	e := newEnv(t, func(c *subscription.Config) { c.Endpoints, _ = subscription.ParseAllowList(rcv.url("/allowed/")) })
	r := e.do(http.MethodPost, "/Subscription", subscriptionJSON("Observation?code=1", rcv.url("/elsewhere"), ""))
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "--subscription-endpoints") {
		t.Fatalf("refused endpoint: %d %s", r.Status, r.Body)
	}
	e.subscribe("Observation?code=14-14", rcv.url("/allowed/hook"), "")
	e.create("Observation", obs("14-14", ""))
	rcv.wait(t, "the allowed endpoint", func(d []delivery) bool { return len(onPath(d, "/allowed/hook")) == 1 })
}

func TestBadSubscriptionsAreRefusedAndNothingStored(t *testing.T) {
	e := newEnv(t)
	good := func(criteria, typ, endpoint, payload string, header ...string) string {
		ch := map[string]any{"type": typ, "endpoint": endpoint}
		if payload != "" {
			ch["payload"] = payload
		}
		if len(header) > 0 {
			ch["header"] = header
		}
		b, _ := json.Marshal(map[string]any{"resourceType": "Subscription", "id": "bad", "status": "requested", "reason": "r", "criteria": criteria, "channel": ch})
		return string(b)
	}
	const ep = "http://127.0.0.1:9/hook"
	tests := []struct {
		name, body, expr string
	}{
		{"unknown type", good("NotAType?x=1", "rest-hook", ep, ""), "Subscription.criteria"},
		{"unknown parameter", good("Observation?nonsense=1", "rest-hook", ep, ""), "Subscription.criteria"},
		{"unknown modifier", good("Observation?code:sideways=1", "rest-hook", ep, ""), "Subscription.criteria"},
		{"bad date", good("Patient?birthdate=notadate", "rest-hook", ep, ""), "Subscription.criteria"},
		{"include", good("Observation?_include=Observation:subject", "rest-hook", ep, ""), "Subscription.criteria"},
		{"no type", good("?code=1", "rest-hook", ep, ""), "Subscription.criteria"},
		{"email channel", good("Observation?code=1", "email", "mailto:a@b.c", ""), "Subscription.channel.type"},
		{"websocket channel", good("Observation?code=1", "websocket", ep, ""), "Subscription.channel.type"},
		{"endpoint not allowed", good("Observation?code=1", "rest-hook", "http://10.1.2.3/hook", ""), "Subscription.channel.endpoint"},
		{"endpoint not http", good("Observation?code=1", "rest-hook", "ftp://127.0.0.1/hook", ""), "Subscription.channel.endpoint"},
		{"endpoint relative", good("Observation?code=1", "rest-hook", "/hook", ""), "Subscription.channel.endpoint"},
		{"payload", good("Observation?code=1", "rest-hook", ep, "text/plain"), "Subscription.channel.payload"},
		{"header", good("Observation?code=1", "rest-hook", ep, "", "no colon here"), "Subscription.channel.header[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []*response{e.do(http.MethodPost, "/Subscription", strings.Replace(tt.body, `"id":"bad",`, "", 1)), e.do(http.MethodPut, "/Subscription/bad", tt.body)} {
				if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), tt.expr) {
					t.Errorf("status %d, want 400 with expression %s: %s", r.Status, tt.expr, r.Body)
				}
			}
		})
	}
	if n := e.do(http.MethodGet, "/Subscription?_summary=count", "").JSON(t)["total"]; n != float64(0) {
		t.Errorf("%v subscriptions stored, want none", n)
	}
}

func TestSubscribingNeedsReadAccessToTheCriteriaType(t *testing.T) {
	e := newEnv(t)
	body := subscriptionJSON("Observation?code=1", "http://127.0.0.1:9/hook", "")
	tests := []struct {
		scope  string
		status int
	}{
		{"system/Subscription.write", http.StatusForbidden},
		{"system/Subscription.* system/Patient.read", http.StatusForbidden},
		{"system/Observation.read", http.StatusForbidden},
		{"system/Subscription.write system/Observation.read", http.StatusCreated},
		{"system/Subscription.cu system/Observation.rs", http.StatusCreated},
	}
	for _, tt := range tests {
		if r := e.call(e.tenant, e.sign(e.tenant, tt.scope), http.MethodPost, "/Subscription", body); r.Status != tt.status {
			t.Errorf("scope %q: %d, want %d: %s", tt.scope, r.Status, tt.status, r.Body)
		}
	}
}

func TestEndStopsDelivery(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	ended := e.create("Subscription", strings.Replace(subscriptionJSON("Observation?code=15-15", rcv.url("/ended"), ""), `"status"`, `"end":"2001-01-01T00:00:00Z","status"`, 1))
	e.waitStatus(ended, subscription.StatusActive)
	e.subscribe("Observation?code=15-15", rcv.url("/open"), "")
	e.create("Observation", obs("15-15", ""))
	e.create("Observation", obs("15-15", ""))
	got := rcv.wait(t, "the open subscription", func(d []delivery) bool { return len(onPath(d, "/open")) == 2 })
	if n := len(onPath(got, "/ended")); n != 0 {
		t.Errorf("%d deliveries after the end", n)
	}
}

func TestSubscriptionsAreResourcesAndShowInMetadataAndMetrics(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	id := e.subscribe("Observation?code=16-16", rcv.url("/hook"), "")
	hist := e.do(http.MethodGet, "/Subscription/"+id+"/_history", "").JSON(t)
	if hist["total"] != float64(2) {
		t.Errorf("history of a requested then activated subscription: %v", hist["total"])
	}
	if s := e.do(http.MethodGet, "/Subscription?status=active", "").JSON(t); s["total"] != float64(1) {
		t.Errorf("search by status: %v", s["total"])
	}
	e.create("Observation", obs("16-16", ""))
	rcv.wait(t, "a delivery", func(d []delivery) bool { return len(d) == 1 })
	var metrics string
	for i := 0; i < 200 && !strings.Contains(metrics, `pending{tenant="`+e.tenant+`"} 0`); i++ { // the endpoint answers before the queue is cleared
		time.Sleep(10 * time.Millisecond)
		metrics = string(e.do(http.MethodGet, "/metrics", "").Body)
	}
	for _, want := range []string{
		`fhirstore_subscription_notifications_sent_total{tenant="` + e.tenant + `"} 1`,
		`fhirstore_subscription_notifications_failed_total{tenant="` + e.tenant + `"} 0`,
		`fhirstore_subscription_notifications_pending{tenant="` + e.tenant + `"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	meta := string(e.do(http.MethodGet, "/metadata", "").Body)
	if !strings.Contains(meta, "rest-hook") {
		t.Error("the CapabilityStatement does not name the rest-hook channel")
	}
	if r := e.do(http.MethodDelete, "/Subscription/"+id, ""); r.Status >= 300 {
		t.Fatalf("delete subscription: %d %s", r.Status, r.Body)
	}
	sync := e.subscribe("Observation?code=16-16", rcv.url("/sync"), "")
	e.create("Observation", obs("16-16", ""))
	got := rcv.wait(t, "the other subscription", func(d []delivery) bool { return len(onPath(d, "/sync")) == 1 })
	if n := len(onPath(got, "/hook")); n != 1 {
		t.Errorf("a deleted subscription (%s) still delivers: %d deliveries (sync %s)", id, n, sync)
	}
}

func TestASlowEndpointDelaysNeitherWritesNorOtherSubscriptions(t *testing.T) {
	e := newEnv(t)
	fast := newReceiver(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // answers long after the engine's timeout
		case <-release:
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	e.subscribe("Observation?code=17-17", slow.URL+"/slow", subscription.PayloadJSON)
	e.subscribe("Observation?code=17-17", fast.url("/fast"), subscription.PayloadJSON)
	start := time.Now()
	for range 3 {
		e.create("Observation", obs("17-17", ""))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("three writes took %v with a subscriber that does not answer", d)
	}
	fast.wait(t, "the fast subscriber", func(d []delivery) bool { return len(d) == 3 })
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("the fast subscriber waited %v behind the slow one", d)
	}
}

// secondServer starts a second server on the env's database: its own
// store and subscription engine, with the env's settings.
func (e *env) secondServer() (*store.Store, *subscription.Engine) {
	e.t.Helper()
	other := db.Open(e.t, e.opts)
	cfg := e.cfg
	cfg.Store = other
	second, err := subscription.Start(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(second.Close)
	return other, second
}

// TestAnotherServerAnnouncesWritesRightAfterActivation: with two servers
// on one database, a write made through the server that does not
// dispatch, right after the subscription reads as active, is announced:
// a subscription turns active only once every server records its changes.
func TestAnotherServerAnnouncesWritesRightAfterActivation(t *testing.T) {
	e := newEnv(t, func(c *subscription.Config) { c.Poll = 300 * time.Millisecond })
	rcv := newReceiver(t)
	other, _ := e.secondServer()
	for i := range 3 {
		code := fmt.Sprintf("19-%d", i)
		e.subscribe("Observation?code="+code, rcv.url("/hook"), "")
		if _, err := other.Create(context.Background(), e.tenant, "Observation", []byte(obs(code, "")), store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		rcv.wait(t, "the notification of a write through the other server", func(d []delivery) bool { return len(d) == i+1 })
	}
}

func TestOneOfSeveralServersDeliversEachTenant(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	other, second := e.secondServer()
	e.subscribe("Observation?code=18-18", rcv.url("/hook"), subscription.PayloadJSON)
	var ids []string
	for range 5 {
		ids = append(ids, e.create("Observation", obs("18-18", "")))
	}
	rcv.wait(t, "five deliveries", func(d []delivery) bool {
		return !slices.ContainsFunc(ids, func(id string) bool { return !mentions(d, id) })
	})
	time.Sleep(300 * time.Millisecond) // time for a second delivery, were there one
	if got := rcv.deliveries(); len(got) != 5 || second.Counts(e.tenant).Sent != 0 {
		t.Errorf("%d deliveries (the second server sent %d), want each of 5 once", len(got), second.Counts(e.tenant).Sent)
	}
	e.eng.Close() // the first server stops: the second takes the tenant over
	r, err := other.Create(context.Background(), e.tenant, "Observation", []byte(obs("18-18", "")), store.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rcv.wait(t, "the delivery by the second server", func(d []delivery) bool { return mentions(d, r.ID) })
	for i := 0; i < 100 && second.Counts(e.tenant).Sent == 0; i++ { // counted once the answer is in
		time.Sleep(10 * time.Millisecond)
	}
	if second.Counts(e.tenant).Sent != 1 {
		t.Errorf("the second server sent %d, want 1", second.Counts(e.tenant).Sent)
	}
}
