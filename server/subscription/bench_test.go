package subscription_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"fhirstore/server/subscription"
)

// BenchmarkWritesWithSubscriptions times Observation creates over HTTP
// (4 clients) with 0, 10 and 100 active subscriptions on Observation
// (each on its own code): writes that none of them matches, and writes
// that one of them matches and is delivered to a receiver on loopback.
// For the latter the timer stops once every notification has arrived, so
// the dispatcher's work is in the figure.
//
//	go test ./server/subscription -run '^$' -bench WritesWithSubscriptions -benchtime 2000x
func BenchmarkWritesWithSubscriptions(b *testing.B) {
	for _, c := range []struct {
		subs    int
		matched bool
	}{{0, false}, {10, false}, {100, false}, {10, true}, {100, true}} {
		b.Run(fmt.Sprintf("subs=%d/matched=%v", c.subs, c.matched), func(b *testing.B) {
			e := newEnv(b)
			rcv := newReceiver(b)
			for i := range c.subs {
				e.subscribe(fmt.Sprintf("Observation?code=http://loinc.org|bench-%d", i), rcv.url("/hook"), subscription.PayloadJSON)
			}
			code := "other"
			if c.matched {
				code = "bench-0"
			}
			body := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"` + code + `"}]},"valueQuantity":{"value":72,"unit":"/min"}}`
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += 4 {
						if r := e.do(http.MethodPost, "/Observation", body); r.Status != http.StatusCreated {
							b.Errorf("create: %d %s", r.Status, r.Body)
							return
						}
					}
				}()
			}
			wg.Wait()
			written := time.Since(start)
			for c.matched && len(rcv.deliveries()) < b.N {
				time.Sleep(5 * time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/write")
			b.ReportMetric(float64(b.N)/written.Seconds(), "writes/s")
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "delivered/s")
		})
	}
}

// BenchmarkNotificationLatency measures commit to delivery: sequential
// creates matching one subscription, each delivery timed from the
// version's meta.lastUpdated to its arrival at a receiver on loopback.
//
//	go test ./server/subscription -run '^$' -bench NotificationLatency -benchtime 1000x
func BenchmarkNotificationLatency(b *testing.B) {
	e := newEnv(b)
	rcv := newReceiver(b)
	e.subscribe("Observation?code=http://loinc.org|lat", rcv.url("/hook"), subscription.PayloadJSON)
	body := `{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"lat"}]}}`
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if r := e.do(http.MethodPost, "/Observation", body); r.Status != http.StatusCreated {
			b.Fatalf("create: %d %s", r.Status, r.Body)
		}
		for len(rcv.deliveries()) <= i {
			time.Sleep(200 * time.Microsecond)
		}
	}
	b.StopTimer()
	lat = append(lat, rcv.arrivals()...)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// arrivals is, per delivery, the time from its version's lastUpdated to
// its arrival.
func (r *receiver) arrivals() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for i, d := range r.got {
		var res struct {
			Meta struct {
				LastUpdated time.Time `json:"lastUpdated"`
			} `json:"meta"`
		}
		if json.Unmarshal([]byte(d.Body), &res) == nil {
			out = append(out, r.at[i].Sub(res.Meta.LastUpdated))
		}
	}
	return out
}

// cpuTime is the CPU time (user and system) this process has used: on a
// shared machine a steadier measure of cost than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
