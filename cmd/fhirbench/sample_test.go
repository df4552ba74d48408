package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fhirstore/server"
)

// withMetrics serves /metrics from fresh server.Metrics, as `fhirstore
// serve` does by default.
func withMetrics(c *server.Config) { c.Metrics = server.NewMetrics() }

func TestTheServersMemoryAndGoroutinesAreSampledDuringTheRun(t *testing.T) {
	base, tenant, dataDir := startServer(t, withMetrics)
	out, log, err := runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "2", "--duration", "3s",
		"--seed", "4", "--sample-every", "500ms", "--warmup", "1s", "--max-rss-growth", "1000", "--max-goroutine-growth", "1000", "--json")
	if err != nil {
		t.Fatalf("fhirbench: %v\nstdout:\n%s\nstderr:\n%s", err, out, log)
	}
	var rep report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	s := rep.Sampling
	if s == nil {
		t.Fatalf("no sampling in the report:\n%s", out)
	}
	if want := strings.TrimSuffix(base, "/fhir/r4") + "/metrics"; s.MetricsURL != want {
		t.Errorf("sampled %s, want %s (the host of --url)", s.MetricsURL, want)
	}
	// 0, 0.5, …, 2.5 s and the end; a scrape may overrun the next one.
	if len(s.Samples) < 4 || s.FailedScrapes != 0 || s.Note != "" {
		t.Errorf("%d samples, %d failed scrapes (%s), note %q", len(s.Samples), s.FailedScrapes, s.FirstFailure, s.Note)
	}
	if s.WarmupSeconds != 1 || s.EverySeconds != 0.5 || s.MaxRSSGrowthPercent != 1000 || s.MaxGoroutineGrowth != 1000 {
		t.Errorf("warm-up %gs, every %gs, bounds %g%% and %d", s.WarmupSeconds, s.EverySeconds, s.MaxRSSGrowthPercent, s.MaxGoroutineGrowth)
	}
	if first := s.Samples[0].Seconds; first > 0.2 {
		t.Errorf("the first sample is at %gs, want the start of the workload", first)
	}
	if last := s.Samples[len(s.Samples)-1].Seconds; last < 2.9 {
		t.Errorf("the last sample is at %gs, want the end of the 3s workload", last)
	}
	for _, g := range gauges {
		sr, ok := s.series(g.name)
		if !ok {
			t.Errorf("no %s (%s) after warm-up: %+v", g.name, g.metric, s.Series)
			continue
		}
		if sr.Start <= 0 || *sr.AfterWarmup <= 0 || sr.End <= 0 || sr.Max < sr.End || sr.Max < *sr.AfterWarmup || sr.Max < sr.Start {
			t.Errorf("%s: start %g, after warm-up %g, end %g, max %g", g.name, sr.Start, *sr.AfterWarmup, sr.End, sr.Max)
		}
		if sr.Growth != sr.End-*sr.AfterWarmup {
			t.Errorf("%s: growth %g, want end − after warm-up = %g", g.name, sr.Growth, sr.End-*sr.AfterWarmup)
		}
	}
}

func TestTheTextReportSumsUpTheSamples(t *testing.T) {
	base, tenant, dataDir := startServer(t, withMetrics)
	out, log, err := runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "1", "--duration", "1s",
		"--seed", "2", "--sample-every", "250ms", "--check=false")
	if err != nil {
		t.Fatalf("fhirbench: %v\n%s\n%s", err, out, log)
	}
	for _, want := range []string{"server memory and goroutines from ", "warm-up 0.2s", "after warm-up", "RSS", "heap in use", "goroutines", " MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestAServerWithoutMetricsIsNotSampled(t *testing.T) {
	base, tenant, dataDir := startServer(t) // no Config.Metrics: /metrics is 404
	out, log, err := runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "1", "--duration", "1s",
		"--seed", "2", "--sample-every", "250ms", "--max-goroutine-growth", "0", "--max-rss-growth", "1", "--check=false")
	if err != nil {
		t.Fatalf("fhirbench failed although only the samples are missing: %v\n%s\n%s", err, out, log)
	}
	if !strings.Contains(out, "not sampled") || !strings.Contains(log, "answers 404") {
		t.Errorf("no note that nothing was sampled:\nstdout:\n%s\nstderr:\n%s", out, log)
	}
}

// growingMetrics serves /metrics whose goroutines and RSS grow with every
// scrape, as a server that leaks would.
func growingMetrics(t *testing.T) string {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := n.Add(1)
		fmt.Fprintf(w, "# TYPE go_goroutines gauge\ngo_goroutines %d\n", 20+10*i)
		fmt.Fprintf(w, "process_resident_memory_bytes %d\ngo_memstats_heap_inuse_bytes 1e+06\n", 100<<20+i<<20)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

func TestGrowthPastABoundFailsTheRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"goroutines", []string{"--max-goroutine-growth", "5"}, "goroutines grew by"},
		{"RSS", []string{"--max-rss-growth", "0.5"}, "RSS grew"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, tenant, dataDir := startServer(t)
			args := append([]string{"--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "1", "--duration", "1500ms",
				"--seed", "2", "--sample-every", "250ms", "--warmup", "250ms", "--check=false", "--metrics-url", growingMetrics(t)}, tc.flags...)
			out, log, err := runBench(t, args...)
			if !errors.Is(err, errFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a failed run because %s\n%s\n%s", err, tc.want, out, log)
			}
		})
	}
	t.Run("within the bounds", func(t *testing.T) {
		base, tenant, dataDir := startServer(t)
		out, log, err := runBench(t, "--url", base, "--data-dir", dataDir, "--tenant", tenant, "--clients", "1", "--duration", "1500ms",
			"--seed", "2", "--sample-every", "250ms", "--warmup", "250ms", "--check=false", "--metrics-url", growingMetrics(t),
			"--max-goroutine-growth", "1000", "--max-rss-growth", "50")
		if err != nil {
			t.Fatalf("fhirbench: %v\n%s\n%s", err, out, log)
		}
	})
}

func TestSamplingFlags(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		warmup     time.Duration
		metricsURL string
		err        string
	}{
		{"the warm-up is 20% of a short run", []string{"--duration", "20s"}, 4 * time.Second, "http://127.0.0.1:18080/metrics", ""},
		{"the warm-up is at most a minute", []string{"--duration", "10m"}, time.Minute, "http://127.0.0.1:18080/metrics", ""},
		{"a warm-up of 0 is the first sample", []string{"--warmup", "0s"}, 0, "http://127.0.0.1:18080/metrics", ""},
		{"another metrics URL", []string{"--metrics-url", "http://localhost:9090/m"}, 6 * time.Second, "http://localhost:9090/m", ""},
		{"a warm-up as long as the run", []string{"--duration", "1m", "--warmup", "1m"}, 0, "", "--warmup"},
		{"a negative interval", []string{"--sample-every", "-1s"}, 0, "", "--sample-every"},
		{"a bound without sampling", []string{"--sample-every", "0", "--max-goroutine-growth", "10"}, 0, "", "need sampling"},
		{"a negative RSS bound", []string{"--max-rss-growth", "-5"}, 0, "", "--max-rss-growth"},
		{"a goroutine bound below -1", []string{"--max-goroutine-growth", "-2"}, 0, "", "--max-goroutine-growth"},
		{"a metrics URL elsewhere", []string{"--metrics-url", "http://10.0.0.5:8080/metrics"}, 0, "", "--allow-remote"},
		{"a metrics URL that is not http", []string{"--metrics-url", "ftp://localhost/metrics"}, 0, "", "--metrics-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseOptions(append([]string{"--url", "http://127.0.0.1:18080/fhir/r4", "--token", "t"}, tc.args...), &bytes.Buffer{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.warmup != tc.warmup || o.metricsURL != tc.metricsURL {
				t.Fatalf("warm-up %s, metrics %s; want %s, %s", o.warmup, o.metricsURL, tc.warmup, tc.metricsURL)
			}
		})
	}
}

func TestGaugesAreReadFromThePrometheusTextFormat(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_gc_duration_seconds{quantile="0.5"} 3.1e-05
go_memstats_heap_inuse_bytes 6.5536e+07
go_memstats_heap_inuse_bytes_total 1
process_resident_memory_bytes 1.23456789e+08
`
	got, err := parseGauges(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"goroutines": 42, "heapInuseBytes": 65536000, "rssBytes": 123456789}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %g, want %g", k, got[k], v)
		}
	}
	if _, err := parseGauges(strings.NewReader("go_goroutines many\n")); err == nil {
		t.Error("a value that is not a number was accepted")
	}
}
