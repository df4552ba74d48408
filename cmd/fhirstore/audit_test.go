package main

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestAuditTrailSurvivesACleanShutdown: the AuditEvents of requests
// answered just before SIGTERM are in the database after a restart.
func TestAuditTrailSurvivesACleanShutdown(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	tok := tokenFor(t, dir, "demo")
	host := "demo.localhost:" + s.port
	id := createPatient(t, s, host, tok, "Audited")
	const reads = 150
	for i := 0; i < reads; i++ {
		if r := call(t, http.MethodGet, s.url("/fhir/r4/Patient/"+id), host, tok, ""); r.status != http.StatusOK {
			t.Fatalf("read %d: %d", i, r.status)
		}
	}
	if err := s.stop(); err != nil { // at once: most records are still queued
		t.Fatal(err)
	}

	s = startServer(t, "--addr", "127.0.0.1:0", "--data-dir", dir, "--audit=false")
	host = "demo.localhost:" + s.port
	r := call(t, http.MethodGet, s.url("/fhir/r4/AuditEvent?entity=Patient/"+id+"&subtype=read&_summary=count"), host, tok, "")
	var b struct{ Total int }
	if err := json.Unmarshal(r.body, &b); r.status != http.StatusOK || err != nil {
		t.Fatalf("AuditEvent search: %d %s", r.status, r.body)
	}
	if b.Total != reads {
		t.Fatalf("%d read AuditEvents after the restart, want %d", b.Total, reads)
	}
}
