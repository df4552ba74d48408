package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// trickle sends head at once and then tail a byte every gap, reading the
// answer meanwhile. It returns what the server sent, how long after the
// first trickled byte the server ended the exchange (answered and closed,
// or just closed), and whether the whole tail got out before that.
func trickle(t *testing.T, addr, head, tail string, gap time.Duration) (answer string, took time.Duration, sentAll bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	ended := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn) // until the server closes the connection
		ended <- string(b)
	}()
	start := time.Now()
	for i := 0; i < len(tail); i++ {
		select {
		case answer = <-ended:
			return answer, time.Since(start), false
		case <-time.After(gap):
		}
		if _, err := conn.Write([]byte{tail[i]}); err != nil {
			return <-ended, time.Since(start), false
		}
	}
	return <-ended, time.Since(start), true
}

// TestTimeoutsCutSlowClients: a client trickling its request is cut off
// after --read-header-timeout (headers) or --read-timeout (the whole
// request), while prompt clients are served as usual.
func TestTimeoutsCutSlowClients(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir,
		"--read-header-timeout", "500ms", "--read-timeout", "1500ms")
	tok := tokenFor(t, dir, "demo")
	createPatient(t, s, "demo.localhost", tok, "Prompt")

	t.Run("headers slower than --read-header-timeout are cut", func(t *testing.T) {
		// About 4s for the whole header at 50ms a byte.
		header := "GET /healthz HTTP/1.1\r\nHost: demo.localhost\r\nUser-Agent: slowloris\r\nX-Padding: 0123456789\r\n\r\n"
		answer, took, sentAll := trickle(t, s.addr, "", header, 50*time.Millisecond)
		if sentAll || strings.Contains(answer, " 200 ") {
			t.Fatalf("the server waited %v for the whole header and answered %q", took, answer)
		}
		if took > 3*time.Second {
			t.Fatalf("cut after %v, want about 500ms", took)
		}
	})

	t.Run("a body slower than --read-timeout is cut and stores nothing", func(t *testing.T) {
		body := `{"resourceType":"Patient","name":[{"family":"Trickled"}]}`
		head := "POST /fhir/r4/Patient HTTP/1.1\r\nHost: demo.localhost\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/fhir+json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n"
		// About 4.5s for the whole body at 80ms a byte.
		answer, took, sentAll := trickle(t, s.addr, head, body, 80*time.Millisecond)
		if sentAll || took > 3500*time.Millisecond {
			t.Fatalf("the exchange lasted %v, want it cut after about 1.5s; answer %q", took, answer)
		}
		if strings.Contains(answer, " 201 ") {
			t.Fatalf("the trickled create was stored: %q", answer)
		}
		r := call(t, http.MethodGet, s.url("/fhir/r4/Patient?name=Trickled"), "demo.localhost", tok, "")
		if total := fmt.Sprint(r.json(t)["total"]); r.status != http.StatusOK || total != "0" {
			t.Fatalf("search for the trickled Patient: %d total %s", r.status, total)
		}
	})

	t.Run("prompt clients are still served", func(t *testing.T) {
		if r := call(t, http.MethodGet, s.url("/healthz"), "", "", ""); r.status != http.StatusOK {
			t.Fatalf("healthz: %d %s", r.status, r.body)
		}
		createPatient(t, s, "demo.localhost", tok, "After")
	})
}

// TestTimeoutFlagsMustBePositiveDurations: a bad timeout stops serve with a
// one-line error naming the flag.
func TestTimeoutFlagsMustBePositiveDurations(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range [][]string{
		{"--read-header-timeout", "soon"},
		{"--read-header-timeout", "0s"},
		{"--read-timeout", "-1s"},
	} {
		t.Run(strings.Join(bad, " "), func(t *testing.T) {
			wantFail(t, bad[0], append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir}, bad...)...)
		})
	}
}
