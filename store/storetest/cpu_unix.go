//go:build unix

package storetest

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the CPU time (user and system) the process has used: on
// a noisy machine, the cost of an operation varies less than its rate.
func ProcessCPU(tb testing.TB) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
