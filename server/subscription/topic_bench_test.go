package subscription_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkTopicSubscriptions times sequential Encounter writes over HTTP
// that finish a visit, with 0 or 100 active topic-based subscriptions to
// the visit-complete topic (each filtered on a patient of its own),
// delivered to a rest-hook receiver or a websocket on loopback: writes
// for another patient, which no subscription matches, and writes for the
// first subscription's patient, each waited for at its receiver. It
// reports the write's latency (the commit, as the client sees it) and the
// notification's, from the version's commit (its lastUpdated) to its
// arrival.
//
//	go test ./server/subscription -run '^$' -bench TopicSubscriptions -benchtime 300x
func BenchmarkTopicSubscriptions(b *testing.B) {
	for _, c := range []struct {
		subs    int
		channel string
		matched bool
	}{{0, "rest-hook", false}, {100, "rest-hook", false}, {100, "rest-hook", true}, {100, "websocket", true}} {
		b.Run(fmt.Sprintf("subs=%d/%s/matched=%v", c.subs, c.channel, c.matched), func(b *testing.B) {
			e := newEnv(b)
			e.storeTopic()
			rcv := newReceiver(b)
			arrived := make(chan arrival, 1024)
			target := "none"
			var ids []string
			for i := range c.subs {
				patient := e.create("Patient", `{"resourceType":"Patient"}`)
				sid := e.create("Subscription", topicSub{channel: c.channel, endpoint: rcv.url(fmt.Sprintf("/s%d", i)), content: "id-only",
					filter: "Encounter?patient=Patient/" + patient}.json())
				ids = append(ids, sid)
				if i == 0 && c.matched {
					target = patient
				}
			}
			for i, sid := range ids { // every one active before the clock starts
				e.waitStatus(sid, "active")
				if i == 0 && c.channel == "websocket" {
					e.listen(b, sid, arrived)
				}
			}
			time.Sleep(time.Second)
			body := encounter(target, "finished")
			var writes, notes []time.Duration
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				if r := e.do(http.MethodPost, "/Encounter", body); r.Status != http.StatusCreated {
					b.Fatalf("create: %d %s", r.Status, r.Body)
				}
				writes = append(writes, time.Since(start))
				if !c.matched {
					continue
				}
				if c.channel == "websocket" {
					notes = append(notes, (<-arrived).latency)
					continue
				}
				got := rcv.wait(b, "the event", func(d []delivery) bool { return countEvents(d) > i })
				notes = append(notes, eventLatency(b, got, i))
			}
			b.StopTimer()
			report(b, writes, "write")
			if len(notes) > 0 {
				report(b, notes, "notify")
			}
		})
	}
}

// arrival is a websocket notification's latency.
type arrival struct{ latency time.Duration }

// listen binds a websocket to subscription id and reports each event's
// latency from its timestamp (the commit) to its arrival.
func (e *env) listen(b *testing.B, id string, arrived chan<- arrival) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	c := e.dialSocket(ctx)
	if err := c.Write(ctx, websocket.MessageText, []byte("bind-with-token "+e.bindingToken(id))); err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			if at, ok := eventTimestamp(string(msg)); ok {
				arrived <- arrival{time.Since(at)}
			}
		}
	}()
}

// countEvents counts the event notifications on /s0 (without parsing
// them: the benchmark's own work must stay small).
func countEvents(got []delivery) int {
	n := 0
	for _, d := range got {
		if strings.HasPrefix(d.Path, "/s0") && strings.Contains(d.Body, `"valueCode":"event-notification"`) {
			n++
		}
	}
	return n
}

// eventLatency is the time from the i-th event's timestamp to its arrival.
func eventLatency(b *testing.B, got []delivery, i int) time.Duration {
	var n int
	for j, d := range got {
		if !strings.HasPrefix(d.Path, "/s0") {
			continue
		}
		at, ok := eventTimestamp(d.Body)
		if !ok {
			continue
		}
		if n == i {
			return got[j].At.Sub(at)
		}
		n++
	}
	b.Fatalf("event %d not found", i)
	return 0
}

// eventTimestamp reads the first notification-event timestamp of a body.
func eventTimestamp(body string) (time.Time, bool) {
	const key = `"name":"timestamp","valueInstant":"`
	_, rest, ok := strings.Cut(body, key)
	if !ok {
		return time.Time{}, false
	}
	s, _, _ := strings.Cut(rest, `"`)
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// report adds the mean, p50 and p99 of d in milliseconds.
func report(b *testing.B, d []time.Duration, name string) {
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	b.ReportMetric(ms(sum/time.Duration(len(d))), name+"-mean-ms")
	b.ReportMetric(ms(d[len(d)/2]), name+"-p50-ms")
	b.ReportMetric(ms(d[len(d)*99/100]), name+"-p99-ms")
}

// BenchmarkWritesWithTopicSubscriptions is BenchmarkWritesWithSubscriptions
// for topic-based subscriptions: 4 clients create finished Encounters with
// 0 or 100 active subscriptions to the visit-complete topic, each filtered
// on a patient of its own, writes that none matches and writes that each
// match one (spread over the patients), delivered to a rest-hook receiver
// on loopback; for those the timer stops once every notification arrived.
//
//	go test ./server/subscription -run '^$' -bench WritesWithTopicSubscriptions -benchtime 1000x
func BenchmarkWritesWithTopicSubscriptions(b *testing.B) {
	for _, c := range []struct {
		subs    int
		matched bool
	}{{0, false}, {100, false}, {100, true}} {
		b.Run(fmt.Sprintf("subs=%d/matched=%v", c.subs, c.matched), func(b *testing.B) {
			e := newEnv(b)
			e.storeTopic()
			rcv := newReceiver(b)
			var patients, ids []string
			for i := range c.subs {
				patient := e.create("Patient", `{"resourceType":"Patient"}`)
				patients = append(patients, patient)
				ids = append(ids, e.create("Subscription", topicSub{channel: "rest-hook", endpoint: rcv.url(fmt.Sprintf("/s%d", i)), content: "id-only",
					filter: "Encounter?patient=Patient/" + patient}.json()))
			}
			for _, id := range ids {
				e.waitStatus(id, "active")
			}
			time.Sleep(time.Second)
			before := len(rcv.deliveries())
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += 4 {
						target := "none"
						if c.matched {
							target = patients[i%len(patients)]
						}
						if r := e.do(http.MethodPost, "/Encounter", encounter(target, "finished")); r.Status != http.StatusCreated {
							b.Errorf("create: %d %s", r.Status, r.Body)
							return
						}
					}
				}()
			}
			wg.Wait()
			written := time.Since(start)
			for c.matched && len(rcv.deliveries())-before < b.N {
				time.Sleep(5 * time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/write")
			b.ReportMetric(float64(b.N)/written.Seconds(), "writes/s")
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "delivered/s")
		})
	}
}
