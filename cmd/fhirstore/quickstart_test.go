package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// quickStep is one command of the README's quick start and what its
// output must contain (the "# ⇒" lines after it).
type quickStep struct {
	command string
	expect  []string
}

// quickStart extracts the fenced block after <!-- quickstart --> in the
// README: comment lines explain, "# ⇒ text" lines expect, others run.
func quickStart(t *testing.T) []quickStep {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "<!-- quickstart -->\n```sh\n")
	if !ok {
		t.Fatal("README.md has no ```sh block after <!-- quickstart -->")
	}
	block, _, ok := strings.Cut(after, "\n```")
	if !ok {
		t.Fatal("the quick start block of README.md does not end")
	}
	var steps []quickStep
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
		case strings.HasPrefix(line, "# ⇒ "):
			if len(steps) == 0 {
				t.Fatalf("expectation %q before any command", line)
			}
			steps[len(steps)-1].expect = append(steps[len(steps)-1].expect, strings.TrimPrefix(line, "# ⇒ "))
		case strings.HasPrefix(line, "#"):
		default:
			steps = append(steps, quickStep{command: line})
		}
	}
	return steps
}

// TestREADMEQuickStartWorks runs the README's quick start, command by
// command, against a server started from the built binary, as a newcomer
// would paste it into a shell in the repository root. Only the places
// differ: "go run ./cmd/fhirstore" is the built binary, port 8080 the
// test server's port and ./data its data dir.
func TestREADMEQuickStartWorks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and loads the Synthea sample (about 30 s)")
	}
	for _, tool := range []string{"bash", "curl", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the quick start needs %s, which is not installed", tool)
		}
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the binary")
	}
	steps := quickStart(t)
	if len(steps) < 5 {
		t.Fatalf("the quick start has %d commands; want the token, load, search, _include, REST and history ones", len(steps))
	}
	for _, want := range []string{"fhirstore load", "_include=", "/_history", "/api/v1/"} {
		found := false
		for _, s := range steps {
			found = found || strings.Contains(s.command, want)
		}
		if !found {
			t.Errorf("the quick start has no command with %q", want)
		}
	}

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "fhirstore")
	start := time.Now()
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
	dataDir := filepath.Join(tmp, "data")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	srv.Env = withoutFHIRStoreEnv()
	var logBuf syncBuffer
	srv.Stderr, srv.Stdout = &logBuf, &bytes.Buffer{}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = srv.Process.Signal(os.Interrupt)
		_ = srv.Wait()
	}()
	port := waitListening(t, &logBuf)
	t.Logf("server listening after %v", time.Since(start).Round(time.Millisecond))

	repl := strings.NewReplacer("go run ./cmd/fhirstore", bin, "localhost:8080", "localhost:"+port, "./data", dataDir)
	var script strings.Builder
	script.WriteString("set -u\ncd ../..\n")
	for i, s := range steps {
		fmt.Fprintf(&script, "{ %s\n} >%s/out.%d 2>&1 || echo \"exit status $?\" >>%s/out.%d\n", repl.Replace(s.command), tmp, i, tmp, i)
	}
	run := exec.CommandContext(ctx, "bash", "-c", script.String())
	run.Env = withoutFHIRStoreEnv()
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	t.Logf("quick start ran after %v", time.Since(start).Round(time.Millisecond))
	for i, s := range steps {
		out, err := os.ReadFile(filepath.Join(tmp, fmt.Sprintf("out.%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`exit status (\d+)\n$`).FindSubmatch(out); m != nil {
			t.Errorf("step %d failed (exit status %s): %s\n%s", i+1, m[1], s.command, tail(out))
			continue
		}
		for _, want := range s.expect {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("step %d: %s\noutput lacks %q:\n%s", i+1, s.command, want, tail(out))
			}
		}
	}
}

// withoutFHIRStoreEnv is the test's environment without FHIRSTORE_*
// variables, which would change the commands' defaults.
func withoutFHIRStoreEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FHIRSTORE_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitListening returns the port of the server once it logs "listening".
func waitListening(t *testing.T, log *syncBuffer) string {
	t.Helper()
	re := regexp.MustCompile(`"msg":"listening".*"addr":"127\.0\.0\.1:(\d+)"`)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(log.String()); m != nil {
			return m[1]
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the server did not log 'listening' within 60s:\n%s", log.String())
	return ""
}

// tail is the end of a long output, enough to see what went wrong.
func tail(b []byte) string {
	if len(b) > 2000 {
		return "…" + string(b[len(b)-2000:])
	}
	return string(b)
}
