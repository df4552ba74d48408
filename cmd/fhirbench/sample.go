package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// gauge is one series of the server's /metrics that the run follows; the
// standard Go and process collectors of the Prometheus client serve them.
type gauge struct {
	name   string // key in samples and the JSON report
	label  string // in the text report
	metric string
	bytes  bool
}

var gauges = []gauge{
	{"rssBytes", "RSS", "process_resident_memory_bytes", true},
	{"heapInuseBytes", "heap in use", "go_memstats_heap_inuse_bytes", true},
	{"goroutines", "goroutines", "go_goroutines", false},
}

// sample is one scrape: seconds since the workload started and the value
// of each gauge the server served.
type sample struct {
	Seconds float64            `json:"seconds"`
	Values  map[string]float64 `json:"values"`
}

// samplingReport is the server's memory and goroutines over the workload.
// Growth compares the end with the sample after warm-up, so that start-up
// allocations and the first fill of pools and caches do not count.
type samplingReport struct {
	MetricsURL    string  `json:"metricsUrl"`
	EverySeconds  float64 `json:"everySeconds"`
	WarmupSeconds float64 `json:"warmupSeconds"`
	// Note says why nothing was sampled (the server has no /metrics).
	Note          string         `json:"note,omitempty"`
	FailedScrapes int            `json:"failedScrapes"`
	FirstFailure  string         `json:"firstFailure,omitempty"`
	Series        []seriesReport `json:"series,omitempty"`
	Samples       []sample       `json:"samples,omitempty"`
	// The bounds of the run: percent (0 is no check) and a count (-1 is
	// no check).
	MaxRSSGrowthPercent float64 `json:"maxRssGrowthPercent"`
	MaxGoroutineGrowth  int     `json:"maxGoroutineGrowth"`
}

// seriesReport sums up one gauge. AfterWarmup is the first sample at or
// after the warm-up (null when the run stopped before), End the last one of
// the workload, Max the largest of all; growth is End against AfterWarmup.
type seriesReport struct {
	Name          string   `json:"name"`
	Metric        string   `json:"metric"`
	Start         float64  `json:"start"`
	AfterWarmup   *float64 `json:"afterWarmup"`
	End           float64  `json:"end"`
	Max           float64  `json:"max"`
	Growth        float64  `json:"growth"`
	GrowthPercent float64  `json:"growthPercent"`
}

// sampler scrapes the server's /metrics on a schedule during the workload.
type sampler struct {
	b      *bench
	url    string
	warmup time.Duration
	every  time.Duration

	mu        sync.Mutex
	samples   []sample
	warmIndex int // index of the first sample at or after the warm-up; -1 before
	failed    int
	firstFail string
	note      string
}

// errNoMetrics means the server answered 404: it serves no metrics.
var errNoMetrics = fmt.Errorf("no metrics (404)")

// newSampler asks /metrics once before the workload. It returns nil when
// sampling is off, and a sampler that only carries a note when the server
// answers 404.
func (b *bench) newSampler(ctx context.Context) *sampler {
	if b.o.sampleEvery <= 0 {
		return nil
	}
	s := &sampler{b: b, url: b.o.metricsURL, warmup: b.o.warmup, every: b.o.sampleEvery, warmIndex: -1}
	if _, err := s.scrape(ctx); err == errNoMetrics {
		s.note = s.url + " answers 404: the server serves no metrics, so memory and goroutines are not sampled"
		fmt.Fprintf(b.log, "fhirbench: %s\n", s.note)
	}
	return s
}

// offsets are the moments to sample: the start, every interval, the end of
// the warm-up and the end of the workload.
func (s *sampler) offsets(d time.Duration) []time.Duration {
	at := []time.Duration{0, s.warmup, d}
	for t := s.every; t < d; t += s.every {
		at = append(at, t)
	}
	slices.Sort(at)
	return slices.Compact(at)
}

// run samples from start until the workload's duration d is over (the last
// sample is taken then) or ctx ends.
func (s *sampler) run(ctx context.Context, start time.Time, d time.Duration) {
	if s.note != "" {
		return
	}
	offsets := s.offsets(d)
	for i, at := range offsets {
		if i+1 < len(offsets) && at != s.warmup && time.Until(start.Add(offsets[i+1])) <= 0 {
			continue // a slow scrape overran this one and the next is due
		}
		t := time.NewTimer(max(time.Until(start.Add(at)), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		took := time.Since(start)
		values, err := s.scrape(ctx)
		s.mu.Lock()
		if err != nil {
			s.failed++
			if s.firstFail == "" {
				s.firstFail = fmt.Sprintf("%.0fs: %v", took.Seconds(), err)
			}
		} else {
			s.samples = append(s.samples, sample{Seconds: math.Round(took.Seconds()*10) / 10, Values: values})
			if s.warmIndex < 0 && at >= s.warmup {
				s.warmIndex = len(s.samples) - 1
			}
		}
		s.mu.Unlock()
	}
}

// scrapeLimit bounds one GET of /metrics; the server answers it from memory.
const scrapeLimit = 10 * time.Second

// scrape reads the gauges from the Prometheus text format.
func (s *sampler) scrape(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, errNoMetrics
	default:
		return nil, fmt.Errorf("GET %s: %d", s.url, resp.StatusCode)
	}
	return parseGauges(resp.Body)
}

// parseGauges picks the unlabelled samples of the followed gauges out of
// the Prometheus text format.
func parseGauges(r io.Reader) (map[string]float64, error) {
	byMetric := map[string]string{}
	for _, g := range gauges {
		byMetric[g.metric] = g.name
	}
	values := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), " ")
		key, followed := byMetric[name]
		if !ok || !followed {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", name, rest)
		}
		values[key] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return values, nil
}

// report sums up the samples.
func (s *sampler) report() *samplingReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &samplingReport{
		MetricsURL: s.url, EverySeconds: s.every.Seconds(), WarmupSeconds: s.warmup.Seconds(), Note: s.note,
		FailedScrapes: s.failed, FirstFailure: s.firstFail, Samples: s.samples,
	}
	if len(s.samples) == 0 {
		return r
	}
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	for _, g := range gauges {
		if _, ok := last.Values[g.name]; !ok {
			continue
		}
		sr := seriesReport{Name: g.name, Metric: g.metric, Start: first.Values[g.name], End: last.Values[g.name]}
		for _, smp := range s.samples {
			sr.Max = max(sr.Max, smp.Values[g.name])
		}
		if s.warmIndex >= 0 {
			warm := s.samples[s.warmIndex].Values[g.name]
			sr.AfterWarmup = &warm
			sr.Growth = sr.End - warm
			if warm > 0 {
				sr.GrowthPercent = math.Round(sr.Growth/warm*1000) / 10
			}
		}
		r.Series = append(r.Series, sr)
	}
	return r
}

// series finds a gauge's summary; ok is false when it was not sampled or
// no sample came after the warm-up.
func (r *samplingReport) series(name string) (seriesReport, bool) {
	if r == nil {
		return seriesReport{}, false
	}
	for _, sr := range r.Series {
		if sr.Name == name {
			return sr, sr.AfterWarmup != nil
		}
	}
	return seriesReport{}, false
}

// limits says which sampled growth exceeds its bound; a bound that could
// not be checked against a server that serves metrics is a failure too,
// while a server without /metrics only gets the note.
func (r *samplingReport) limits() []string {
	if r == nil || r.Note != "" {
		return nil
	}
	maxRSSPercent, maxGoroutines := r.MaxRSSGrowthPercent, r.MaxGoroutineGrowth
	var why []string
	if maxRSSPercent > 0 {
		if sr, ok := r.series("rssBytes"); !ok {
			why = append(why, "no RSS after warm-up to check --max-rss-growth against")
		} else if sr.GrowthPercent > maxRSSPercent {
			why = append(why, fmt.Sprintf("RSS grew %.1f%% after warm-up (limit %g%%)", sr.GrowthPercent, maxRSSPercent))
		}
	}
	if maxGoroutines >= 0 {
		if sr, ok := r.series("goroutines"); !ok {
			why = append(why, "no goroutine count after warm-up to check --max-goroutine-growth against")
		} else if sr.Growth > float64(maxGoroutines) {
			why = append(why, fmt.Sprintf("goroutines grew by %.0f after warm-up (limit %d)", sr.Growth, maxGoroutines))
		}
	}
	return why
}

// writeText prints the summary table of the sampled gauges.
func (r *samplingReport) writeText(b *strings.Builder) {
	if r.Note != "" {
		fmt.Fprintf(b, "\nmemory and goroutines: not sampled: %s\n", r.Note)
		return
	}
	fmt.Fprintf(b, "\nserver memory and goroutines from %s: %d samples every %gs, warm-up %gs\n", r.MetricsURL, len(r.Samples), r.EverySeconds, r.WarmupSeconds)
	if r.FailedScrapes > 0 {
		fmt.Fprintf(b, "  %d scrapes failed, the first at %s\n", r.FailedScrapes, r.FirstFailure)
	}
	if len(r.Series) == 0 {
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tstart\tafter warm-up\tend\tgrowth\tmax\t")
	for _, g := range gauges {
		sr, ok := r.series(g.name)
		if !ok && sr.Name == "" {
			continue
		}
		f := formatCount
		if g.bytes {
			f = formatMiB
		}
		warm, growth := "-", "-"
		if ok {
			warm = f(*sr.AfterWarmup)
			growth = fmt.Sprintf("%+.1f%%", sr.GrowthPercent)
			if !g.bytes {
				growth = fmt.Sprintf("%+.0f (%s)", sr.Growth, growth)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t\n", g.label, f(sr.Start), warm, f(sr.End), growth, f(sr.Max))
	}
	_ = tw.Flush() // a strings.Builder does not fail
}

func formatMiB(v float64) string   { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
func formatCount(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
