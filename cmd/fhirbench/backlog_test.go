package main

import (
	"encoding/json"
	"strings"
	"testing"

	"fhirstore/server"
)

// TestTheReportCarriesTheAuditBacklog: against a server that audits every
// request, the report gives the trail's backlog at the start and at the
// end of the workload, owed when some is left; without the trail it says
// so.
func TestTheReportCarriesTheAuditBacklog(t *testing.T) {
	base, tenant, dataDir := startServer(t, func(c *server.Config) { c.Audit, c.Metrics = true, server.NewMetrics() })
	out, log, err := runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "2", "--duration", "1s", "--seed", "3", "--json")
	if err != nil {
		t.Fatalf("fhirbench: %v\n%s\n%s", err, out, log)
	}
	var rep report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	bl := rep.AuditBacklog
	if bl == nil || bl.Start == nil || bl.End == nil || bl.Owed != (*bl.End > 0) || *bl.End < 0 {
		t.Fatalf("audit backlog in the report: %+v", bl)
	}

	base, tenant, dataDir = startServer(t, func(c *server.Config) { c.Metrics = server.NewMetrics() })
	out, log, err = runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "1", "--duration", "1s", "--seed", "2")
	if err != nil {
		t.Fatalf("fhirbench: %v\n%s\n%s", err, out, log)
	}
	if !strings.Contains(out, "audit backlog: the server reports no audit trail") {
		t.Fatalf("the text report of a run without the trail:\n%s", out)
	}
}

// TestARunEndingWithRecordsOwedSaysSo: the backlog series are summed, and
// a backlog left at the end is named in the text report.
func TestARunEndingWithRecordsOwedSaysSo(t *testing.T) {
	metrics := "# HELP x\nfhirstore_audit_queue_length 3\nfhirstore_audit_spooled_records 40\nfhirstore_audit_records_total{outcome=\"stored\"} 9\n"
	n, ok, err := parseBacklog(strings.NewReader(metrics))
	if err != nil || !ok || n != 43 {
		t.Fatalf("parseBacklog: %v %v %v, want 43", n, ok, err)
	}
	start := 0.0
	r := &backlogReport{Start: &start, End: &n, Owed: true}
	var b strings.Builder
	r.writeText(&b)
	if !strings.Contains(b.String(), "0 records at the start, 43 at the end") || !strings.Contains(b.String(), "work still owed: 43 audit records") {
		t.Fatalf("text: %s", b.String())
	}
}
