package main

import (
	"net/http"
	"runtime/debug"
	"sync/atomic"
)

// largeRequestBytes is the body size from which a request's memory is
// returned to the system when it leaves the server idle.
const largeRequestBytes = 1 << 20

// trimmer wraps the server's handler: when a large request (a Bundle of
// hundreds of resources, a bulk load) finishes and no other request is in
// flight, it collects the garbage the request left and gives the free
// memory back to the system before the response ends, so that a server
// that has loaded data and gone idle is as small as it will be. The
// collection costs tens of milliseconds, against the seconds such a
// request takes; small requests never pay it.
type trimmer struct {
	next     http.Handler
	inFlight atomic.Int64
	trim     func()
}

func newTrimmer(next http.Handler) *trimmer {
	return &trimmer{next: next, trim: debug.FreeOSMemory}
}

// ServeHTTP serves r, trimming after it when it was large and the last.
func (t *trimmer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.inFlight.Add(1)
	t.next.ServeHTTP(w, r)
	if t.inFlight.Add(-1) == 0 && r.ContentLength >= largeRequestBytes {
		t.trim()
	}
}
