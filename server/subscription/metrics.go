package subscription

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stats counts deliveries per tenant since the engine started.
type stats struct {
	mu      sync.Mutex
	tenants map[string]*tenantStats
	latency *prometheus.HistogramVec
}

type tenantStats struct {
	sent, failed, queued int64
}

func newStats() *stats {
	return &stats{tenants: map[string]*tenantStats{}, latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fhirstore_subscription_delivery_seconds",
		Help:    "Time from a change's commit to its notification's acknowledged delivery, by tenant.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"tenant"})}
}

func (s *stats) of(tenant string) *tenantStats {
	t := s.tenants[tenant]
	if t == nil {
		t = &tenantStats{}
		s.tenants[tenant] = t
	}
	return t
}

func (s *stats) sent(tenant string, committed time.Time) {
	s.mu.Lock()
	s.of(tenant).sent++
	s.mu.Unlock()
	s.latency.WithLabelValues(tenant).Observe(time.Since(committed).Seconds())
}

func (s *stats) failed(tenant string) {
	s.mu.Lock()
	s.of(tenant).failed++
	s.mu.Unlock()
}

func (s *stats) queued(tenant string, n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.of(tenant).queued += int64(n)
	s.mu.Unlock()
}

// Counts are a tenant's delivery counts since the engine started.
type Counts struct {
	Queued, Sent, Failed int64
}

// Counts returns the delivery counts of a tenant.
func (e *Engine) Counts(tenant string) Counts {
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	t := e.stats.of(tenant)
	return Counts{Queued: t.queued, Sent: t.sent, Failed: t.failed}
}

var (
	sentDesc = prometheus.NewDesc("fhirstore_subscription_notifications_sent_total",
		"Notifications delivered (acknowledged with a 2xx) since start, by tenant.", []string{"tenant"}, nil)
	failedDesc = prometheus.NewDesc("fhirstore_subscription_notifications_failed_total",
		"Failed delivery attempts since start (each retry counts), by tenant.", []string{"tenant"}, nil)
	pendingDesc = prometheus.NewDesc("fhirstore_subscription_notifications_pending",
		"Notifications waiting for delivery plus changes not yet matched, by tenant.", []string{"tenant"}, nil)
)

// Collector exposes the engine's series for a Prometheus registry.
func (e *Engine) Collector() prometheus.Collector { return collector{e} }

type collector struct{ e *Engine }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sentDesc
	ch <- failedDesc
	ch <- pendingDesc
	c.e.stats.latency.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.e.mu.RLock()
	names := make([]string, 0, len(c.e.tenants))
	for name := range c.e.tenants {
		names = append(names, name)
	}
	c.e.mu.RUnlock()
	sort.Strings(names)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range names {
		counts := c.e.Counts(name)
		ch <- prometheus.MustNewConstMetric(sentDesc, prometheus.CounterValue, float64(counts.Sent), name)
		ch <- prometheus.MustNewConstMetric(failedDesc, prometheus.CounterValue, float64(counts.Failed), name)
		queued, unmatched, err := c.e.st.PendingNotifications(ctx, name)
		if err == nil {
			ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(queued+unmatched), name)
		}
	}
	c.e.stats.latency.Collect(ch)
}
