package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// maxSamples bounds the error descriptions a run keeps.
const maxSamples = 10

// recorder is one client's tally; only that client writes it.
type recorder struct {
	lat          [numOps][]time.Duration
	ok           [numOps]int
	precondition [numOps]int
	failed       [numOps]int
	requests     int
	byStatus     map[int]int
	errByStatus  map[int]int
	samples      []string
}

func newRecorder() *recorder {
	return &recorder{byStatus: map[int]int{}, errByStatus: map[int]int{}}
}

func (r *recorder) request(status int) {
	r.requests++
	r.byStatus[status]++
}

func (r *recorder) fail(k op, status int, why string) {
	r.errByStatus[status]++
	if len(r.samples) < maxSamples {
		r.samples = append(r.samples, k.String()+": "+why)
	}
}

// op records a finished operation; failed ones have no latency sample.
func (r *recorder) op(k op, out outcome, d time.Duration) {
	switch out {
	case outOK:
		r.ok[k]++
	case outPrecondition:
		r.precondition[k]++
	default:
		r.failed[k]++
		return
	}
	r.lat[k] = append(r.lat[k], d)
}

func mergeRecorders(recs []*recorder) *recorder {
	m := newRecorder()
	for _, r := range recs {
		for k := range numOps {
			m.lat[k] = append(m.lat[k], r.lat[k]...)
			m.ok[k] += r.ok[k]
			m.precondition[k] += r.precondition[k]
			m.failed[k] += r.failed[k]
		}
		m.requests += r.requests
		for s, n := range r.byStatus {
			m.byStatus[s] += n
		}
		for s, n := range r.errByStatus {
			m.errByStatus[s] += n
		}
		for _, s := range r.samples {
			if len(m.samples) < maxSamples {
				m.samples = append(m.samples, s)
			}
		}
	}
	return m
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// report is what a run prints, as text or JSON.
type report struct {
	URL            string         `json:"url"`
	Clients        int            `json:"clients"`
	Duration       string         `json:"duration"`
	Mix            string         `json:"mix"`
	ElapsedSeconds float64        `json:"elapsedSeconds"`
	Interrupted    bool           `json:"interrupted,omitempty"`
	Operations     []opReport     `json:"operations"`
	Total          totals         `json:"total"`
	ByStatus       map[string]int `json:"requestsByStatus"`
	ErrorsByStatus map[string]int `json:"errorsByStatus"`
	ErrorSamples   []string       `json:"errorSamples,omitempty"`
	Check          *checkReport   `json:"check,omitempty"`
	// Sampling is the server's memory and goroutines during the workload.
	Sampling *samplingReport `json:"serverSampling,omitempty"`
	// AuditBacklog is the audit trail's backlog at the start and the end.
	AuditBacklog *backlogReport `json:"auditBacklog,omitempty"`
}

// opReport is one operation kind. Latency covers every request of the
// operation (an update is a read and a conditional write).
type opReport struct {
	Name               string  `json:"name"`
	Count              int     `json:"count"`
	OK                 int     `json:"ok"`
	PreconditionFailed int     `json:"preconditionFailed"`
	Errors             int     `json:"errors"`
	PerSecond          float64 `json:"perSecond"`
	P50Ms              float64 `json:"p50Ms"`
	P99Ms              float64 `json:"p99Ms"`
	MaxMs              float64 `json:"maxMs"`
}

type totals struct {
	Operations         int     `json:"operations"`
	PerSecond          float64 `json:"perSecond"`
	Requests           int     `json:"requests"`
	RequestsPerSecond  float64 `json:"requestsPerSecond"`
	Errors             int     `json:"errors"`
	PreconditionFailed int     `json:"preconditionFailed"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func newReport(o *options, r *recorder, elapsed time.Duration) *report {
	secs := elapsed.Seconds()
	rep := &report{
		URL: o.base, Clients: o.clients, Duration: o.duration.String(), Mix: o.mix.String(),
		ElapsedSeconds: math.Round(secs*100) / 100,
		ByStatus:       statusKeys(r.byStatus), ErrorsByStatus: statusKeys(r.errByStatus), ErrorSamples: r.samples,
	}
	for k := range numOps {
		n := r.ok[k] + r.precondition[k] + r.failed[k]
		if n == 0 && (k >= numPicked || o.mix[k] == 0) {
			continue // neither in the mix nor run
		}
		lat := slices.Clone(r.lat[k])
		slices.Sort(lat)
		rep.Operations = append(rep.Operations, opReport{
			Name: k.String(), Count: n, OK: r.ok[k], PreconditionFailed: r.precondition[k], Errors: r.failed[k],
			PerSecond: math.Round(float64(n)/secs*10) / 10,
			P50Ms:     ms(percentile(lat, 50)), P99Ms: ms(percentile(lat, 99)), MaxMs: ms(percentile(lat, 100)),
		})
		if k >= numPicked {
			continue // the requests of a crud cycle: the cycle counts
		}
		rep.Total.Operations += n
		rep.Total.Errors += r.failed[k]
		rep.Total.PreconditionFailed += r.precondition[k]
	}
	rep.Total.PerSecond = math.Round(float64(rep.Total.Operations)/secs*10) / 10
	rep.Total.Requests = r.requests
	rep.Total.RequestsPerSecond = math.Round(float64(r.requests)/secs*10) / 10
	return rep
}

// statusKeys names statuses for output; 0 (no answer) is "transport".
func statusKeys(m map[int]int) map[string]int {
	out := make(map[string]int, len(m))
	for s, n := range m {
		key := strconv.Itoa(s)
		if s == 0 {
			key = "transport"
		}
		out[key] = n
	}
	return out
}

// failures says why the run failed, or "" when it did not.
func (r *report) failures() string {
	var why []string
	if n := r.Total.Errors; n > 0 {
		why = append(why, fmt.Sprintf("%d operations failed", n))
	}
	if c := r.Check; c != nil {
		if n := c.Lost + c.Duplicated; n > 0 {
			why = append(why, fmt.Sprintf("%d lost or duplicated versions", n))
		}
		if c.CurrentMismatch > 0 {
			why = append(why, fmt.Sprintf("%d resources whose current version is not their newest", c.CurrentMismatch))
		}
		if c.Errors > 0 {
			why = append(why, fmt.Sprintf("%d check requests failed", c.Errors))
		}
	}
	if !r.Interrupted {
		why = append(why, r.Sampling.limits()...)
	}
	return strings.Join(why, ", ")
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *report) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "fhirbench %s: %d clients, %s (%.1fs), mix %s\n", r.URL, r.Clients, r.Duration, r.ElapsedSeconds, r.Mix)
	if r.Interrupted {
		b.WriteString("interrupted: the workload stopped early and nothing was checked\n")
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tcount\tok\t412\terrors\tops/s\tp50 ms\tp99 ms\tmax ms\t")
	for _, o := range r.Operations {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t\n", o.Name, o.Count, o.OK, o.PreconditionFailed, o.Errors, o.PerSecond, o.P50Ms, o.P99Ms, o.MaxMs)
	}
	fmt.Fprintf(tw, "total\t%d\t\t%d\t%d\t%.1f\t\t\t\t\n", r.Total.Operations, r.Total.PreconditionFailed, r.Total.Errors, r.Total.PerSecond)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nrequests: %d (%.1f/s), by status: %s\n", r.Total.Requests, r.Total.RequestsPerSecond, formatCounts(r.ByStatus))
	fmt.Fprintf(&b, "errors by status: %s\n", formatCounts(r.ErrorsByStatus))
	for _, s := range r.ErrorSamples {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	if c := r.Check; c != nil {
		fmt.Fprintf(&b, "check: %d resources, %d versions in %.1fs; lost %d, duplicated %d, current not newest %d, failed check requests %d\n",
			c.Resources, c.Versions, c.Seconds, c.Lost, c.Duplicated, c.CurrentMismatch, c.Errors)
		if c.PagingDisagreements > 0 {
			fmt.Fprintf(&b, "  type history pages disagreed with instance history for %d resources\n", c.PagingDisagreements)
		}
		for _, p := range c.Problems {
			fmt.Fprintf(&b, "  %s\n", p)
		}
	}
	if r.Sampling != nil {
		r.Sampling.writeText(&b)
	}
	if r.AuditBacklog != nil {
		r.AuditBacklog.writeText(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
