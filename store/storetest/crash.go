package storetest

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// KillChild runs the test named test of this test binary as a child
// process with env added to its environment, waits until it prints a line
// "ready", lets it run for delay and kills it with SIGKILL: a crash at a
// moment of the child's work.
func KillChild(t *testing.T, test string, env []string, delay time.Duration) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	child.Env = append(os.Environ(), env...)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				ready <- true
				break
			}
		}
		ready <- false
		for sc.Scan() { // keep draining so the child never blocks on stdout
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = child.Wait()
			t.Fatal("the crash child exited before it was ready")
		}
	case <-time.After(2 * time.Minute):
		_ = child.Process.Kill()
		t.Fatal("the crash child did not get ready")
	}
	time.Sleep(delay)
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
}
