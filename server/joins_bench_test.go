package server_test

// Include benchmarks: searches with _include or _revinclude next to the same
// searches without, through the real server over HTTP, with the database
// commands each page costs (counted with store.Options.Monitor). The
// targets: a page with includes costs at most 3 times the page without, and
// as many database queries at _count=10 as at _count=100.
//
//	go test ./server/ -run '^$' -bench 'Include|Revinclude' -benchtime 10x -count 1
//
// FHIRSTORE_BENCH_LARGE=1 stores 10,000 Patients instead of 1,000.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"fhirstore/server"
	"fhirstore/store"
)

// joinsBenchQuestionnaires is the number of Questionnaires the responses
// answer (by canonical URL).
const joinsBenchQuestionnaires = 5

func joinsBenchQuestionnaireURL(k int) string {
	return fmt.Sprintf("http://example.org/fhir/Questionnaire/home-visit-%d", k)
}

// joinsBenchEpisodes is the number of EpisodeOfCare of the i-th Patient (1–2).
func joinsBenchEpisodes(i int) int { return 1 + i%2 }

// joinsBenchResponses is the number of QuestionnaireResponses of the i-th
// Patient (2–4); the j-th answers Questionnaire (i+j) % joinsBenchQuestionnaires.
func joinsBenchResponses(i int) int { return 2 + i%3 }

// joinsBenchData is what the seed stored.
type joinsBenchData struct {
	patients  []string            // ids, by seed position
	episodes  map[string][]string // Patient id -> its EpisodeOfCare (Type/id)
	responses map[string][]string // Patient id -> the Questionnaire URLs its responses answer
	urls      map[string]string   // Questionnaire id -> URL
}

// seedJoinsBench stores the Questionnaires, n Patients, their EpisodeOfCare
// and QuestionnaireResponses directly through the store, several writers at
// once; the first resource of each type is written alone (it creates the
// collection and its indexes).
func seedJoinsBench(b *testing.B, e *env, n int) *joinsBenchData {
	b.Helper()
	ctx := context.Background()
	d := &joinsBenchData{patients: make([]string, n), episodes: map[string][]string{}, responses: map[string][]string{}, urls: map[string]string{}}
	create := func(typ, body string) (string, error) {
		res, err := e.store.Create(ctx, e.tenant, typ, []byte(body), store.WriteOptions{})
		if err != nil {
			return "", fmt.Errorf("seed %s: %w", typ, err)
		}
		return res.ID, nil
	}
	for k := 0; k < joinsBenchQuestionnaires; k++ {
		id, err := create("Questionnaire", fmt.Sprintf(`{"resourceType":"Questionnaire","url":%q,"version":"1","name":"HomeVisit%d",`+
			`"status":"active","subjectType":["Patient"],"item":[{"linkId":"1","text":"Mobility","type":"choice"},`+
			`{"linkId":"2","text":"Pain (0-10)","type":"integer"},{"linkId":"3","text":"Notes","type":"text"}]}`, joinsBenchQuestionnaireURL(k), k))
		if err != nil {
			b.Fatal(err)
		}
		d.urls[id] = joinsBenchQuestionnaireURL(k)
	}
	parallel := func(from int, fn func(i int) error) { seedParallel(b, from, n, fn) }
	patient := func(i int) error {
		body, _ := benchSearchPatient(i)
		id, err := create("Patient", body)
		d.patients[i] = id
		return err
	}
	if err := patient(0); err != nil {
		b.Fatal(err)
	}
	parallel(1, patient)

	var mu sync.Mutex
	episodes := func(i int) error {
		var ids []string
		for j := 0; j < joinsBenchEpisodes(i); j++ {
			status := []string{"active", "finished"}[j%2]
			id, err := create("EpisodeOfCare", fmt.Sprintf(`{"resourceType":"EpisodeOfCare","status":%q,`+
				`"type":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/episodeofcare-type","code":"hacc"}]}],`+
				`"patient":{"reference":"Patient/%s"},"period":{"start":"2024-%02d-01"}}`, status, d.patients[i], 1+(i+j)%12))
			if err != nil {
				return err
			}
			ids = append(ids, "EpisodeOfCare/"+id)
		}
		mu.Lock()
		d.episodes[d.patients[i]] = ids
		mu.Unlock()
		return nil
	}
	responses := func(i int) error {
		var urls []string
		for j := 0; j < joinsBenchResponses(i); j++ {
			u := joinsBenchQuestionnaireURL((i + j) % joinsBenchQuestionnaires)
			if _, err := create("QuestionnaireResponse", fmt.Sprintf(`{"resourceType":"QuestionnaireResponse","questionnaire":%q,`+
				`"status":"completed","subject":{"reference":"Patient/%s"},"authored":"2024-%02d-%02dT10:00:00Z",`+
				`"item":[{"linkId":"1","answer":[{"valueCoding":{"system":"http://example.org/mobility","code":"independent"}}]},`+
				`{"linkId":"2","answer":[{"valueInteger":%d}]},{"linkId":"3","answer":[{"valueString":"Visit %d"}]}]}`,
				u, d.patients[i], 1+(i+j)%12, 1+(i*7+j)%28, (i+j)%11, j)); err != nil {
				return err
			}
			urls = append(urls, u)
		}
		mu.Lock()
		d.responses[d.patients[i]] = urls
		mu.Unlock()
		return nil
	}
	for _, fn := range []func(int) error{episodes, responses} {
		if err := fn(0); err != nil {
			b.Fatal(err)
		}
		parallel(1, fn)
	}
	return d
}

// joinsBenchCounter counts the database commands the store starts on the
// tenant's database (not the server's periodic tenant lookup in the system
// database, whose cache expires between operations that take seconds).
type joinsBenchCounter struct {
	database          atomic.Value // string: the tenant's database
	commands, queries atomic.Int64 // every command; find, aggregate and count
	mu                sync.Mutex
	names             map[string]int // by command name, while recording
	recording         bool
}

func (c *joinsBenchCounter) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		if db, _ := c.database.Load().(string); ev.DatabaseName != db {
			return
		}
		c.commands.Add(1)
		switch ev.CommandName {
		case "find", "aggregate", "count":
			c.queries.Add(1)
		}
		c.mu.Lock()
		if c.recording {
			c.names[ev.CommandName]++
		}
		c.mu.Unlock()
	}}
}

// record runs fn and returns the commands it started, by name.
func (c *joinsBenchCounter) record(fn func()) map[string]int {
	c.mu.Lock()
	c.names, c.recording = map[string]int{}, true
	c.mu.Unlock()
	fn()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recording = false
	return c.names
}

// joinsBenchCase is one search with its include and what a page must hold.
type joinsBenchCase struct {
	name    string
	typ     string
	params  url.Values // without the include
	include [2]string  // the include parameter and value
	// check verifies a page with the include (matches and included
	// resources, Type/id), describing what is wrong ("" when right).
	check func(matches, included []string) string
}

// joinsBenchPage runs a search and returns its matches and included
// resources (Type/id), failing on a non-200 answer or a duplicate entry.
func joinsBenchPage(b *testing.B, e *env, path string) (matches, included []string) {
	b.Helper()
	r := e.get(path)
	if r.Status != http.StatusOK {
		b.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	entries, _ := r.JSON(b)["entry"].([]any)
	seen := map[string]bool{}
	for _, en := range entries {
		m := en.(map[string]any)
		res := m["resource"].(map[string]any)
		key := res["resourceType"].(string) + "/" + res["id"].(string)
		if seen[key] {
			b.Fatalf("GET %s: %s twice", path, key)
		}
		seen[key] = true
		if m["search"].(map[string]any)["mode"] == "include" {
			included = append(included, key)
		} else {
			matches = append(matches, key)
		}
	}
	return matches, included
}

// BenchmarkIncludes times each search with its include ("with"), without
// it ("without"), and both alternately ("paired", reporting each one's mean
// time and their ratio, so that load drifting between sub-benchmarks on a
// shared machine affects both alike), at _count=10 and _count=100. Every
// sub-benchmark reports db-cmds/op (every command on the tenant's database,
// getMore included) and db-queries/op (find, aggregate, count).
func BenchmarkIncludes(b *testing.B) {
	n := searchBenchSize()
	counter := &joinsBenchCounter{}
	e := newEnv(b, func(_ *server.Config, o *store.Options) { o.Monitor = counter.monitor() })
	counter.database.Store(db.Options().DatabasePrefix + e.tenant)
	start := time.Now()
	d := seedJoinsBench(b, e, n)
	b.Logf("seeded %d Patients, their EpisodeOfCare and QuestionnaireResponses and %d Questionnaires in %v",
		n, joinsBenchQuestionnaires, time.Since(start).Round(time.Millisecond))

	who := d.patients[n/2]
	urlIDs := map[string]string{}
	for id, u := range d.urls {
		urlIDs[u] = id
	}
	cases := []joinsBenchCase{
		{
			name: "Patient-revinclude-EpisodeOfCare", typ: "Patient", params: url.Values{},
			include: [2]string{"_revinclude", "EpisodeOfCare:patient"},
			check: func(matches, included []string) string {
				var want []string
				for _, m := range matches {
					want = append(want, d.episodes[strings.TrimPrefix(m, "Patient/")]...)
				}
				slices.Sort(want)
				slices.Sort(included)
				if !slices.Equal(included, want) {
					return fmt.Sprintf("%d resources included for %d Patients, want their %d EpisodeOfCare", len(included), len(matches), len(want))
				}
				return ""
			},
		},
		{
			name: "QuestionnaireResponse-of-a-patient-include-questionnaire", typ: "QuestionnaireResponse", params: url.Values{"patient": {who}},
			include: [2]string{"_include", "QuestionnaireResponse:questionnaire"},
			check: func(matches, included []string) string {
				var want []string
				for _, u := range d.responses[who] {
					if key := "Questionnaire/" + urlIDs[u]; !slices.Contains(want, key) {
						want = append(want, key)
					}
				}
				slices.Sort(want)
				slices.Sort(included)
				if len(matches) != len(d.responses[who]) || !slices.Equal(included, want) {
					return fmt.Sprintf("%d matches including %v, want %d including %v", len(matches), included, len(d.responses[who]), want)
				}
				return ""
			},
		},
	}

	for _, c := range cases {
		for _, count := range []int{10, 100} {
			plain := url.Values{}
			for k, v := range c.params {
				plain[k] = v
			}
			plain.Set("_count", fmt.Sprint(count))
			with := url.Values{}
			for k, v := range plain {
				with[k] = v
			}
			with.Set(c.include[0], c.include[1])
			withPath, withoutPath := "/"+c.typ+"?"+with.Encode(), "/"+c.typ+"?"+plain.Encode()

			// Check the answer and count the commands of one page, untimed.
			var matches, included []string
			withCmds := counter.record(func() { matches, included = joinsBenchPage(b, e, withPath) })
			if problem := c.check(matches, included); problem != "" {
				b.Fatalf("GET %s: %s", withPath, problem)
			}
			plainMatches, _ := joinsBenchPage(b, e, withoutPath)
			if !slices.Equal(plainMatches, matches) {
				b.Fatalf("GET %s: the include changed the matches", withPath)
			}
			withoutCmds := counter.record(func() { joinsBenchPage(b, e, withoutPath) })
			b.Logf("%s _count=%d: %d matches, %d included; commands with %v, without %v",
				c.name, count, len(matches), len(included), withCmds, withoutCmds)

			prefix := fmt.Sprintf("n=%d/%s/count=%d/", n, c.name, count)
			run := func(path string) func(b *testing.B) {
				return func(b *testing.B) {
					se := *e
					se.t = b
					b.ReportAllocs()
					cmds, queries := counter.commands.Load(), counter.queries.Load()
					ops := 0
					for b.Loop() {
						if r := se.get(path); r.Status != http.StatusOK {
							b.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
						}
						ops++
					}
					b.ReportMetric(float64(counter.commands.Load()-cmds)/float64(ops), "db-cmds/op")
					b.ReportMetric(float64(counter.queries.Load()-queries)/float64(ops), "db-queries/op")
				}
			}
			b.Run(prefix+"with", run(withPath))
			b.Run(prefix+"without", run(withoutPath))
			b.Run(prefix+"paired", func(b *testing.B) {
				se := *e
				se.t = b
				var viaWith, viaWithout time.Duration
				i := 0
				for b.Loop() {
					for step := range 2 {
						path, into := withPath, &viaWith
						if (i+step)%2 == 1 {
							path, into = withoutPath, &viaWithout
						}
						start := time.Now()
						if r := se.get(path); r.Status != http.StatusOK {
							b.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
						}
						*into += time.Since(start)
					}
					i++
				}
				b.ReportMetric(float64(viaWith.Nanoseconds())/float64(i), "with-ns/op")
				b.ReportMetric(float64(viaWithout.Nanoseconds())/float64(i), "without-ns/op")
				b.ReportMetric(float64(viaWith)/float64(viaWithout), "with/without")
			})
		}
	}
}
