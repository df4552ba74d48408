package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestMemoryIsReturnedAfterALargeRequestLeavesTheServerIdle(t *testing.T) {
	var trims atomic.Int64
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	tr := newTrimmer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			entered <- struct{}{}
			<-release
		}
	}))
	tr.trim = func() { trims.Add(1) }
	serve := func(path string, size int) {
		body := strings.Repeat("x", size)
		tr.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	}
	serve("/", 100)
	if n := trims.Load(); n != 0 {
		t.Fatalf("a small request trimmed %d times", n)
	}
	serve("/", largeRequestBytes)
	if n := trims.Load(); n != 1 {
		t.Fatalf("a large request alone trimmed %d times, want 1", n)
	}
	// A large request finishing while another is in flight leaves the trim
	// to the last one.
	done := make(chan struct{})
	go func() { serve("/wait", 10); close(done) }()
	<-entered
	serve("/", largeRequestBytes)
	if n := trims.Load(); n != 1 {
		t.Fatalf("a large request finishing beside another trimmed: %d", n)
	}
	close(release)
	<-done
	if n := trims.Load(); n != 1 {
		t.Fatalf("a small last request trimmed: %d", n)
	}
}
