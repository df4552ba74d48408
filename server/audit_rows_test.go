package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"fhirstore/server"
	"fhirstore/server/auth"
	"fhirstore/store"
)

// auditedEnv is an env whose trail waits for its records in a log of a
// directory of its own, as `fhirstore serve` runs it.
func auditedEnv(t *testing.T, mutate ...func(*server.Config)) *env {
	t.Helper()
	dir := t.TempDir()
	return newEnv(t, func(c *server.Config, _ *store.Options) {
		c.Audit, c.AuditSpoolDir = true, dir
		for _, m := range mutate {
			m(c)
		}
	})
}

// TestAuditRowsAreSearchedByEachParameter: the records of a few requests
// are found by every search parameter the trail's rows hold (each with
// and without a system or type where it has one), sorted by date, paged,
// and read by id as the AuditEvent their searches return.
func TestAuditRowsAreSearchedByEachParameter(t *testing.T) {
	e := auditedEnv(t)
	before := time.Now().UTC().Add(-time.Second).Format(time.RFC3339)
	p := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Searched"}]}`)
	e.get("/Patient/" + p)
	e.get("/Patient/" + p)
	e.get("/Observation?patient=" + p)
	if r := e.get("/Observation/missing-one"); r.Status != http.StatusNotFound {
		t.Fatalf("read of a missing Observation: %d", r.Status)
	}
	closeAudit(t, e) // every record is an audit row; the searches below are not recorded
	after := time.Now().UTC().Add(time.Second).Format(time.RFC3339)
	for query, want := range map[string]int{
		"entity=Patient/" + p:       4, // the create, the two reads and the search limited to the patient
		"patient=" + p:              4, // and the search limited to the patient
		"patient=Patient/" + p:      4,
		"subtype=read&patient=" + p: 2,
		"subtype=http://hl7.org/fhir/restful-interaction|create&entity=Patient/" + p:       1,
		"subtype=search-type&patient=" + p:                                                 1,
		"action=R&patient=" + p:                                                            2,
		"action=http://hl7.org/fhir/audit-event-action|C&patient=" + p:                     1,
		"outcome=4&entity=Observation/missing-one":                                         1,
		"outcome=http://hl7.org/fhir/audit-event-outcome|0&entity=Observation/missing-one": 0,
		"agent:identifier=dev&patient=" + p:                                                4,
		"agent:identifier=someone-else&patient=" + p:                                       0,
		"type=rest&patient=" + p:                                                           4,
		"type=http://terminology.hl7.org/CodeSystem/audit-event-type|rest&patient=" + p:    4,
		"type=other&patient=" + p:                                                          0,
		"date=ge" + before + "&date=le" + after + "&patient=" + p:                          4,
		"date=lt" + before + "&patient=" + p:                                               0,
		"_lastUpdated=ge" + before + "&patient=" + p:                                       4,
		"_lastUpdated=gt" + after + "&patient=" + p:                                        0,
	} {
		if n := searchTotal(t, e, "/AuditEvent?_summary=count&"+queryEscape(query)); n != want {
			t.Errorf("AuditEvent?%s: %d, want %d", query, n, want)
		}
	}

	// Newest first, two a page: the pages hold the four records once each.
	var recorded []string
	ids := map[string]bool{}
	next := "/AuditEvent?_sort=-date&_count=2&patient=" + p
	for next != "" {
		r := e.get(next)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", next, r.Status, r.Body)
		}
		b := r.JSON(t)
		entries, _ := b["entry"].([]any)
		if len(entries) > 2 {
			t.Fatalf("a page of %d entries with _count=2", len(entries))
		}
		for _, en := range entries {
			ev := en.(map[string]any)["resource"].(map[string]any)
			ids[ev["id"].(string)] = true
			recorded = append(recorded, ev["recorded"].(string))
		}
		next = ""
		for _, l := range b["link"].([]any) {
			if l := l.(map[string]any); l["relation"] == "next" {
				u, _ := url.Parse(l["url"].(string))
				next = strings.TrimPrefix(u.Path, "/fhir/r4") + "?" + u.RawQuery
			}
		}
	}
	if len(ids) != 4 || len(recorded) != 4 {
		t.Fatalf("the pages held %d records (%d distinct), want 4", len(recorded), len(ids))
	}
	for i := 1; i < len(recorded); i++ {
		if recorded[i] > recorded[i-1] {
			t.Fatalf("_sort=-date: %v is not newest first", recorded)
		}
	}

	// The search limited to the patient names it as an entity of its own.
	events := auditEvents(t, e, "subtype=search-type&patient="+p)
	if len(events) != 1 {
		t.Fatalf("%d search events", len(events))
	}
	ev := events[0]
	entities := ev["entity"].([]any)
	if len(entities) != 2 || entities[1].(map[string]any)["what"].(map[string]any)["reference"] != "Patient/"+p {
		t.Fatalf("the search's entities: %v", entities)
	}
	r := e.get("/AuditEvent/" + ev["id"].(string))
	got := r.JSON(t)
	meta, _ := got["meta"].(map[string]any)
	if r.Status != http.StatusOK || got["recorded"] != ev["recorded"] || meta["versionId"] != "1" || got["source"].(map[string]any)["site"] != e.tenant {
		t.Fatalf("AuditEvent/%s: %d %s", ev["id"], r.Status, r.Body)
	}
}

// queryEscape escapes the values of a query written plainly (their | and :).
func queryEscape(q string) string {
	var parts []string
	for _, kv := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		parts = append(parts, k+"="+url.QueryEscape(v))
	}
	return strings.Join(parts, "&")
}

// TestAuditRecordsLoggedBeforeACrashAreStored: records a server appended
// to its log and did not store (it died first) become AuditEvents after
// the next start; a last line cut short by the crash is skipped; once they
// are stored and the server closes, the log is empty.
func TestAuditRecordsLoggedBeforeACrashAreStored(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC).UnixNano()
	e := newEnv(t)
	keys := []string{"0190b000-0000-7000-8000-000000000001", "0190b000-0000-7000-8000-000000000002"}
	lines := keys[0] + ` {"t":` + itoa(at) + `,"si":"` + e.tenant + `","m":"GET","p":"/fhir/r4/Patient/p9","s":200,"ty":"Patient","id":"p9","pt":"p9","i":"read","ac":"R","su":"nurse"}` + "\n" +
		keys[1] + ` {"t":` + itoa(at) + `,"si":"` + e.tenant + `","m":"DELETE","p":"/fhir/r4/Patient/p9","s":410,"ty":"Patient","id":"p9"}` + "\n" +
		`0190b000-0000-7000-8000-000000000003 {"t":` + itoa(at) + `,"si":"` // the crash cut this one short
	path := filepath.Join(dir, server.AuditLogFile)
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := e.cfg
	cfg.AuditSpoolDir = dir
	h := server.New(cfg, e.store, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	next := *e
	next.h, next.srv = h, httptest.NewServer(h)
	t.Cleanup(next.srv.Close)
	if n := waitForAuditEvents(t, &next, "entity=Patient/p9", 2); n != 2 {
		t.Fatalf("%d AuditEvents from the log, want 2", n)
	}
	r := next.get("/AuditEvent/" + keys[0])
	if ev := r.JSON(t); r.Status != http.StatusOK || ev["recorded"] != "2026-02-03T04:05:06.000Z" || ev["action"] != "R" {
		t.Fatalf("AuditEvent/%s: %d %s", keys[0], r.Status, r.Body)
	}
	if n := searchTotal(t, &next, "/AuditEvent?_summary=count&entity=Patient/p9&action=D&outcome=4"); n != 1 {
		t.Fatalf("%d AuditEvents of the refused delete, rendered from an earlier record's fields, want 1", n)
	}
	closeServer(t, h)
	if st, err := os.Stat(path); err != nil || st.Size() != 0 {
		t.Fatalf("the log after a clean close: %v, %v; want empty", st, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestAuditRetentionPurgesOldRecords: with a retention, the records older
// than it are purged at the start; newer records and the AuditEvents
// clients wrote stay.
func TestAuditRetentionPurgesOldRecords(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old := time.Now().Add(-3 * time.Hour).UnixNano()
	recs := []store.AuditRecord{
		{At: old, Site: e.tenant, Method: "GET", Path: "/fhir/r4/Patient/old", Status: 200, Type: "Patient", ID: "old", Interaction: "read", Action: "R"},
		{At: time.Now().UnixNano(), Site: e.tenant, Method: "GET", Path: "/fhir/r4/Patient/new", Status: 200, Type: "Patient", ID: "new", Interaction: "read", Action: "R"},
	}
	if err := e.store.Audit(ctx, e.tenant, recs); err != nil {
		t.Fatal(err)
	}
	client := e.create("AuditEvent", `{"resourceType":"AuditEvent","type":{"system":"http://dicom.nema.org/resources/ontology/DCM","code":"110100"},
		"recorded":"2020-01-01T00:00:00Z","agent":[{"requestor":true,"who":{"display":"an app"}}],"source":{"observer":{"display":"an app"}}}`)
	if n := searchTotal(t, e, "/AuditEvent?_summary=count&entity=Patient/old"); n != 1 {
		t.Fatalf("%d records of the old read before the purge, want 1", n)
	}
	cfg := e.cfg
	cfg.AuditRetention = time.Hour
	h := server.New(cfg, e.store, auth.HS256{Key: testKey, Issuer: auth.DevIssuer, Leeway: time.Minute}, zap.NewNop())
	t.Cleanup(func() { closeServer(t, h) })
	next := *e
	next.h, next.srv = h, httptest.NewServer(h)
	t.Cleanup(next.srv.Close)
	deadline := time.Now().Add(20 * time.Second)
	for searchTotal(t, &next, "/AuditEvent?_summary=count&entity=Patient/old") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the record older than the retention was not purged")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := searchTotal(t, &next, "/AuditEvent?_summary=count&entity=Patient/new"); n != 1 {
		t.Fatalf("%d records of the recent read after the purge, want 1", n)
	}
	if r := next.get("/AuditEvent/" + client); r.Status != http.StatusOK {
		t.Fatalf("the client's AuditEvent after the purge: %d %s", r.Status, r.Body)
	}
}

// TestAuditRowsAreExported: $export writes the trail's records as the
// AuditEvents they are read as, beside the AuditEvents clients wrote.
func TestAuditRowsAreExported(t *testing.T) {
	x := newExportEnv(t)
	at := time.Now().Add(-time.Minute).UnixNano()
	recs := []store.AuditRecord{
		{Key: "0190c000-0000-7000-8000-000000000001", At: at, Site: x.tenant, Method: "GET", Path: "/fhir/r4/Patient/p1", Status: 200, Type: "Patient", ID: "p1", Patient: "p1", Interaction: "read", Action: "R", Subject: "nurse"},
		{Key: "0190c000-0000-7000-8000-000000000002", At: at, Site: x.tenant, Method: "DELETE", Path: "/fhir/r4/Patient/p1", Status: 204, Type: "Patient", ID: "p1", Patient: "p1", Interaction: "delete", Action: "D", Subject: "nurse"},
	}
	if err := x.store.Audit(context.Background(), x.tenant, recs); err != nil {
		t.Fatal(err)
	}
	_, lines := x.export("/$export?_type=AuditEvent")
	got := map[string]map[string]any{}
	for _, l := range lines["AuditEvent"] {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("an exported line is not JSON: %v: %s", err, l)
		}
		got[ev["id"].(string)] = ev
	}
	if len(got) != 2 {
		t.Fatalf("%d AuditEvents exported, want 2: %v", len(got), lines)
	}
	del := got[recs[1].Key]
	if del["action"] != "D" || del["resourceType"] != "AuditEvent" || del["entity"].([]any)[0].(map[string]any)["what"].(map[string]any)["reference"] != "Patient/p1" {
		t.Fatalf("the exported delete: %v", del)
	}
}
