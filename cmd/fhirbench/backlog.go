package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// backlogMetrics are the server's series whose sum is the audit trail's
// backlog: records waiting to be written, and records an earlier version
// spooled that are not audit rows yet.
var backlogMetrics = []string{"fhirstore_audit_queue_length", "fhirstore_audit_spooled_records"}

// backlogReport is the audit trail's backlog at the start and at the end
// of the workload: a run that ends with records still owed has measured
// the requests without all of the trail's cost.
type backlogReport struct {
	Start *float64 `json:"start"`
	End   *float64 `json:"end"`
	// Owed says the run ended with audit records not yet stored.
	Owed bool `json:"owed"`
	// Note says why the backlog is unknown (no metrics, or no trail).
	Note string `json:"note,omitempty"`
}

// auditBacklog reads the backlog from the server's metrics; ok is false
// when the server serves none of its series (the trail is off).
func (b *bench) auditBacklog(ctx context.Context) (n float64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.o.metricsURL, nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("GET %s: %d", b.o.metricsURL, resp.StatusCode)
	}
	return parseBacklog(resp.Body)
}

// parseBacklog sums the backlog's series in the Prometheus text format.
func parseBacklog(r io.Reader) (float64, bool, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), " ")
		if !ok || !isBacklogMetric(name) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q is not a number", name, rest)
		}
		sum, found = sum+v, true
	}
	return sum, found, sc.Err()
}

func isBacklogMetric(name string) bool {
	for _, m := range backlogMetrics {
		if name == m {
			return true
		}
	}
	return false
}

// measureBacklog fills the start (atStart) or the end of r.
func (b *bench) measureBacklog(ctx context.Context, r *backlogReport, atStart bool) {
	n, ok, err := b.auditBacklog(ctx)
	switch {
	case err != nil:
		r.Note = "backlog unknown: " + err.Error()
		return
	case !ok:
		r.Note = "the server reports no audit trail"
		return
	}
	if atStart {
		r.Start = &n
		return
	}
	r.End = &n
	r.Owed = n > 0
}

// writeText prints the backlog line, and says when work is still owed.
func (r *backlogReport) writeText(b *strings.Builder) {
	if r.Start == nil || r.End == nil {
		fmt.Fprintf(b, "\naudit backlog: %s\n", r.Note)
		return
	}
	fmt.Fprintf(b, "\naudit backlog: %.0f records at the start, %.0f at the end\n", *r.Start, *r.End)
	if r.Owed {
		fmt.Fprintf(b, "the run ended with work still owed: %.0f audit records not yet stored; the figures above do not include their cost\n", *r.End)
	}
}
