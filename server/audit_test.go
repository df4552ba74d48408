package server_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// auditEvents are the AuditEvents of the env's tenant matching query,
// read with the env's full token.
func auditEvents(t testing.TB, e *env, query string) []map[string]any {
	t.Helper()
	r := e.get("/AuditEvent?_count=100&" + query)
	if r.Status != http.StatusOK {
		t.Fatalf("AuditEvent search: %d %s", r.Status, r.Body)
	}
	var out []map[string]any
	entries, _ := r.JSON(t)["entry"].([]any)
	for _, en := range entries {
		out = append(out, en.(map[string]any)["resource"].(map[string]any))
	}
	return out
}

func closeAudit(t testing.TB, e *env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.h.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAuditTrail: every request, allowed or not, becomes an AuditEvent in
// the tenant's database naming who, what and the outcome; a clean close
// writes every queued record.
func TestAuditTrail(t *testing.T) {
	e := newEnv(t, func(c *server.Config, _ *store.Options) { c.Audit = true })
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Audited"}]}`)
	e.get("/Patient/" + id)
	e.get("/Patient?family=Audited")
	e.as(scopedToken(t, e.tenant, "user/Observation.rs", ""), request{Method: http.MethodGet, Path: "/Patient/" + id})
	e.do(request{Method: http.MethodGet, Path: "/Patient/" + id, Token: e2eStr("not-a-token")})
	const burst = 300
	for i := 0; i < burst; i++ {
		e.get("/Observation/does-not-exist")
	}
	closeAudit(t, e)

	events := auditEvents(t, e, "entity=Patient/"+id)
	byCode := map[string][]map[string]any{}
	for _, ev := range events {
		code := ""
		if st, ok := ev["subtype"].([]any); ok {
			code = st[0].(map[string]any)["code"].(string)
		}
		byCode[code+" "+ev["outcome"].(string)] = append(byCode[code+" "+ev["outcome"].(string)], ev)
	}
	for _, want := range []string{"create 0", "read 0", "read 4"} {
		if len(byCode[want]) == 0 {
			t.Fatalf("no AuditEvent %q for Patient/%s; have %v", want, id, keys(byCode))
		}
	}
	if n := len(byCode["read 4"]); n != 2 {
		t.Fatalf("want 2 refused reads (403 and 401), got %d", n)
	}
	create := byCode["create 0"][0]
	agent := create["agent"].([]any)[0].(map[string]any)
	if who := agent["who"].(map[string]any); who["display"] != "dev" {
		t.Fatalf("the create's agent is %v, want the token subject dev", who)
	}
	if create["action"] != "C" || create["source"].(map[string]any)["site"] != e.tenant {
		t.Fatalf("create event: %v", create)
	}
	var anonymous bool
	for _, ev := range byCode["read 4"] {
		who := ev["agent"].([]any)[0].(map[string]any)["who"].(map[string]any)
		anonymous = anonymous || who["display"] == "anonymous"
	}
	if !anonymous {
		t.Fatal("the request with a bad token is not recorded as anonymous")
	}
	searches := auditEvents(t, e, "subtype=search-type")
	found := false
	for _, ev := range searches {
		q, _ := ev["entity"].([]any)[0].(map[string]any)["query"].(string)
		raw, _ := base64.StdEncoding.DecodeString(q)
		found = found || string(raw) == "family=Audited"
	}
	if !found {
		t.Fatalf("the search's query is not recorded: %d search events", len(searches))
	}
	if n := searchTotal(t, e, "/AuditEvent?outcome=4&subtype=read&_summary=count"); n < burst {
		t.Fatalf("%d of the %d not-found reads were recorded before close returned", n, burst)
	}
}

// TestAuditTrailIsReadLikeAnyResource: the trail's records, written on
// the server's own path, are still AuditEvents a client reads by id, finds
// by the resource a request addressed (writes and reads alike) and sees
// the one version of in their history; the metrics count them.
func TestAuditTrailIsReadLikeAnyResource(t *testing.T) {
	m := server.NewMetrics()
	e := newEnv(t, func(c *server.Config, _ *store.Options) { c.Audit, c.Metrics = true, m })
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Traced"}]}`)
	if r := e.put("/Patient/"+id, `{"resourceType":"Patient","id":"`+id+`","name":[{"family":"Traced","given":["Again"]}]}`); r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	e.get("/Patient/" + id)
	if r := e.do(request{Method: http.MethodDelete, Path: "/Patient/" + id}); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	closeAudit(t, e)

	actions := map[string]string{}
	var read map[string]any
	for _, ev := range auditEvents(t, e, "entity=Patient/"+id+"&_sort=date") {
		code := ev["subtype"].([]any)[0].(map[string]any)["code"].(string)
		actions[code] = ev["action"].(string)
		if code == "read" {
			read = ev
		}
	}
	for code, action := range map[string]string{"create": "C", "update": "U", "read": "R", "delete": "D"} {
		if actions[code] != action {
			t.Errorf("the %s of Patient/%s: recorded with action %q, want %q (recorded: %v)", code, id, actions[code], action, actions)
		}
	}
	if read == nil {
		t.Fatal("no read recorded")
	}
	evID := read["id"].(string)
	r := e.get("/AuditEvent/" + evID)
	if r.Status != http.StatusOK || r.JSON(t)["recorded"] != read["recorded"] {
		t.Fatalf("AuditEvent/%s: %d %s", evID, r.Status, r.Body)
	}
	hist := e.get("/AuditEvent/" + evID + "/_history")
	entries, _ := hist.JSON(t)["entry"].([]any)
	if hist.Status != http.StatusOK || len(entries) != 1 {
		t.Fatalf("the history of AuditEvent/%s: %d %s", evID, hist.Status, hist.Body)
	}
	if v := entries[0].(map[string]any)["resource"].(map[string]any)["meta"].(map[string]any)["versionId"]; v != "1" {
		t.Fatalf("the history of AuditEvent/%s holds version %v, want 1", evID, v)
	}
	if r := e.get("/AuditEvent/" + evID + "/_history/1"); r.Status != http.StatusOK {
		t.Fatalf("AuditEvent/%s/_history/1: %d %s", evID, r.Status, r.Body)
	}
	if n := searchTotal(t, e, "/AuditEvent?agent:identifier=dev&outcome=0&date=ge2000-01-01&_summary=count"); n < 4 {
		t.Fatalf("%d AuditEvents of dev's successful requests, want at least the 4 above", n)
	}
	// The trail has no full-text index (_content, _text): its records are
	// found by AuditEvent's own parameters.
	strict := map[string]string{"Prefer": "handling=strict"}
	if r := e.do(request{Method: http.MethodGet, Path: "/AuditEvent?_content=dev", Header: strict}); r.Status != http.StatusBadRequest {
		t.Fatalf("AuditEvent?_content with handling=strict: %d %s", r.Status, r.Body)
	}
	if v, ok := seriesValue(e.scrape(), "fhirstore_audit_records_total", map[string]string{"outcome": "stored"}); !ok || v < 4 {
		t.Fatalf("fhirstore_audit_records_total{outcome=\"stored\"} = %v (found %v), want at least 4", v, ok)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSmartDiscovery: the SMART configuration and the CapabilityStatement's
// security block are public and name the token endpoint.
func TestSmartDiscovery(t *testing.T) {
	e := newEnv(t)
	none := ""
	r := e.do(request{Method: http.MethodGet, Path: "/.well-known/smart-configuration", Token: &none})
	if r.Status != http.StatusOK {
		t.Fatalf("smart-configuration: %d %s", r.Status, r.Body)
	}
	cfg := r.JSON(t)
	if tok, _ := cfg["token_endpoint"].(string); !strings.HasSuffix(tok, "/oauth2/token") || !strings.Contains(tok, e.tenant+".localhost") {
		t.Fatalf("token_endpoint %v", cfg["token_endpoint"])
	}
	caps := strings.Join(toStrings(cfg["capabilities"]), " ")
	for _, want := range []string{"client-confidential-symmetric", "client-confidential-asymmetric", "permission-v1", "permission-v2", "permission-patient"} {
		if !strings.Contains(caps, want) {
			t.Fatalf("capabilities %q lack %s", caps, want)
		}
	}
	r = e.do(request{Method: http.MethodGet, Path: "/metadata", Token: &none})
	sec := r.JSON(t)["rest"].([]any)[0].(map[string]any)["security"].(map[string]any)
	coding := sec["service"].([]any)[0].(map[string]any)["coding"].([]any)[0].(map[string]any)
	if coding["code"] != "SMART-on-FHIR" || coding["system"] != "http://terminology.hl7.org/CodeSystem/restful-security-service" {
		t.Fatalf("security service %v", coding)
	}
	ext := sec["extension"].([]any)[0].(map[string]any)
	inner := ext["extension"].([]any)[0].(map[string]any)
	if ext["url"] != "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris" || inner["url"] != "token" || inner["valueUri"] != cfg["token_endpoint"] {
		t.Fatalf("oauth-uris extension %v", ext)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// BenchmarkReadAudited reads one Patient with the audit trail on: each
// read queues an AuditEvent written in the background (compare
// BenchmarkRead). The trail is drained inside the timing, so the figure
// includes the writes.
func BenchmarkReadAudited(b *testing.B) {
	e := newEnv(b, func(c *server.Config, _ *store.Options) { c.Audit = true })
	path := "/Patient/" + seedPatients(b, e, 1)
	benchGet(b, e, path)
	closeAudit(b, e)
}

// TestAuditTrailOfTheTokenEndpoint: token requests are recorded too, a
// refused one as an anonymous minor failure, a granted one under the client.
func TestAuditTrailOfTheTokenEndpoint(t *testing.T) {
	e := newAuthEnv(t, nil, func(c *server.Config) { c.Audit = true })
	id, secret := secretClient(t, e.store, e.tenant, "system/*.read")
	if r := e.tokenRequest(tokenCall{form: form("grant_type", "client_credentials"), basic: [2]string{id, secret}}); r.Status != http.StatusOK {
		t.Fatalf("token: %d %s", r.Status, r.Body)
	}
	if r := e.tokenRequest(tokenCall{form: form("grant_type", "client_credentials"), basic: [2]string{id, "wrong"}}); r.Status != http.StatusUnauthorized {
		t.Fatalf("token with a wrong secret: %d %s", r.Status, r.Body)
	}
	closeAudit(t, e)
	var granted, refused int
	for _, ev := range auditEvents(t, e, "agent:identifier="+id) {
		if ev["outcome"] == "0" {
			granted++
		}
	}
	for _, ev := range auditEvents(t, e, "outcome=4") {
		desc, _ := ev["entity"].([]any)[0].(map[string]any)["description"].(string)
		if strings.HasPrefix(desc, "POST /oauth2/token") {
			refused++
		}
	}
	if granted != 1 || refused != 1 {
		t.Fatalf("token requests recorded: %d granted (want 1), %d refused (want 1)", granted, refused)
	}
}

// waitForAuditEvents polls the AuditEvent search until it counts at least
// want, without closing the server: the trail indexes while it is idle.
func waitForAuditEvents(t *testing.T, e *env, query string, want int) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := searchTotal(t, e, "/AuditEvent?_summary=count&"+query)
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAuditTrailIndexesWhileTheServerIsIdle: the records of requests
// become AuditEvents soon after the requests, with the server running.
func TestAuditTrailIndexesWhileTheServerIsIdle(t *testing.T) {
	e := newEnv(t, func(c *server.Config, _ *store.Options) { c.Audit = true })
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Idle"}]}`)
	const reads = 30
	for range reads {
		if r := e.get("/Patient/" + id); r.Status != http.StatusOK {
			t.Fatalf("read: %d %s", r.Status, r.Body)
		}
	}
	if n := waitForAuditEvents(t, e, "entity=Patient/"+id+"&subtype=read", reads); n != reads {
		t.Fatalf("%d AuditEvents of the reads, want %d", n, reads)
	}
}

// TestAuditRecordsSpooledBeforeTheStartAreIndexed: records a server
// spooled and did not index (it stopped first) become AuditEvents after
// the next start, with the trail off; an unreadable record is set aside
// and leaves the spool.
func TestAuditRecordsSpooledBeforeTheStartAreIndexed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	recs := []store.SpoolRecord{
		{Key: "0190a000-0000-7000-8000-000000000001", Data: []byte(`{"t":` + strconv.FormatInt(at, 10) + `,"r":"req1","m":"GET","p":"/fhir/r4/Patient/p1","s":200,"ty":"Patient","id":"p1","su":"nurse","a":"127.0.0.1"}`)},
		{Key: "0190a000-0000-7000-8000-000000000002", Data: []byte(`not json`)},
		{Key: "0190a000-0000-7000-8000-000000000003", Data: []byte(`{"t":` + strconv.FormatInt(at, 10) + `,"m":"DELETE","p":"/fhir/r4/Patient/p2","s":410,"ty":"Patient","id":"p2"}`)},
	}
	if err := e.store.Spool(ctx, e.tenant, recs); err != nil {
		t.Fatal(err)
	}
	h := server.New(e.cfg, e.store, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	t.Cleanup(func() { closeServer(t, h) })
	next := *e
	next.h, next.srv = h, httptest.NewServer(h)
	t.Cleanup(next.srv.Close)
	if n := waitForAuditEvents(t, &next, "", 2); n != 2 {
		t.Fatalf("%d AuditEvents from the spool, want 2", n)
	}
	r := next.get("/AuditEvent/" + recs[0].Key)
	if r.Status != http.StatusOK {
		t.Fatalf("AuditEvent/%s: %d %s", recs[0].Key, r.Status, r.Body)
	}
	ev := r.JSON(t)
	if ev["recorded"] != "2026-01-02T03:04:05.000Z" || ev["action"] != "R" || ev["outcome"] != "0" {
		t.Fatalf("the spooled read's AuditEvent: %s", r.Body)
	}
	if n := searchTotal(t, &next, "/AuditEvent?_summary=count&entity=Patient/p2&outcome=4&subtype=delete"); n != 1 {
		t.Fatalf("%d AuditEvents of the refused delete, want 1", n)
	}
	// The spool's rows go once their AuditEvents are stored, in a write
	// of their own.
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := e.store.Spooled(ctx, e.tenant)
		if err == nil && n == 0 {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("%d records still spooled (%v)", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAuditTrailPastItsBacklogLosesNothing: with a backlog of 3 records
// the trail spools no faster than it indexes, and every one of many
// concurrent requests still becomes one AuditEvent.
func TestAuditTrailPastItsBacklogLosesNothing(t *testing.T) {
	e := newEnv(t, func(c *server.Config, _ *store.Options) { c.Audit, c.AuditBacklog = true, 3 })
	id := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Backlog"}]}`)
	const clients, reads = 4, 25
	var wg sync.WaitGroup
	failed := make(chan string, clients*reads)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range reads {
				if r := e.get("/Patient/" + id); r.Status != http.StatusOK {
					failed <- string(r.Body)
				}
			}
		}()
	}
	wg.Wait()
	close(failed)
	for body := range failed {
		t.Fatalf("a read failed: %s", body)
	}
	if n := waitForAuditEvents(t, e, "entity=Patient/"+id+"&subtype=read", clients*reads); n != clients*reads {
		t.Fatalf("%d AuditEvents of the reads, want %d", n, clients*reads)
	}
}
