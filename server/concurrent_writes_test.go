package server_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// TestConcurrentWritesKeepTheirOwnOutcomes sends creates, conditional
// updates of one resource, deletes and refused writes all at once: the
// embedded engine commits writes that arrive together in one transaction,
// and each must still get its own version and status, a failed one
// changing nothing.
func TestConcurrentWritesKeepTheirOwnOutcomes(t *testing.T) {
	e := newEnv(t)
	contended := e.create("Patient", `{"resourceType":"Patient","name":[{"family":"Contended"}]}`)
	var doomed []string
	for i := range 6 {
		doomed = append(doomed, e.create("Patient", fmt.Sprintf(`{"resourceType":"Patient","name":[{"family":"Doomed%d"}]}`, i)))
	}
	type result struct {
		kind   string
		status int
		loc    string
	}
	var mu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	send := func(kind string, r request) {
		wg.Go(func() {
			resp := e.do(r)
			mu.Lock()
			results = append(results, result{kind, resp.Status, resp.Header.Get("Location")})
			mu.Unlock()
		})
	}
	for i := range 12 {
		send("create", request{Method: http.MethodPost, Path: "/Patient", Body: fmt.Sprintf(`{"resourceType":"Patient","name":[{"family":"Together","given":["G%d"]}]}`, i)})
		send("update", request{Method: http.MethodPut, Path: "/Patient/" + contended, Header: map[string]string{"If-Match": `W/"1"`},
			Body: fmt.Sprintf(`{"resourceType":"Patient","id":%q,"name":[{"family":"Contended","given":["U%d"]}]}`, contended, i)})
		send("invalid", request{Method: http.MethodPost, Path: "/Patient", Body: `{"resourceType":"Patient","gender":"sometimes"}`})
		if i < len(doomed) {
			send("delete", request{Method: http.MethodDelete, Path: "/Patient/" + doomed[i]})
		}
	}
	wg.Wait()
	count := map[string]map[int]int{}
	for _, r := range results {
		if count[r.kind] == nil {
			count[r.kind] = map[int]int{}
		}
		count[r.kind][r.status]++
	}
	for _, want := range []struct {
		kind   string
		status int
		n      int
	}{
		{"create", http.StatusCreated, 12},
		{"update", http.StatusOK, 1},
		{"update", http.StatusPreconditionFailed, 11},
		{"invalid", http.StatusBadRequest, 0},
		{"delete", http.StatusNoContent, len(doomed)},
	} {
		got := count[want.kind][want.status]
		if want.status == http.StatusBadRequest { // refused as unprocessable: 400 or 422
			got = count[want.kind][http.StatusBadRequest] + count[want.kind][http.StatusUnprocessableEntity]
			want.n = 12
		}
		if want.kind == "delete" {
			got = count[want.kind][http.StatusNoContent] + count[want.kind][http.StatusOK]
		}
		if got != want.n {
			t.Errorf("%s: %d answered %d, want %d (all: %v)", want.kind, got, want.status, want.n, count[want.kind])
		}
	}
	if n := btTotal(t, e, "/Patient?family=Together"); n != 12 {
		t.Errorf("%d Patients created together, want 12", n)
	}
	if n := btTotal(t, e, "/Patient/"+contended+"/_history"); n != 2 {
		t.Errorf("the contended Patient has %d versions, want 2", n)
	}
	for _, id := range doomed {
		if r := e.get("/Patient/" + id); r.Status != http.StatusGone {
			t.Errorf("deleted Patient/%s: %d, want 410", id, r.Status)
		}
	}
	if n := btTotal(t, e, "/Patient?gender=sometimes"); n != 0 {
		t.Errorf("%d refused Patients stored", n)
	}
}
