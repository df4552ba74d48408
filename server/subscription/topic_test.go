package subscription_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"fhirstore/server/subscription"
)

const (
	bp         = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/"
	visitTopic = "http://example.org/fhir/SubscriptionTopic/visit-complete"
	topicExt   = "http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic."
)

// storeTopic stores the test topic of testdata/topics.
func (e *env) storeTopic() string {
	e.t.Helper()
	body, err := os.ReadFile("../../testdata/topics/visit-complete.json")
	if err != nil {
		e.t.Fatal(err)
	}
	return e.create("Basic", string(body))
}

// topicSub is a backport Subscription to topic.
type topicSub struct {
	topic, channel, endpoint, content, filter, payload string
	heartbeat, maxCount                                int
}

func (s topicSub) json() string {
	if s.topic == "" {
		s.topic = visitTopic
	}
	if s.payload == "" {
		s.payload = subscription.PayloadJSON
	}
	ch := map[string]any{"type": s.channel, "payload": s.payload}
	if s.endpoint != "" {
		ch["endpoint"] = s.endpoint
	}
	if s.content != "" {
		ch["_payload"] = map[string]any{"extension": []any{map[string]any{"url": bp + "backport-payload-content", "valueCode": s.content}}}
	}
	var exts []any
	if s.heartbeat > 0 {
		exts = append(exts, map[string]any{"url": bp + "backport-heartbeat-period", "valueUnsignedInt": s.heartbeat})
	}
	if s.maxCount > 0 {
		exts = append(exts, map[string]any{"url": bp + "backport-max-count", "valuePositiveInt": s.maxCount})
	}
	if exts != nil {
		ch["extension"] = exts
	}
	sub := map[string]any{"resourceType": "Subscription", "meta": map[string]any{"profile": []string{subscription.ProfileSubscription}},
		"status": "requested", "reason": "test", "criteria": s.topic, "channel": ch}
	if s.filter != "" {
		sub["_criteria"] = map[string]any{"extension": []any{map[string]any{"url": bp + "backport-filter-criteria", "valueString": s.filter}}}
	}
	b, _ := json.Marshal(sub)
	return string(b)
}

// note is what a test reads of a notification Bundle.
type note struct {
	Type    string
	Since   string
	Events  []string // event numbers
	Focus   []string
	Entries []map[string]any
}

func parseNote(t testing.TB, body string) note {
	t.Helper()
	var b struct {
		ResourceType string           `json:"resourceType"`
		Type         string           `json:"type"`
		Entry        []map[string]any `json:"entry"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil || b.ResourceType != "Bundle" || b.Type != "history" || len(b.Entry) == 0 {
		t.Fatalf("not a notification Bundle: %s", body)
	}
	var p struct {
		Parameter []struct {
			Name        string `json:"name"`
			ValueCode   string `json:"valueCode"`
			ValueString string `json:"valueString"`
			Part        []struct {
				Name           string `json:"name"`
				ValueString    string `json:"valueString"`
				ValueReference struct {
					Reference string `json:"reference"`
				} `json:"valueReference"`
			} `json:"part"`
		} `json:"parameter"`
	}
	raw, _ := json.Marshal(b.Entry[0]["resource"])
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	n := note{Entries: b.Entry[1:]}
	for _, prm := range p.Parameter {
		switch prm.Name {
		case "type":
			n.Type = prm.ValueCode
		case "events-since-subscription-start":
			n.Since = prm.ValueString
		case "notification-event":
			for _, part := range prm.Part {
				switch part.Name {
				case "event-number":
					n.Events = append(n.Events, part.ValueString)
				case "focus":
					n.Focus = append(n.Focus, part.ValueReference.Reference)
				}
			}
		}
	}
	return n
}

// notesOf parses the deliveries on path of type kind.
func notesOf(t testing.TB, got []delivery, path, kind string) []note {
	var out []note
	for _, d := range onPath(got, path) {
		if n := parseNote(t, d.Body); n.Type == kind {
			out = append(out, n)
		}
	}
	return out
}

func encounter(patient, status string) string {
	return fmt.Sprintf(`{"resourceType":"Encounter","status":%q,"class":{"code":"HH"},"subject":{"reference":"Patient/%s"}}`, status, patient)
}

// finish updates an Encounter to finished.
func (e *env) finish(id, patient string) {
	e.t.Helper()
	body := strings.Replace(encounter(patient, "finished"), "{", `{"id":"`+id+`",`, 1)
	if r := e.do(http.MethodPut, "/Encounter/"+id, body); r.Status != http.StatusOK {
		e.t.Fatalf("update: %d %s", r.Status, r.Body)
	}
}

// distinctEvents keeps the notifications whose event number is higher
// than any before it: a repeat is dropped.
func distinctEvents(notes []note) []note {
	var out []note
	last := 0
	for _, n := range notes {
		num := 0
		fmt.Sscan(n.Events[0], &num)
		if num > last {
			out = append(out, n)
			last = num
		}
	}
	return out
}

// wantIssue checks an OperationOutcome answer: status and an issue at expr.
func wantIssue(t testing.TB, r *response, status int, expr string) {
	t.Helper()
	if r.Status != status || !strings.Contains(string(r.Body), `"`+expr) {
		t.Errorf("got %d %s, want %d with an issue at %s", r.Status, r.Body, status, expr)
	}
}

func TestBadTopicsAreRefusedWithTheElement(t *testing.T) {
	e := newEnv(t)
	good, err := os.ReadFile("../../testdata/topics/visit-complete.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ from, to, expr string }{
		"status":        {`"valueCode":"active"}],`, `"valueCode":"finished"}],`, "Basic.modifierExtension[0].value"},
		"url":           {`"valueUri":"http://example.org/fhir/SubscriptionTopic/visit-complete"`, `"valueUri":"not a url"`, "Basic.extension[0].value"},
		"resource":      {`"valueUri":"http://hl7.org/fhir/StructureDefinition/Encounter"`, `"valueUri":"Visit"`, "Basic.extension[3].extension[1].value"},
		"interaction":   {`"valueCode":"create"}`, `"valueCode":"read"}`, "Basic.extension[3].extension[2].value"},
		"criteria":      {`"valueString":"status=finished"`, `"valueString":"colour=blue"`, "Basic.extension[3].extension[4].extension[2].value"},
		"fhirpath":      {`"valueString":"(%previous.id.empty()`, `"valueString":"((%previous.id.empty()`, "Basic.extension[3].extension[5].value"},
		"filter":        {`"valueString":"patient"`, `"valueString":"no-such-parameter"`, "Basic.extension[4].extension[2].value"},
		"shape include": {`"valueString":"Encounter:patient"`, `"valueString":"patient"`, "Basic.extension[5].extension[1].value"},
	} {
		body := strings.Replace(string(good), c.from, c.to, 1)
		if body == string(good) {
			t.Fatalf("%s: the case changes nothing", name)
		}
		wantIssue(t, e.do(http.MethodPost, "/Basic", body), http.StatusUnprocessableEntity, c.expr)
	}
	r := e.do(http.MethodGet, "/Basic?_summary=count", "")
	if total := r.JSON(t)["total"]; total != float64(0) {
		t.Errorf("refused topics were stored: total %v", total)
	}
	e.storeTopic()
	wantIssue(t, e.do(http.MethodPost, "/Basic", string(good)), http.StatusUnprocessableEntity, "Basic.extension")
}

func TestTopicSubscriptionsAreRefusedWithTheReason(t *testing.T) {
	e := newEnv(t)
	e.storeTopic()
	rcv := newReceiver(t)
	for name, c := range map[string]struct {
		sub  topicSub
		expr string
	}{
		"unknown topic":     {topicSub{topic: "http://example.org/fhir/SubscriptionTopic/nothing", channel: "rest-hook", endpoint: rcv.url("/x")}, "Subscription.criteria"},
		"filter not listed": {topicSub{channel: "rest-hook", endpoint: rcv.url("/x"), filter: "Encounter?length=gt5"}, "Subscription.criteria.extension[0].value"},
		"email":             {topicSub{channel: "email", endpoint: "mailto:a@example.org"}, "Subscription.channel.type"},
		"payload content":   {topicSub{channel: "rest-hook", endpoint: rcv.url("/x"), content: "everything"}, "Subscription.channel.payload.extension[0].value"},
		"payload type":      {topicSub{channel: "rest-hook", endpoint: rcv.url("/x"), payload: "text/plain"}, "Subscription.channel.payload"},
		"endpoint":          {topicSub{channel: "rest-hook", endpoint: "http://192.0.2.1/hook"}, "Subscription.channel.endpoint"},
	} {
		r := e.do(http.MethodPost, "/Subscription", c.sub.json())
		if r.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d %s, want 422", name, r.Status, r.Body)
			continue
		}
		wantIssue(t, r, http.StatusUnprocessableEntity, c.expr)
	}
	if total := e.do(http.MethodGet, "/Subscription?_summary=count", "").JSON(t)["total"]; total != float64(0) {
		t.Errorf("refused subscriptions were stored: total %v", total)
	}
}

func TestHandshakeEventsAndNumbersAcrossARestart(t *testing.T) {
	e := newEnv(t)
	e.storeTopic()
	rcv := newReceiver(t)
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	other := e.create("Patient", `{"resourceType":"Patient"}`)
	sid := e.create("Subscription", topicSub{channel: "rest-hook", endpoint: rcv.url("/ids"), content: "id-only", filter: "Encounter?patient=Patient/" + patient}.json())
	rcv.wait(t, "the handshake", func(d []delivery) bool { return len(notesOf(t, d, "/ids", "handshake")) == 1 })
	e.waitStatus(sid, subscription.StatusActive)

	enc := e.create("Encounter", encounter(patient, "in-progress"))
	e.create("Encounter", encounter(other, "finished")) // filtered out
	e.finish(enc, patient)
	second := e.create("Encounter", encounter(patient, "finished"))
	got := rcv.wait(t, "two events", func(d []delivery) bool { return len(notesOf(t, d, "/ids", "event-notification")) >= 2 })
	events := notesOf(t, got, "/ids", "event-notification")
	if events[0].Since != "1" || strings.Join(events[0].Events, ",") != "1" || !strings.HasSuffix(events[0].Focus[0], "Encounter/"+enc) {
		t.Errorf("first event: %+v", events[0])
	}
	if strings.Join(events[1].Events, ",") != "2" || !strings.HasSuffix(events[1].Focus[0], "Encounter/"+second) {
		t.Errorf("second event: %+v", events[1])
	}
	for _, ent := range events[0].Entries {
		if ent["resource"] != nil && strings.HasSuffix(ent["fullUrl"].(string), "Encounter/"+enc) {
			t.Errorf("id-only carried the resource: %v", ent)
		}
	}

	e.eng.Close() // a restart: numbering goes on from the log
	e.start()
	third := e.create("Encounter", encounter(patient, "finished"))
	got = rcv.wait(t, "the third event", func(d []delivery) bool { return len(distinctEvents(notesOf(t, d, "/ids", "event-notification"))) >= 3 })
	// At least once: a notification in flight at the stop may come again,
	// with its number, which tells the receiver it is a repeat.
	if evs := distinctEvents(notesOf(t, got, "/ids", "event-notification")); len(evs) != 3 || evs[2].Events[0] != "3" || !strings.HasSuffix(evs[2].Focus[0], "Encounter/"+third) {
		t.Errorf("events after the restart: %+v", evs)
	}

	r := e.do(http.MethodGet, "/Subscription/"+sid+"/$status", "")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"events-since-subscription-start","valueString":"3"`) {
		t.Errorf("$status: %d %s", r.Status, r.Body)
	}
	r = e.do(http.MethodGet, "/Subscription/$status", "")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "Subscription/"+sid) {
		t.Errorf("$status of every subscription: %d %s", r.Status, r.Body)
	}
	r = e.do(http.MethodGet, "/Subscription/"+sid+"/$events?eventsSinceNumber=1&eventsUntilNumber=2&content=full-resource", "")
	if r.Status != http.StatusOK {
		t.Fatalf("$events: %d %s", r.Status, r.Body)
	}
	replay := parseNote(t, string(r.Body))
	if replay.Type != "query-event" || strings.Join(replay.Events, ",") != "1,2" || !strings.Contains(string(r.Body), `"status":"finished"`) {
		t.Errorf("$events replay: %+v", replay)
	}
	wantIssue(t, e.do(http.MethodGet, "/Subscription/"+sid+"/$events?eventsSinceNumber=x", ""), http.StatusBadRequest, "eventsSinceNumber")
}

func TestAFailedHandshakePutsTheSubscriptionInError(t *testing.T) {
	e := newEnv(t)
	e.storeTopic()
	rcv := newReceiver(t)
	rcv.fail.Store(true)
	sid := e.create("Subscription", topicSub{channel: "rest-hook", endpoint: rcv.url("/down")}.json())
	if sub := e.waitStatus(sid, subscription.StatusError); !strings.Contains(fmt.Sprint(sub["error"]), "handshake") {
		t.Errorf("error %v does not name the handshake", sub["error"])
	}
}

func TestRetiringATopicEndsItsSubscriptionsInError(t *testing.T) {
	e := newEnv(t)
	id := e.storeTopic()
	rcv := newReceiver(t)
	sid := e.create("Subscription", topicSub{channel: "rest-hook", endpoint: rcv.url("/r")}.json())
	e.waitStatus(sid, subscription.StatusActive)
	topic := e.do(http.MethodGet, "/Basic/"+id, "").Body
	retired := strings.Replace(string(topic), `"valueCode":"active"`, `"valueCode":"retired"`, 1)
	if r := e.do(http.MethodPut, "/Basic/"+id, retired); r.Status != http.StatusOK {
		t.Fatalf("retire: %d %s", r.Status, r.Body)
	}
	if sub := e.waitStatus(sid, subscription.StatusError); !strings.Contains(fmt.Sprint(sub["error"]), "retired") {
		t.Errorf("error %v does not say the topic is retired", sub["error"])
	}
}

func TestBuiltInTopicIsListedAndNotifies(t *testing.T) {
	e := newEnv(t)
	meta := string(e.do(http.MethodGet, "/metadata", "").Body)
	const builtin = "https://fhirstore.dev/fhir/SubscriptionTopic/encounter-finished"
	if !strings.Contains(meta, builtin) {
		t.Fatalf("the CapabilityStatement does not list %s", builtin)
	}
	rcv := newReceiver(t)
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	e.create("Subscription", topicSub{topic: builtin, channel: "rest-hook", endpoint: rcv.url("/b"), content: "full-resource", filter: "Encounter?class=HH"}.json())
	rcv.wait(t, "the handshake", func(d []delivery) bool { return len(notesOf(t, d, "/b", "handshake")) == 1 })
	enc := e.create("Encounter", encounter(patient, "finished"))
	got := rcv.wait(t, "the event", func(d []delivery) bool { return len(notesOf(t, d, "/b", "event-notification")) == 1 })
	ev := notesOf(t, got, "/b", "event-notification")[0]
	b, _ := json.Marshal(ev.Entries)
	if !strings.Contains(string(b), `"id":"`+enc+`"`) || !strings.Contains(string(b), `"id":"`+patient+`"`) {
		t.Errorf("full-resource notification lacks the Encounter or its patient: %s", b)
	}
}

// dialSocket connects to the env's websocket channel.
func (e *env) dialSocket(ctx context.Context) *websocket.Conn {
	e.t.Helper()
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/fhir-ws/subscriptions"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Host: e.tenant + ".localhost"})
	if err != nil {
		e.t.Fatalf("dial %s: %v", url, err)
	}
	c.SetReadLimit(1 << 24)
	e.t.Cleanup(func() { c.CloseNow() })
	return c
}

// bindingToken gets a binding token for subscription id.
func (e *env) bindingToken(id string) string {
	e.t.Helper()
	r := e.do(http.MethodGet, "/Subscription/"+id+"/$get-ws-binding-token", "")
	var p struct {
		Parameter []struct {
			Name        string `json:"name"`
			ValueString string `json:"valueString"`
			ValueURL    string `json:"valueUrl"`
		} `json:"parameter"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &p) != nil {
		e.t.Fatalf("$get-ws-binding-token: %d %s", r.Status, r.Body)
	}
	token, url := "", ""
	for _, prm := range p.Parameter {
		switch prm.Name {
		case "token":
			token = prm.ValueString
		case "websocket-url":
			url = prm.ValueURL
		}
	}
	if token == "" || !strings.HasSuffix(url, "/fhir-ws/subscriptions") {
		e.t.Fatalf("$get-ws-binding-token: %s", r.Body)
	}
	return token
}

// readNote reads the next notification of a websocket.
func readNote(t testing.TB, ctx context.Context, c *websocket.Conn) note {
	t.Helper()
	_, msg, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return parseNote(t, string(msg))
}

func TestWebsocketBindsWithEitherMessageForm(t *testing.T) {
	e := newEnv(t)
	e.storeTopic()
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	a := e.create("Subscription", topicSub{channel: "websocket", content: "id-only", filter: "Encounter?patient=Patient/" + patient}.json())
	b := e.create("Subscription", topicSub{channel: "websocket", content: "full-resource"}.json())
	e.waitStatus(a, subscription.StatusActive)
	e.waitStatus(b, subscription.StatusActive)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	jsonForm := e.dialSocket(ctx)
	msg := fmt.Sprintf(`{"type":"bind-with-token","payload":{"token":%q}}`, e.bindingToken(a))
	if err := jsonForm.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	if n := readNote(t, ctx, jsonForm); n.Type != "handshake" {
		t.Fatalf("first message %+v, want the handshake", n)
	}
	textForm := e.dialSocket(ctx)
	if err := textForm.Write(ctx, websocket.MessageText, []byte("bind-with-token "+e.bindingToken(b))); err != nil {
		t.Fatal(err)
	}
	if n := readNote(t, ctx, textForm); n.Type != "handshake" {
		t.Fatalf("first message %+v, want the handshake", n)
	}
	enc := e.create("Encounter", encounter(patient, "finished"))
	for name, c := range map[string]*websocket.Conn{"json": jsonForm, "text": textForm} {
		n := readNote(t, ctx, c)
		if n.Type != "event-notification" || strings.Join(n.Events, ",") != "1" || !strings.HasSuffix(n.Focus[0], "Encounter/"+enc) {
			t.Errorf("%s-bound socket got %+v", name, n)
		}
	}
	if err := textForm.Write(ctx, websocket.MessageText, []byte("bind-with-token nonsense")); err != nil {
		t.Fatal(err)
	}
	if _, m, err := textForm.Read(ctx); err != nil || !strings.Contains(string(m), "OperationOutcome") {
		t.Errorf("a bad token got %s (%v), want an OperationOutcome", m, err)
	}
}

func TestAWebsocketClientThatStopsReadingIsDisconnected(t *testing.T) {
	e := newEnv(t, func(c *subscription.Config) {
		c.Sockets = subscription.SocketConfig{Queue: 2, WriteTimeout: 300 * time.Millisecond}
	})
	e.storeTopic()
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	sid := e.create("Subscription", topicSub{channel: "websocket", content: "full-resource"}.json())
	e.waitStatus(sid, subscription.StatusActive)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c := e.dialSocket(ctx)
	if err := c.Write(ctx, websocket.MessageText, []byte("bind-with-token "+e.bindingToken(sid))); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing while large notifications are sent: more
	// than the connection's buffers hold.
	narrative := `,"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">` + strings.Repeat("visit notes ", 40000) + `</div>"}`
	const writes = 16
	for range writes {
		e.create("Encounter", strings.Replace(encounter(patient, "finished"), `"status"`, narrative[1:]+`,"status"`, 1))
	}
	time.Sleep(time.Second)
	read := 0
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation && ctx.Err() != nil {
				t.Fatalf("the connection was not closed: %v", err)
			}
			break
		}
		read++
	}
	if read >= writes+1 {
		t.Errorf("the slow client got all %d messages: it was buffered, not disconnected", read)
	}
}

func TestOnlyTheLatestDeliveredEventsAreKept(t *testing.T) {
	e := newEnv(t, func(c *subscription.Config) { c.KeepEvents = 2 })
	e.storeTopic()
	rcv := newReceiver(t)
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	sid := e.create("Subscription", topicSub{channel: "rest-hook", endpoint: rcv.url("/k")}.json())
	e.waitStatus(sid, subscription.StatusActive)
	for i := 1; i <= 5; i++ {
		e.create("Encounter", encounter(patient, "finished"))
		rcv.wait(t, "the event", func(d []delivery) bool { return len(distinctEvents(notesOf(t, d, "/k", "event-notification"))) >= i })
	}
	r := e.do(http.MethodGet, "/Subscription/"+sid+"/$events", "")
	if n := parseNote(t, string(r.Body)); strings.Join(n.Events, ",") != "3,4,5" || n.Since != "5" {
		t.Errorf("$events after pruning: %+v, want events 3,4,5 of 5", n)
	}
}

func TestEventsWaitingForADownEndpointGoOutBatchedInOrder(t *testing.T) {
	e := newEnv(t, func(c *subscription.Config) { c.Attempts = 1000 })
	e.storeTopic()
	rcv := newReceiver(t)
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	sid := e.create("Subscription", topicSub{channel: "rest-hook", endpoint: rcv.url("/m"), content: "id-only", maxCount: 3}.json())
	e.waitStatus(sid, subscription.StatusActive)
	rcv.fail.Store(true)
	for range 5 {
		e.create("Encounter", encounter(patient, "finished"))
	}
	time.Sleep(300 * time.Millisecond)
	rcv.fail.Store(false)
	got := rcv.wait(t, "five events", func(d []delivery) bool {
		n := 0
		for _, ev := range notesOf(t, d, "/m", "event-notification") {
			n += len(ev.Events)
		}
		return n >= 5
	})
	var numbers []string
	batched := false
	for _, ev := range notesOf(t, got, "/m", "event-notification") {
		numbers = append(numbers, ev.Events...)
		batched = batched || len(ev.Events) > 1
		if len(ev.Events) > 3 {
			t.Errorf("a notification carries %d events, more than max-count 3", len(ev.Events))
		}
	}
	if strings.Join(numbers, ",") != "1,2,3,4,5" || !batched {
		t.Errorf("events went out as %v (batched: %v), want 1..5 in order, several to a notification", numbers, batched)
	}
}

func TestRestHookNotificationsInXML(t *testing.T) {
	e := newEnv(t)
	e.storeTopic()
	rcv := newReceiver(t)
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	sid := e.create("Subscription", topicSub{channel: "rest-hook", endpoint: rcv.url("/x"), content: "full-resource", payload: subscription.PayloadXML}.json())
	e.waitStatus(sid, subscription.StatusActive)
	enc := e.create("Encounter", encounter(patient, "finished"))
	got := rcv.wait(t, "the event", func(d []delivery) bool { return len(onPath(d, "/x")) >= 2 })
	d := onPath(got, "/x")[1]
	if d.ContentType != subscription.PayloadXML || !strings.Contains(d.Body, "<Bundle") || !strings.Contains(d.Body, `<id value="`+enc+`"/>`) ||
		!strings.Contains(d.Body, "event-notification") {
		t.Errorf("XML notification: %s %s", d.ContentType, d.Body)
	}
}

func TestChangingABoundSubscriptionClosesItsWebsocket(t *testing.T) {
	e := newEnv(t)
	e.storeTopic()
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	sid := e.create("Subscription", topicSub{channel: "websocket", content: "id-only"}.json())
	e.waitStatus(sid, subscription.StatusActive)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := e.dialSocket(ctx)
	if err := c.Write(ctx, websocket.MessageText, []byte("bind-with-token "+e.bindingToken(sid))); err != nil {
		t.Fatal(err)
	}
	if n := readNote(t, ctx, c); n.Type != "handshake" {
		t.Fatalf("first message %+v, want the handshake", n)
	}
	var sub map[string]any
	json.Unmarshal(e.do(http.MethodGet, "/Subscription/"+sid, "").Body, &sub)
	sub["_criteria"] = map[string]any{"extension": []any{map[string]any{"url": bp + "backport-filter-criteria", "valueString": "Encounter?patient=Patient/" + patient}}}
	body, _ := json.Marshal(sub)
	if r := e.do(http.MethodPut, "/Subscription/"+sid, string(body)); r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	if _, m, err := c.Read(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("the socket stayed open after its subscription changed (got %s, %v)", m, err)
	}
}

func TestACriteriaSubscriptionTurnedTopicBasedDeliversEvents(t *testing.T) {
	e := newEnv(t)
	e.storeTopic()
	rcv := newReceiver(t)
	patient := e.create("Patient", `{"resourceType":"Patient"}`)
	sid := e.subscribe("Encounter?status=finished", rcv.url("/c"), "")
	var sub map[string]any
	if err := json.Unmarshal([]byte(topicSub{channel: "rest-hook", endpoint: rcv.url("/c"), content: "id-only"}.json()), &sub); err != nil {
		t.Fatal(err)
	}
	sub["id"] = sid
	body, _ := json.Marshal(sub)
	if r := e.do(http.MethodPut, "/Subscription/"+sid, string(body)); r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	rcv.wait(t, "the handshake", func(d []delivery) bool { return mentions(d, `"handshake"`) })
	e.waitStatus(sid, subscription.StatusActive)
	enc := e.create("Encounter", encounter(patient, "finished"))
	rcv.wait(t, "the event", func(d []delivery) bool {
		for _, n := range notesOf(t, d, "/c", "event-notification") {
			if strings.HasSuffix(n.Focus[0], "Encounter/"+enc) {
				return true
			}
		}
		return false
	})
}

func TestABindingTokenOnlyBindsInItsTenant(t *testing.T) {
	e := newEnv(t)
	e.storeTopic()
	sid := e.create("Subscription", topicSub{channel: "websocket"}.json())
	e.waitStatus(sid, subscription.StatusActive)
	token := e.bindingToken(sid)
	other := db.Tenant(t, e.store)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/fhir-ws/subscriptions"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Host: other + ".localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("bind-with-token "+token)); err != nil {
		t.Fatal(err)
	}
	if _, m, err := c.Read(ctx); err != nil || !strings.Contains(string(m), "OperationOutcome") || strings.Contains(string(m), "handshake") {
		t.Errorf("a token of another tenant got %s (%v), want an OperationOutcome", m, err)
	}
	r := e.call(other, e.sign(other, "system/*.*"), http.MethodGet, "/Subscription/"+sid+"/$get-ws-binding-token", "")
	if r.Status != http.StatusNotFound {
		t.Errorf("a binding token for another tenant's subscription: %d %s, want 404", r.Status, r.Body)
	}
}

// TestATopicSubscriptionNeedsReadOnWhatItsNotificationsCarry: a token may
// subscribe to a topic only when it may read every resource type the
// topic's notifications carry (the built-in topic: Encounters, and what
// its include Encounter:patient may reach: a Patient or a Group).
func TestATopicSubscriptionNeedsReadOnWhatItsNotificationsCarry(t *testing.T) {
	e := newEnv(t)
	rcv := newReceiver(t)
	const builtin = "https://fhirstore.dev/fhir/SubscriptionTopic/encounter-finished"
	body := topicSub{topic: builtin, channel: "rest-hook", endpoint: rcv.url("/s")}.json()
	for _, tc := range []struct {
		scope  string
		status int
		names  string
	}{
		{"system/Subscription.cruds", http.StatusForbidden, "Encounter"},
		{"system/Subscription.cruds system/Encounter.rs system/Group.rs", http.StatusForbidden, "Patient"},
		{"system/Subscription.cruds system/Encounter.rs system/Patient.rs", http.StatusForbidden, "Group"},
		{"system/Subscription.cruds system/Encounter.rs system/Patient.rs system/Group.rs", http.StatusCreated, ""},
		{"system/Subscription.cruds system/*.read", http.StatusCreated, ""},
	} {
		r := e.call(e.tenant, e.sign(e.tenant, tc.scope), http.MethodPost, "/Subscription", body)
		if r.Status != tc.status || (tc.names != "" && !strings.Contains(string(r.Body), "read on "+tc.names)) {
			t.Errorf("scopes %q: %d %s; want %d naming %s", tc.scope, r.Status, r.Body, tc.status, tc.names)
		}
	}
	unknown := topicSub{topic: "http://example.org/fhir/SubscriptionTopic/none", channel: "rest-hook", endpoint: rcv.url("/s")}.json()
	if r := e.call(e.tenant, e.sign(e.tenant, "system/Subscription.cruds"), http.MethodPost, "/Subscription", unknown); r.Status != http.StatusUnprocessableEntity {
		t.Errorf("an unknown topic: %d %s; want 422 from validation", r.Status, r.Body)
	}
}
