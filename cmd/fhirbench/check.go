package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// checkReport is what the history check found. A version is lost when a
// number between 1 and the newest (or one the server acknowledged) is not in
// history; duplicated when a number is there more than once.
type checkReport struct {
	Resources       int     `json:"resources"`
	Versions        int     `json:"versions"`
	Lost            int     `json:"lostVersions"`
	Duplicated      int     `json:"duplicatedVersions"`
	CurrentMismatch int     `json:"currentNotNewest"`
	Errors          int     `json:"failedRequests"`
	Seconds         float64 `json:"seconds"`
	// PagingDisagreements counts resources that looked wrong in the type
	// history pages but right in their own history.
	PagingDisagreements int      `json:"pagingDisagreements"`
	Problems            []string `json:"problems,omitempty"`
}

// historyPageSize is the largest _count the server allows.
const historyPageSize = 100

// seen is what the server holds of one written resource.
type seen struct {
	versions []int
	current  int // 0: no current version found
}

// checker collects the check's findings from several goroutines.
type checker struct {
	b  *bench
	mu sync.Mutex
	r  checkReport
}

func (c *checker) failed(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.r.Errors++
	c.problem(why)
}

// problem keeps a description; the caller holds mu.
func (c *checker) problem(why string) {
	if len(c.r.Problems) < maxSamples {
		c.r.Problems = append(c.r.Problems, why)
	}
}

// check verifies the history of every resource the run wrote. Reading each
// resource's own history would cost one request per resource (and one scan
// of the history collection each on a database that scans), so it pages through each type's history
// once, reads current versions 100 ids at a time, and only goes back to a
// resource's own history when something looks wrong there.
func (b *bench) check(ctx context.Context) checkReport {
	start := time.Now()
	c := &checker{b: b}
	all := b.track.all()
	byType := map[string]map[string]*seen{}
	for _, w := range all {
		if byType[w.typ] == nil {
			byType[w.typ] = map[string]*seen{}
		}
		byType[w.typ][w.id] = &seen{}
	}
	var wg sync.WaitGroup
	for typ, ids := range byType {
		wg.Go(func() { c.typeHistory(ctx, typ, ids) })
	}
	wg.Wait()
	for typ, ids := range byType {
		c.currentVersions(ctx, typ, ids)
	}
	var suspects []*written
	for _, w := range all {
		s := byType[w.typ][w.id]
		c.r.Versions += len(s.versions)
		if lost, dup, mismatch := verify(w.acked, s.versions, s.current, w.gone); lost+dup > 0 || mismatch {
			suspects = append(suspects, w)
		}
	}
	c.r.Resources = len(all)
	parallel(len(suspects), b.o.clients, func(i int) { c.recheck(ctx, suspects[i]) })
	c.r.Seconds = float64(time.Since(start).Milliseconds()) / 1000
	return c.r
}

// verify compares a resource's history versions and current version with
// the versions the server acknowledged to the run; a resource the run
// deleted has no current version (0).
func verify(acked, versions []int, current int, gone bool) (lost, duplicated int, currentMismatch bool) {
	count := map[int]int{}
	newest := 0
	for _, v := range versions {
		count[v]++
		newest = max(newest, v)
	}
	top := newest
	for _, v := range acked {
		top = max(top, v)
	}
	for v := 1; v <= top; v++ {
		if count[v] == 0 {
			lost++
		}
	}
	for _, n := range count {
		duplicated += n - 1
	}
	if gone {
		return lost, duplicated, current != 0
	}
	return lost, duplicated, current != newest
}

// historyPage is the part of a history Bundle the check reads.
type historyPage struct {
	ResourceType string `json:"resourceType"`
	Link         []struct {
		Relation string `json:"relation"`
		URL      string `json:"url"`
	} `json:"link"`
	Entry []struct {
		FullURL  string `json:"fullUrl"`
		Response struct {
			ETag string `json:"etag"`
		} `json:"response"`
	} `json:"entry"`
}

func (p *historyPage) next() string {
	for _, l := range p.Link {
		if l.Relation == "next" {
			return l.URL
		}
	}
	return ""
}

// pages follows a history's next links from target, calling each with the
// id and version of every entry. It reports whether it got to the end.
func (c *checker) pages(ctx context.Context, target string, each func(id string, vid int)) bool {
	for visited := map[string]bool{}; target != ""; {
		if visited[target] {
			c.failed("history paging loops at " + target)
			return false
		}
		visited[target] = true
		x := c.b.send(ctx, http.MethodGet, target, nil, "")
		var p historyPage
		if x.status != http.StatusOK {
			c.failed("check: " + x.describe("GET", target))
			return false
		}
		if err := json.Unmarshal(x.body, &p); err != nil || p.ResourceType != "Bundle" {
			c.failed(fmt.Sprintf("check: GET %s: not a history Bundle: %.300s", target, x.body))
			return false
		}
		for _, e := range p.Entry {
			vid, ok := parseETag(e.Response.ETag)
			if !ok {
				c.failed(fmt.Sprintf("check: GET %s: entry %s has etag %q", target, e.FullURL, e.Response.ETag))
				return false
			}
			each(e.FullURL[strings.LastIndexByte(e.FullURL, '/')+1:], vid)
		}
		target = p.next()
	}
	return true
}

// typeHistory reads the whole history of typ once and keeps the versions of
// the written resources. When it cannot, the resources stay without versions
// and the recheck reads their own histories.
func (c *checker) typeHistory(ctx context.Context, typ string, ids map[string]*seen) {
	versions := map[string][]int{}
	if !c.pages(ctx, fmt.Sprintf("/%s/_history?_count=%d", typ, historyPageSize), func(id string, vid int) {
		if ids[id] != nil {
			versions[id] = append(versions[id], vid)
		}
	}) {
		return
	}
	for id, vs := range versions {
		ids[id].versions = vs
	}
}

// currentVersions reads the current version of the written resources of typ
// by _id searches of a page each.
func (c *checker) currentVersions(ctx context.Context, typ string, ids map[string]*seen) {
	list := make([]string, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	slices.Sort(list)
	batches := (len(list) + historyPageSize - 1) / historyPageSize
	parallel(batches, c.b.o.clients, func(i int) {
		batch := list[i*historyPageSize : min(len(list), (i+1)*historyPageSize)]
		target := fmt.Sprintf("/%s?_id=%s&_count=%d&_elements=id", typ, strings.Join(batch, ","), historyPageSize)
		x := c.b.send(ctx, http.MethodGet, target, nil, "")
		if x.status != http.StatusOK {
			c.failed("check: " + x.describe("GET", fmt.Sprintf("/%s?_id=(%d ids)", typ, len(batch))))
			return
		}
		var s struct {
			Entry []struct {
				Resource struct {
					ID   string `json:"id"`
					Meta struct {
						VersionID string `json:"versionId"`
					} `json:"meta"`
				} `json:"resource"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(x.body, &s); err != nil {
			c.failed(fmt.Sprintf("check: GET /%s?_id=...: %v", typ, err))
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, e := range s.Entry {
			if st := ids[e.Resource.ID]; st != nil {
				st.current, _ = parseETag(e.Resource.Meta.VersionID)
			}
		}
	})
}

// recheck reads one resource's own history and current version, which
// decide: a fault there is counted, a fault only in the type pages is a
// paging disagreement.
func (c *checker) recheck(ctx context.Context, w *written) {
	var versions []int
	if !c.pages(ctx, fmt.Sprintf("/%s/%s/_history?_count=%d", w.typ, w.id, historyPageSize), func(_ string, vid int) {
		versions = append(versions, vid)
	}) {
		return
	}
	target := "/" + w.typ + "/" + w.id
	x := c.b.send(ctx, http.MethodGet, target, nil, "")
	current := 0
	switch x.status {
	case http.StatusOK:
		current, _ = parseETag(x.header.Get("ETag"))
	case http.StatusNotFound, http.StatusGone:
	default:
		c.failed("check: " + x.describe("GET", target))
		return
	}
	lost, dup, mismatch := verify(w.acked, versions, current, w.gone)
	c.mu.Lock()
	defer c.mu.Unlock()
	if lost+dup == 0 && !mismatch {
		c.r.PagingDisagreements++
		c.problem(fmt.Sprintf("%s/%s: right in its own history, wrong in the %s history pages", w.typ, w.id, w.typ))
		return
	}
	c.r.Lost += lost
	c.r.Duplicated += dup
	if mismatch {
		c.r.CurrentMismatch++
	}
	slices.Sort(versions)
	acked := slices.Clone(w.acked)
	slices.Sort(acked)
	c.problem(fmt.Sprintf("%s/%s: history versions %v, acknowledged %v, current %d", w.typ, w.id, versions, acked, current))
}

// parallel calls f(0..n-1) on up to workers goroutines.
func parallel(n, workers int, f func(int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
