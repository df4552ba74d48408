package wshost_test

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"fhirstore/server/wshost"
)

// serve runs an HTTP server on a Listener whose handler answers the Host
// it saw; it returns the address.
func serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 2 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("host=" + r.Host))
	})}
	go func() { _ = srv.Serve(wshost.Listener(ln, "/ws")) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// exchange sends raw requests on one connection and reads one response
// to each: status code and body.
func exchange(t *testing.T, addr string, raw ...string) (statuses []int, bodies []string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for _, r := range raw {
		if _, err := c.Write([]byte(r)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("read the response to %q: %v", r, err)
		}
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		statuses, bodies = append(statuses, resp.StatusCode), append(bodies, b.String())
	}
	return statuses, bodies
}

func TestOnlyTheWebsocketUpgradeKeepsItsLastHost(t *testing.T) {
	addr := serve(t)
	upgrade := "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nHost: demo.localhost\r\n\r\n"
	for _, tc := range []struct {
		name, raw string
		status    int
		body      string
	}{
		{"a websocket upgrade with two Host headers: the last one", upgrade, 200, "host=demo.localhost"},
		{"another path with two Host headers", strings.Replace(upgrade, "/ws", "/fhir/r4/Patient", 1), 400, ""},
		{"the websocket path without an upgrade", "GET /ws HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, ""},
		{"one Host header", "GET /ws HTTP/1.1\r\nHost: one\r\nUpgrade: websocket\r\n\r\n", 200, "host=one"},
		{"a request shorter than the path", "GET / HTTP/1.0\r\n\r\n", 200, "host="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := exchange(t, addr, tc.raw)
			if st[0] != tc.status || (tc.body != "" && body[0] != tc.body) {
				t.Fatalf("%d %q, want %d %q", st[0], body[0], tc.status, tc.body)
			}
		})
	}
	t.Run("the next requests of a connection are read as sent", func(t *testing.T) {
		st, body := exchange(t, addr, "GET /x HTTP/1.1\r\nHost: one\r\n\r\n", "GET /y HTTP/1.1\r\nHost: two\r\n\r\n", "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nHost: b\r\n\r\n")
		if st[0] != 200 || body[0] != "host=one" || st[1] != 200 || body[1] != "host=two" || st[2] != 400 {
			t.Fatalf("statuses %v bodies %q", st, body)
		}
	})
}
